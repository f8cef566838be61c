// Forged packets from someone who knows the addresses but no secret (docs/security.md): a blind
// wrong-rkey write sweep, forged fatal NAKs, forged port-status updates with and without
// authentication, and an event queue nobody drains. The forged packets are built with the codec's
// own encoder; the real transfer is moved by hand and must complete, byte for byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/harness.hpp"
#include "engine/packet_util.hpp"
#include "engine/qp.hpp"

namespace mrc::test {
namespace {

using wire::Opcode;

/// Moves everything both endpoints send, both ways, `rounds` times `step` apart (a loss-free wire
/// by hand), running their timers on the way.
void exchange(Pair& p, Time& t, int rounds, Duration step = 2000) {
  const std::uint32_t all = 0xFFFFFFFFu;
  for (int i = 0; i < rounds; ++i) {
    for (engine::Endpoint* e : {&p.a(), &p.b()})
      if (e->next_deadline() <= t) e->on_timer(t);
    const auto from_a = pull_all(p.a(), t, all);
    const auto from_b = pull_all(p.b(), t, all);
    t += step;
    for (const Frame& f : from_a) deliver(p.b(), f, p.node_a(), t);
    for (const Frame& f : from_b) deliver(p.a(), f, p.node_b(), t);
  }
}

/// A WRITE that looks like it came from a: right QPN and peer, a guessed PSN, a wrong rkey.
std::vector<std::uint8_t> forged_write(const Pair& p, std::uint32_t psn, std::uint32_t rkey) {
  static const std::uint8_t junk[64] = {};
  wire::Packet k;
  k.bth.opcode = Opcode::kWriteOnly;
  k.bth.dest_qp = p.qpn_b();
  k.bth.psn = psn;
  k.bth.ack_req = true;
  k.reth.va = 0x1000;
  k.reth.rkey = rkey;
  k.reth.dma_len = sizeof junk;
  k.payload = junk;
  return encode_packet(k);
}

/// An AETH NAK (remote access error) for a's QP, as if b had sent it.
std::vector<std::uint8_t> forged_access_nak(const Pair& p, std::uint32_t psn) {
  wire::Packet k;
  k.bth.opcode = Opcode::kAck;
  k.bth.dest_qp = p.qpn_a();
  k.bth.psn = psn;
  k.aeth.syndrome = wire::aeth::kNakRemoteAccessError;
  return encode_packet(k);
}

std::vector<std::uint8_t> forged_port_status(std::uint32_t mask) {
  wire::Packet k;
  k.bth.opcode = Opcode::kEndpointRequest;
  k.bth.dest_qp = wire::kEpQpn;
  k.erth.op = wire::EpOp::kPortStatusUpdate;
  k.erth.port_status_mask = mask;
  return encode_packet(k);
}

/// Posts a WRITE of src[0, len) to dst[0, len) without kicking the pair's network: the tests move
/// every packet by hand.
int post_write(Pair& p, std::uint64_t id, std::uint32_t len, bool imm = false) {
  engine::SendWr wr;
  wr.wr_id = id;
  wr.with_imm = imm;
  wr.imm = 7;
  wr.local_addr = reinterpret_cast<std::uintptr_t>(p.src().data());
  wr.length = len;
  wr.lkey = p.mr_a().lkey;
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst().data());
  wr.rkey = p.mr_b().rkey;
  return p.a().post_send(p.qpn_a(), wr, 0);
}

std::vector<engine::Completion> completions(engine::Endpoint& e) {
  std::vector<engine::Completion> v;
  engine::Completion c;
  while (e.poll_completion(c)) v.push_back(c);
  return v;
}

/// No congestion control: the whole message leaves at once, so tests can hold all of it back.
PairOptions open_window() {
  PairOptions o;
  o.nscc = false;
  return o;
}

/// Runs the pair `rounds` more rounds and checks a's one write of `len` bytes completed, its bytes
/// placed, the QP still up.
void expect_transfer_done(Pair& p, Time& t, int rounds, std::uint32_t len) {
  exchange(p, t, rounds);
  const auto done = completions(p.a());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(p.same(0, len, 0));
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts);
}

