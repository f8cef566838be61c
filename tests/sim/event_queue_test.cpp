#include "sim/event_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/rng.hpp"

namespace mrc::sim {
namespace {

using Ref = std::vector<std::tuple<Time, std::uint64_t, std::uint32_t>>;  // min-heap of (time, seq, index)

// Pops the reference's earliest event and the queue's, checks they are the same and returns its time.
Time pop_both(EventQueue& q, Ref& ref) {
  std::pop_heap(ref.begin(), ref.end(), std::greater<>());
  const auto expect = ref.back();
  ref.pop_back();
  const QueuedEvent e = q.pop();
  EXPECT_EQ(e.time, std::get<0>(expect));
  EXPECT_EQ(e.seq, std::get<1>(expect));
  EXPECT_EQ(e.index, std::get<2>(expect));
  return e.time;
}

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

TEST(EventQueue, PopDueStopsAtTheLimit) {
  EventQueue q(4);  // slots of 16: ring, far heap and near run all take part
  QueuedEvent e;
  EXPECT_FALSE(q.pop_due(1000, e));
  q.push(40, 0, 1);
  q.push(5'000'000, 0, 3);  // beyond the ring
  q.push(41, 0, 2);
  EXPECT_FALSE(q.pop_due(39, e));
  EXPECT_EQ(q.size(), 3u);
  ASSERT_TRUE(q.pop_due(40, e));
  EXPECT_EQ(e.index, 1u);
  EXPECT_EQ(e.time, 40u);
  ASSERT_TRUE(q.pop_due(41, e));
  EXPECT_EQ(e.index, 2u);
  EXPECT_FALSE(q.pop_due(4'999'999, e));
  ASSERT_TRUE(q.pop_due(std::numeric_limits<Time>::max(), e));
  EXPECT_EQ(e.index, 3u);
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.pop_due(std::numeric_limits<Time>::max(), e));
}

// Random interleaved pushes and pops against a sorted reference.
TEST(EventQueue, MatchesReferenceUnderRandomWorkload) {
  EventQueue q;
  Ref ref;  // (time, seq, index)
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
      now = pop_both(q, ref);
      if (HasFailure()) return;
    }
    ASSERT_EQ(q.size(), ref.size());
  }
}

// The calendar's regions: slots of 2^8 units, times beyond the ring's reach (far heap), pushes into
// the slot being run and into slots top() has already looked past, all against a sorted reference.
TEST(EventQueue, CalendarMatchesReferenceAcrossRegions) {
  for (const unsigned shift : {0u, 8u}) {
    EventQueue q(shift);
    Ref ref;
    Rng rng(7 + shift);
    Time now = 0;
    std::uint32_t next_index = 0;
    auto push = [&](Time t) {
      const std::uint32_t idx = next_index++;
      ref.emplace_back(t, q.push(t, 0, idx), idx);
      std::push_heap(ref.begin(), ref.end(), std::greater<>());
    };
    for (int op = 0; op < 200000; ++op) {
      const std::uint32_t r = rng.below(100);
      if (ref.empty() || r < 50) {
        // Mostly near (within a few slots), some across the ring, some far beyond it, some at now.
        const std::uint32_t kind = rng.below(10);
        const Time span = kind < 6 ? 4096 : kind < 8 ? (Time{1} << (shift + 15)) : (Time{1} << (shift + 20));
        push(kind == 9 ? now : now + rng.below(static_cast<std::uint32_t>(span)));
      } else if (r < 55) {
        // Look ahead, then schedule between now and the event top() found (an earlier slot).
        const Time ahead = q.top().time;
        ASSERT_EQ(ahead, std::get<0>(ref.front()));
        push(now + (ahead - now) / 2);
      } else {
        if (const QueuedEvent* pk = q.peek(0)) {
          EXPECT_EQ(pk->seq, std::get<1>(*std::min_element(ref.begin(), ref.end())));
        }
        now = pop_both(q, ref);
        if (HasFailure()) return;
      }
      ASSERT_EQ(q.size(), ref.size());
      ASSERT_EQ(q.empty(), ref.empty());
    }
  }
}

// Keyed events (a random, unique key each) in lone and crowded slots, in the slot being run, across
// the ring and beyond it (the far heap; sometimes in the same slot as ring events, which is how a
// far event's slot comes into the ring's reach), popped in exact (time, key) order.
TEST(EventQueue, KeyedMixOfSlotsMatchesReference) {
  constexpr unsigned kShift = 8;
  EventQueue q(kShift);
  Ref ref;  // (time, key, index)
  Rng rng(11);
  Time now = 0;
  std::uint32_t next_index = 0;
  std::size_t far_pushes = 0;
  auto push = [&](Time t) {
    const std::uint32_t idx = next_index++;
    const std::uint64_t key = (rng.next() >> 24 << 24) | idx;  // unique, unrelated to push order
    q.push_keyed(t, 0, idx, key);
    ref.emplace_back(t, key, idx);
    std::push_heap(ref.begin(), ref.end(), std::greater<>());
  };
  for (int op = 0; op < 300000; ++op) {
    const std::uint32_t r = rng.below(100);
    if (ref.empty() || r < 50) {
      const std::uint32_t kind = rng.below(20);
      const Time slot_start = now >> kShift << kShift;
      if (kind < 8) {
        push(now + rng.below(1u << 16));  // a few slots ahead: mostly one event a slot
      } else if (kind < 12) {
        push(slot_start + (Time{1} << kShift) + rng.below(4));  // the next slot, crowded
      } else if (kind < 14) {
        push(now +
             rng.below(static_cast<std::uint32_t>((slot_start + (Time{1} << kShift)) - now)));  // this slot
      } else if (kind < 17) {
        push(now + (Time{1} << (kShift + 14)) + rng.below(1u << 20));  // beyond the ring
        ++far_pushes;
      } else {
        push(now + rng.below(1u << 22));  // across the ring
      }
    } else {
      now = pop_both(q, ref);
      if (HasFailure()) return;
    }
    ASSERT_EQ(q.size(), ref.size());
    ASSERT_EQ(q.empty(), ref.empty());
  }
  EXPECT_GT(far_pushes, 10000u);
}

