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
constexpr std::size_t kPage = 4096;
constexpr int kDefaultTopPad = 128 << 10;
constexpr int kMaxMmapThreshold = 32 << 20;  // glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)

std::uintptr_t brk_now() {
  return reinterpret_cast<std::uintptr_t>(sbrk(0));
}
}  // namespace

HeapTuning heap_tuning_for(std::uint64_t qps, std::uint64_t large_qps) {
  HeapTuning t;
  if (qps < large_qps) {  // perm128 and incast128 use some 5 MB of heap
    t.reserve_bytes = std::size_t{64} << 20;
    t.mmap_threshold = std::size_t{1} << 20;
  }
  return t;
}

namespace {
struct Range {
  std::uintptr_t lo = 0, hi = 0;
};

// Grows the heap once by `reserve` bytes of address space from a 2 MB boundary nothing has
// touched; returns the 2 MB-aligned part of the growth ({} if the heap could not grow so).
Range grow_aligned(std::size_t reserve) {
  // The request is more than all the free space the heap has (its top and its free blocks), so
  // the heap must grow; as one block of the heap, below the mmap threshold.
  const std::size_t ask = (mallinfo2().fordblks + 64 + 15) & ~std::size_t{15};
  if (ask + 2 * kPage >= static_cast<std::size_t>(kMaxMmapThreshold)) return {};
  // The growth starts `ask` + 8 KB below a 2 MB boundary and the request reaches just short of it:
  // glibc's two writes (the block's header at its start, the new top's at its end) fall in 4 KB
  // pages below the boundary, and the huge pages above it are untouched when they are marked, so
  // the kernel can fault each in whole. The block is kept: it is address space nobody touches, and
  // the heap's next blocks then start at the boundary. The gap before the growth is address space
  // too (glibc takes it for another user's sbrk and never touches it). It is at least a page: with
  // no gap, glibc would grow its top in place and the block would start below `start` (about one
  // run in 500, as the break falls under address randomisation).
  const std::uintptr_t before = brk_now();
  const std::uintptr_t lo = (before + ask + 3 * kPage + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t start = (lo - ask - 2 * kPage) & ~(kPage - 1);
  if (start > before && sbrk(static_cast<intptr_t>(start - before)) == reinterpret_cast<void*>(-1)) return {};
  const std::size_t filler = lo - start - 64;
  mallopt(M_TOP_PAD, static_cast<int>(reserve));
  void* p = std::malloc(filler);
  mallopt(M_TOP_PAD, kDefaultTopPad);
  const std::uintptr_t after = brk_now();
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  // Carved from the grown heap, or else (brk refused, malloc fell back to mmap) no reservation.
  if (p == nullptr || at < start || at + filler > lo || after < lo + kHugePage) {
    std::free(p);
    return {};
  }
  return {lo, after & ~(kHugePage - 1)};
}
}  // namespace

HeapReport tune_heap(const HeapTuning& t) {
  HeapReport r;
  std::size_t reserve = t.reserve_bytes;
  if (const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE); pages > 0 && size > 0)
    reserve = std::min(reserve, static_cast<std::size_t>(pages) * static_cast<std::size_t>(size) / 4);
  reserve &= ~(kHugePage - 1);
  // The top is not trimmed while it is within twice the reservation (free() would otherwise hand
  // the reservation back at once). A sanitizer's mallopt does nothing and returns 0.
  const std::size_t trim = std::min<std::size_t>(2 * reserve + kHugePage, std::numeric_limits<int>::max());
  if (reserve < kHugePage || mallopt(M_MMAP_THRESHOLD, kMaxMmapThreshold) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(trim)) != 1)
    return r;
  r.tuned = true;
  const Range g = grow_aligned(reserve);
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(std::min<std::size_t>(t.mmap_threshold, kMaxMmapThreshold)));
  if (g.hi > g.lo && madvise(reinterpret_cast<void*>(g.lo), g.hi - g.lo, MADV_HUGEPAGE) == 0) {
    r.huge_pages = true;
    r.huge_bytes = g.hi - g.lo;
  }
  return r;
}

}  // namespace mrc::sim