/// Posts a 16 KiB write and holds its 4 packets back (returned); a forged wrong-rkey write at the
/// first PSN makes b NAK it, so a resends that packet (appended to `resent`), and a forged NAK
/// answers the resend: two forged packets at one PSN.
std::vector<Frame> two_forged_hits(Pair& p, Time& t, std::vector<Frame>& resent) {
  EXPECT_EQ(post_write(p, 1, 16 << 10), 0);
  auto real = pull_all(p.a(), t, 0xF);
  EXPECT_EQ(real.size(), 4u);
  const std::uint32_t psn = p.psn_ab();
  p.b().receive(forged_write(p, psn, p.mr_b().rkey ^ 0x77u), rx_meta(p.node_a(), 0, 0), t);
  t += 1000;
  for (const Frame& f : pull_all(p.b(), t, 0xF)) deliver(p.a(), f, p.node_b(), t);  // b's NAK
  for (Frame& f : pull_all(p.a(), t, 0xF)) resent.push_back(std::move(f));
  EXPECT_FALSE(resent.empty());
  p.a().receive(forged_access_nak(p, psn), rx_meta(p.node_b(), 0, 0), t);  // "refused again"
  return real;
}

TEST(Attack, ABlindWrongRkeySweepBeforeTheRealPacketsDoesNotFailTheRequester) {
  // The attacker knows the QPN and forges a's address, but not the rkey; it sweeps every PSN of
  // the window just before the real packets arrive, so the responder refuses each forged write
  // and NAKs its PSN to the real requester.
  Pair p(open_window());
  ASSERT_EQ(post_write(p, 1, 64 << 10), 0);
  Time t = 0;
  const auto real = pull_all(p.a(), t, 0xF);
  ASSERT_EQ(real.size(), 16u);
  for (std::uint32_t k = 0; k < 1024; ++k) {
    const auto bytes = forged_write(p, psn_add(p.psn_ab(), k), p.mr_b().rkey ^ 0x5A5A5A5Au);
    p.b().receive(bytes, rx_meta(p.node_a(), static_cast<std::uint8_t>(k % 4), k), t);
  }
  EXPECT_GE(p.qpb().counters().rx_refused, 16u);
  t += 1000;
  for (const Frame& f : pull_all(p.b(), t, 0xF)) deliver(p.a(), f, p.node_b(), t);  // the NAKs
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts) << "one forged write per PSN failed the QP";
  for (const Frame& f : real) deliver(p.b(), f, p.node_a(), t);
  exchange(p, t, 20);
  const auto done = completions(p.a());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(p.same(0, 64 << 10, 0));
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts);
  EXPECT_GE(p.qpa().counters().rx_fatal_nak_held, 1u);
  EXPECT_GE(p.qpa().counters().rx_fatal_nak_dismissed, 1u);
}

TEST(Attack, ForgedAccessNaksForEveryInFlightPsnDoNotFailTheRequester) {
  Pair p(open_window());
  ASSERT_EQ(post_write(p, 1, 64 << 10), 0);
  Time t = 0;
  const auto real = pull_all(p.a(), t, 0xF);
  ASSERT_EQ(real.size(), 16u);
  // One forged NAK per PSN in flight, straight to the requester, before any real answer.
  for (std::uint32_t k = 0; k < 16; ++k) {
    const auto nak = forged_access_nak(p, psn_add(p.psn_ab(), k));
    p.a().receive(nak, rx_meta(p.node_b(), 0, 0), t);
  }
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts);
  for (const Frame& f : real) deliver(p.b(), f, p.node_a(), t + 500);
  exchange(p, t, 20);
  const auto done = completions(p.a());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(p.same(0, 64 << 10, 0));
  EXPECT_EQ(p.qpa().counters().rx_fatal_nak_held, 1u);  // one confirmation at a time
  EXPECT_EQ(p.qpa().counters().rx_fatal_nak_dismissed, 15u);
}

TEST(Attack, AForgedUnexpEventNackIsHeldAndTheTransferCompletes) {
  Pair p(open_window());
  ASSERT_EQ(post_write(p, 1, 8192, true), 0);
  Time t = 0;
  const auto real = pull_all(p.a(), t, 0xF);
  ASSERT_EQ(real.size(), 2u);
  wire::Packet k;
  k.bth.opcode = Opcode::kNack;
  k.bth.dest_qp = p.qpn_a();
  k.bth.psn = p.psn_ab();
  k.neth.nack_psn = p.psn_ab();
  k.neth.reason = wire::NackReason::kUnexpEvent;
  p.a().receive(encode_packet(k), rx_meta(p.node_b(), 0, 0), t);
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts);
  ASSERT_EQ(p.b().post_recv(p.qpn_b(), 99), 0);
  for (const Frame& f : real) deliver(p.b(), f, p.node_a(), t + 500);
  exchange(p, t, 20);
  const auto done = completions(p.a());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(p.same(0, 8192, 0));
}

