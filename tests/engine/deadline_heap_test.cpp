// DeadlineHeap (src/engine/deadline_heap.hpp): per-index deadlines in an indexed 4-ary min-heap;
// the endpoint's QP timers.
#include "engine/deadline_heap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/rng.hpp"

namespace mrc::engine {
namespace {

TEST(DeadlineHeap, KeepsTheEarliestDeadlineAndForgetsRemovedOnes) {
  DeadlineHeap h;
  for (int i = 0; i < 3; ++i) h.add_index();
  EXPECT_EQ(h.min(), kNever);
  h.set(0, 300);
  h.set(1, 100);
  h.set(2, 200);
  EXPECT_EQ(h.min(), 100u);
  EXPECT_EQ(h.get(2), 200u);
  h.set(1, 400);  // later: the next one takes over
  EXPECT_EQ(h.min(), 200u);
  h.set(2, kNever);  // removed
  EXPECT_EQ(h.get(2), kNever);
  EXPECT_EQ(h.min(), 300u);
  EXPECT_EQ(h.size(), 2u);
  h.set(0, 50);  // earlier
  EXPECT_EQ(h.min(), 50u);
  std::vector<std::uint32_t> due;
  h.collect_due(49, due);
  EXPECT_TRUE(due.empty());
  h.collect_due(400, due);
  std::sort(due.begin(), due.end());
  EXPECT_EQ(due, (std::vector<std::uint32_t>{0, 1}));
}

// Random sets over hundreds of indices (moves up, down, in and out of the heap, equal deadlines):
// after each the minimum and the index set are checked against the model; every 97 sets every
// index's deadline and exactly the indices due at a random time.
TEST(DeadlineHeap, AgreesWithAScanOfEveryIndex) {
  constexpr std::uint32_t kN = 300;
  DeadlineHeap h;
  std::vector<Time> model(kN, kNever);
  for (std::uint32_t i = 0; i < kN; ++i) h.add_index();
  Rng rng(7);
  std::vector<std::uint32_t> due, want;
  for (int step = 0; step < 20000; ++step) {
    const auto i = static_cast<std::uint32_t>(rng.next() % kN);
    // Few distinct times, so equal deadlines (ordered by index) are common; a fifth are removals.
    const Time t = rng.next() % 5 == 0 ? kNever : 1000 + rng.next() % 64;
    h.set(i, t);
    model[i] = t;
    ASSERT_EQ(h.min(), *std::min_element(model.begin(), model.end())) << step;
    ASSERT_EQ(h.get(i), t);
    if (step % 97 == 0) {
      const Time now = 1000 + rng.next() % 70;
      h.collect_due(now, due);
      std::sort(due.begin(), due.end());
      want.clear();
      for (std::uint32_t j = 0; j < kN; ++j)
        if (model[j] <= now) want.push_back(j);
      ASSERT_EQ(due, want) << step;
      std::size_t live = 0;
      for (std::uint32_t j = 0; j < kN; ++j) {
        ASSERT_EQ(h.get(j), model[j]);
        live += model[j] != kNever;
      }
      ASSERT_EQ(h.size(), live);
    }
  }
}

}  // namespace
}  // namespace mrc::engine
