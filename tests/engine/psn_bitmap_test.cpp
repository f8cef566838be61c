// PsnBitmap (src/engine/psn_bitmap.hpp): the responder's record of received PSNs. The SACK bitmap
// it reports must name exactly the PSNs that arrived, across the ring's wrap and the 24-bit PSN
// wrap, and never a position past the window (those bits alias older PSNs).
#include "engine/psn_bitmap.hpp"

#include <gtest/gtest.h>

#include <set>

#include "common/rng.hpp"

namespace mrc::engine {
namespace {

TEST(PsnBitmap, InOrderArrivalsMoveTheExpectedPsn) {
  PsnBitmap b;
  b.init(256, 1000);
  EXPECT_EQ(b.size(), 256u);
  EXPECT_EQ(b.epsn(), 1000u);
  b.set(1000);
  EXPECT_EQ(b.advance(), 1u);
  EXPECT_EQ(b.epsn(), 1001u);
  EXPECT_FALSE(b.test(1001));
  EXPECT_FALSE(b.test(1000 + 256));  // the bit PSN 1000 had is clear again for its alias
}

TEST(PsnBitmap, AHoleHoldsTheExpectedPsnUntilItFills) {
  PsnBitmap b;
  b.init(128, 0);
  for (std::uint32_t psn : {1u, 2u, 3u, 5u}) b.set(psn);
  EXPECT_EQ(b.advance(), 0u);
  EXPECT_EQ(b.window(0, 128), 0b101110u);
  EXPECT_EQ(b.window(2, 128), 0b1011u);  // unaligned base
  b.set(0);
  EXPECT_EQ(b.advance(), 4u);
  EXPECT_EQ(b.epsn(), 4u);
  EXPECT_EQ(b.window(4, 128), 0b10u);
}

TEST(PsnBitmap, TheWindowStopsAtItsEdge) {
  // Window 100 in a 128-bit ring: from base 60, only 40 positions (60..99) may be reported, even
  // if the ring has bits set beyond (which would be older PSNs' aliases).
  PsnBitmap b;
  b.init(100, 0);
  EXPECT_EQ(b.size(), 128u);
  for (std::uint32_t psn = 60; psn < 100; ++psn) b.set(psn);
  b.set(100);  // past the window: the caller would not do this; it must not be reported
  EXPECT_EQ(b.window(60, 100), (1ULL << 40) - 1);
  EXPECT_EQ(b.window(100, 100), 0u);
  EXPECT_EQ(b.window(120, 100), 0u);
}

TEST(PsnBitmap, WrapsTheRingAndThe24BitPsn) {
  PsnBitmap b;
  const std::uint32_t start = kPsnMask - 40;  // the PSN wraps 41 packets in
  b.init(64, start);
  for (std::uint32_t i = 1; i < 64; ++i) b.set(psn_add(start, i));
  std::uint64_t want = ~1ULL;  // everything but the expected PSN
  EXPECT_EQ(b.window(start, 64), want);
  b.set(start);
  EXPECT_EQ(b.advance(), 64u);
  EXPECT_EQ(b.epsn(), psn_add(start, 64));
  EXPECT_EQ(b.window(b.epsn(), 64), 0u);
}

TEST(PsnBitmap, MatchesASetUnderRandomArrivals) {
  // Arrivals in random order within the window; the reported bits, the expected PSN and the
  // number advanced must match a plain set of received PSNs at every step.
  Rng rng(11);
  const std::uint32_t window = 200;
  PsnBitmap b;
  std::uint32_t epsn = kPsnMask - 5000;
  b.init(window, epsn);
  std::set<std::uint32_t> got;  // PSN offsets from the first expected PSN
  std::uint64_t base_off = 0;   // offset of epsn
  const std::uint32_t first = epsn;
  for (int step = 0; step < 50000; ++step) {
    const std::uint64_t off = base_off + rng.next() % window;
    b.set(psn_add(first, static_cast<std::int64_t>(off)));
    got.insert(static_cast<std::uint32_t>(off));
    std::uint32_t moved = 0;
    while (got.count(static_cast<std::uint32_t>(base_off))) {
      got.erase(static_cast<std::uint32_t>(base_off));
      ++base_off;
      ++moved;
    }
    ASSERT_EQ(b.advance(), moved);
    ASSERT_EQ(b.epsn(), psn_add(first, static_cast<std::int64_t>(base_off)));
    const std::uint64_t from = base_off + rng.next() % window;
    std::uint64_t want = 0;
    for (std::uint32_t i = 0; i < 64 && from + i < base_off + window; ++i)
      if (got.count(static_cast<std::uint32_t>(from + i))) want |= 1ULL << i;
    ASSERT_EQ(b.window(psn_add(first, static_cast<std::int64_t>(from)), window), want) << "step " << step;
  }
}

}  // namespace
}  // namespace mrc::engine
