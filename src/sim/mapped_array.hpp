// An array of zero-filled elements in an anonymous mapping of its own.
//
// Two uses in the simulator: buffers that must stay untouched (the message buffers: payloads are not
// carried by default, so nothing reads or writes them, and pages nobody touches are never faulted
// in), and tables that should not push a small run's heap into one more huge page (the route
// table, D77: 80 KB on k=8, which from the heap's huge-page reservation, sim/heap.hpp, cost 2 MB of
// peak memory; the event ring's head array, D78). Not calloc or std::vector: the heap hands out its
// reserved space and zeroes it.
// Elements must be trivially copyable, with all-zero bytes a valid value. Pointers are shallow, as
// in std::span: a const array's elements stay writable.
#pragma once
#include <cstddef>
#include <type_traits>
#include <utility>

namespace mrc::sim {

namespace detail {
/// `bytes` of zero-filled, page-granular memory (nullptr for 0); throws std::bad_alloc if the
/// kernel refuses.
void* map_zeroed(std::size_t bytes);
void unmap(void* p, std::size_t bytes);
}  // namespace detail

template <class T>
class MappedArray {
  static_assert(std::is_trivially_copyable_v<T>, "elements are zero-filled bytes");

 public:
  MappedArray() = default;
  explicit MappedArray(std::size_t n) : p_(static_cast<T*>(detail::map_zeroed(n * sizeof(T)))), n_(n) {}
  MappedArray(MappedArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  MappedArray& operator=(MappedArray&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  MappedArray(const MappedArray&) = delete;
  MappedArray& operator=(const MappedArray&) = delete;
  ~MappedArray() { release(); }

  /// `n` zero elements in a new mapping (the old one is unmapped).
  void assign_zero(std::size_t n) { *this = MappedArray(n); }
  void clear() { release(); }

  T* data() const { return p_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](std::size_t i) const { return p_[i]; }

 private:
  void release() {
    detail::unmap(p_, n_ * sizeof(T));
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace mrc::sim
