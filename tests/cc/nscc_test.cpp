// Unit tests of the NSCC window rules (docs/protocol.md §8.4) on hand-built ACK/NACK sequences.
#include "cc/nscc.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace mrc::cc {
namespace {

constexpr std::uint32_t kMtu = 4150;
constexpr std::uint64_t kBase = 14023;
constexpr std::uint64_t kTarget = 10517;

NsccConfig cfg_default() {
  return NsccConfig::derive(100'000'000'000ULL, 14023, kMtu, true);
}

// The same, without the periodic eta bump, to observe one rule in isolation across many base RTTs.
NsccConfig cfg_no_eta() {
  NsccConfig c = cfg_default();
  c.adjust_period_threshold_ns = 1'000'000'000;
  return c;
}

AckSample ack(std::uint32_t n, std::uint64_t delay_ns, bool ecn = false) {
  AckSample s;
  s.newly_acked_bytes = n;
  s.ecn_echo = ecn;
  s.rtt_valid = true;
  s.rtt_ns = kBase + delay_ns;
  return s;
}

void send(Nscc& cc, std::uint32_t packets) {
  for (std::uint32_t i = 0; i < packets; ++i) cc.on_send(kMtu);
}

// Brings cwnd down to `w` without touching any other state that matters to the tests.
void shrink_to(Nscc& cc, std::uint64_t w) {
  ASSERT_GE(cc.cwnd(), w);
  cc.on_inferred_loss(static_cast<std::uint32_t>(cc.cwnd() - w), 0);
  ASSERT_EQ(cc.cwnd(), w);
}

TEST(Nscc, StartsAtMaxCwnd) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd);
  EXPECT_EQ(cc.max_wnd(), c.max_cwnd);
  EXPECT_EQ(cc.inflight(), 0);
  EXPECT_EQ(cc.base_rtt_ns(), kBase);
  EXPECT_EQ(cc.avg_delay_ns(), 0.0);
  EXPECT_TRUE(cc.can_send(kMtu));
  EXPECT_FALSE(cc.ack_request());
  // Line rate from the start: a whole max_cwnd can go out before the first ACK.
  std::uint32_t pkts = 0;
  while (cc.can_send(kMtu)) {
    cc.on_send(kMtu);
    ++pkts;
  }
  EXPECT_EQ(pkts, c.max_cwnd / kMtu);
  EXPECT_TRUE(cc.ack_request());  // less than one MTU of window left
}

// CC-D13: at the window's floor (one mtu) a packet charged more than mtu (payload + header
// overhead) still goes when nothing is in flight, and only then.
TEST(Nscc, OnePacketAlwaysFitsAnEmptyWindow) {
  Nscc cc(cfg_default());
  shrink_to(cc, kMtu);
  constexpr std::uint32_t kCharged = 4096 + 64;
  static_assert(kCharged > kMtu);
  EXPECT_TRUE(cc.can_send(kCharged));
  cc.on_send(kCharged);
  EXPECT_FALSE(cc.can_send(1));
  cc.on_inferred_loss(kCharged, 0);  // released: empty again
  EXPECT_EQ(cc.inflight(), 0);
  EXPECT_TRUE(cc.can_send(kCharged));
}

TEST(Nscc, AckRequestBelowAckGenTrigger) {
  Nscc cc(cfg_default());
  shrink_to(cc, 16384);
  EXPECT_FALSE(cc.ack_request());
  shrink_to(cc, 16383);
  EXPECT_TRUE(cc.ack_request());
}

TEST(Nscc, InvalidRttOnlyReleasesInflight) {
  Nscc cc(cfg_default());
  shrink_to(cc, 100000);
  send(cc, 10);
  AckSample s = ack(kMtu, 50000, true);
  s.rtt_valid = false;
  cc.on_ack(s, 100000);
  EXPECT_EQ(cc.inflight(), 9 * kMtu);
  EXPECT_EQ(cc.cwnd(), 100000u);
  EXPECT_EQ(cc.avg_delay_ns(), 0.0);
  EXPECT_EQ(cc.stats().multi_dec, 0u);
}