TEST(Attack, AGenuineWrongRkeyStillFailsTheQpOnceItsRetransmissionIsRefusedToo) {
  Pair p(PairOptions{});
  engine::SendWr wr;
  wr.wr_id = 5;
  wr.local_addr = reinterpret_cast<std::uintptr_t>(p.src().data());
  wr.length = 4096;
  wr.lkey = p.mr_a().lkey;
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst().data());
  wr.rkey = p.mr_b().rkey ^ 1u;
  ASSERT_EQ(p.a().post_send(p.qpn_a(), wr, 0), 0);
  Time t = 0;
  exchange(p, t, 1);  // the write, its NAK comes back next round
  exchange(p, t, 1);
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts) << "the first NAK is only held";
  EXPECT_EQ(p.qpa().counters().rx_fatal_nak_held, 1u);
  exchange(p, t, 2);  // the retransmission is refused as well ...
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts) << "... which alone does not fail the QP (D39)";
  exchange(p, t, 40);
  const auto done = completions(p.a());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, engine::WcStatus::kRemoteAccessError);
  EXPECT_EQ(p.qpa().state(), engine::QpState::kError);
}

TEST(Attack, AGenuineWrongRkeyAmongOtherWritesFailsTheQpWithItsOwnStatus) {
  // The bad write among 38 good ones in flight: their SACKs keep coming while its retransmissions
  // are refused, and only its own WR reports the access error.
  Pair p(PairOptions{});
  ASSERT_EQ(post_write(p, 1, 32 << 10), 0);
  engine::SendWr wr;
  wr.wr_id = 2;
  wr.local_addr = reinterpret_cast<std::uintptr_t>(p.src().data());
  wr.length = 4096;
  wr.lkey = p.mr_a().lkey;
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst().data()) + (64 << 10);
  wr.rkey = p.mr_b().rkey ^ 1u;
  ASSERT_EQ(p.a().post_send(p.qpn_a(), wr, 0), 0);
  for (std::uint64_t id = 3; id < 40; ++id) ASSERT_EQ(post_write(p, id, 32 << 10), 0);
  Time t = 0;
  for (int i = 0; i < 200 && p.qpa().state() == engine::QpState::kRts; ++i) exchange(p, t, 1);
  EXPECT_EQ(p.qpa().state(), engine::QpState::kError);
  EXPECT_EQ(p.qpa().counters().rx_fatal_nak_held, 1u);
  const auto done = completions(p.a());
  ASSERT_EQ(done.size(), 39u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].status, engine::WcStatus::kSuccess);
  int errors = 0;
  for (const auto& c : done) {
    if (c.wr_id == 2) {
      EXPECT_EQ(c.status, engine::WcStatus::kRemoteAccessError);
    } else if (c.wr_id > 2) {
      EXPECT_NE(c.status, engine::WcStatus::kRemoteAccessError);
    }
    errors += c.status == engine::WcStatus::kRemoteAccessError;
  }
  EXPECT_EQ(errors, 1);
}

TEST(Attack, AForgedWriteAndAForgedNakAtTheSamePsnDoNotFailTheRequester) {
  // Two forged packets at one PSN: a wrong-rkey write makes the responder NAK it (held, the packet
  // is resent), then a forged NAK answers the retransmission. The responder still SACKs the real
  // retransmission, which dismisses both.
  Pair p(open_window());
  Time t = 0;
  std::vector<Frame> rtx;
  const auto real = two_forged_hits(p, t, rtx);
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts);
  for (const Frame& f : real) deliver(p.b(), f, p.node_a(), t + 500);
  for (const Frame& f : rtx) deliver(p.b(), f, p.node_a(), t + 500);
  expect_transfer_done(p, t, 40, 16 << 10);
}

TEST(Attack, TwoForgedHitsOnOnePsnDoNotFailARequesterWhosePeerLags) {
  // The loopback attack test's failure (CI, ASan, 2 loaded cores): the same two forged packets,
  // and then the responder, busy with the attacker's flood, answers nothing for far longer than
  // 4 RTTs. Its silence is no evidence against the packet: when it catches up it SACKs the real
  // copies (D69).
  Pair p(open_window());
  Time t = 0;
  std::vector<Frame> late;
  const auto real = two_forged_hits(p, t, late);
  // 500 us of silence (RTO: 1.05 ms): a's timers run, what it sends reaches b only afterwards.
  for (const Time end = t + 500'000; t < end; t += 2000) {
    if (p.a().next_deadline() <= t) p.a().on_timer(t);
    for (Frame& f : pull_all(p.a(), t, 0xF)) late.push_back(std::move(f));
  }
  EXPECT_EQ(p.qpa().state(), engine::QpState::kRts) << "a silent responder failed the QP";
  for (const Frame& f : real) deliver(p.b(), f, p.node_a(), t);
  for (const Frame& f : late) deliver(p.b(), f, p.node_a(), t);
  expect_transfer_done(p, t, 40, 16 << 10);
}

