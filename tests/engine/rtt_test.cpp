// RttEstimator (src/engine/rtt.hpp): the RTT state and the timing rules RACK's loss detection, the
// tail-loss probe and the EV probes use (D43).
#include "engine/rtt.hpp"

#include <gtest/gtest.h>

namespace mrc::engine {
namespace {

TEST(RttEstimator, TheHintIsTheBaseUntilASmallerSample) {
  RttEstimator r(10'000);
  EXPECT_EQ(r.base(), 10'000u);
  EXPECT_EQ(r.srtt(), 0u);
  EXPECT_FALSE(r.on_sample(12'000));  // larger than the hint: the base stays
  EXPECT_EQ(r.base(), 10'000u);
  EXPECT_TRUE(r.on_sample(4'000));
  EXPECT_EQ(r.base(), 4'000u);
  EXPECT_FALSE(r.on_sample(4'000));
}

TEST(RttEstimator, SmoothsAsRfc6298) {
  RttEstimator r(1'000'000);
  r.on_sample(8'000);
  EXPECT_EQ(r.srtt(), 8'000u);
  EXPECT_EQ(r.rttvar(), 4'000u);
  r.on_sample(16'000);  // err 8000: rttvar (3*4000 + 8000)/4, srtt (7*8000 + 16000)/8
  EXPECT_EQ(r.rttvar(), 5'000u);
  EXPECT_EQ(r.srtt(), 9'000u);
}

TEST(RttEstimator, TheReorderWindowIsAnEighthBaseRttOnASteadyPath) {  // D62
  RttEstimator r(1'000'000);
  for (int i = 0; i < 200; ++i) r.on_sample(8'000);  // rttvar decays to ~0, srtt == base
  EXPECT_EQ(r.srtt(), 8'000u);
  EXPECT_LT(r.rttvar(), 4u);
  EXPECT_EQ(r.reorder_window(), 1'000u);
  EXPECT_EQ(r.tail_probe_delay(r.reorder_window()), 9'000u);
  EXPECT_EQ(r.probe_wait(), 32'000u);  // 4 base RTTs
}

TEST(RttEstimator, BeforeItsFirstSampleTheTailProbeWaitsFourBaseRtts) {  // D84
  // The hint (10 us) is the base RTT until a sample comes.
  RttEstimator r(10'000);
  EXPECT_EQ(r.srtt(), 0u);
  EXPECT_EQ(r.tail_probe_delay(r.reorder_window()), 4 * 10'000u + r.reorder_window());
  EXPECT_EQ(r.tail_probe_delay(500), 40'500u);
  r.on_sample(30'000);  // the first sample: srtt 30 us, rttvar 15 us, and the usual rule
  EXPECT_EQ(r.tail_probe_delay(500), 30'000u + 4 * 15'000u);
}

TEST(RttEstimator, QueuedPathsKeepTheQuarterBaseRttFloor) {  // D62
  // srtt 15 % above the base with no variation: the spread (1.2 us) is below a quarter of the base
  // RTT, and the floor is that quarter, not the eighth of an unqueued path.
  RttEstimator r(1'000'000);
  r.on_sample(8'000);
  for (int i = 0; i < 200; ++i) r.on_sample(9'200);
  EXPECT_EQ(r.base(), 8'000u);
  EXPECT_GT(r.srtt(), 9'000u);  // integer smoothing stops a few ns short
  EXPECT_EQ(r.reorder_window(), 2'000u);
  RttEstimator q(1'000'000);  // within an eighth (9 us): the eighth, or the spread if larger
  q.on_sample(8'000);
  for (int i = 0; i < 200; ++i) q.on_sample(8'800);
  EXPECT_FALSE(q.queued());
  EXPECT_EQ(q.reorder_window(), 1'000u);
}

TEST(RttEstimator, MeasuredReorderingWidensTheWindowAtOnceAndDecaysSlowly) {
  RttEstimator r(1'000'000);
  for (int i = 0; i < 200; ++i) r.on_sample(8'000);
  r.on_reordering(4'000);  // a delivery 4 us late: 5 us with the margin
  EXPECT_EQ(r.reordering(), 5'000u);
  EXPECT_EQ(r.reorder_window(), 5'000u);
  r.on_reordering(0);                                // on time: down by 1/1024 of the difference
  EXPECT_EQ(r.reordering(), 4'995u);                 // 5,000 less 1/1024 of it: 4,995.1
  for (int i = 0; i < 700; ++i) r.on_reordering(0);  // D64: still over half after 700 reports
  EXPECT_GT(r.reorder_window(), 2'500u);
  for (int i = 0; i < 16000; ++i) r.on_reordering(0);
  EXPECT_EQ(r.reorder_window(), 1'000u);  // back to the floor
  r.on_reordering(100'000);               // capped at max(base, srtt) in the window
  EXPECT_EQ(r.reorder_window(), 8'000u);
}

TEST(RttEstimator, QueueingSpreadWidensTheWindow) {
  // Samples alternating 8 and 24 us: srtt sits well above the base and rttvar is large, so RTTs
  // of different queues differ by that much; the window covers srtt - base + 4 rttvar.
  RttEstimator r(1'000'000);
  for (int i = 0; i < 200; ++i) r.on_sample(i % 2 ? 24'000 : 8'000);
  const Duration spread = r.srtt() - r.base() + 4 * r.rttvar();
  EXPECT_GT(spread, r.base() / 4);
  EXPECT_EQ(r.reorder_window(), spread);
  EXPECT_EQ(r.probe_wait(), 2 * (r.srtt() + 4 * r.rttvar()));
  EXPECT_EQ(r.tail_probe_delay(1), r.srtt() + 4 * r.rttvar());  // a tiny fixed window: 4 rttvar rules
}

TEST(RttEstimator, TheSlowPathBoundAppliesOnlyToQueuedPathsAndAtMostDoubles) {
  // D63: on queued paths (srtt above 9/8 of the base RTT) a live path's packet waits for the
  // slowest recent RTT plus the window, at most twice that RTT; on unqueued paths there is no bound.
  RttEstimator r(10'000);
  EXPECT_EQ(r.slow_wait(30'000, 5'000), 0u);  // no sample yet
  r.on_sample(10'000);
  EXPECT_FALSE(r.queued());
  EXPECT_EQ(r.slow_wait(30'000, 5'000), 0u);
  for (int i = 0; i < 20; ++i) r.on_sample(20'000);
  EXPECT_TRUE(r.queued());
  EXPECT_EQ(r.slow_wait(30'000, 5'000), 35'000u);
  EXPECT_EQ(r.slow_wait(30'000, 50'000), 60'000u);  // a huge window: twice the slowest RTT
}

}  // namespace
}  // namespace mrc::engine
