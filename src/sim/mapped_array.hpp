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

/// The untyped mapping: page-granular, zero-filled, unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  /// Maps `bytes` (none for 0); throws std::bad_alloc if the kernel refuses.
  explicit Mapping(std::size_t bytes);
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { release(); }

  void* data() const { return p_; }
  std::size_t bytes() const { return n_; }

 private:
  void release();
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T>
class MappedArray {
  static_assert(std::is_trivially_copyable_v<T>, "elements are zero-filled bytes");

 public:
  MappedArray() = default;
  explicit MappedArray(std::size_t n) : map_(n * sizeof(T)), n_(n) {}
  MappedArray(MappedArray&& o) noexcept : map_(std::move(o.map_)), n_(std::exchange(o.n_, 0)) {}
  MappedArray& operator=(MappedArray&& o) noexcept {
    map_ = std::move(o.map_);
    n_ = std::exchange(o.n_, 0);
    return *this;
  }
  /// `n` zero elements in a new mapping (the old one is unmapped).
  void assign_zero(std::size_t n) { *this = MappedArray(n); }
  void clear() { *this = MappedArray(); }

  T* data() const { return static_cast<T*>(map_.data()); }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](std::size_t i) const { return data()[i]; }

 private:
  Mapping map_;
  std::size_t n_ = 0;
};

}  // namespace mrc::sim
