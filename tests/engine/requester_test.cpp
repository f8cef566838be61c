// Requester (the send side of a QP) driven directly: WRs posted to it, its packets pulled from
// poll() and decoded, SACKs and NACKs built by hand, its timers run by the test. The QP around it
// is one connected QP of one Endpoint, with no peer and no network.
#include "engine/requester.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "packet_util.hpp"

namespace mrc::test {
namespace {

using engine::Requester;
using engine::WcStatus;

constexpr std::uint32_t kPmtu = 1024;
constexpr std::uint32_t kSqPsn = 0xFFFFFE;  // the 24-bit PSN wraps inside every test
constexpr std::uint32_t kPorts = 0x3;
constexpr std::uint64_t kRemoteVa = 0x7000'0000;
constexpr std::uint32_t kRkey = 0x4242;

std::uint32_t psn(std::int32_t i) {
  return psn_add(kSqPsn, i);
}

struct Rig {
  std::unique_ptr<engine::Endpoint> ep;
  std::vector<std::uint8_t> src = std::vector<std::uint8_t>(1 << 16);
  const engine::MemoryRegion* mr = nullptr;
  std::uint32_t qpn = 0;

  /// `tun`: the endpoint's tunables (fixed reorder window or tail-probe delay where a test needs
  /// one); timeout and retries: the QP's RTO.
  /// wire_ext: the connection agreed to the wire extensions (the SACK says which copy arrived).
  /// events: the endpoint keeps events (EndpointConfig::events).
  /// cc: the QP's congestion control (default: none, the window is the MPR's).
  explicit Rig(const engine::Tunables& tun = {}, std::uint8_t timeout = 20, std::uint8_t retry_linear = 7,
               std::uint8_t retry_exp = 25, bool wire_ext = false, bool events = true,
               const cc::Config* cc = nullptr) {
    engine::EndpointConfig ec;
    ec.num_ports = 2;
    ec.tun = tun;
    ec.events = events;
    ep = std::make_unique<engine::Endpoint>(ec);
    std::iota(src.begin(), src.end(), 0);
    mr = ep->memory().register_region(src.data(), src.size(), engine::access::kAll);
    engine::QpConfig c;
    c.pmtu = kPmtu;
    c.mpr = c.mpr_dest = 8;
    c.timeout = timeout;
    c.retry_linear = retry_linear;
    c.retry_exp = retry_exp;
    c.evs = engine::make_ev_set(2, 4, 1);
    c.active_count = 8;
    c.cc.algorithm = cc::Algorithm::kNone;  // no congestion window: the window is the MPR's
    if (cc != nullptr) c.cc = *cc;
    qpn = ep->create_qp(c);
    engine::QpRemote r;
    r.peer = 7;
    r.qpn = 0x99;
    r.sq_psn = kSqPsn;
    r.peer_mpr_dest = 8;
    r.peer_max_wimm_dest = 128;
    r.wire_ext = wire_ext;
    EXPECT_EQ(ep->connect_qp(qpn, r, 0), 0);
  }
  engine::Qp& qp() { return *ep->qp(qpn); }
  Requester& rq() { return qp().requester(); }
  const engine::QpCounters& ctr() { return qp().counters(); }

