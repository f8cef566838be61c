// SplitMix (common/rng.hpp): the per-port coin flips of the fabric (D67).
#include <gtest/gtest.h>

#include "common/rng.hpp"

namespace mrc {
namespace {

// The published SplitMix64 sequence for seed 0 (Vigna's splitmix64.c): the generator is the
// reference one, so a port's draws are reproducible outside this project too.
TEST(SplitMix, MatchesTheReferenceSequence) {
  SplitMix g(0);
  EXPECT_EQ(g.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(g.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(g.next(), 0x06c45d188009454fULL);
}

TEST(SplitMix, ChanceFollowsItsProbability) {
  SplitMix g(42);
  EXPECT_FALSE(g.chance(0.0));
  EXPECT_TRUE(g.chance(1.0));
  int hits = 0;
  for (int i = 0; i < 100000; ++i) hits += g.chance(0.25) ? 1 : 0;
  EXPECT_NEAR(hits / 100000.0, 0.25, 0.01);
  for (int i = 0; i < 1000; ++i) {
    const double u = g.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

// Streams from different seeds (the ports' gids) are unrelated: no shared prefix.
TEST(SplitMix, SeedsGiveDifferentStreams) {
  SplitMix a(mix64(1)), b(mix64(2));
  int same = 0;
  for (int i = 0; i < 64; ++i) same += a.next() == b.next() ? 1 : 0;
  EXPECT_EQ(same, 0);
}

}  // namespace
}  // namespace mrc
