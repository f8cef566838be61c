// Per-QP state for many QPs (docs/decisions.md D54): the endpoint's deadline heap agrees with the
// QPs' own deadlines through sends, timers, port changes and destroyed QPs; the PSN ring a small
// first message sizes grows for a large one without losing data; what an idle QP holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "cc/nscc.hpp"
#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "harness.hpp"
#include "packet_util.hpp"

namespace mrc::test {
namespace {

/// The earliest deadline of the endpoint's QPs, by asking each one.
Time scan_deadline(const engine::Endpoint& ep) {
  Time t = kNever;
  for (const std::uint32_t qpn : ep.qpns()) t = std::min(t, ep.qp(qpn)->next_deadline());
  return t;
}

/// A 2-port endpoint whose peers never answer, with a registered buffer and a QP configuration
/// (4 EVs a plane, queues of `depth`) for the tests to adjust.
struct SilentHost {
  SilentHost(std::size_t bytes, std::uint8_t fill, std::uint32_t depth, std::uint64_t seed = 1)
      : ep(config(seed)), buf(bytes, fill) {
    mr = ep.memory().register_region(buf.data(), buf.size(), engine::access::kAll);
    qc.evs = engine::make_ev_set(2, 4, 0);
    qc.sq_depth = qc.rq_depth = depth;
  }
  static engine::EndpointConfig config(std::uint64_t seed) {
    engine::EndpointConfig ec;
    ec.num_ports = 2;
    ec.seed = seed;
    return ec;
  }
  /// A WRITE of `length` bytes from the buffer's start.
  engine::SendWr write(std::uint32_t length, std::uint64_t wr_id = 0) const {
    engine::SendWr wr;
    wr.wr_id = wr_id;
    wr.local_addr = reinterpret_cast<std::uint64_t>(buf.data());
    wr.lkey = mr->lkey;
    wr.length = length;
    wr.rkey = 1;
    return wr;
  }
  engine::Endpoint ep;
  std::vector<std::uint8_t> buf;
  const engine::MemoryRegion* mr = nullptr;
  engine::QpConfig qc;
};

TEST(QpState, EndpointDeadlineIsTheEarliestQpDeadline) {
  // 300 QPs to peers that never answer: the senders' packets vanish, so their tail probes, RTOs and
  // retries drive the timers until each sender gives up; the receivers have no deadline.
  SilentHost h(1 << 16, 0x11, 16, 3);
  ASSERT_NE(h.mr, nullptr);
  engine::Endpoint& ep = h.ep;
  engine::QpConfig& qc = h.qc;
  qc.timeout = 4;  // RTO 16 us
  qc.retry_linear = 2;
  qc.retry_exp = 1;
  std::vector<std::uint32_t> qpns;
  for (std::uint32_t i = 0; i < 300; ++i) {
    qc.seed = i + 1;
    const std::uint32_t qpn = ep.create_qp(qc);
    ASSERT_NE(qpn, 0u);
    engine::QpRemote r;
    r.peer = 1 + i % 7;
    r.qpn = 0x100 + i;
    r.sq_psn = i * 11;
    r.rq_psn = i * 13;
    ASSERT_EQ(ep.connect_qp(qpn, r, 0), 0);
    qpns.push_back(qpn);
  }
  EXPECT_EQ(ep.next_deadline(), kNever);  // nobody has sent
  // Every third QP posts one message (1-3 packets), 700 ns after the previous one, so the senders'
  // timers interleave; the loop runs whichever comes first, a post or the endpoint's deadline.
  Time now = 0;
  std::uint32_t next_post = 0;
  auto post_time = [&] { return next_post < qpns.size() ? Time{next_post} * 700 / 3 : kNever; };
  engine::TxPacket tx;
  std::uint32_t steps = 0, sent = 0, timer_rounds = 0;
  for (; steps < 1000000; ++steps) {
    // One packet a step (lost on the way), so the deadline is checked after each transmission.
    const bool sent_one = ep.poll_tx(tx, now, 0x3);
    sent += sent_one ? 1 : 0;
    const Time d = ep.next_deadline();
    ASSERT_EQ(d, scan_deadline(ep)) << "at step " << steps << ", " << now << " ns";
    if (steps == 60) {  // destroyed senders leave the heap; a port change touches every QP
      ASSERT_EQ(ep.destroy_qp(qpns[0]), 0);
      ASSERT_EQ(ep.destroy_qp(qpns[3]), 0);
      ep.set_port_up(1, false, now);
      ASSERT_EQ(ep.next_deadline(), scan_deadline(ep));
    }
    if (steps == 90) ep.set_port_up(1, true, now);
    if (sent_one) continue;
    const Time p = post_time();
    if (d == kNever && p == kNever) break;
    if (p <= d) {
      now = std::max(now, p);
      ASSERT_EQ(ep.post_send(qpns[next_post], h.write(4096 * (1 + next_post % 3), next_post), now), 0);
      next_post += 3;
      continue;
    }
    now = std::max(now, d);
    ep.on_timer(now);
    ++timer_rounds;
  }
  EXPECT_EQ(ep.next_deadline(), kNever);  // every sender gave up
  EXPECT_GT(timer_rounds, 100u);
  EXPECT_GT(sent, 200u);  // first transmissions (100 QPs, 1-3 packets) and what the timers resent
  std::uint64_t timeouts = 0;
  for (const std::uint32_t qpn : ep.qpns()) timeouts += std::as_const(ep).qp(qpn)->counters().timeouts;
  EXPECT_GT(timeouts, 0u);
}

TEST(QpState, OnTimerRunsEveryDueRto) {
  // 40 senders to peers that never answer post one packet each at t = 0..39 ns; the first 30 have
  // a 16 us RTO, the last 10 one of 4 ms. At 500 us one on_timer() must fire the RTO of each of
  // the 30 (however the heap holds them) and of none of the 10.
  SilentHost h(4096, 0x22, 4);
  ASSERT_NE(h.mr, nullptr);
  engine::Endpoint& ep = h.ep;
  engine::QpConfig& qc = h.qc;
  std::vector<std::uint32_t> qpns;
  for (std::uint32_t i = 0; i < 40; ++i) {
    qc.seed = i + 1;
    qc.timeout = i < 30 ? 4 : 12;  // RTO 16 us or 4 ms
    const std::uint32_t qpn = ep.create_qp(qc);
    ASSERT_NE(qpn, 0u);
    engine::QpRemote r;
    r.peer = 1 + i % 5;
    r.qpn = 0x200 + i;
    ASSERT_EQ(ep.connect_qp(qpn, r, 0), 0);
    qpns.push_back(qpn);
  }
  engine::TxPacket tx;
  for (std::uint32_t i = 0; i < 40; ++i) {
    ASSERT_EQ(ep.post_send(qpns[i], h.write(4096, i), Time{i}), 0);
    ASSERT_TRUE(ep.poll_tx(tx, Time{i}, 0x3));
    ASSERT_EQ(tx.qpn, qpns[i]);
    ASSERT_EQ(ep.next_deadline(), scan_deadline(ep));
  }
  ep.on_timer(500_us);
  for (std::uint32_t i = 0; i < 40; ++i)
    EXPECT_EQ(std::as_const(ep).qp(qpns[i])->counters().timeouts, i < 30 ? 1u : 0u) << "QP " << i;
  EXPECT_EQ(ep.next_deadline(), scan_deadline(ep));
}

TEST(QpState, AQpLeavesTheReadyListWithTheSendThatLeavesItNothing) {
  // D79: a responder QP with an ACK to send is on the ready list until that ACK goes, and leaves it
  // with that send, not at the next poll: the endpoint then has nothing pending and settle_tx() lets
  // the driver skip the poll at the end of the ACK, with other QPs on the endpoint too (an
  // incast's receiver). New work puts the QP back on the list.
  SilentHost a(8192, 0x5a, 4, 1), b(8192, 0, 4, 2);
  ASSERT_NE(a.mr, nullptr);
  ASSERT_NE(b.mr, nullptr);
  const std::uint32_t qa = a.ep.create_qp(a.qc);
  std::vector<std::uint32_t> qbs;
  for (int i = 0; i < 3; ++i) qbs.push_back(b.ep.create_qp(b.qc));
  const std::uint32_t qb = qbs[1];
  engine::QpRemote ra;
  ra.peer = 1;
  ra.qpn = qb;
  engine::QpRemote rb;
  rb.peer = 0;
  rb.qpn = qa;
  ASSERT_EQ(a.ep.connect_qp(qa, ra, 0), 0);
  ASSERT_EQ(b.ep.connect_qp(qb, rb, 0), 0);
  engine::SendWr wr = a.write(4096);
  wr.remote_addr = reinterpret_cast<std::uint64_t>(b.buf.data());
  wr.rkey = b.mr->rkey;
  engine::TxPacket tx;
  for (std::uint64_t k = 0; k < 2; ++k) {
    wr.wr_id = k;
    ASSERT_EQ(a.ep.post_send(qa, wr, 0), 0);
    const std::vector<Frame> data = pull_all(a.ep, 100 * k, 0x3);
    ASSERT_EQ(data.size(), 1u) << "write " << k;
    EXPECT_FALSE(b.ep.tx_pending());
    engine::RxMeta meta;
    meta.port = data[0].port;
    meta.ev = data[0].ev.value;
    b.ep.receive(data[0].bytes, meta, 100 * k + 10);
    EXPECT_TRUE(b.ep.tx_pending()) << "the ACK of write " << k;
    ASSERT_TRUE(b.ep.poll_tx(tx, 100 * k + 10, 0x3));
    EXPECT_EQ(tx.qpn, qb);
    EXPECT_FALSE(b.ep.tx_pending()) << "the QP left the ready list with its ACK";
    EXPECT_TRUE(b.ep.settle_tx(100 * k + 11));
    EXPECT_FALSE(b.ep.poll_tx(tx, 100 * k + 11, 0x3));  // what the skipped poll would have found
  }
  EXPECT_EQ(b.buf[4095], 0x5a);
}

TEST(QpState, AnEndpointSettlesOnALostPacketItsWindowHoldsBack) {
  // An incast's sender after a trim NACK: the NACKed packet is lost, but the congestion window,
  // full with the packets sent after it, holds its retransmission back. A poll then only closes the
  // window, so settle_tx() does that now (the driver skips the poll) and leaves nothing pending;
  // while the window has room for the retransmission, it refuses.
  SilentHost h(1 << 20, 0x11, 16);
  ASSERT_NE(h.mr, nullptr);
  engine::Endpoint& ep = h.ep;
  h.qc.cc.algorithm = cc::Algorithm::kNscc;
  h.qc.cc.nscc = cc::NsccConfig::derive(100'000'000'000ULL, 10'000, h.qc.pmtu + 64, true);
  const std::uint32_t qpn = ep.create_qp(h.qc);
  engine::QpRemote r;
  r.peer = 1;
  r.qpn = 0x40;
  ASSERT_EQ(ep.connect_qp(qpn, r, 0), 0);
  ASSERT_EQ(ep.post_send(qpn, h.write(1 << 20), 0), 0);
  engine::TxPacket tx;
  std::vector<std::uint32_t> psns;
  while (ep.poll_tx(tx, 10, 0x3)) psns.push_back(tx.psn);  // up to the congestion window
  ASSERT_GE(psns.size(), 4u);
  ASSERT_LT(psns.size(), 256u) << "the congestion window closed before the message ended";
  engine::Requester& rq = ep.qp(qpn)->requester();
  wire::Packet n;
  n.bth.opcode = wire::Opcode::kNack;
  n.bth.dest_qp = qpn;
  n.neth.reason = wire::NackReason::kTrimmed;
  n.neth.nack_psn = psns[0];
  n.bth.psn = psns[0];
  engine::RxMeta meta;
  meta.peer = 1;
  ep.receive(encode_packet(n), meta, 20);
  ASSERT_EQ(rq.lost(), 1u);
  ASSERT_TRUE(ep.tx_pending());
  if (!ep.settle_tx(21)) {
    // The window had room for the retransmission: it goes, and the next trim finds the window full.
    ASSERT_TRUE(ep.poll_tx(tx, 21, 0x3));
    EXPECT_EQ(tx.psn, psns[0]);
    n.neth.nack_psn = n.bth.psn = psns[1];
    ep.receive(encode_packet(n), meta, 30);
    ASSERT_EQ(rq.lost(), 1u);
    ASSERT_TRUE(ep.tx_pending());
    ASSERT_TRUE(ep.settle_tx(31));
  }
  EXPECT_FALSE(ep.tx_pending());
  EXPECT_FALSE(ep.poll_tx(tx, 40, 0x3));  // what the skipped poll would have found
  EXPECT_EQ(rq.lost(), 1u);               // still waiting for its window
}

TEST(QpState, IdleUntilEndsWhenTheTailProbeIsDue) {
  // A sender whose one packet is unanswered has nothing to send until its tail-loss probe: it says
  // so (Qp::idle_until), the endpoint's poll_tx passes over it until then and sends the probe then.
  SilentHost h(4096, 0x33, 4);
  ASSERT_NE(h.mr, nullptr);
  engine::Endpoint& ep = h.ep;
  const std::uint32_t qpn = ep.create_qp(h.qc);
  engine::QpRemote r;
  r.peer = 1;
  r.qpn = 0x40;
  ASSERT_EQ(ep.connect_qp(qpn, r, 0), 0);
  const engine::Qp& q = *std::as_const(ep).qp(qpn);
  EXPECT_EQ(q.idle_until(), kNever);  // nothing posted, nothing in flight
  ASSERT_EQ(ep.post_send(qpn, h.write(4096), 0), 0);
  EXPECT_EQ(q.idle_until(), 0u);  // something to send
  engine::TxPacket tx;
  ASSERT_TRUE(ep.poll_tx(tx, 0, 0x3));
  const std::uint32_t psn = tx.psn;
  EXPECT_FALSE(ep.poll_tx(tx, 1, 0x3));
  const Time idle = q.idle_until();
  ASSERT_GT(idle, 1u);
  ASSERT_LT(idle, kNever);
  EXPECT_EQ(ep.next_deadline(), std::min(idle, q.next_deadline()));
  EXPECT_FALSE(ep.poll_tx(tx, idle / 2, 0x3));
  EXPECT_FALSE(ep.poll_tx(tx, idle - 1, 0x3));
  ASSERT_TRUE(ep.poll_tx(tx, idle, 0x3));  // the tail-loss probe: the packet again
  EXPECT_EQ(tx.psn, psn);
  EXPECT_EQ(q.counters().tx_rtx, 1u);
}

TEST(QpState, PsnRingGrowsForALargerMessage) {
  PairOptions o;
  o.mpr = 8;  // window 1024 PSNs
  Pair p(o);
  const engine::Qp* qa = &std::as_const(p.qpa());
  const std::size_t idle = qa->memory_bytes();
  ASSERT_EQ(p.write(1, 0, 100, 0), 0);  // one packet: a 16-slot ring
  ASSERT_TRUE(p.run_until_completions(1, 0, 10_ms));
  const std::size_t small = qa->memory_bytes();
  EXPECT_GT(small, idle);
  ASSERT_EQ(p.write(2, 0, 1 << 20, 0), 0);  // 256 packets, many in flight at once
  ASSERT_TRUE(p.run_until_completions(2, 0, 100_ms));
  EXPECT_TRUE(p.same(0, 1 << 20, 0));
  const std::size_t large = qa->memory_bytes();
  EXPECT_GT(large, small);  // the ring doubled at least once
  // ... and never past the window's 1024 records.
  EXPECT_LT(large - small, 1024 * 64u);
}

TEST(QpState, TheQpsOfOneEvListShareOneCopy) {
  engine::EndpointConfig ec;
  ec.num_ports = 2;
  engine::Endpoint ep(ec);
  engine::QpConfig qc;
  qc.evs = engine::make_ev_set(2, 4, 0);
  const std::vector<engine::Ev> first = qc.evs;
  const std::uint32_t a = ep.create_qp(qc), b = ep.create_qp(qc);
  qc.evs = engine::make_ev_set(2, 4, 1);
  const std::uint32_t c = ep.create_qp(qc);
  ASSERT_TRUE(a != 0 && b != 0 && c != 0);
  const engine::Endpoint& cep = ep;
  EXPECT_EQ(&cep.qp(a)->evs().ev(0), &cep.qp(b)->evs().ev(0));
  EXPECT_NE(&cep.qp(a)->evs().ev(0), &cep.qp(c)->evs().ev(0));
  EXPECT_EQ(cep.qp(c)->evs().size(), 10u);
  // a and b keep their list after the endpoint moved on to another, and after each other's end.
  ASSERT_EQ(ep.destroy_qp(a), 0);
  ASSERT_EQ(cep.qp(b)->evs().size(), first.size());
  for (std::uint16_t s = 0; s < first.size(); ++s) EXPECT_EQ(cep.qp(b)->evs().ev(s), first[s]);
  // An equal list made anew is shared again only while it is the endpoint's last.
  qc.evs = engine::make_ev_set(2, 4, 1);
  const std::uint32_t d = ep.create_qp(qc);
  EXPECT_EQ(&cep.qp(c)->evs().ev(0), &cep.qp(d)->evs().ev(0));
}

TEST(QpState, AQpThatOnlySendsHoldsNoResponderBuffers) {
  PairOptions o;
  Pair p(o);
  const engine::Qp* qa = &std::as_const(p.qpa());
  const engine::Qp* qb = &std::as_const(p.qpb());
  const std::size_t idle = qa->memory_bytes();
  EXPECT_EQ(qb->memory_bytes(), idle);    // both connected, neither used yet
  EXPECT_TRUE(qa->config().evs.empty());  // the EV manager holds the EVs
  // ... and reads them, and their state, from the endpoint's table until one changes state.
  const std::size_t evm_idle = qb->evs().heap_bytes();
  EXPECT_EQ(evm_idle, 0u);
  EXPECT_TRUE(qb->evs().shares_slots());
  ASSERT_EQ(p.b().post_recv(p.qpn_b(), 9), 0);
  ASSERT_EQ(p.write(1, 0, 64 * 1024, 0, true), 0);  // a WRITE_WITH_IMM from a to b
  ASSERT_TRUE(p.run_until_completions(1, 1, 10_ms));
  EXPECT_TRUE(p.same(0, 64 * 1024, 0));
  // a allocated its send queue (4096 WRs) and PSN ring; b only its WRITE_IMM slots (128) and
  // control ring: no send queue, no ring.
  EXPECT_GT(qa->memory_bytes(), idle + 4096 * 32);
  EXPECT_LT(qb->memory_bytes(), idle + 8 * 1024);
  EXPECT_GT(qb->memory_bytes(), idle);
  // b's SACKs picked EVs but changed none: its EV manager holds what it held idle; a's learned
  // the delivery times of its EVs.
  EXPECT_EQ(qb->evs().heap_bytes(), evm_idle);
  EXPECT_TRUE(qb->evs().shares_slots());
  EXPECT_GE(qa->evs().heap_bytes(), evm_idle + qa->evs().size() * sizeof(Time));
}

}  // namespace
}  // namespace mrc::test
