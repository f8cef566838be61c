// MemoryTable (src/engine/memory.hpp): registered regions found by lkey (the requester, per
// message) and by rkey (the responder, per packet, in an open-addressed table with backward-shift
// deletion).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "common/rng.hpp"
#include "engine/memory.hpp"

namespace mrc::engine {
namespace {

TEST(MemoryTable, FindsARegionByEitherKeyAndForgetsItWhenDeregistered) {
  std::vector<std::uint8_t> buf(4096);
  MemoryTable t(1);
  EXPECT_EQ(t.find_rkey(0), nullptr);
  EXPECT_EQ(t.find_rkey(12345), nullptr);  // an empty table
  const MemoryRegion* mr = t.register_region(buf.data(), buf.size(), access::kAll);
  ASSERT_NE(mr, nullptr);
  EXPECT_NE(mr->lkey, 0u);
  EXPECT_NE(mr->rkey, 0u);
  const std::uint32_t lkey = mr->lkey, rkey = mr->rkey;
  const MemoryRegion* by_r = t.find_rkey(rkey);
  ASSERT_NE(by_r, nullptr);
  EXPECT_EQ(by_r->addr, buf.data());
  EXPECT_EQ(by_r->length, buf.size());
  EXPECT_EQ(by_r->lkey, lkey);
  EXPECT_EQ(t.find_lkey(lkey), mr);
  EXPECT_EQ(t.find_rkey(lkey == rkey ? rkey + 1 : lkey), nullptr);  // keys are not interchangeable
  EXPECT_EQ(t.find_rkey(0), nullptr);
  EXPECT_TRUE(t.deregister(lkey));
  EXPECT_EQ(t.find_rkey(rkey), nullptr);
  EXPECT_EQ(t.find_lkey(lkey), nullptr);
  EXPECT_FALSE(t.deregister(lkey));
  EXPECT_EQ(t.size(), 0u);
}

TEST(MemoryTable, RefusesWhatIsNotARegion) {
  std::vector<std::uint8_t> buf(64);
  MemoryTable t(2);
  EXPECT_EQ(t.register_region(nullptr, 64, access::kAll), nullptr);
  EXPECT_EQ(t.register_region(buf.data(), 0, access::kAll), nullptr);
  EXPECT_EQ(t.register_region(buf.data(), 64, 1u << 7), nullptr);  // unknown access bit
  EXPECT_EQ(t.size(), 0u);
}

// Thousands of registrations and deregistrations in random order, the table growing and entries
// moving back over deleted ones, checked every 50 steps (and every step while few are live) against
// a plain map: every live rkey
// finds its own region, every deregistered one finds nothing, and register_region's pointers stay
// valid while their regions live.
TEST(MemoryTable, AgreesWithAMapThroughGrowthAndDeletions) {
  std::vector<std::uint8_t> buf(1 << 16);
  MemoryTable t(3);
  Rng rng(4);
  struct Live {
    const MemoryRegion* mr;
    std::uint64_t off;
  };
  std::map<std::uint32_t, Live> live;  // by rkey
  std::vector<std::uint32_t> gone;
  auto check_all = [&] {
    for (const auto& [rkey, l] : live) {
      const MemoryRegion* r = t.find_rkey(rkey);
      ASSERT_NE(r, nullptr) << rkey;
      ASSERT_EQ(r->addr, buf.data() + l.off);
      ASSERT_EQ(r->lkey, l.mr->lkey);
      ASSERT_EQ(t.find_lkey(l.mr->lkey), l.mr);
      ASSERT_EQ(l.mr->rkey, rkey);
    }
    for (const std::uint32_t rkey : gone) {
      if (!live.count(rkey)) {
        ASSERT_EQ(t.find_rkey(rkey), nullptr) << rkey;
      }
    }
    ASSERT_EQ(t.size(), live.size());
  };
  for (int step = 0; step < 3000; ++step) {
    const bool add = live.size() < 8 || rng.next() % 100 < 55;
    if (add) {
      const std::uint64_t off = rng.next() % (buf.size() - 64);
      const MemoryRegion* mr = t.register_region(buf.data() + off, 64, access::kAll);
      ASSERT_NE(mr, nullptr);
      ASSERT_FALSE(live.count(mr->rkey)) << "an rkey handed out twice";
      live[mr->rkey] = {mr, off};
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng.next() % live.size()));
      ASSERT_TRUE(t.deregister(it->second.mr->lkey));
      gone.push_back(it->first);
      live.erase(it);
    }
    if (step % 50 == 0 || live.size() < 20) check_all();
  }
  check_all();
  EXPECT_GT(live.size(), 200u);  // the table grew several times over
  while (!live.empty()) {        // and empties back out, each deletion leaving the rest findable
    ASSERT_TRUE(t.deregister(live.begin()->second.mr->lkey));
    gone.push_back(live.begin()->first);
    live.erase(live.begin());
    if (live.size() % 16 == 0) check_all();
  }
  check_all();
}

}  // namespace
}  // namespace mrc::engine
