// How a simulator run takes memory from the kernel (decisions.md D70, D72).
//
// On the virtual machines this project is measured on, the first touch of a 4 KB page costs 10-30 us
// (the hypervisor's page-table work) and a TLB miss walks two page tables. A run touches megabytes
// (perm128: ~1,100 pages of heap) to hundreds of MB of QP, port and packet state, so with glibc's
// defaults (every block of 128 KB or more its own mmap, everything on 4 KB pages) a good part of
// its time is page faults and TLB misses. tune_heap() changes, for the calling process: the heap reserves
// address space ahead (nothing touched, so nothing resident; never handed back mid-run), starting at a 2 MB
// boundary nothing has touched, and asks for transparent huge pages on it, so that state is faulted in 2 MB
// at a time (about 0.4 us per 4 KB) and mapped by few TLB entries. Blocks come from the reservation while it
// lasts, whatever their size; beyond it, blocks from `mmap_threshold` up get their own mappings. The cost is
// peak memory: the last huge page is faulted in whole (up to 2 MB more), and a freed block inside the heap
// stays resident where an mmap'd one was unmapped (+42 % on scen6_collective_small, D70). Memory that must
// stay untouched (the simulator's message buffers) is mapped on its own, not calloc'd: calloc zeroes a block
// carved from the reservation. Results do not depend on any of this; only time and peak memory do.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mrc::sim {

struct HeapTuning {
  std::size_t reserve_bytes = std::size_t{512} << 20;  // capped at a quarter of physical memory
  /// Once the reservation is used up, blocks of this size or more get their own mappings.
  std::size_t mmap_threshold = std::size_t{32} << 20;
};

struct HeapReport {
  /// glibc's thresholds set (false: another allocator, e.g. a sanitizer's).
  bool tuned = false;
  bool huge_pages = false;  ///< the reservation made and MADV_HUGEPAGE accepted on it
  std::size_t huge_bytes = 0;
};

/// Call once, early, from the process's main thread, before any other thread starts (mrc sim does,
/// unless --heap plain, before it builds a run): it moves the program break. Another allocator than
/// glibc's (a sanitizer's) is left as it is.
HeapReport tune_heap(const HeapTuning& t);

/// The tuning for a run of `qps` QPs (both ends counted): from `large_qps` on (the point where QP state
/// outgrows the caches, RunConfig::prefetch_qps) a larger reservation, and blocks up to 32 MB from the heap
/// beyond it.
HeapTuning heap_tuning_for(std::uint64_t qps, std::uint64_t large_qps);

}  // namespace mrc::sim
