// SentPackets (src/engine/sent_packets.hpp): the requester's per-PSN records and its in-flight list
// in send order. Loss detection walks the list from its oldest end and the tail-loss probe takes
// its newest, so the order must hold through removals, ring growth and the 24-bit PSN wrap.
#include "engine/sent_packets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>

#include "common/rng.hpp"

namespace mrc::engine {
namespace {

std::vector<std::uint32_t> in_flight(const SentPackets& s) {
  std::vector<std::uint32_t> v;
  for (std::uint32_t psn = s.oldest(); psn != SentPackets::kNone; psn = s.next(psn)) v.push_back(psn);
  return v;
}

TEST(SentPackets, TheListKeepsSendOrderNotPsnOrder) {
  // A retransmission re-enters the list at the newest end: the list is in send order.
  SentPackets s;
  s.init(16, 64);
  EXPECT_TRUE(s.none_in_flight());
  for (std::uint32_t psn = 10; psn < 14; ++psn) s.push(psn);
  s.remove(11);  // declared lost ...
  s.push(11);    // ... and resent
  EXPECT_EQ(in_flight(s), (std::vector<std::uint32_t>{10, 12, 13, 11}));
  EXPECT_EQ(s.oldest(), 10u);
  EXPECT_EQ(s.newest(), 11u);
  s.remove(10);
  s.remove(11);
  EXPECT_EQ(in_flight(s), (std::vector<std::uint32_t>{12, 13}));
  EXPECT_EQ(s.newest(), 13u);
  s.clear_in_flight();
  EXPECT_TRUE(s.none_in_flight());
}

TEST(SentPackets, GrowingKeepsRecordsAndListAcrossThePsnWrap) {
  SentPackets s;
  s.init(16, 256);
  const std::uint32_t una = kPsnMask - 9;  // [una, una + 16) wraps to PSN 5
  for (std::uint32_t i = 0; i < 16; ++i) {
    const std::uint32_t psn = psn_add(una, i);
    s.rec(psn).wqe = i;
    s.rec(psn).flags = kValid | kInFlight;
  }
  // Sent in a shuffled order: the list links by PSN survive the move to other slots.
  const std::uint32_t order[16] = {3, 0, 15, 7, 1, 2, 14, 9, 8, 4, 5, 13, 6, 12, 10, 11};
  for (std::uint32_t i : order) s.push(psn_add(una, i));
  s.grow(una, psn_add(una, 16));
  EXPECT_EQ(s.slots(), 32u);
  EXPECT_EQ(s.max_slots(), 256u);
  for (std::uint32_t i = 0; i < 16; ++i) EXPECT_EQ(s.rec(psn_add(una, i)).wqe, i);
  std::vector<std::uint32_t> want;
  for (std::uint32_t i : order) want.push_back(psn_add(una, i));
  EXPECT_EQ(in_flight(s), want);
  // Slots that were free are clean records.
  EXPECT_EQ(s.rec(psn_add(una, 16)).flags, 0u);
}

TEST(SentPackets, LinksSpanTheWholeLargestWindowAcrossThePsnWrap) {
  // The links are 16-bit PSN distances: the first and last PSN of a window of kMaxSlots, sent in
  // either order, are neighbours.
  SentPackets s;
  s.init(SentPackets::kMaxSlots, SentPackets::kMaxSlots);
  const std::uint32_t una = kPsnMask - 100;
  const std::uint32_t last = psn_add(una, SentPackets::kMaxSlots - 1);
  s.push(last);
  s.push(una);
  s.push(psn_add(una, 7));
  s.push(psn_add(last, -1));
  EXPECT_EQ(in_flight(s), (std::vector<std::uint32_t>{last, una, psn_add(una, 7), psn_add(last, -1)}));
  s.remove(una);
  s.remove(psn_add(una, 7));
  EXPECT_EQ(in_flight(s), (std::vector<std::uint32_t>{last, psn_add(last, -1)}));
  s.remove(psn_add(last, -1));
  s.push(una);
  EXPECT_EQ(in_flight(s), (std::vector<std::uint32_t>{last, una}));
  EXPECT_EQ(s.oldest(), last);
  EXPECT_EQ(s.newest(), una);
  s.remove(last);
  EXPECT_EQ(in_flight(s), (std::vector<std::uint32_t>{una}));
  s.remove(una);
  EXPECT_TRUE(s.none_in_flight());
}

TEST(SentPackets, MatchesAListUnderRandomSendsAcksAndGrowth) {
  Rng rng(5);
  SentPackets s;
  s.init(16, 1 << 12);
  std::list<std::uint32_t> model;  // PSNs in flight, send order
  std::uint32_t una = kPsnMask - 300, nxt = una;
  for (int step = 0; step < 30000; ++step) {
    const std::uint64_t what = rng.next() % 8;
    if (what < 3 && static_cast<std::uint32_t>(psn_diff(nxt, una)) < s.max_slots()) {
      if (static_cast<std::uint32_t>(psn_diff(nxt, una)) >= s.slots()) s.grow(una, nxt);
      s.rec(nxt) = TxRec{};
      s.push(nxt);
      model.push_back(nxt);
      nxt = psn_add(nxt, 1);
    } else if (what < 6 && !model.empty()) {
      // Acknowledged or declared lost: leaves the list; a lost one may be resent.
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng.next() % model.size()));
      const std::uint32_t psn = *it;
      model.erase(it);
      s.remove(psn);
      if (rng.next() % 4 == 0) {
        s.push(psn);
        model.push_back(psn);
      }
    } else {
      // The cumulative acknowledgement retires PSNs no longer in flight from the bottom.
      while (una != nxt && std::find(model.begin(), model.end(), una) == model.end()) una = psn_add(una, 1);
    }
    ASSERT_EQ(s.none_in_flight(), model.empty());
    if (!model.empty()) {
      ASSERT_EQ(s.oldest(), model.front());
      ASSERT_EQ(s.newest(), model.back());
    }
    if (step % 97 == 0) {
      ASSERT_EQ(in_flight(s), std::vector<std::uint32_t>(model.begin(), model.end())) << step;
    }
  }
  EXPECT_GT(s.slots(), 16u);  // it grew
}

