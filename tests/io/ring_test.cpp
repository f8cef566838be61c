#include "io/ring.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace mrc::io {
namespace {

TEST(Ring, SpscKeepsOrderAndReportsFull) {
  SpscRing<int> r(4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(r.push(i));
  EXPECT_TRUE(r.full());
  EXPECT_FALSE(r.push(99));
  int v = -1;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(r.pop(v));
    EXPECT_EQ(v, i);
  }
  EXPECT_FALSE(r.pop(v));
}

TEST(Ring, MpscManyProducersLoseNothingAndKeepPerProducerOrder) {
  constexpr int kProducers = 4;
  constexpr std::uint32_t kPerProducer = 100000;
  MpscRing<std::uint64_t> r(256);  // small: producers see "full" often
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&r, p] {
      for (std::uint32_t i = 0; i < kPerProducer; ++i) {
        const std::uint64_t v = (static_cast<std::uint64_t>(p) << 32) | i;
        while (!r.push(v)) std::this_thread::yield();
      }
    });
  }
  std::vector<std::uint32_t> next(kProducers, 0);
  std::uint64_t got = 0, errors = 0;
  while (got < std::uint64_t{kProducers} * kPerProducer) {
    std::uint64_t v = 0;
    if (!r.pop(v)) {
      std::this_thread::yield();
      continue;
    }
    const auto p = static_cast<std::size_t>(v >> 32);
    const auto i = static_cast<std::uint32_t>(v);
    if (p >= next.size() || i != next[p]) ++errors;
    if (p < next.size()) next[p] = i + 1;
    ++got;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(errors, 0u);
  for (const std::uint32_t n : next) EXPECT_EQ(n, kPerProducer);
  std::uint64_t v = 0;
  EXPECT_FALSE(r.pop(v));
  EXPECT_FALSE(r.ready());
}

}  // namespace
}  // namespace mrc::io
