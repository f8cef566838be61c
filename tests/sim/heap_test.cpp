// tune_heap (sim/heap.hpp, D70). It changes the whole process's allocator, so each case runs in a
// forked child and reports through its exit status. And it must be called early, on a heap with
// little free space (mrc sim calls it before it builds anything): after the other tests of this
// binary, the heap has more free space than a reservation may ask for. So each case that calls it
// runs first in a process of its own, started afresh (this binary again, filtered to the case),
// whether the binary runs one test (ctest) or all of them.
#include "sim/heap.hpp"

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace mrc::sim {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kGlibcMalloc = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kGlibcMalloc = false;
#else
constexpr bool kGlibcMalloc = true;
#endif
#else
constexpr bool kGlibcMalloc = true;
#endif

// Runs `body` in a child; its return value (0 = pass) is the child's exit status.
int in_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

// Runs the current test in a new process of this binary, filtered to that test, and checks its exit
// status: true. In that process (the environment names the test to it): false, so the test goes on.
bool ran_in_fresh_process() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  constexpr const char* kVar = "MRC_HEAP_TEST_FRESH";
  if (const char* e = std::getenv(kVar); e != nullptr && name == e) return false;
  std::fflush(nullptr);  // (or the child would write out the parent's buffered output again)
  const pid_t pid = fork();
  if (pid == 0) {
    setenv(kVar, name.c_str(), 1);
    const std::string filter = "--gtest_filter=" + name;
    execl("/proc/self/exe", "heap_test_fresh", filter.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << name << " failed in a fresh process (its output is above); status " << status;
  return true;
}

bool thp_offered() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.find("[never]") == std::string::npos && !s.empty();
}

// The line starting with `field` of the mapping that holds `addr`, from /proc/self/smaps ("" if
// none).
std::string smaps_line(const void* addr, const std::string& field) {
  std::ifstream f("/proc/self/smaps");
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  bool inside = false;
  for (std::string line; std::getline(f, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(' ') > line.find('-')) {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind(field, 0) == 0) return line;
  }
  return "";
}

TEST(Heap, TheTuningFollowsTheNumberOfQps) {
  const HeapTuning small = heap_tuning_for(256, 1024), large = heap_tuning_for(1024, 1024);
  EXPECT_LT(small.reserve_bytes, large.reserve_bytes);
  EXPECT_LT(small.mmap_threshold, large.mmap_threshold);
  EXPECT_EQ(heap_tuning_for(32512, 1024).reserve_bytes, large.reserve_bytes);
}

// A counter of /proc/vmstat (-1 if absent).
long vmstat(const std::string& name) {
  std::ifstream f("/proc/vmstat");
  std::string key;
  long value = 0;
  while (f >> key >> value)
    if (key == name) return value;
  return -1;
}

// The AnonHugePages figure (kB) of the mapping that holds `addr` (-1 if none).
long huge_kb_of(const void* addr) {
  const std::string line = smaps_line(addr, "AnonHugePages:");
  return line.empty() ? -1 : std::stol(line.substr(14));
}

// The tuning (a 64 MB reservation): the heap reserves address space ahead and the kernel marks it for huge
// pages ("hg" in smaps); a 4 MB block allocated afterwards lies in it, below the break.
TEST(Heap, TheHeapIsReservedAndMarked) {
  if (ran_in_fresh_process()) return;
  EXPECT_EQ(in_child([] {
              HeapTuning t;
              t.reserve_bytes = std::size_t{64} << 20;
              const long arena_before = mallinfo2().arena;
              const HeapReport r = tune_heap(t);
              if (!kGlibcMalloc) return r.tuned || r.huge_pages ? 1 : 0;
              if (!r.tuned) return 2;
              if (!thp_offered()) return r.huge_pages ? 3 : 0;
              if (!r.huge_pages || r.huge_bytes < (std::size_t{60} << 20)) return 4;
              if (mallinfo2().arena < arena_before + (std::size_t{60} << 20)) return 5;  // the heap grew
              void* p = std::malloc(std::size_t{4} << 20);
              const bool below_break =
                  reinterpret_cast<std::uintptr_t>(p) < reinterpret_cast<std::uintptr_t>(sbrk(0));
              const std::string flags =
                  smaps_line(static_cast<char*>(p) + (std::size_t{3} << 20), "VmFlags:");
              std::free(p);
              if (!below_break) return 6;
              return flags.find(" hg") != std::string::npos ? 0 : 7;
            }),
            0);
}

// `p`, which the compiler may no longer drop with its malloc and free as a pair.
void* kept(void* p) {
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

// Wherever the heap's top and the break lie within a 2 MB page (address randomisation puts them
// anywhere), the reservation is made. The child first gives the heap 8 MB of free top, then takes
// k pages of it: the top's start moves by k pages, through every page of a 2 MB page.
TEST(Heap, TheReservationIsMadeWhereverTheBreakLies) {
  if (ran_in_fresh_process()) return;
  const bool thp = thp_offered();
  int failures = 0;
  for (std::size_t k = 0; k < 512; ++k) {
    const int rc = in_child([k, thp] {
      mallopt(M_MMAP_THRESHOLD, 32 << 20);  // blocks from the heap, not mappings of their own
      mallopt(M_TRIM_THRESHOLD, 1 << 30);
      mallopt(M_TOP_PAD, 4 << 20);
      std::free(kept(std::malloc(std::size_t{4} << 20)));
      mallopt(M_TOP_PAD, 128 << 10);
      void* first = kept(std::malloc(k * 4096 + 100));
      const HeapReport r = tune_heap(heap_tuning_for(256, 1024));
      std::free(first);
      if (!kGlibcMalloc) return r.tuned || r.huge_pages ? 1 : 0;
      return r.tuned && r.huge_pages == thp ? 0 : 1;
    });
    if (rc != 0) ADD_FAILURE() << "not the expected reservation after a first block of " << k << " pages";
    failures += rc != 0;
    if (failures > 3) break;
  }
}

// The reservation starts at a 2 MB boundary that nothing has touched (glibc's own writes fall
// below it), so the blocks after it are faulted in as whole huge pages: the first large block lies
// just above the boundary (above the little the child allocated since) and, written, is backed by
// huge pages (or, when memory is too fragmented, the kernel counts a huge-page fault that fell back).
TEST(Heap, TheBlocksAfterTheReservationAreOnHugePages) {
  if (ran_in_fresh_process()) return;
  EXPECT_EQ(in_child([] {
              const bool thp = thp_offered();
              const HeapReport r = tune_heap(heap_tuning_for(256, 1024));
              if (!kGlibcMalloc) return r.tuned || r.huge_pages ? 1 : 0;
              if (!r.tuned) return 2;
              if (!thp) return r.huge_pages ? 3 : 0;
              if (!r.huge_pages) return 4;
              const std::size_t n = std::size_t{4} << 20;
              auto* p = static_cast<char*>(std::malloc(n));
              const auto at = reinterpret_cast<std::uintptr_t>(p);
              // (Its data may begin a few words below the boundary: glibc's header for it is there.)
              if (((at + 64) & ((std::uintptr_t{2} << 20) - 1)) > (std::uintptr_t{64} << 10)) return 5;
              const long fallbacks = vmstat("thp_fault_fallback");
              std::memset(p, 1, n);
              const long huge = huge_kb_of(p + (std::size_t{1} << 20));
              std::free(p);
              // Or the kernel tried a huge page there and had none free (memory fragmented by
              // other processes): the layout allowed one.
              return huge >= 2048 || vmstat("thp_fault_fallback") > fallbacks ? 0 : 6;
            }),
            0);
}

}  // namespace
}  // namespace mrc::sim
