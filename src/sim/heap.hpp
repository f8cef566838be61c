// How a large simulator run takes memory from the kernel (decisions.md D70).
//
// On the virtual machines this project is measured on, the first touch of a 4 KB page costs 10-30 us
// (the hypervisor's page-table work) and a TLB miss walks two page tables. A run with thousands of
// QPs touches tens to hundreds of MB of QP, port and packet state at random, so with glibc's
// defaults (every block of 128 KB or more its own mmap, everything on 4 KB pages) a good part of its
// time is page faults and TLB misses. tune_heap() with `huge_pages` changes, for the calling
// process: blocks below 32 MB come from the heap; the heap reserves address space ahead (nothing
// touched, so nothing resident; never handed back mid-run) and asks for transparent huge pages on
// it, so that state is faulted in 2 MB at a time and mapped by few TLB entries. The cost is peak
// memory: a freed block inside the heap stays resident where an mmap'd one was unmapped (from +1 %
// on the all-to-alls to +42 % on scen6_collective_small, D70). A small run is left alone: its state
// stays in the caches and the gain was within the noise.
// Results do not depend on any of this; only time and peak memory do.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mrc::sim {

struct HeapTuning {
  bool huge_pages = false;
  std::size_t reserve_bytes = std::size_t{512} << 20;  // capped at a quarter of physical memory
};

struct HeapReport {
  /// glibc's thresholds set (false: not asked, or another allocator, e.g. a sanitizer's).
  bool tuned = false;
  bool huge_pages = false;  ///< the reservation made and MADV_HUGEPAGE accepted on it
  std::size_t huge_bytes = 0;
};

/// Call once, early, from the process's main thread (mrc sim does, unless --heap plain, before it
/// builds a run). Without `huge_pages` it does nothing; another allocator than glibc's (a
/// sanitizer's) is left as it is.
HeapReport tune_heap(const HeapTuning& t);

/// The tuning for a run of `qps` QPs (both ends counted): huge pages from `large_qps` on (the
/// point where QP state outgrows the caches, RunConfig::prefetch_qps).
HeapTuning heap_tuning_for(std::uint64_t qps, std::uint64_t large_qps);

}  // namespace mrc::sim