TEST(Attack, TwoForgedPacketsPerPsnNeverFailAQpWhateverTheResponderLags) {
  // D69's guarantee on random schedules: a kill needs a fatal NAK after the first retransmission and
  // after the second, so at most two forged packets per PSN (a wrong-rkey write to the responder,
  // or an access NAK to the requester, at random times) never fail the QP, however long the
  // responder takes nothing (here up to 600 us at a random moment; the RTO is 1.05 ms).
  constexpr std::uint32_t kPkts = 16;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE(seed);
    Pair p(open_window());
    ASSERT_EQ(post_write(p, 1, kPkts * 4096), 0);
    std::mt19937_64 rng(seed);
    struct OnWire {
      Time at;
      Frame f;
    };
    std::vector<OnWire> to_a, to_b;
    const Time stall_from = 2000 * (rng() % 20);
    const Time stall_to = stall_from + 2000 * (rng() % 301);
    std::vector<int> hits(kPkts, 0);
    std::vector<engine::Completion> done;
    Time t = 0;
    for (int round = 0; round < 3000 && done.empty(); ++round, t += 2000) {
      const bool stalled = t >= stall_from && t < stall_to;
      if (p.a().next_deadline() <= t) p.a().on_timer(t);
      for (Frame& f : pull_all(p.a(), t, 0xF)) to_b.push_back({t + 1000, std::move(f)});
      if (rng() % 3 == 0) {
        const auto k = static_cast<std::uint32_t>(rng() % kPkts);
        if (hits[k] < 2) {
          ++hits[k];
          const std::uint32_t psn = psn_add(p.psn_ab(), static_cast<std::int32_t>(k));
          if (rng() & 1) {
            Frame f;
            f.bytes = forged_write(p, psn, p.mr_b().rkey ^ 0x5A5Au);
            to_b.push_back({t, std::move(f)});
          } else {
            p.a().receive(forged_access_nak(p, psn), rx_meta(p.node_b(), 0, 0), t);
          }
        }
      }
      if (!stalled) {  // b takes what has reached it, in order, and answers
        std::size_t n = 0;
        while (n < to_b.size() && to_b[n].at <= t) deliver(p.b(), to_b[n++].f, p.node_a(), t);
        to_b.erase(to_b.begin(), to_b.begin() + static_cast<std::ptrdiff_t>(n));
        if (p.b().next_deadline() <= t) p.b().on_timer(t);
        for (Frame& f : pull_all(p.b(), t, 0xF)) to_a.push_back({t + 1000, std::move(f)});
      }
      std::size_t n = 0;
      while (n < to_a.size() && to_a[n].at <= t) deliver(p.a(), to_a[n++].f, p.node_b(), t);
      to_a.erase(to_a.begin(), to_a.begin() + static_cast<std::ptrdiff_t>(n));
      done = completions(p.a());
    }
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, engine::WcStatus::kSuccess);
    EXPECT_TRUE(p.same(0, kPkts * 4096, 0));
    EXPECT_EQ(p.qpa().state(), engine::QpState::kRts);
  }
}

TEST(Attack, APortStatusThatLeavesOutItsArrivalPlaneIsRefused) {
  Pair p(PairOptions{});
  const auto bytes = forged_port_status(0);  // "no port usable", yet it arrived on plane 1
  p.b().receive(bytes, rx_meta(p.node_a(), 1, 0), 0);
  EXPECT_EQ(p.b().counters().rx_ep_refused, 1u);
  EXPECT_EQ(p.qpb().peer_port_mask() & 0xF, 0xFu);
  const auto mask_3 = forged_port_status(0x7);  // leaves out plane 3, arrives on plane 3
  p.b().receive(mask_3, rx_meta(p.node_a(), 3, 0), 0);
  EXPECT_EQ(p.b().counters().rx_ep_refused, 2u);
  EXPECT_EQ(p.qpb().peer_port_mask() & 0xF, 0xFu);
}

