// Replaces the global operator new/delete of the benchmark programs with malloc/free plus a counter
// that only runs while armed (see alloc_hook.hpp). new[], nothrow and sized variants of the standard
// library forward to these two.
#include "alloc_hook.hpp"

#include <cstdlib>
#include <new>

namespace {
bool g_armed = false;
std::uint64_t g_count = 0;
}  // namespace

namespace mrc::bench {
void alloc_count_arm(bool on) {
  g_armed = on;
}
std::uint64_t alloc_count() {
  return g_count;
}
}  // namespace mrc::bench

void* operator new(std::size_t n) {
  if (g_armed) ++g_count;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept {
  std::free(p);
}

void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