TEST(Nscc, MultiplicativeDecreaseBoundedAndOncePerBaseRtt) {
  NsccConfig c = cfg_no_eta();
  c.disable_qa = true;  // delays here exceed qa_threshold; isolate MD
  Nscc cc(c);
  send(cc, 60);
  // Before one base RTT has elapsed since t=0, MD is gated: build up a large average delay.
  for (int i = 0; i < 50; ++i) cc.on_ack(ack(kMtu, 200000, true), 1000);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd);
  EXPECT_EQ(cc.stats().multi_dec, 0u);
  EXPECT_GT(cc.avg_delay_ns(), 2.7 * kTarget);  // 1 - 0.8*(d-t)/d < 0.5 from here on

  Time t = 20000;
  cc.on_ack(ack(kMtu, 200000, true), t);
  EXPECT_EQ(cc.stats().multi_dec, 1u);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd / 2);  // bounded by max_md_jump = 0.5
  const std::uint64_t w1 = cc.cwnd();

  // Not again within one base RTT (strictly more than base_rtt must pass).
  cc.on_ack(ack(kMtu, 200000, true), t + 5000);
  cc.on_ack(ack(kMtu, 200000, true), t + kBase);
  EXPECT_EQ(cc.cwnd(), w1);
  EXPECT_EQ(cc.stats().multi_dec, 1u);

  cc.on_ack(ack(kMtu, 200000, true), t + kBase + 1);
  EXPECT_EQ(cc.stats().multi_dec, 2u);
  EXPECT_EQ(cc.cwnd(), w1 / 2);
}

TEST(Nscc, MultiplicativeDecreaseProportionalToExcessDelay) {
  const NsccConfig c = cfg_no_eta();
  Nscc cc(c);
  send(cc, 60);
  // Samples of 13 us (above target, below qa_threshold); gate closed until t > base_rtt.
  for (int i = 0; i < 200; ++i) cc.on_ack(ack(1000, 13000, true), 1000);
  ASSERT_GT(cc.avg_delay_ns(), static_cast<double>(kTarget));
  ASSERT_EQ(cc.cwnd(), c.max_cwnd);
  cc.on_ack(ack(1000, 13000, true), 20000);
  const double d = cc.avg_delay_ns();
  const double factor = 1.0 - 0.8 * (d - kTarget) / d;
  ASSERT_GT(factor, 0.5);
  EXPECT_NEAR(static_cast<double>(cc.cwnd()), std::floor(c.max_cwnd * factor), 1.0);
  EXPECT_EQ(cc.stats().multi_dec, 1u);
  EXPECT_EQ(cc.stats().quick_adapt, 0u);
}

TEST(Nscc, EcnBelowTargetLeavesWindowAlone) {
  Nscc cc(cfg_no_eta());
  shrink_to(cc, 100000);
  send(cc, 60);
  // Make the average delay large first, so only the per-sample gate can prevent an MD.
  for (int i = 0; i < 100; ++i) cc.on_ack(AckSample{100, true, true, kBase + 30000, 0, false}, 1000);
  ASSERT_GT(cc.avg_delay_ns(), static_cast<double>(kTarget));
  ASSERT_EQ(cc.cwnd(), 100000u);
  for (int i = 0; i < 20; ++i) cc.on_ack(ack(kMtu, 5000, /*ecn=*/true), 20000);
  EXPECT_EQ(cc.cwnd(), 100000u);
  EXPECT_EQ(cc.stats().multi_dec, 0u);
  EXPECT_EQ(cc.stats().prop_inc, 0u);
  EXPECT_EQ(cc.stats().fair_inc, 0u);

  // The same ACKs without ECN grow the window (proportional increase).
  Nscc ref(cfg_default());
  shrink_to(ref, 100000);
  send(ref, 60);
  for (int i = 0; i < 20; ++i) ref.on_ack(ack(kMtu, 5000, false), 5000);
  EXPECT_GT(ref.cwnd(), 100000u);
  EXPECT_GT(ref.stats().prop_inc, 0u);
}

TEST(Nscc, FairIncreaseAboveTargetWithoutEcn) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  shrink_to(cc, 100000);
  send(cc, 60);
  // One ACK at t >= adjust_period: fulfil runs (period elapsed) and adds eta as well.
  cc.on_ack(ack(kMtu, kTarget + 1000), 20000);
  const auto fair1 = static_cast<std::uint64_t>(static_cast<double>(c.fi) * kMtu / 100000.0);
  const auto eta = static_cast<std::uint64_t>(c.eta);
  EXPECT_EQ(cc.cwnd(), 100000u + fair1 + eta);
  EXPECT_EQ(cc.stats().fair_inc, fair1);
  EXPECT_EQ(cc.stats().eta_inc, eta);
  EXPECT_EQ(cc.stats().prop_inc, 0u);

  // Increases accumulate until more than adjust_bytes_threshold bytes are acked.
  const std::uint64_t w = cc.cwnd();
  for (int i = 0; i < 8; ++i) cc.on_ack(ack(kMtu, kTarget), 21000);  // 33,200 B: not > threshold
  EXPECT_EQ(cc.cwnd(), w);
  cc.on_ack(ack(1, kTarget), 21000);
  const double expect = static_cast<double>(c.fi) * (8 * kMtu + 1) / static_cast<double>(w);
  EXPECT_NEAR(static_cast<double>(cc.cwnd() - w), expect, 1.0);
  // Per window of ACKs, fair increase adds ~fi bytes regardless of cwnd.
  EXPECT_NEAR(c.fi, 24248.1, 0.1);
}

