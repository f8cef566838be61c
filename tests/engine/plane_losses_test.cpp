// PlaneLosses (plane-failure inference, D18 / D59 / D62) on its own.
#include "engine/plane_losses.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace mrc::engine {
namespace {

constexpr Duration kUs = 1000;
constexpr Duration kSilence = 5 * kUs;
// Declared lost long after it was sent: the silence condition holds for these tests.
constexpr Time late(Time sent) {
  return sent + 100 * kUs;
}

TEST(PlaneLosses, ARunOfLossesWithNothingDeliveredFailsThePlane) {
  PlaneLosses pl;
  pl.init(4);
  int rate_asked = 0;
  auto clean = [&] {
    ++rate_asked;
    return 0.0;
  };
  pl.on_delivered(2, 10 * kUs);
  EXPECT_FALSE(pl.on_lost(2, 11 * kUs, late(11 * kUs), kSilence, 3, clean));
  EXPECT_FALSE(pl.on_lost(2, 12 * kUs, late(12 * kUs), kSilence, 3, clean));
  EXPECT_EQ(rate_asked, 0);  // a run below the base threshold asks nothing
  EXPECT_TRUE(pl.on_lost(2, 13 * kUs, late(13 * kUs), kSilence, 3, clean));
  EXPECT_EQ(pl.run(2), 0u);  // the run starts over
  EXPECT_EQ(pl.run(1), 0u);  // other planes untouched
}

TEST(PlaneLosses, ADeliveryEndsTheRunAndOlderLossesSayNothing) {
  PlaneLosses pl;
  pl.init(2);
  auto clean = [] { return 0.0; };
  pl.on_delivered(0, 10 * kUs);
  EXPECT_FALSE(pl.on_lost(0, 11 * kUs, late(11 * kUs), kSilence, 3, clean));
  EXPECT_FALSE(pl.on_lost(0, 12 * kUs, late(12 * kUs), kSilence, 3, clean));
  pl.on_delivered(0, 14 * kUs);  // something sent later arrived: the plane works
  EXPECT_EQ(pl.run(0), 0u);
  // Losses of packets sent before that delivery (reordering, old news) do not count.
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(pl.on_lost(0, 13 * kUs, late(13 * kUs), kSilence, 3, clean));
  EXPECT_EQ(pl.run(0), 0u);
  pl.on_delivered(0, 12 * kUs);  // an older delivery does not move the mark back
  EXPECT_FALSE(pl.on_lost(0, 13 * kUs, late(13 * kUs), kSilence, 3, clean));
}

TEST(PlaneLosses, ZeroTurnsInferenceOff) {
  PlaneLosses pl;
  pl.init(1);
  for (int i = 1; i <= 20; ++i)
    EXPECT_FALSE(pl.on_lost(0, i * kUs, late(i * kUs), kSilence, 0, [] { return 0.0; }));
}

TEST(PlaneLosses, TheThresholdFollowsTheRandomLossRate) {
  // D59: the run must be rarer than 1e-5 at the QP's loss rate; 3 up to ~2 %, 4 at 5 %, at most 8.
  EXPECT_EQ(PlaneLosses::threshold(3, 0.0), 3u);
  EXPECT_EQ(PlaneLosses::threshold(3, 0.01), 3u);
  EXPECT_EQ(PlaneLosses::threshold(3, 0.02), 3u);
  EXPECT_EQ(PlaneLosses::threshold(3, 0.05), 4u);
  EXPECT_EQ(PlaneLosses::threshold(3, 0.2), 8u);  // capped
  for (double rate : {0.001, 0.03, 0.05, 0.1}) {
    const std::uint32_t k = PlaneLosses::threshold(3, rate);
    EXPECT_LT(std::pow(rate, k), 1e-5) << rate;
    if (k > 3) {
      EXPECT_GE(std::pow(rate, k - 1), 1e-5) << rate;  // the smallest such run
    }
  }
  // At 5 % loss three losses in a row no longer fail a plane; four do.
  PlaneLosses pl;
  pl.init(1);
  auto five = [] { return 0.05; };
  EXPECT_FALSE(pl.on_lost(0, 1 * kUs, late(1 * kUs), kSilence, 3, five));
  EXPECT_FALSE(pl.on_lost(0, 2 * kUs, late(2 * kUs), kSilence, 3, five));
  EXPECT_FALSE(pl.on_lost(0, 3 * kUs, late(3 * kUs), kSilence, 3, five));
  EXPECT_TRUE(pl.on_lost(0, 4 * kUs, late(4 * kUs), kSilence, 3, five));
}

TEST(PlaneLosses, ARunFailsThePlaneOnlyOnceItsOldestLossIsSilentLongEnough) {
  // D62: a plane whose queue is deeper than the others' makes RACK declare a run of losses that
  // then arrive; only a run whose oldest packet has gone min_silence without news fails it.
  PlaneLosses pl;
  pl.init(2);
  auto clean = [] { return 0.0; };
  pl.on_delivered(1, 10 * kUs);
  EXPECT_FALSE(pl.on_lost(1, 12 * kUs, 14 * kUs, kSilence, 3, clean));
  EXPECT_FALSE(pl.on_lost(1, 11 * kUs, 15 * kUs, kSilence, 3, clean));  // older: the run starts here
  EXPECT_FALSE(pl.on_lost(1, 13 * kUs, 15 * kUs, kSilence, 3, clean));  // 3 losses, 4 us silent
  EXPECT_EQ(pl.run(1), 3u);
  EXPECT_FALSE(pl.on_lost(1, 14 * kUs, 15 * kUs + 999, kSilence, 3, clean));
  EXPECT_TRUE(pl.on_lost(1, 15 * kUs, 16 * kUs, kSilence, 3, clean));  // 11 + 5 us: silent enough
  // The delayed plane: its late packets arrive before the silence is up, and the run ends.
  EXPECT_FALSE(pl.on_lost(1, 20 * kUs, 22 * kUs, kSilence, 3, clean));
  EXPECT_FALSE(pl.on_lost(1, 21 * kUs, 22 * kUs, kSilence, 3, clean));
  EXPECT_FALSE(pl.on_lost(1, 22 * kUs, 23 * kUs, kSilence, 3, clean));
  pl.on_delivered(1, 20 * kUs);
  EXPECT_EQ(pl.run(1), 0u);
  EXPECT_FALSE(pl.on_lost(1, 23 * kUs, 30 * kUs, kSilence, 3, clean));  // a new run of one
}

}  // namespace
}  // namespace mrc::engine