// Slot numbers up to the largest time (slot_shift 0): an event at the end of time still pops.
TEST(EventQueue, TimesNearTheEndOfTime) {
  EventQueue q(0);
  constexpr Time kMax = std::numeric_limits<Time>::max();
  q.push(kMax, 0, 3);
  q.push(kMax - 5, 0, 1);
  q.push(7, 0, 0);
  EXPECT_EQ(q.pop().index, 0u);
  EXPECT_EQ(q.pop().index, 1u);  // cur_ is now near the end: the next one is in the ring
  q.push(kMax - 2, 0, 2);
  q.push(kMax, 0, 4);
  EXPECT_EQ(q.pop().index, 2u);
  EXPECT_EQ(q.pop().index, 3u);
  EXPECT_EQ(q.pop().index, 4u);
  EXPECT_TRUE(q.empty());
}

// peek(i) shows the next events of the loaded run in pop order, and nothing past it.
TEST(EventQueue, PeekFollowsPopOrder) {
  EventQueue q(4);
  for (std::uint32_t i = 0; i < 64; ++i) q.push(1000 + (i * 37) % 50, 0, i);
  q.push(1u << 30, 0, 99);  // beyond the ring
  std::vector<std::uint32_t> peeked;
  EXPECT_EQ(q.peek(0), nullptr);  // nothing is loaded before the first top() or pop()
  EXPECT_EQ(q.top().index, 0u);   // time 1000, pushed before index 50 (also 1000)
  for (std::size_t i = 0; const QueuedEvent* e = q.peek(i); ++i) peeked.push_back(e->index);
  ASSERT_FALSE(peeked.empty());
  for (const std::uint32_t idx : peeked) EXPECT_EQ(q.pop().index, idx);
  std::size_t popped = peeked.size();
  Time last = 0;
  while (q.size() > 1) {
    const QueuedEvent e = q.pop();
    EXPECT_GE(e.time, last);
    last = e.time;
    ++popped;
  }
  EXPECT_EQ(popped, 64u);
  EXPECT_EQ(q.pop().index, 99u);  // the far one comes last
}

TEST(EventQueue, ClearEmptiesEveryRegion) {
  EventQueue q(8);
  q.push(10, 0, 0);
  q.push(10'000, 0, 1);
  q.push(Time{1} << 40, 0, 2);
  EXPECT_EQ(q.top().index, 0u);
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  q.push(5, 0, 7);
  EXPECT_EQ(q.pop().index, 7u);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, EntriesAreSmallPods) {
  static_assert(std::is_trivially_copyable_v<QueuedEvent>);
  EXPECT_LE(sizeof(QueuedEvent), 24u);
}

// push_keyed: the order is (time, key) whatever the push order, across the near run, the ring and
// the far heap (what makes the Fabric's order independent of how it is partitioned).
TEST(EventQueue, KeyedOrderIsIndependentOfPushOrder) {
  std::vector<std::pair<Time, std::uint64_t>> evs;  // (time, key); index = position
  Rng gen(7);
  for (std::uint32_t i = 0; i < 3000; ++i)
    evs.emplace_back(gen.below(4) * 300 + gen.below(2) * 5'000'000, gen.next() >> 1);
  std::vector<std::uint32_t> expect(evs.size());
  for (std::uint32_t i = 0; i < expect.size(); ++i) expect[i] = i;
  std::sort(expect.begin(), expect.end(), [&](std::uint32_t a, std::uint32_t b) { return evs[a] < evs[b]; });
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    std::vector<std::uint32_t> perm = expect;
    Rng r(seed);
    for (std::size_t i = perm.size(); i > 1; --i)
      std::swap(perm[i - 1], perm[r.below(static_cast<std::uint32_t>(i))]);
    EventQueue q(8);
    // The first event first (it sets the current slot), the rest shuffled: some go to the ring,
    // the 5 ms ones to the far heap.
    q.push_keyed(evs[expect[0]].first, 0, expect[0], evs[expect[0]].second);
    for (const std::uint32_t i : perm)
      if (i != expect[0]) q.push_keyed(evs[i].first, 0, i, evs[i].second);
    std::vector<std::uint32_t> order;
    while (!q.empty()) order.push_back(q.pop().index);
    EXPECT_EQ(order, expect) << "shuffle " << seed;
  }
}

}  // namespace
}  // namespace mrc::sim
