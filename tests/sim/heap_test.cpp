// tune_heap (sim/heap.hpp, D70). It changes the whole process's allocator, so each case runs in a
// forked child and reports through its exit status.
#include "sim/heap.hpp"

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
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

bool thp_offered() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.find("[never]") == std::string::npos && !s.empty();
}

// The flags line of the mapping that holds `addr`, from /proc/self/smaps ("" if none).
std::string vm_flags_of(const void* addr) {
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
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(Heap, TheTuningFollowsTheNumberOfQps) {
  EXPECT_FALSE(heap_tuning_for(256, 1024).huge_pages);
  EXPECT_TRUE(heap_tuning_for(1024, 1024).huge_pages);
  EXPECT_TRUE(heap_tuning_for(32512, 1024).huge_pages);
}

// A small run's tuning changes nothing: a 4 MB block is still an mmap of its own, above the break.
TEST(Heap, WithoutHugePagesNothingChanges) {
  EXPECT_EQ(in_child([] {
              const HeapReport r = tune_heap(HeapTuning{});
              if (r.tuned || r.huge_pages) return 1;
              if (!kGlibcMalloc) return 0;
              void* p = std::malloc(std::size_t{4} << 20);
              const bool above_break =
                  reinterpret_cast<std::uintptr_t>(p) > reinterpret_cast<std::uintptr_t>(sbrk(0));
              std::free(p);
              return above_break ? 0 : 2;
            }),
            0);
}

// A large run's tuning: the heap reserves address space ahead and the kernel marks it for huge
// pages ("hg" in smaps); a 4 MB block allocated afterwards lies in it, below the break.
TEST(Heap, WithHugePagesTheHeapIsReservedAndMarked) {
  EXPECT_EQ(in_child([] {
              HeapTuning t;
              t.huge_pages = true;
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
              const std::string flags = vm_flags_of(static_cast<char*>(p) + (std::size_t{3} << 20));
              std::free(p);
              if (!below_break) return 6;
              return flags.find(" hg") != std::string::npos ? 0 : 7;
            }),
            0);
}

}  // namespace
}  // namespace mrc::sim
