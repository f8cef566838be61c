// MappedArray (sim/mapped_array.hpp): zero-filled elements in a mapping of their own, whose pages
// are faulted in only when touched.
#include "sim/mapped_array.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace mrc::sim {
namespace {

struct Pair {
  std::uint32_t a, b;
};

// How many pages of [p, p + bytes) are resident (mincore).
std::size_t resident_pages(const void* p, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  if (mincore(const_cast<void*>(p), bytes, v.data()) != 0) return ~std::size_t{0};
  std::size_t n = 0;
  for (const unsigned char c : v) n += c & 1u;
  return n;
}

TEST(MappedArray, ElementsStartZeroAndKeepWhatIsWritten) {
  MappedArray<Pair> m(1000);
  ASSERT_EQ(m.size(), 1000u);
  ASSERT_FALSE(m.empty());
  for (std::size_t i = 0; i < m.size(); ++i) ASSERT_EQ(m[i].a | m[i].b, 0u) << i;
  for (std::uint32_t i = 0; i < 1000; ++i) m[i] = {i, 2 * i};
  for (std::uint32_t i = 0; i < 1000; ++i) EXPECT_TRUE(m[i].a == i && m[i].b == 2 * i) << i;
}

TEST(MappedArray, IsNotOnTheHeapAndOnlyTouchedPagesAreResident) {
  const std::size_t n = std::size_t{8} << 20;
  MappedArray<std::uint8_t> m(n);
  void* heap_block = std::malloc(64);
  // Its own mapping: not between the heap's start and its break.
  const auto at = reinterpret_cast<std::uintptr_t>(m.data());
  EXPECT_FALSE(at >= reinterpret_cast<std::uintptr_t>(heap_block) &&
               at < reinterpret_cast<std::uintptr_t>(sbrk(0)));
  std::free(heap_block);
  EXPECT_EQ(resident_pages(m.data(), n), 0u);
  m[0] = 1;
  m[n - 1] = 1;
  EXPECT_EQ(resident_pages(m.data(), n), 2u);
}

TEST(MappedArray, MovesAndReassignsWithoutLeakingOrSharing) {
  MappedArray<std::uint64_t> a(512);
  a[7] = 42;
  std::uint64_t* const old = a.data();
  MappedArray<std::uint64_t> b(std::move(a));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), old);
  EXPECT_EQ(b[7], 42u);
  b.assign_zero(16);  // a new mapping, zeroed; the old one is unmapped
  EXPECT_EQ(b.size(), 16u);
  EXPECT_EQ(b[7], 0u);
  unsigned char v = 0;
  EXPECT_NE(mincore(old, 4096, &v), 0);  // ENOMEM: no longer mapped
  b.clear();
  EXPECT_TRUE(b.empty());
  MappedArray<std::uint64_t> none(0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
}

}  // namespace
}  // namespace mrc::sim