  /// Posts a WRITE of src[0, len) to kRemoteVa.
  int post(std::uint64_t wr_id, std::uint32_t len, Time now) {
    engine::SendWr wr;
    wr.wr_id = wr_id;
    wr.local_addr = reinterpret_cast<std::uintptr_t>(src.data());
    wr.length = len;
    wr.lkey = mr->lkey;
    wr.remote_addr = kRemoteVa;
    wr.rkey = kRkey;
    return rq().post_send(wr, now);
  }
  /// What the requester sends now (at most `max` packets), through the QP's poll_tx as the
  /// endpoint calls it (it has no control packets to send: no peer talks to it).
  std::vector<Frame> pull(Time now, std::size_t max = 1000) {
    std::vector<Frame> out;
    engine::TxPacket tx;
    while (out.size() < max && qp().poll_tx(tx, now, kPorts)) out.push_back(flatten(tx));
    return out;
  }
  /// One packet sent at each of `times`.
  std::vector<Frame> pull_one_each(const std::vector<Time>& times) {
    std::vector<Frame> out;
    for (const Time t : times) {
      auto f = pull(t, 1);
      EXPECT_EQ(f.size(), 1u) << "at " << t;
      out.insert(out.end(), f.begin(), f.end());
    }
    return out;
  }
  std::vector<engine::Completion> completions() {
    std::vector<engine::Completion> out;
    engine::Completion c;
    while (ep->poll_completion(c)) out.push_back(c);
    return out;
  }
};

wire::Packet decoded(const Frame& f) {
  wire::Packet p;
  EXPECT_EQ(f.decode(p), wire::Error::kOk);
  return p;
}

TEST(Requester, SegmentsAWrIntoPsnsCarryingTheirAddresses) {
  Rig r;
  constexpr std::uint32_t len = 3 * kPmtu + 100;
  ASSERT_EQ(r.post(1, len, 1000), 0);
  const auto f = r.pull(1000);
  ASSERT_EQ(f.size(), 4u);
  using wire::Opcode;
  const Opcode ops[] = {Opcode::kWriteFirst, Opcode::kWriteMiddle, Opcode::kWriteMiddle, Opcode::kWriteLast};
  for (std::uint32_t i = 0; i < 4; ++i) {
    const wire::Packet p = decoded(f[i]);
    EXPECT_EQ(p.bth.opcode, ops[i]) << i;
    EXPECT_EQ(p.bth.psn, psn(static_cast<std::int32_t>(i))) << i;
    EXPECT_EQ(p.bth.dest_qp, 0x99u);
    EXPECT_FALSE(p.bth.rtx);
    EXPECT_EQ(p.meth.msn, 0u);
    EXPECT_EQ(p.reth.va, kRemoteVa + i * kPmtu) << i;
    EXPECT_EQ(p.reth.rkey, kRkey);
    EXPECT_EQ(p.reth.dma_len, len);
    const std::uint32_t plen = i < 3 ? kPmtu : 100;
    ASSERT_EQ(p.payload.size(), plen) << i;
    EXPECT_TRUE(std::equal(p.payload.begin(), p.payload.end(), r.src.begin() + i * kPmtu)) << i;
  }
  EXPECT_TRUE(decoded(f[3]).bth.ack_req);  // a message's last packet asks for a SACK
  EXPECT_EQ(r.rq().snd_nxt(), psn(4));
  EXPECT_EQ(r.rq().outstanding_psns(), 4u);
  // The next WR continues the PSNs with the next message number.
  ASSERT_EQ(r.post(2, 10, 1100), 0);
  const auto g = r.pull(1100);
  ASSERT_EQ(g.size(), 1u);
  const wire::Packet p = decoded(g[0]);
  EXPECT_EQ(p.bth.opcode, wire::Opcode::kWriteOnly);
  EXPECT_EQ(p.bth.psn, psn(4));
  EXPECT_EQ(p.meth.msn, 1u);
  EXPECT_TRUE(r.completions().empty());
}

TEST(Requester, SacksAcknowledgeAndCompleteWrsInOrder) {
  Rig r;
  ASSERT_EQ(r.post(1, 2 * kPmtu, 1000), 0);
  ASSERT_EQ(r.post(2, kPmtu, 1000), 0);
  ASSERT_EQ(r.pull(1000).size(), 3u);
  r.rq().handle_sack(make_sack(psn(0), 0), 2000);
  EXPECT_EQ(r.rq().snd_una(), psn(1));
  EXPECT_TRUE(r.completions().empty());  // WR 1 still waits for PSN 1
  // PSN 2 (WR 2) acknowledged out of order: WR 2 completes only after WR 1.
  r.rq().handle_sack(make_sack(psn(0), 2, 0x1, 2), 2100);
  EXPECT_EQ(r.rq().snd_una(), psn(1));
  EXPECT_TRUE(r.completions().empty());
  r.rq().handle_sack(make_sack(psn(2), -1), 2200);
  const auto c = r.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].byte_len, 2 * kPmtu);
  EXPECT_EQ(c[1].wr_id, 2u);
  EXPECT_EQ(c[1].status, WcStatus::kSuccess);
  EXPECT_EQ(r.rq().outstanding_psns(), 0u);
  EXPECT_EQ(r.ctr().bytes_acked, 3u * kPmtu);
  EXPECT_EQ(r.ctr().tx_rtx, 0u);
}

