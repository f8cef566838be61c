#include "sim/heap.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace mrc::sim {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr int kMmapThreshold = 32 << 20;  // glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
constexpr int kDefaultTopPad = 128 << 10;

std::uintptr_t brk_now() {
  return reinterpret_cast<std::uintptr_t>(sbrk(0));
}
}  // namespace

HeapTuning heap_tuning_for(std::uint64_t qps, std::uint64_t large_qps) {
  HeapTuning t;
  t.huge_pages = qps >= large_qps;
  return t;
}

HeapReport tune_heap(const HeapTuning& t) {
  HeapReport r;
  if (!t.huge_pages) return r;
  std::size_t reserve = t.reserve_bytes;
  if (const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE); pages > 0 && size > 0)
    reserve = std::min(reserve, static_cast<std::size_t>(pages) * static_cast<std::size_t>(size) / 4);
  reserve &= ~(kHugePage - 1);
  // The top is not trimmed while it is within twice the reservation (free() would otherwise hand
  // the reservation back at once). A sanitizer's mallopt does nothing and returns 0.
  const std::size_t trim = std::min<std::size_t>(2 * reserve + kHugePage, std::numeric_limits<int>::max());
  if (reserve < kHugePage || mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(trim)) != 1)
    return r;
  r.tuned = true;
  // One growth of the heap, padded by the reservation: address space only. The request is more
  // than the top's free space, so the heap must grow.
  const std::size_t ask = mallinfo2().keepcost + kHugePage / 2;
  if (ask >= static_cast<std::size_t>(kMmapThreshold)) return r;
  const std::uintptr_t before = brk_now();
  mallopt(M_TOP_PAD, static_cast<int>(reserve));
  void* p = std::malloc(ask);
  mallopt(M_TOP_PAD, kDefaultTopPad);
  const std::uintptr_t after = brk_now();
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::free(p);
  // Carved from the grown heap, or else (brk refused, malloc fell back to mmap) no reservation.
  if (p == nullptr || at + ask < before || at >= after || after - before < reserve) return r;
  const std::uintptr_t lo = (before + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t hi = after & ~(kHugePage - 1);
  if (hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0) {
    r.huge_pages = true;
    r.huge_bytes = hi - lo;
  }
  return r;
}

}  // namespace mrc::sim
