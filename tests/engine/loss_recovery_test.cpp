// Loss detection and path blame (docs/decisions.md D43): time-based RACK with a reorder timer,
// tail-loss probes that resend the newest packet, SACK triggers that must be acknowledged by their
// SACK, and EVs blamed only when they lose more than the others.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "harness.hpp"
#include "packet_util.hpp"

namespace mrc::test {
namespace {

using engine::EventType;
using engine::EvState;

std::vector<Frame> first_frames(Pair& p, std::uint32_t npkts, Time now) {
  engine::SendWr wr;
  wr.wr_id = 1;
  wr.local_addr = reinterpret_cast<std::uintptr_t>(p.src().data());
  wr.length = npkts * p.options().pmtu;
  wr.lkey = p.a().memory().register_region(p.src().data(), p.src().size(), engine::access::kAll)->lkey;
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst().data());
  wr.rkey = p.mr_b().rkey;
  EXPECT_EQ(p.a().post_send(p.qpn_a(), wr, now), 0);
  return pull_all(p.a(), now, 0xF, npkts);
}

wire::Packet sack_for(Pair& p, std::uint32_t cack, std::int16_t trigger_offset, std::uint32_t ev) {
  return make_sack(cack, trigger_offset, 0, 1, wire::cc_flags::kSvcTime, p.qpn_a(), ev);
}

TEST(LossRecovery, RttSampleFromATriggerTheSackDoesNotAcknowledgeIsRefused) {
  // A continuation SACK used to carry the PSN of the probe it followed, which a data packet sent
  // later takes (D22): its "RTT" was the time since that later packet left, ~1 us, and it pinned
  // the base RTT. A trigger the SACK does not acknowledge gives no sample.
  Pair p(PairOptions{});
  const Duration base = p.qpa().base_rtt();
  const auto frames = first_frames(p, 2, 1000);
  ASSERT_EQ(frames.size(), 2u);
  // Acknowledges frames[0] only, names frames[1] as its trigger: 300 ns after it was sent.
  p.a().receive(encode_packet(sack_for(p, frames[0].psn, 1, frames[1].ev.value)),
                rx_meta(p.node_b(), frames[1].port, 0), 1300);
  EXPECT_EQ(p.qpa().base_rtt(), base);
  EXPECT_EQ(p.qpa().outstanding_psns(), 1u);  // the cumulative part was taken
  // The same SACK naming the packet it acknowledges is a valid (here: short) sample.
  Pair q(PairOptions{});
  const auto f2 = first_frames(q, 2, 1000);
  q.a().receive(encode_packet(sack_for(q, f2[0].psn, 0, f2[0].ev.value)), rx_meta(q.node_b(), f2[0].port, 0),
                1300);
  EXPECT_EQ(q.qpa().base_rtt(), 300u);
}

std::uint32_t assumed_bad(Pair& p, std::uint32_t plane, std::uint32_t path, std::uint32_t* elsewhere) {
  std::uint32_t on = 0;
  for (const auto& e : p.a_events()) {
    if (e.type != EventType::kEvState || e.to != EvState::kAssumedBad) continue;
    if (e.ev.port == plane && p.net().path_index(e.ev) == path)
      ++on;
    else
      ++*elsewhere;
  }
  return on;
}

TEST(LossRecovery, RandomLossOnEveryPathBlamesNoPath) {
  // 1 % loss on every path: no path loses more than the others, so no EV is retired (D43).
  PairOptions o;
  o.buf_size = 16 << 20;
  o.path.loss = 0.01;
  Pair p(o);
  ASSERT_EQ(p.write(1, 0, 16 << 20, 0), 0);
  ASSERT_TRUE(p.run_until_completions(1, 0, 50_ms));
  EXPECT_TRUE(p.same(0, 16 << 20, 0));
  EXPECT_GT(p.qpa().counters().rtx_loss, 10u);
  std::uint32_t bad = 0;
  for (const auto& e : p.a_events()) bad += e.type == EventType::kEvState && e.to == EvState::kAssumedBad;
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(p.qpa().counters().ev_transitions, 0u);
}

TEST(LossRecovery, SingleLossBlamesNoPath) {
  // One packet lost on an otherwise clean network: repaired, and its path keeps its EVs.
  PairOptions o;
  o.buf_size = 4 << 20;
  Pair p(o);
  bool dropped = false;
  p.net().path(2, 3).loss = 1.0;
  p.net().set_observer([&](const sim::PacketRecord& r) {
    if (!r.delivered && !dropped) {
      dropped = true;
      p.net().path(2, 3).loss = 0;
    }
  });
  ASSERT_EQ(p.write(1, 0, 4 << 20, 0), 0);
  ASSERT_TRUE(p.run_until_completions(1, 0, 50_ms));
  EXPECT_TRUE(p.same(0, 4 << 20, 0));
  EXPECT_TRUE(dropped);
  std::uint32_t elsewhere = 0;
  EXPECT_EQ(assumed_bad(p, 2, 3, &elsewhere), 0u);
  EXPECT_EQ(elsewhere, 0u);
}

TEST(LossRecovery, GrayPathIsCaught) {
  // One path of 64 loses 5 %, the others nothing: its EV loses far more than the rest and is
  // retired after two or three of them (about 50 of its packets); no other EV is.
  PairOptions o;
  o.buf_size = 64 << 20;
  Pair p(o);
  p.net().path(1, 5).loss = 0.05;
  ASSERT_EQ(p.write(1, 0, 64 << 20, 0), 0);
  ASSERT_TRUE(p.run_until_completions(1, 0, 50_ms));
  EXPECT_TRUE(p.same(0, 64 << 20, 0));
  std::uint32_t elsewhere = 0;
  EXPECT_GE(assumed_bad(p, 1, 5, &elsewhere), 1u)
      << p.net().path_stats(1, 5).dropped << " lost of " << p.net().path_stats(1, 5).packets;
  EXPECT_EQ(elsewhere, 0u);
}

TEST(LossRecovery, SeveralDeadPathsAreEachBlamedAtTheirSecondLoss) {
  // Four paths of 64 dead from the start (one per plane), nothing else lost. Each dead EV's losses
  // stay out of the rate the others are judged by (D57), and a retransmission acknowledged by any
  // SACK confirms its loss, so every dead EV is retired at its second loss (a few more packets were
  // already on their way) and no healthy one is. Before D57 they lost 4 to 10 packets each.
  PairOptions o;
  o.buf_size = 64 << 20;
  Pair p(o);
  const std::uint32_t dead[4][2] = {{0, 1}, {1, 6}, {2, 11}, {3, 15}};
  for (const auto& d : dead) p.net().path(d[0], d[1]).loss = 1.0;
  std::map<std::uint32_t, std::uint32_t> data_lost;  // per EV value: probes are not counted
  p.net().set_observer([&](const sim::PacketRecord& r) {
    if (!r.delivered && r.tc != engine::TrafficClass::kControl) ++data_lost[r.ev.value];
  });
  ASSERT_EQ(p.write(1, 0, 64 << 20, 0), 0);
  ASSERT_TRUE(p.run_until_completions(1, 0, 50_ms));
  EXPECT_TRUE(p.same(0, 64 << 20, 0));
  std::uint32_t elsewhere = 0;
  for (const auto& d : dead) {
    std::uint32_t other = 0;
    EXPECT_GE(assumed_bad(p, d[0], d[1], &other), 1u);
  }
  for (const auto& e : p.a_events())
    if (e.type == EventType::kEvState && e.to == EvState::kAssumedBad) {
      bool on_dead = false;
      for (const auto& d : dead) on_dead |= e.ev.port == d[0] && p.net().path_index(e.ev) == d[1];
      elsewhere += !on_dead;
    }
  EXPECT_EQ(elsewhere, 0u);
  EXPECT_EQ(data_lost.size(), 4u);  // one EV per dead path
  for (const auto& [ev, n] : data_lost) {
    std::printf("EV %u: %u data packets lost\n", ev, n);
    EXPECT_LE(n, 6u) << "EV " << ev;  // two confirmed losses and what was on its way meanwhile
  }
}

TEST(LossRecovery, ATrimNackAlsoReportsTheArrivalsCoalescingHeldBack) {
  // D86: two packets arrive (no ACK request: the responder coalesces them), then the third's
  // trimmed header. The NACK asks for the third again; a SACK goes with it, so that the requester
  // also learns the first two arrived (before D86 it learned that only from the resend's SACK, and
  // when that resend was trimmed too, from its tail probe or the RTO).
  Pair p(PairOptions{});
  const auto frames = first_frames(p, 3, 1000);
  ASSERT_EQ(frames.size(), 3u);
  deliver(p.b(), frames[0], p.node_a(), 3000);
  deliver(p.b(), frames[1], p.node_a(), 3100);
  EXPECT_TRUE(pull_all(p.b(), 3100, 0xF).empty());  // coalesced
  Frame trimmed = frames[2];
  trimmed.bytes.resize(trimmed.bytes.size() - p.options().pmtu - wire::kIcrcSize);
  engine::RxMeta m = rx_meta(p.node_a(), trimmed.port, trimmed.ev.value);
  m.trimmed = true;
  p.b().receive(trimmed.bytes, m, 3200);
  const auto answers = pull_all(p.b(), 3200, 0xF);
  ASSERT_EQ(answers.size(), 2u);
  wire::Packet nack, sack;
  ASSERT_EQ(answers[0].decode(nack), wire::Error::kOk);
  ASSERT_EQ(answers[1].decode(sack), wire::Error::kOk);
  EXPECT_EQ(nack.bth.opcode, wire::Opcode::kNack);
  EXPECT_EQ(nack.neth.nack_psn, frames[2].psn);
  ASSERT_EQ(sack.bth.opcode, wire::Opcode::kSack);
  EXPECT_EQ(sack.seth.cack_psn, frames[1].psn);  // both arrivals
  EXPECT_EQ(sack.seth.ack_psn_offset, -32768);   // it answers no packet: no RTT sample from it
  EXPECT_EQ(sack.seth.cc_flags & wire::cc_flags::kEcnEcho, 0);
  // The requester takes both: only the trimmed packet is outstanding, and it goes again.
  for (const Frame& f : answers) deliver(p.a(), f, p.node_b(), 5000);
  EXPECT_EQ(p.qpa().outstanding_psns(), 1u);
  const auto resend = pull_all(p.a(), 5000, 0xF);
  ASSERT_EQ(resend.size(), 1u);
  EXPECT_EQ(resend[0].psn, frames[2].psn);
  // A trimmed header with nothing unreported gets its NACK alone.
  p.b().receive(trimmed.bytes, m, 5100);
  const auto again = pull_all(p.b(), 5100, 0xF);
  ASSERT_EQ(again.size(), 1u);
  wire::Packet only;
  ASSERT_EQ(again[0].decode(only), wire::Error::kOk);
  EXPECT_EQ(only.bth.opcode, wire::Opcode::kNack);
}

TEST(LossRecovery, TailLossIsRepairedWithinTwoRtts) {
  // The last packet of a message is lost: nothing sent after it can expose the loss, so the
  // tail-loss probe resends it one PTO (about srtt + reorder window) after it left (D43).
  PairOptions o;
  Pair p(o);
  const Duration rtt = p.net().base_rtt();
  ASSERT_EQ(p.write(1, 0, 256 << 10, 0), 0);  // warm up: RTT estimates
  ASSERT_TRUE(p.run_until_completions(1, 0, 10_ms));
  bool armed = true;
  Time lost_sent = 0, repaired = 0;
  std::uint32_t lost_psn = 0;
  for (std::uint32_t pl = 0; pl < o.planes; ++pl)
    for (std::uint32_t i = 0; i < o.paths; ++i) p.net().path(pl, i).loss = 1.0;
  p.net().set_observer([&](const sim::PacketRecord& r) {
    if (r.src != p.node_a() || r.tc == engine::TrafficClass::kControl) return;
    if (!r.delivered && armed) {
      armed = false;
      lost_sent = r.sent;
      lost_psn = r.psn;
      for (std::uint32_t pl = 0; pl < o.planes; ++pl)
        for (std::uint32_t i = 0; i < o.paths; ++i) p.net().path(pl, i).loss = 0;
    } else if (r.delivered && !armed && r.psn == lost_psn && repaired == 0) {
      repaired = r.time;
    }
  });
  ASSERT_EQ(p.write(2, 0, 4096, 0), 0);  // one packet: a tail by construction
  ASSERT_TRUE(p.run_until_completions(2, 0, 10_ms));
  ASSERT_FALSE(armed);
  ASSERT_GT(repaired, lost_sent);
  const double rtts = static_cast<double>(repaired - lost_sent) / static_cast<double>(rtt);
  std::printf("tail loss: repaired %.2f base RTTs after the lost packet left\n", rtts);
  EXPECT_LE(rtts, 2.0);
  EXPECT_EQ(p.qpa().counters().timeouts, 0u);
}

}  // namespace
}  // namespace mrc::test