TEST(Nscc, ProportionalIncreaseScalesWithHeadroom) {
  const NsccConfig c = cfg_default();
  auto grow = [&](std::uint64_t delay) {
    Nscc cc(c);
    shrink_to(cc, 100000);
    send(cc, 60);
    cc.on_ack(ack(10 * kMtu, delay), 5000);  // > adjust_bytes_threshold, before first period
    EXPECT_EQ(cc.stats().eta_inc, 0u);
    EXPECT_EQ(cc.stats().fast_inc, 0u);
    return cc.cwnd() - 100000;
  };
  for (std::uint64_t delay : {1000u, 4000u, 8000u, 10000u}) {
    const double expect = c.alpha * 10 * kMtu * static_cast<double>(kTarget - delay) / 100000.0;
    EXPECT_NEAR(static_cast<double>(grow(delay)), expect, 1.0) << "delay " << delay;
  }
  EXPECT_GT(grow(1000), grow(4000));
  EXPECT_GT(grow(4000), grow(8000));
  EXPECT_GT(grow(8000), grow(10000));
}

TEST(Nscc, FastIncreaseNearZeroDelay) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  shrink_to(cc, 100000);
  send(cc, 60);
  const auto step = static_cast<std::uint64_t>(kMtu * static_cast<double>(c.fi_scale));  // 1212 B
  std::uint64_t acked = 0;
  int first_fast = -1;
  for (int i = 0; i < 60 && first_fast < 0; ++i) {
    const std::uint64_t before = cc.cwnd();
    cc.on_ack(ack(kMtu, 0), 5000);
    acked += kMtu;
    if (cc.stats().fast_inc > 0) {
      first_fast = i;
      // Fast mode starts on the first ACK at which more than one cwnd was acked at ~zero delay.
      EXPECT_GT(acked, before);
      EXPECT_LE(acked - kMtu, before);
    }
  }
  ASSERT_GE(first_fast, 0);
  // Each further ACK in fast mode grows cwnd by n * fi_scale at once (plus at most what
  // proportional increase had accumulated before fast mode began).
  std::uint64_t w = cc.cwnd();
  for (int i = 0; i < 20; ++i) {
    cc.on_ack(ack(kMtu, 0), 5000);
    EXPECT_GE(cc.cwnd() - w, step);
    w = cc.cwnd();
  }
  const std::uint64_t prop_before = cc.stats().prop_inc;
  EXPECT_GE(cc.stats().fast_inc, 21 * step);

  // A delay of >= 1 us leaves fast mode; the next ACK is a proportional increase again.
  cc.on_ack(ack(kMtu, 2000), 5000);
  const std::uint64_t fast = cc.stats().fast_inc;
  for (int i = 0; i < 9; ++i) cc.on_ack(ack(kMtu, 0), 5000);  // fi_count restarts from zero
  EXPECT_EQ(cc.stats().fast_inc, fast);
  EXPECT_GT(cc.stats().prop_inc, prop_before);
}

TEST(Nscc, FastIncreaseNeedsDelayBelowOneMicrosecond) {
  auto fast_bytes = [](std::uint64_t delay) {
    Nscc cc(cfg_default());
    shrink_to(cc, 50000);
    send(cc, 60);
    for (int i = 0; i < 40; ++i) cc.on_ack(ack(kMtu, delay), 5000);  // 166 KB > cwnd
    return cc.stats().fast_inc;
  };
  EXPECT_GT(fast_bytes(999), 0u);
  EXPECT_EQ(fast_bytes(1000), 0u);
}

TEST(Nscc, QuickAdaptOnTrimNack) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  send(cc, 40);
  cc.on_ack(ack(kMtu, 0), 1000);  // first ACK arms the QA window: ends at 1000 + base + target
  for (int i = 0; i < 3; ++i) cc.on_ack(ack(kMtu, 2000), 5000 + i);
  const std::uint64_t achieved = 3 * kMtu;
  ASSERT_EQ(cc.cwnd(), c.max_cwnd);

  cc.on_nack(kMtu, NackKind::kTrimmed, true, kBase + 3000, 1000 + kBase + kTarget);
  EXPECT_EQ(cc.cwnd(), achieved);  // QA replaces the NACK's one-packet cut
  EXPECT_EQ(cc.stats().quick_adapt, 1u);
  EXPECT_EQ(cc.stats().nack_dec, 0u);
  EXPECT_EQ(cc.inflight(), 35 * kMtu);

  // ECN-marked ACKs for the backlog that was in flight at QA time are ignored.
  const Time t = 40000;
  for (int i = 0; i < 5; ++i) cc.on_ack(ack(kMtu, 30000, true), t + static_cast<Time>(i) * 20000);
  EXPECT_EQ(cc.cwnd(), achieved);
  EXPECT_EQ(cc.stats().multi_dec, 0u);
  EXPECT_EQ(cc.stats().quick_adapt, 1u);
}

