#include "sim/mapped_array.hpp"

#include <sys/mman.h>

#include <new>

namespace mrc::sim::detail {

void* map_zeroed(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  // MAP_NORESERVE: a buffer is sized for the largest message and mostly never touched.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void unmap(void* p, std::size_t bytes) {
  if (p != nullptr) munmap(p, bytes);
}

}  // namespace mrc::sim::detail