TEST(Requester, AHoleIsLostByTimeAndResent) {
  engine::Tunables tun;
  tun.reorder_window = 5000;
  tun.tail_probe_delay = 1'000'000;  // no tail-loss probe in this test
  Rig r(tun);
  ASSERT_EQ(r.post(1, 4 * kPmtu, 1000), 0);
  const auto f = r.pull_one_each({1000, 1100, 1200, 1300});
  // PSNs 1-3 arrive, PSN 0 does not: the SACK for PSN 3 (sent at 1300) comes at 3000, an RTT of
  // 1700. PSN 0 is lost once that RTT and the reorder window have passed since it left.
  r.rq().handle_sack(make_sack(psn(-1), 4, 0b1110), 3000);
  EXPECT_EQ(r.rq().next_deadline(), 1000u + 1700 + 5000);
  r.rq().on_timer(7699);
  EXPECT_TRUE(r.pull(7699).empty());
  r.rq().on_timer(7700);
  const auto g = r.pull(7700);
  ASSERT_EQ(g.size(), 1u);
  const wire::Packet p = decoded(g[0]);
  EXPECT_EQ(p.bth.psn, psn(0));
  EXPECT_TRUE(p.bth.rtx);
  EXPECT_TRUE(p.bth.ack_req);
  EXPECT_EQ(r.ctr().rtx_loss, 1u);
  // Its SACK (echoing a retransmission) completes the WR.
  r.rq().handle_sack(make_sack(psn(3), -3, 0, 1, wire::cc_flags::kSvcTime | wire::cc_flags::kRtxEcho), 9000);
  const auto c = r.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}

