// WindowedMax (src/engine/windowed_max.hpp): the largest sample of a sliding time window in
// constant space (D63: the slowest recent path's RTT).
#include "engine/windowed_max.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <utility>

#include "common/rng.hpp"

namespace mrc::engine {
namespace {

TEST(WindowedMax, ANewMaximumTakesOverAtOnce) {
  WindowedMax m;
  EXPECT_EQ(m.get(), 0u);
  m.update(0, 10, 100);
  m.update(10, 30, 100);
  EXPECT_EQ(m.get(), 30u);
  m.update(20, 20, 100);  // smaller: the maximum stays
  EXPECT_EQ(m.get(), 30u);
}

TEST(WindowedMax, AnExpiredMaximumHandsOverToTheBestLaterSample) {
  WindowedMax m;
  m.update(0, 50, 100);
  m.update(30, 40, 100);
  m.update(60, 20, 100);
  EXPECT_EQ(m.get(), 50u);
  m.update(101, 10, 100);  // 50 is older than the window: the best later one (40) is next
  EXPECT_EQ(m.get(), 40u);
  m.update(200, 5, 100);  // everything before 100 expired: 5 was taken at 200, 10 at 101
  EXPECT_EQ(m.get(), 10u);
  m.update(400, 7, 100);  // a gap longer than the window: the estimate restarts from the sample
  EXPECT_EQ(m.get(), 7u);
}

TEST(WindowedMax, NeverAboveTheTrueMaximumOfTheWindowAndNeverBelowTheNewestSample) {
  // Random samples against the exact maximum of the window: the estimate may lag only towards a
  // sample that is in the window's last half (that is all three entries can remember), never
  // report a value no sample within the window had, and never fall below the newest sample.
  Rng rng(7);
  WindowedMax m;
  std::deque<std::pair<Time, Duration>> all;
  const Duration window = 1000;
  Time t = 0;
  for (int i = 0; i < 20000; ++i) {
    t += rng.below(60);
    const Duration v = rng.below(10001);
    m.update(t, v, window);
    all.emplace_back(t, v);
    while (t - all.front().first > window) all.pop_front();
    Duration exact = 0;
    for (const auto& [st, sv] : all) exact = std::max(exact, sv);
    ASSERT_LE(m.get(), exact) << "at " << t;
    ASSERT_GE(m.get(), v);
    bool seen = false;
    for (const auto& [st, sv] : all) seen |= sv == m.get();
    ASSERT_TRUE(seen) << "the estimate is a sample of the window";
  }
}

}  // namespace
}  // namespace mrc::engine