TEST(SentPackets, LostPacketsAreRetransmittedOldestFirst) {
  // The retransmission queue: whatever order losses are declared in, the next one to resend is
  // the lowest lost PSN at or above una; acknowledged or resent ones leave it; across the wrap.
  constexpr std::uint32_t kUna = 0xFFFFF8;
  SentPackets s;
  s.init(64, 64);
  s.start(kUna);
  auto at = [](std::uint32_t i) { return psn_add(kUna, static_cast<std::int32_t>(i)); };
  const std::uint32_t nxt = at(20);
  for (std::uint32_t i = 0; i < 20; ++i) {
    s.rec(at(i)) = TxRec{};
    s.rec(at(i)).flags = kValid | kInFlight;
    s.push(at(i));
  }
  std::uint32_t psn = 0;
  EXPECT_EQ(s.lost(), 0u);
  EXPECT_FALSE(s.next_lost(kUna, nxt, psn));
  for (std::uint32_t i : {12u, 3u, 17u, 9u}) s.mark_lost(at(i));  // declared out of order
  EXPECT_EQ(s.lost(), 4u);
  EXPECT_EQ(in_flight(s).size(), 16u);  // taken out of flight
  ASSERT_TRUE(s.next_lost(kUna, nxt, psn));
  EXPECT_EQ(psn, at(3));
  // Resent: it leaves the queue (the caller clears kLost and puts it back in flight).
  s.rec(psn).flags = static_cast<std::uint8_t>((s.rec(psn).flags & ~kLost) | kInFlight);
  s.push(psn);
  s.lost_done();
  ASSERT_TRUE(s.next_lost(kUna, nxt, psn));
  EXPECT_EQ(psn, at(9));
  // A loss declared below the cursor comes first again.
  s.mark_lost(at(5));
  ASSERT_TRUE(s.next_lost(kUna, nxt, psn));
  EXPECT_EQ(psn, at(5));
  // una passing a lost PSN (acknowledged after all) skips it.
  s.rec(at(5)).flags = kValid | kSacked;
  s.rec(at(9)).flags = kValid | kSacked;
  s.lost_done();
  s.lost_done();
  ASSERT_TRUE(s.next_lost(at(10), nxt, psn));
  EXPECT_EQ(psn, at(12));
  EXPECT_EQ(s.lost(), 2u);  // 12 and 17
  s.clear_in_flight();      // the QP failed
  EXPECT_EQ(s.lost(), 0u);
}

}  // namespace
}  // namespace mrc::engine