TEST(Requester, ATailLossIsRepairedByTheTailProbe) {
  engine::Tunables tun;
  tun.tail_probe_delay = 20'000;
  Rig r(tun);
  ASSERT_EQ(r.post(1, 2 * kPmtu, 1000), 0);
  r.pull_one_each({1000, 1100});
  // PSN 0 is acknowledged, PSN 1 (the last) is lost: nothing sent after it can tell RACK.
  r.rq().handle_sack(make_sack(psn(0), 0), 3000);
  EXPECT_EQ(r.rq().next_deadline(), 1100u + 20'000);
  EXPECT_TRUE(r.pull(21'099).empty());
  const auto g = r.pull(21'100);
  ASSERT_EQ(g.size(), 1u);
  const wire::Packet p = decoded(g[0]);
  EXPECT_EQ(p.bth.psn, psn(1));
  EXPECT_TRUE(p.bth.rtx);
  EXPECT_EQ(r.ctr().rtx_loss, 1u);
  r.rq().handle_sack(make_sack(psn(1), 0, 0, 1, wire::cc_flags::kSvcTime | wire::cc_flags::kRtxEcho), 23'000);
  const auto c = r.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}

TEST(Requester, TheTailProbeGoesOutThroughAFullCongestionWindow) {
  // D85: three packets fill NSCC's window and no SACK comes back (in a 128-host all-to-all: a SACK
  // the responder coalesced, waiting for more data while the sender waited for it). The tail-loss
  // probe declares the newest lost, which here (loss counted as congestion) also takes it off the
  // window: the two still in flight fill it. The probe resends anyway, as Linux forces out its loss
  // probe; held back by the window it probed nothing and only the RTO ended the wait.
  engine::Tunables tun;
  tun.tail_probe_delay = 20'000;
  tun.loss_is_congestion = true;
  cc::Config cc;
  cc.algorithm = cc::Algorithm::kNscc;
  cc.nscc.max_cwnd = 3 * (kPmtu + engine::kPktOverhead);
  cc.nscc.mtu = kPmtu + engine::kPktOverhead;
  Rig r(tun, 20, 7, 25, false, true, &cc);
  ASSERT_EQ(r.post(1, 8 * kPmtu, 1000), 0);
  EXPECT_EQ(r.pull(1000).size(), 3u);  // the congestion window's three packets
  EXPECT_TRUE(r.pull(5000).empty());
  EXPECT_TRUE(r.pull(21'000 - 1).empty());
  const auto g = r.pull(21'000);
  ASSERT_EQ(g.size(), 1u);
  const wire::Packet p = decoded(g[0]);
  EXPECT_EQ(p.bth.psn, psn(2));
  EXPECT_TRUE(p.bth.rtx);
  EXPECT_TRUE(p.bth.ack_req);
  EXPECT_TRUE(r.pull(21'001).empty());  // one packet per probe: the window holds the rest
  // The resend's SACK acknowledges all three (the first copies had arrived): new data goes again.
  r.rq().handle_sack(make_sack(psn(2), 0, 0, 1, wire::cc_flags::kSvcTime | wire::cc_flags::kRtxEcho), 23'000);
  EXPECT_FALSE(r.pull(23'000).empty());
}

TEST(Requester, TheTailProbeWaitsOutHowLongTheResponderHeldItsSacks) {
  // D87: an RTT sample leaves out the time the responder held the SACK (svc_time), but the SACK for
  // the newest packet is held too. In an all-to-all a SACK waits behind other QPs' data at the
  // responder's NIC, longer than the base RTT, and a probe that did not wait for it resent packets
  // that had arrived. Two QPs see the same RTT, one with SACKs held 16 us: its probe waits 16 us
  // more, for as long as that hold was seen lately (two RTTs).
  Time probe_at[2] = {}, probe_later[2] = {};
  for (const bool held : {false, true}) {
    Rig r;
    const std::uint16_t units = held ? 500 : 0;  // 16 us
    const Duration svc = Duration{units} * wire::kSvcUnitNs;
    ASSERT_EQ(r.post(1, kPmtu, 1000), 0);
    ASSERT_EQ(r.pull(1000).size(), 1u);
    wire::Packet s = make_sack(psn(0), 0);
    s.seth.svc_time = units;
    r.rq().handle_sack(s, 11'000 + svc);
    ASSERT_EQ(r.rq().rtt().srtt(), 10'000u);
    ASSERT_EQ(r.completions().size(), 1u);
    ASSERT_EQ(r.post(2, kPmtu, 40'000), 0);
    ASSERT_EQ(r.pull(40'000).size(), 1u);
    probe_at[held] = r.rq().next_deadline();
    // A SACK held 0 us, more than two RTTs after the held one: the 16 us hold no longer counts.
    r.rq().handle_sack(make_sack(psn(1), 0), 50'000);
    ASSERT_EQ(r.post(3, kPmtu, 80'000), 0);
    ASSERT_EQ(r.pull(80'000).size(), 1u);
    probe_later[held] = r.rq().next_deadline();
  }
  EXPECT_GT(probe_at[0], 40'000u);
  EXPECT_EQ(probe_at[1] - probe_at[0], 16'000u);
  EXPECT_EQ(probe_later[1], probe_later[0]);
}

TEST(Requester, AFirstCopyArrivingAfterItsTailProbeStillGivesTheRtt) {
  // D63: a packet resent by the tail probe before its SACK came (a deep queue) is acknowledged by
  // a SACK that says the first copy arrived (no retransmission echo): its RTT is measured from the
  // first transmission. Without the wire extension nobody says which copy arrived: no sample.
  for (bool ext : {true, false}) {
    engine::Tunables tun;
    tun.tail_probe_delay = 20'000;
    Rig r(tun, 20, 7, 25, ext);
    ASSERT_EQ(r.post(1, kPmtu, 1000), 0);
    ASSERT_EQ(r.pull(1000).size(), 1u);
    const auto g = r.pull(21'000);  // the tail probe resends it
    ASSERT_EQ(g.size(), 1u);
    EXPECT_TRUE(decoded(g[0]).bth.rtx);
    EXPECT_EQ(r.rq().rtt().srtt(), 0u);
    r.rq().handle_sack(make_sack(psn(0), 0), 50'000);
    EXPECT_EQ(r.rq().rtt().srtt(), ext ? 49'000u : 0u) << ext;
    ASSERT_EQ(r.completions().size(), 1u);
  }
}

TEST(Requester, APacketWhoseEarlierCopiesWereAllTrimmedIsTimedByItsLatestCopy) {
  // D81: every copy before the third was answered by a trim NACK, so only the third can arrive and
  // its SACK times it, with or without the peer's retransmission echo. A copy declared lost without
  // a NACK (the tail probe) may still arrive: then no sample, as before (an echo of a retransmission
  // cannot say whether the second or the third copy arrived). A peer that echoes and says the first
  // copy arrived is believed instead: the sample is from that copy (D63, the QP has no RTT yet).
  enum class Peer { kSpec, kEchoRtx, kEchoFirst };
  for (const Peer peer : {Peer::kSpec, Peer::kEchoRtx, Peer::kEchoFirst}) {
    for (const bool probe : {false, true}) {
      SCOPED_TRACE(probe ? "second copy sent by the tail probe" : "every copy but the last trimmed");
      SCOPED_TRACE(peer == Peer::kSpec      ? "a spec peer (no echo)"
                   : peer == Peer::kEchoRtx ? "an echoing peer: a retransmission arrived"
                                            : "an echoing peer: a first transmission arrived");
      engine::Tunables tun;
      tun.tail_probe_delay = 20'000;
      Rig r(tun, 20, 7, 25, /*wire_ext=*/peer != Peer::kSpec);
      ASSERT_EQ(r.post(1, kPmtu, 1000), 0);
      ASSERT_EQ(r.pull(1000).size(), 1u);
      wire::Packet n;
      n.bth.opcode = wire::Opcode::kNack;
      n.neth.reason = wire::NackReason::kTrimmed;
      n.neth.nack_psn = psn(0);
      Time t = 2000;
      if (probe) {
        t = 21'000;  // the tail probe resends it
      } else {
        r.rq().handle_nack(n, t);
      }
      ASSERT_EQ(r.pull(t).size(), 1u);
      r.rq().handle_nack(n, 3000 + t);
      ASSERT_EQ(r.pull(3000 + t).size(), 1u);  // the third copy
      EXPECT_EQ(r.ctr().tx_rtx, 2u);
      EXPECT_EQ(r.rq().rtt().srtt(), 0u);
      std::uint8_t flags = wire::cc_flags::kSvcTime;
      if (peer == Peer::kEchoRtx) flags |= wire::cc_flags::kRtxEcho;
      r.rq().handle_sack(make_sack(psn(0), 0, 0, 1, flags), 3000 + t + 4000);
      if (peer == Peer::kEchoFirst)
        EXPECT_EQ(r.rq().rtt().srtt(), 3000 + t + 4000 - 1000);
      else
        EXPECT_EQ(r.rq().rtt().srtt(), probe ? 0u : 4000u);
      ASSERT_EQ(r.completions().size(), 1u);
    }
  }
}

TEST(Requester, AQpBlockedByItsWindowLeavesTheReadyListUntilASackOpensIt) {
  // The endpoint keeps a QP in its transmit-ready list only while it may send: a QP whose MPR
  // window is full is not polled again for every free port (with 127 such QPs a host spent most
  // of its time polling them) until the SACK that opens the window marks it ready again.
  Rig r;
  for (std::uint64_t i = 0; i < 17; ++i) ASSERT_EQ(r.post(i, 1 << 16, 1000), 0);  // 17 x 64 packets
  const auto f = r.pull(1000, 2000);
  const std::size_t window = r.rq().window_psns();
  ASSERT_LT(window, 17u * 64);
  ASSERT_EQ(f.size(), window);
  EXPECT_FALSE(r.qp().wants_tx());  // blocked by the window; its tail probe has a timer
  EXPECT_LT(r.rq().next_deadline(), kNever);
  r.rq().handle_sack(make_sack(psn(3), 3), 5000);  // PSNs 0-3 acknowledged
  EXPECT_TRUE(r.qp().wants_tx());
  EXPECT_EQ(r.pull(5000).size(), 4u);
  EXPECT_FALSE(r.qp().wants_tx());
}

TEST(Requester, AnEndpointWhoseOnlyQpFilledItsWindowTakesItOffTheReadyListAtOnce) {
  // A driver whose port is busy until `at` after a send asks settle_tx(at): true only if a poll at
  // `at` would find nothing but the closed window, and then the endpoint has nothing pending (the
  // driver skips that poll) until the SACK that opens the window.
  Rig r;
  for (std::uint64_t i = 0; i < 17; ++i) ASSERT_EQ(r.post(i, 1 << 16, 1000), 0);  // 17 x 64 packets
  const std::size_t window = r.rq().window_psns();
  ASSERT_LT(window, 17u * 64);
  engine::TxPacket tx;
  for (std::size_t k = 0; k + 1 < window; ++k) {
    ASSERT_TRUE(r.ep->poll_tx(tx, 1000, kPorts));
    ASSERT_FALSE(r.ep->settle_tx(1001)) << "the window still has room after packet " << k;
  }
  ASSERT_TRUE(r.ep->poll_tx(tx, 1000, kPorts));  // the last packet the window takes
  EXPECT_TRUE(r.ep->tx_pending());
  // A poll once the tail-loss probe is due would resend: nothing is settled for that time.
  EXPECT_FALSE(r.ep->settle_tx(kNever - 1));
  EXPECT_TRUE(r.ep->tx_pending());
  EXPECT_TRUE(r.ep->settle_tx(1001));
  EXPECT_FALSE(r.ep->tx_pending());
  EXPECT_FALSE(r.qp().wants_tx());
  EXPECT_FALSE(r.ep->poll_tx(tx, 1001, kPorts));   // what the skipped poll would have found
  r.rq().handle_sack(make_sack(psn(3), 3), 5000);  // PSNs 0-3 acknowledged
  EXPECT_TRUE(r.ep->tx_pending());
  std::size_t sent = 0;
  while (r.ep->poll_tx(tx, 5000, kPorts)) ++sent;
  EXPECT_EQ(sent, 4u);
}

TEST(Requester, AnEndpointWithTwoQpsDoesNotSettle) {
  // With another QP, one that joins the ready list before the skipped poll's time would change
  // the round robin's order: settle_tx() refuses.
  Rig r;
  engine::QpConfig c;
  c.pmtu = kPmtu;
  c.mpr = c.mpr_dest = 8;
  c.evs = engine::make_ev_set(2, 4, 1);
  c.active_count = 8;
  ASSERT_NE(r.ep->create_qp(c), 0u);
  for (std::uint64_t i = 0; i < 17; ++i) ASSERT_EQ(r.post(i, 1 << 16, 1000), 0);
  const std::size_t window = r.rq().window_psns();
  engine::TxPacket tx;
  for (std::size_t k = 0; k < window; ++k) ASSERT_TRUE(r.ep->poll_tx(tx, 1000, kPorts));
  EXPECT_FALSE(r.ep->settle_tx(1001));
  EXPECT_TRUE(r.ep->tx_pending());
  EXPECT_FALSE(r.ep->poll_tx(tx, 1001, kPorts));  // the poll finds the window closed ...
  EXPECT_FALSE(r.ep->tx_pending());               // ... and takes the QP off the list
}

TEST(Requester, RtoRetriesRunOutIntoAnErrorCompletion) {
  engine::Tunables tun;
  tun.tail_probe_delay = 1'000'000'000;  // only the RTO acts
  // timeout 4: 16.384 us; 2 linear retries, none exponential: the third RTO fails the QP.
  Rig r(tun, 4, 2, 0);
  ASSERT_EQ(r.post(1, kPmtu, 1000), 0);
  ASSERT_EQ(r.post(2, kPmtu, 1000), 0);
  ASSERT_EQ(r.pull(1000).size(), 2u);
  std::vector<Time> fired;
  for (int i = 0; i < 10 && r.qp().state() == engine::QpState::kRts; ++i) {
    const Time t = r.rq().next_deadline();
    ASSERT_NE(t, kNever);
    fired.push_back(t);
    r.rq().on_timer(t);
    if (r.qp().state() == engine::QpState::kRts) {
      EXPECT_EQ(r.pull(t).size(), 2u);  // both resent
    }
  }
  // Linear, then doubling: 16.384 us, 16.384 us, 32.768 us.
  ASSERT_EQ(fired.size(), 3u);
  EXPECT_EQ(fired[0], 1000u + 16'384);
  EXPECT_EQ(fired[1] - fired[0], 16'384u);
  EXPECT_EQ(fired[2] - fired[1], 32'768u);
  EXPECT_EQ(r.qp().state(), engine::QpState::kError);
  EXPECT_EQ(r.ctr().timeouts, 3u);
  EXPECT_EQ(r.ctr().rtx_timeout, 4u);
  const auto c = r.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRetryExceeded);  // the WR of the oldest unacknowledged PSN
  EXPECT_EQ(c[1].wr_id, 2u);
  EXPECT_EQ(c[1].status, WcStatus::kFlushed);
  EXPECT_EQ(r.qp().next_deadline(), kNever);
}

TEST(Requester, ATrimNackResendsAtOnce) {
  Rig r;
  ASSERT_EQ(r.post(1, 3 * kPmtu, 1000), 0);
  const auto f = r.pull(1000);
  ASSERT_EQ(f.size(), 3u);
  wire::Packet n;
  n.bth.opcode = wire::Opcode::kNack;
  n.neth.reason = wire::NackReason::kTrimmed;
  n.neth.nack_psn = psn(1);
  r.rq().handle_nack(n, 1500);
  const auto g = r.pull(1500);
  ASSERT_EQ(g.size(), 1u);
  const wire::Packet p = decoded(g[0]);
  EXPECT_EQ(p.bth.psn, psn(1));
  EXPECT_TRUE(p.bth.rtx);
  EXPECT_EQ(r.ctr().rtx_nack, 1u);
  // A trim is congestion on that path: its EV is skipped for a while.
  bool skipped = false;
  engine::Event e;
  while (r.ep->poll_event(e))
    skipped |= e.type == engine::EventType::kEvState && e.ev == f[1].ev && e.to == engine::EvState::kSkip &&
               e.cause == engine::EvCause::kTrimNack;
  EXPECT_TRUE(skipped);
  // A NACK for a PSN never sent is stale.
  n.neth.nack_psn = psn(3);
  r.rq().handle_nack(n, 1600);
  EXPECT_TRUE(r.pull(1600).empty());
}

// A SKIP's expiry is applied lazily, at its own time: it needs a timer only if someone watches
// the EV events (their times) or if something queued may wait for it (the next test).
TEST(Requester, ASkipExpiryNeedsATimerOnlyWhenItsEventIsWatched) {
  for (const bool events : {true, false}) {
    SCOPED_TRACE(events ? "events kept" : "no events");
    Rig r({}, 20, 7, 25, false, events);
    ASSERT_EQ(r.post(1, kPmtu, 1000), 0);
    ASSERT_EQ(r.pull(1000).size(), 1u);
    engine::EvManager& evm = r.qp().evs();
    constexpr std::uint16_t kSlot = 0;
    evm.on_skip_signal(kSlot, engine::EvCause::kEcnEcho, 1100);
    ASSERT_EQ(evm.state(kSlot), engine::EvState::kSkip);
    r.rq().handle_sack(make_sack(psn(0), 0), 1200);  // nothing in flight, nothing queued
    const Time expiry = evm.next_skip_expiry();
    ASSERT_GT(expiry, 1200u);
    ASSERT_NE(expiry, kNever);
    EXPECT_EQ(r.ep->next_deadline(), events ? expiry : kNever);
    const std::uint64_t before = r.ctr().ev_transitions;
    if (events) {
      r.ep->on_timer(expiry);
      EXPECT_EQ(evm.state(kSlot), engine::EvState::kGood);
      bool seen = false;
      engine::Event e;
      while (r.ep->poll_event(e))
        seen |= e.type == engine::EventType::kEvState && e.to == engine::EvState::kGood &&
                e.cause == engine::EvCause::kSkipExpired && e.time == expiry;
      EXPECT_TRUE(seen);
    } else {
      // Nothing looked at the EVs yet: still SKIP; the next use applies the expiry (a poll that
      // finds nothing to send), counted once.
      EXPECT_EQ(evm.state(kSlot), engine::EvState::kSkip);
      engine::TxPacket tx;
      EXPECT_FALSE(r.qp().poll_tx(tx, expiry + 5000, kPorts));
      EXPECT_EQ(evm.state(kSlot), engine::EvState::kGood);
      EXPECT_EQ(evm.next_skip_expiry(), kNever);
    }
    EXPECT_EQ(r.ctr().ev_transitions, before + 1);
  }
}

// With every active EV of port 0 skipped and port 0 the only free one, queued data waits for an
// expiry: the QP keeps the timer for it even when nobody watches the events, and sends at it.
TEST(Requester, ASkipExpiryWakesDataThatWaitsForIt) {
  Rig r({}, 20, 7, 25, false, /*events=*/false);
  engine::EvManager& evm = r.qp().evs();
  for (std::uint16_t s = 0; s < evm.size(); ++s)
    if (evm.is_active(s) && evm.ev(s).port == 0) evm.on_skip_signal(s, engine::EvCause::kEcnEcho, 1000);
  ASSERT_EQ(evm.ports_with_good(), 0x2u);
  EXPECT_EQ(r.ep->next_deadline(), kNever);  // nothing queued: nothing to wake
  ASSERT_EQ(r.post(1, kPmtu, 1100), 0);
  engine::TxPacket tx;
  EXPECT_FALSE(r.qp().poll_tx(tx, 1100, 0x1));
  const Time expiry = evm.next_skip_expiry();
  ASSERT_NE(expiry, kNever);
  EXPECT_EQ(r.ep->next_deadline(), expiry);
  EXPECT_FALSE(r.qp().poll_tx(tx, expiry - 1, 0x1));
  ASSERT_TRUE(r.qp().poll_tx(tx, expiry, 0x1));
  EXPECT_EQ(tx.port, 0u);
  EXPECT_EQ(evm.ports_with_good(), 0x3u);
}

TEST(Requester, AnRttSampleFromAPsnTheSackDoesNotAcknowledgeIsRefused) {
  Rig r;
  const Duration base = r.rq().rtt().base();
  ASSERT_EQ(r.post(1, 2 * kPmtu, 1000), 0);
  ASSERT_EQ(r.pull(1000).size(), 2u);
  // Acknowledges PSN 0 but names PSN 1 as its trigger, 300 ns after it left: PSN 1 did not arrive.
  r.rq().handle_sack(make_sack(psn(0), 1), 1300);
  EXPECT_EQ(r.rq().rtt().base(), base);
  EXPECT_EQ(r.rq().outstanding_psns(), 1u);  // the cumulative part was taken
  // Names PSN 2, not sent yet.
  r.rq().handle_sack(make_sack(psn(0), 2), 1350);
  EXPECT_EQ(r.rq().rtt().base(), base);
  // Naming the packet it acknowledges is a sample (here: short).
  r.rq().handle_sack(make_sack(psn(1), 0), 1400);
  EXPECT_EQ(r.rq().rtt().base(), 400u);
}

}  // namespace
}  // namespace mrc::test
