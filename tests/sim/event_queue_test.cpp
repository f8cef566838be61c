#include "sim/event_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/rng.hpp"

namespace mrc::sim {
namespace {

TEST(EventQueue, PopsInTimeOrder) {
  EventQueue q;
  q.push(30, 1, 3);
  q.push(10, 1, 1);
  q.push(20, 1, 2);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q.top().time, 10u);
  EXPECT_EQ(q.pop().index, 1u);
  EXPECT_EQ(q.pop().index, 2u);
  EXPECT_EQ(q.pop().index, 3u);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, EqualTimesPopInPushOrder) {
  EventQueue q;
  for (std::uint32_t i = 0; i < 100; ++i) q.push(i % 2 == 0 ? 5 : 7, static_cast<std::uint8_t>(i % 3), i);
  std::vector<std::uint32_t> order;
  while (!q.empty()) {
    const QueuedEvent e = q.pop();
    EXPECT_EQ(e.kind, e.index % 3);
    EXPECT_EQ(e.time, e.index % 2 == 0 ? 5u : 7u);
    order.push_back(e.index);
  }
  // All even indices (time 5) in increasing order, then all odd ones (time 7).
  std::vector<std::uint32_t> expect;
  for (std::uint32_t i = 0; i < 100; i += 2) expect.push_back(i);
  for (std::uint32_t i = 1; i < 100; i += 2) expect.push_back(i);
  EXPECT_EQ(order, expect);
}

TEST(EventQueue, PushReturnsIncreasingSeq) {
  EventQueue q;
  const auto a = q.push(100, 0, 0);
  const auto b = q.push(50, 0, 0);
  EXPECT_LT(a, b);
  EXPECT_EQ(q.pop().seq, b);
  EXPECT_EQ(q.pop().seq, a);
}

// Random interleaved pushes and pops against a sorted reference.
TEST(EventQueue, MatchesReferenceUnderRandomWorkload) {
  EventQueue q;
  std::vector<std::tuple<Time, std::uint64_t, std::uint32_t>> ref;  // (time, seq, index)
  Rng rng(42);
  Time now = 0;
  std::uint32_t next_index = 0;
  for (int op = 0; op < 200000; ++op) {
    if (ref.empty() || rng.below(100) < 55) {
      const Time t = now + rng.below(1000);  // never in the past, many ties
      const std::uint32_t idx = next_index++;
      const std::uint64_t seq = q.push(t, 0, idx);
      ref.emplace_back(t, seq, idx);
      std::push_heap(ref.begin(), ref.end(), std::greater<>());
    } else {
      std::pop_heap(ref.begin(), ref.end(), std::greater<>());
      const auto expect = ref.back();
      ref.pop_back();
      const QueuedEvent e = q.pop();
      ASSERT_EQ(e.time, std::get<0>(expect));
      ASSERT_EQ(e.seq, std::get<1>(expect));
      ASSERT_EQ(e.index, std::get<2>(expect));
      now = e.time;
    }
    ASSERT_EQ(q.size(), ref.size());
  }
}

TEST(EventQueue, EntriesAreSmallPods) {
  static_assert(std::is_trivially_copyable_v<QueuedEvent>);
  EXPECT_LE(sizeof(QueuedEvent), 24u);
}

}  // namespace
}  // namespace mrc::sim