TEST(Attack, EndpointPacketsFromAnUnknownSourceAreRefusedAndQueueNothing) {
  Pair p(PairOptions{});
  for (std::uint32_t i = 0; i < 10000; ++i)
    p.b().receive(forged_port_status(i % 2 ? 0x3 : 0x1), rx_meta(engine::kNoPeer, 0, 0), i);
  wire::Packet probe;
  probe.bth.opcode = Opcode::kEndpointRequest;
  probe.bth.dest_qp = wire::kEpQpn;
  probe.erth.op = wire::EpOp::kEvProbe;
  for (std::uint32_t i = 0; i < 5000; ++i)
    p.b().receive(encode_packet(probe), rx_meta(engine::kNoPeer, 0, 0), i);
  EXPECT_EQ(p.b().counters().rx_ep_refused, 15000u);
  engine::Event e;
  EXPECT_FALSE(p.b().poll_event(e));
  EXPECT_TRUE(pull_all(p.b(), 10000, 0xF).empty()) << "no answer queued for a source nobody can reach";
}

TEST(Attack, AForgedPortStatusIsUndoneByTheCheckItTriggers) {
  // Without authentication a forged update is believed at first (a real one must act at once),
  // then b probes a on the arrival plane and a's answer carries its real port mask.
  Pair p(PairOptions{});
  ASSERT_EQ(post_write(p, 1, 256 << 10), 0);
  Time t = 0;
  exchange(p, t, 2);
  p.b().receive(forged_port_status(0x2), rx_meta(p.node_a(), 1, 0), t);  // "only plane 1 is up"
  EXPECT_EQ(p.qpb().peer_port_mask() & 0xF, 0x2u);
  exchange(p, t, 3);  // b's check and a's answer
  EXPECT_EQ(p.qpb().peer_port_mask() & 0xF, 0xFu);
  EXPECT_EQ(p.b().counters().port_status_corrected, 1u);
  exchange(p, t, 60);
  const auto done = completions(p.a());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(p.same(0, 256 << 10, 0));
}

TEST(Attack, AGenuinePortStatusStandsAfterItsCheck) {
  PairOptions o;
  Pair p(o);
  Time t = 0;
  exchange(p, t, 1);
  p.a().set_port_up(2, false, t);  // a really loses plane 2 and tells b
  exchange(p, t, 4);
  EXPECT_EQ(p.qpb().peer_port_mask() & 0xF, 0xBu);
  EXPECT_EQ(p.b().counters().port_status_corrected, 0u);
  EXPECT_EQ(p.b().counters().rx_ep_refused, 0u);
}

TEST(Attack, WithAuthAForgedPortStatusIsRefusedAndAGenuineOneWorks) {
  PairOptions o;
  o.auth = true;
  Pair p(o);
  Time t = 0;
  for (int i = 0; i < 8; ++i) p.b().receive(forged_port_status(0x2), rx_meta(p.node_a(), 1, 0), t);
  EXPECT_EQ(p.b().counters().rx_ep_refused, 8u);
  EXPECT_EQ(p.b().counters().rx_auth_failed, 8u);
  EXPECT_EQ(p.qpb().peer_port_mask() & 0xF, 0xFu);
  p.a().set_port_up(0, false, t);  // a genuine update carries a tag b accepts
  exchange(p, t, 4);
  EXPECT_EQ(p.qpb().peer_port_mask() & 0xF, 0xEu);
  EXPECT_EQ(p.b().counters().rx_ep_refused, 8u);
  ASSERT_EQ(post_write(p, 1, 64 << 10), 0);
  exchange(p, t, 30);
  const auto done = completions(p.a());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(p.same(0, 64 << 10, 0));
}

TEST(Attack, AnUndrainedEventQueueKeepsTheNewestAndSaysHowManyWereDropped) {
  PairOptions o;
  Pair p(o);
  // Each toggle of a local port changes every EV of that plane: far more events than the cap.
  Time t = 0;
  for (int i = 0; i < 400; ++i) {
    p.b().set_port_up(1, i % 2 == 1, t);
    t += 1000;
  }
  const std::uint64_t cap = engine::Tunables{}.max_events;
  EXPECT_GT(p.b().counters().events_dropped, 0u);
  engine::Event e;
  ASSERT_TRUE(p.b().poll_event(e));
  EXPECT_EQ(e.type, engine::EventType::kEventsDropped);
  EXPECT_EQ(e.dropped, p.b().counters().events_dropped);
  std::uint64_t kept = 0;
  Time last = 0;
  while (p.b().poll_event(e)) {
    EXPECT_NE(e.type, engine::EventType::kEventsDropped);
    EXPECT_GE(e.time, last);
    last = e.time;
    ++kept;
  }
  EXPECT_EQ(kept, cap);
  EXPECT_EQ(last, t - 1000);  // the newest survived
}

}  // namespace
}  // namespace mrc::test
