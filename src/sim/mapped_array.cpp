#include "sim/mapped_array.hpp"

#include <sys/mman.h>

#include <new>

namespace mrc::sim {

Mapping::Mapping(std::size_t bytes) {
  if (bytes == 0) return;
  // MAP_NORESERVE: a buffer is sized for the largest message and mostly never touched.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  p_ = p;
  n_ = bytes;
}

void Mapping::release() {
  if (p_ != nullptr) munmap(p_, n_);
  p_ = nullptr;
  n_ = 0;
}

}  // namespace mrc::sim