TEST(Nscc, QuickAdaptOnLastHopTrimToo) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  send(cc, 40);
  cc.on_ack(ack(kMtu, 0), 1000);
  cc.on_ack(ack(2 * kMtu, 0), 2000);
  cc.on_nack(kMtu, NackKind::kTrimmedLastHop, false, 0, 30000);
  EXPECT_EQ(cc.cwnd(), 2u * kMtu);
  EXPECT_EQ(cc.stats().quick_adapt, 1u);
}

TEST(Nscc, TrimNackOutsideQaWindowCutsOnePacket) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  send(cc, 40);
  cc.on_ack(ack(kMtu, 0), 1000);  // arms QA window until 25,540
  cc.on_nack(kMtu, NackKind::kTrimmed, false, 0, 2000);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd - kMtu);
  EXPECT_EQ(cc.stats().nack_dec, 1u);
  EXPECT_EQ(cc.stats().quick_adapt, 0u);
  // The trim left trigger_qa set: the first ACK after the window closes fires QA.
  cc.on_ack(ack(kMtu, 2000), 30000);
  EXPECT_EQ(cc.cwnd(), kMtu);  // achieved bytes since the window opened: this ACK only
  EXPECT_EQ(cc.stats().quick_adapt, 1u);
}

TEST(Nscc, QuickAdaptNotWhenAchievedIsHigh) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  send(cc, 60);
  cc.on_ack(ack(kMtu, 0), 1000);
  cc.on_ack(ack(static_cast<std::uint32_t>(c.max_cwnd >> 3), 2000), 2000);  // achieved = max_wnd/8
  cc.on_nack(kMtu, NackKind::kTrimmed, false, 0, 30000);
  EXPECT_EQ(cc.stats().quick_adapt, 0u);
  EXPECT_EQ(cc.stats().nack_dec, 1u);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd - kMtu);
}

TEST(Nscc, QuickAdaptOnLargeDelayWithoutTrims) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  send(cc, 40);
  cc.on_ack(ack(kMtu, 0), 1000);
  cc.on_ack(ack(kMtu, c.qa_threshold_ns + 1), 30000);  // delay above qa_threshold, few bytes
  EXPECT_EQ(cc.stats().quick_adapt, 1u);
  EXPECT_EQ(cc.cwnd(), kMtu);  // achieved bytes in the last window: this ACK only
}

TEST(Nscc, QuickAdaptCanBeDisabled) {
  NsccConfig c = cfg_default();
  c.disable_qa = true;
  Nscc cc(c);
  send(cc, 40);
  cc.on_ack(ack(kMtu, 0), 1000);
  cc.on_nack(kMtu, NackKind::kTrimmed, false, 0, 30000);
  EXPECT_EQ(cc.stats().quick_adapt, 0u);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd - kMtu);
}

TEST(Nscc, NonTrimNackOnlyReleasesInflight) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  send(cc, 10);
  cc.on_ack(ack(kMtu, 0), 1000);
  cc.on_nack(kMtu, NackKind::kOther, false, 0, 30000);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd);
  EXPECT_EQ(cc.inflight(), 8 * kMtu);
  EXPECT_EQ(cc.stats().nack_dec + cc.stats().quick_adapt, 0u);
}

TEST(Nscc, BaseRttTracksMinimumAndShrinksMaxWnd) {
  Nscc cc(cfg_default());
  send(cc, 10);
  cc.on_ack(AckSample{kMtu, false, true, 10000, 0, false}, 20000);
  EXPECT_EQ(cc.base_rtt_ns(), 10000u);
  EXPECT_EQ(cc.max_wnd(), 187500u);  // 1.5 * 12.5 B/ns * 10 us
  EXPECT_LE(cc.cwnd(), 187500u);
  cc.on_nack(kMtu, NackKind::kOther, true, 9000, 21000);  // NACK RTT samples count too
  EXPECT_EQ(cc.base_rtt_ns(), 9000u);
  EXPECT_EQ(cc.max_wnd(), 168750u);
  cc.on_nack(kMtu, NackKind::kOther, false, 5000, 22000);           // ...when valid
  cc.on_ack(AckSample{kMtu, false, true, 12000, 0, false}, 23000);  // larger: no change
  EXPECT_EQ(cc.base_rtt_ns(), 9000u);
  EXPECT_EQ(cc.max_wnd(), 168750u);
}

