// Property test: random (but legitimate) event sequences never break NSCC's invariants.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cc/nscc.hpp"
#include "common/rng.hpp"

namespace mrc::cc {
namespace {

constexpr std::uint32_t kMtu = 4150;

struct Invariants {
  const NsccConfig& cfg;
  std::uint64_t last_base_rtt;

  void check(const Nscc& cc, std::uint64_t step, std::uint64_t seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " step " << step);
    ASSERT_GE(cc.cwnd(), cfg.mtu);
    ASSERT_LE(cc.cwnd(), cc.max_wnd());
    ASSERT_LE(cc.max_wnd(), std::max<std::uint64_t>(cfg.max_cwnd, cfg.mtu));
    ASSERT_GE(cc.max_wnd(), cfg.mtu);
    ASSERT_GE(cc.inflight(), 0);
    ASSERT_LE(cc.base_rtt_ns(), last_base_rtt);  // only ever shrinks
    if (cc.base_rtt_ns() < cfg.base_rtt_ns) {
      // max_wnd follows 1.5 * linkspeed * base_rtt once base_rtt has shrunk.
      const double w =
          1.5 * static_cast<double>(cfg.linkspeed_bps) * static_cast<double>(cc.base_rtt_ns()) / 8e9;
      ASSERT_NEAR(static_cast<double>(cc.max_wnd()),
                  std::max(std::min(w, static_cast<double>(cfg.max_cwnd)), static_cast<double>(cfg.mtu)),
                  1.0);
    }
    ASSERT_TRUE(std::isfinite(cc.avg_delay_ns()));
    ASSERT_GE(cc.avg_delay_ns(), 0.0);
    last_base_rtt = cc.base_rtt_ns();
  }
};

void run(std::uint64_t seed, const NsccConfig& cfg) {
  Rng rng(seed);
  Nscc cc(cfg);
  Invariants inv{cfg, cc.base_rtt_ns()};
  Time now = 0;
  for (std::uint64_t step = 0; step < 20000; ++step) {
    now += rng.below(3000);
    const std::uint32_t op = rng.below(100);
    if (op < 45) {
      // Send up to the window, sometimes in sub-MTU pieces.
      const std::uint32_t sz = rng.chance(0.8) ? cfg.mtu : 64 + rng.below(cfg.mtu);
      for (int k = 0; k < 4 && cc.can_send(sz); ++k) cc.on_send(sz);
    } else if (op < 85) {
      // A SACK for at most what is in flight.
      const auto inflight = static_cast<std::uint32_t>(cc.inflight());
      if (inflight == 0) continue;
      AckSample s;
      s.newly_acked_bytes = 1 + rng.below(std::min<std::uint32_t>(inflight, 20 * cfg.mtu));
      s.ecn_echo = rng.chance(0.3);
      s.rtt_valid = rng.chance(0.9);
      // Mostly around base RTT + [0, 60 us]; occasionally below the base (a shorter path).
      s.rtt_ns = rng.chance(0.02) ? cfg.base_rtt_ns / 2 + rng.below(cfg.base_rtt_ns)
                                  : cfg.base_rtt_ns + rng.below(60000);
      s.rcv_cwnd_pen = rng.chance(0.05) ? static_cast<std::uint8_t>(1 + rng.below(127)) : 0;
      s.restore_cwnd = rng.chance(0.05);
      cc.on_ack(s, now);
    } else if (op < 93) {
      const auto inflight = static_cast<std::uint32_t>(cc.inflight());
      if (inflight == 0) continue;
      const std::uint32_t sz = std::min(inflight, cfg.mtu);
      const NackKind kinds[] = {NackKind::kTrimmed, NackKind::kTrimmedLastHop, NackKind::kOther};
      cc.on_nack(sz, kinds[rng.below(3)], rng.chance(0.5),
                 cfg.base_rtt_ns / 2 + rng.below(4 * cfg.base_rtt_ns), now);
    } else if (op < 97) {
      const auto inflight = static_cast<std::uint32_t>(cc.inflight());
      if (inflight == 0) continue;
      cc.on_inferred_loss(std::min(inflight, cfg.mtu), now);
    } else {
      const auto inflight = static_cast<std::uint32_t>(cc.inflight());
      if (inflight == 0) continue;
      cc.on_forget(std::min(inflight, cfg.mtu));
    }
    inv.check(cc, step, seed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(NsccProperty, WindowStaysWithinBoundsUnderRandomInput) {
  const NsccConfig base = NsccConfig::derive(100'000'000'000ULL, 14023, kMtu, true);
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    NsccConfig cfg = base;
    if (seed % 3 == 0) cfg.disable_qa = true;
    if (seed % 4 == 0) cfg = NsccConfig::derive(400'000'000'000ULL, 6000, 2048, seed % 8 == 0);
    if (seed % 5 == 0) cfg.qa_gate = 0;
    run(seed, cfg);
    if (HasFatalFailure()) return;
  }
}

TEST(NsccProperty, InflightNeverNegativeEvenWhenOverReleased) {
  // Not legitimate use, but the defensive clamp must hold.
  Nscc cc(NsccConfig::derive(100'000'000'000ULL, 14023, kMtu, true));
  cc.on_send(kMtu);
  AckSample s;
  s.newly_acked_bytes = 3 * kMtu;
  cc.on_ack(s, 1000);
  EXPECT_EQ(cc.inflight(), 0);
  cc.on_nack(kMtu, NackKind::kTrimmed, false, 0, 2000);
  cc.on_inferred_loss(kMtu, 3000);
  cc.on_forget(kMtu);
  EXPECT_EQ(cc.inflight(), 0);
  EXPECT_GE(cc.cwnd(), kMtu);
}

}  // namespace
}  // namespace mrc::cc
