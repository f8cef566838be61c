// Ring<T> (src/engine/ring.hpp): the FIFO behind a Qp's send, receive-WR, control and second-copy
// queues. Slots must stay put while queued (TxRec::wqe names a send WR by its slot), order must
// survive growth, and nothing may be allocated before the first reserve().
#include "engine/ring.hpp"

#include <gtest/gtest.h>

#include <deque>

#include "common/rng.hpp"

namespace mrc::engine {
namespace {

TEST(Ring, HoldsNothingUntilReserved) {
  Ring<std::uint64_t> r;
  EXPECT_FALSE(r.allocated());
  EXPECT_EQ(r.memory_bytes(), 0u);
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(r.full());  // no room at all: a caller must reserve first
  r.reserve(3);
  EXPECT_TRUE(r.allocated());
  EXPECT_EQ(r.capacity(), 3u);
  EXPECT_FALSE(r.full());
}

TEST(Ring, SlotsStayPutAndWrapAtAnyCapacity) {
  // Capacity 5 (not a power of two): the send queue holds exactly sq_depth WRs.
  Ring<int> r;
  r.reserve(5);
  std::uint32_t slot_of[8] = {};
  for (int i = 0; i < 4; ++i) slot_of[i] = r.push_back(i);
  EXPECT_EQ(slot_of[0], 0u);
  EXPECT_EQ(slot_of[3], 3u);
  r.pop_front();
  r.pop_front();
  for (int i = 4; i < 7; ++i) slot_of[i] = r.push_back(i);
  EXPECT_TRUE(r.full());
  EXPECT_EQ(slot_of[4], 4u);
  EXPECT_EQ(slot_of[5], 0u);  // wrapped into the freed slots
  EXPECT_EQ(slot_of[6], 1u);
  for (int i = 2; i < 7; ++i) EXPECT_EQ(r.slot(slot_of[i]), i);
  EXPECT_EQ(r.head_slot(), 2u);
  EXPECT_EQ(r.tail_slot(), 2u);  // full: one past the newest is the head
  EXPECT_EQ(r.next_slot(4), 0u);
  for (std::uint32_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i], static_cast<int>(i) + 2);
}

TEST(Ring, GrowingKeepsTheOrder) {
  Ring<int> r;
  r.reserve(4);
  for (int i = 0; i < 4; ++i) r.push_back(i);
  r.pop_front();
  r.push_back(4);  // wrapped: elements 1..4 with the head at slot 1
  r.reserve(8);
  EXPECT_EQ(r.capacity(), 8u);
  EXPECT_EQ(r.head_slot(), 0u);
  ASSERT_EQ(r.size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) EXPECT_EQ(r[i], static_cast<int>(i) + 1);
  r.reserve(2);  // never shrinks
  EXPECT_EQ(r.capacity(), 8u);
}

TEST(Ring, EraseKeepsTheRestInOrder) {
  Ring<int> r;
  r.reserve(4);
  for (int i = 0; i < 3; ++i) r.push_back(i);
  r.pop_front();
  r.push_back(3);
  r.push_back(4);  // 1 2 3 4, wrapped
  r.erase(1);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], 1);
  EXPECT_EQ(r[1], 3);
  EXPECT_EQ(r[2], 4);
  r.clear();
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.tail_slot(), r.head_slot());
}

TEST(Ring, BehavesAsADequeUnderRandomOperations) {
  Rng rng(7);
  Ring<std::uint32_t> r;
  std::deque<std::uint32_t> model;
  r.reserve(3);
  std::uint32_t next = 0;
  for (int op = 0; op < 20000; ++op) {
    const std::uint64_t what = rng.next() % 10;
    if (what < 5) {
      if (r.full()) {
        if (r.capacity() < 64)
          r.reserve(r.capacity() * 2 + 1);
        else
          continue;
      }
      const std::uint32_t s = r.push_back(next);
      EXPECT_EQ(r.slot(s), next);
      model.push_back(next++);
    } else if (what < 9) {
      if (model.empty()) continue;
      EXPECT_EQ(r.front(), model.front());
      r.pop_front();
      model.pop_front();
    } else if (!model.empty()) {
      const auto i = static_cast<std::uint32_t>(rng.next() % model.size());
      r.erase(i);
      model.erase(model.begin() + i);
    }
    ASSERT_EQ(r.size(), model.size());
    for (std::uint32_t i = 0; i < model.size(); ++i) ASSERT_EQ(r[i], model[i]) << "op " << op;
  }
}

}  // namespace
}  // namespace mrc::engine