TEST(Nscc, DelayAverage) {
  const double w = 0.0125;
  Nscc cc(cfg_default());
  send(cc, 40);
  double avg = 0;
  cc.on_ack(ack(kMtu, 20000, true), 1000);  // ECN: the sample itself
  avg = w * 20000;
  EXPECT_DOUBLE_EQ(cc.avg_delay_ns(), avg);
  cc.on_ack(ack(kMtu, 20000, false), 1000);  // no ECN, above target: pulled to 0.25 * base_rtt
  avg = w * (0.25 * static_cast<double>(kBase)) + (1 - w) * avg;
  EXPECT_DOUBLE_EQ(cc.avg_delay_ns(), avg);
  cc.on_ack(ack(kMtu, 5000, false), 1000);  // no ECN, below target: the sample
  avg = w * 5000 + (1 - w) * avg;
  EXPECT_DOUBLE_EQ(cc.avg_delay_ns(), avg);
  cc.on_nack(kMtu, NackKind::kTrimmed, false, 0, 1000);  // trim: one config base RTT
  avg = w * static_cast<double>(kBase) + (1 - w) * avg;
  EXPECT_DOUBLE_EQ(cc.avg_delay_ns(), avg);
}

TEST(Nscc, PenaltyAndRestore) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  send(cc, 20);
  AckSample s = ack(kMtu, 2000);
  s.rcv_cwnd_pen = 64;
  cc.on_ack(s, 5000);  // before the first adjust period: no eta
  // saved = max_cwnd; cwnd = min(cwnd, inflight) - (64 * 4150 >> 7).
  EXPECT_EQ(cc.cwnd(), 19u * kMtu - ((64u * kMtu) >> 7));
  EXPECT_EQ(cc.stats().prop_inc + cc.stats().fair_inc + cc.stats().fast_inc, 0u);  // limited

  s.rcv_cwnd_pen = 127;
  // A heavy penalty keeps cwnd just under what is in flight: min(cwnd, inflight) - 127/128 * n.
  cc.on_ack(s, 5000);
  EXPECT_EQ(cc.cwnd(), 18u * kMtu - ((127u * kMtu) >> 7));
  for (int i = 0; i < 17; ++i) cc.on_ack(s, 5000);
  EXPECT_EQ(cc.inflight(), kMtu);
  EXPECT_EQ(cc.cwnd(), kMtu);  // never below one MTU

  AckSample r = ack(kMtu, 2000);
  r.restore_cwnd = true;
  cc.on_ack(r, 6000);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd);  // the saved window
  // Restoring twice does nothing more (saved_cwnd was consumed).
  shrink_to(cc, 50000);
  cc.on_ack(r, 6000);
  EXPECT_LE(cc.cwnd(), 52000u);
}

TEST(Nscc, InferredLossCutsOnePacketAndFloorsAtMtu) {
  const NsccConfig c = cfg_default();
  Nscc cc(c);
  send(cc, 3);
  cc.on_inferred_loss(kMtu, 1000);
  EXPECT_EQ(cc.cwnd(), c.max_cwnd - kMtu);
  EXPECT_EQ(cc.inflight(), 2 * kMtu);
  cc.on_inferred_loss(1'000'000, 1000);
  EXPECT_EQ(cc.cwnd(), kMtu);
  EXPECT_EQ(cc.inflight(), 0);  // clamped defensively, never negative
  cc.on_forget(kMtu);
  EXPECT_EQ(cc.inflight(), 0);
  EXPECT_EQ(cc.stats().loss_dec, 2u);
}

TEST(Nscc, AlphaDerivedWhenZero) {
  // alpha = 0 in the config means "derive": must behave exactly like the explicit derived value.
  NsccConfig explicit_cfg = cfg_default();
  NsccConfig zero = explicit_cfg;
  zero.alpha = 0.0;
  Nscc a(explicit_cfg), b(zero);
  for (Nscc* cc : {&a, &b}) {
    shrink_to(*cc, 100000);
    send(*cc, 20);
    cc->on_ack(ack(10 * kMtu, 3000), 5000);
  }
  EXPECT_GT(a.cwnd(), 100000u);
  EXPECT_EQ(a.cwnd(), b.cwnd());
}

}  // namespace
}  // namespace mrc::cc
