// Bounded lock-free queues between the progress thread and application threads.
//
// MpscRing: many producers (application threads posting work requests), one consumer (the
// progress thread). Each cell carries a sequence number that tells producers and the consumer
// whose turn it is; a producer claims a cell with a CAS on the tail. SpscRing: one producer (the
// progress thread), one consumer (the application), for completions and events.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace mrc::io {

inline constexpr std::size_t kCacheLine = 64;

inline std::size_t round_up_pow2(std::size_t n) {
  std::size_t p = 2;
  while (p < n) p <<= 1;
  return p;
}

template <class T>
class MpscRing {
 public:
  explicit MpscRing(std::size_t capacity) : mask_(round_up_pow2(capacity) - 1) {
    cells_ = std::make_unique<Cell[]>(mask_ + 1);
    for (std::size_t i = 0; i <= mask_; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  bool push(const T& v) {
    std::size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const std::size_t seq = c.seq.load(std::memory_order_acquire);
      const auto dif = static_cast<std::ptrdiff_t>(seq) - static_cast<std::ptrdiff_t>(pos);
      if (dif == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value = v;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        return false;  // full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  /// Single consumer.
  bool pop(T& out) {
    Cell& c = cells_[head_ & mask_];
    const std::size_t seq = c.seq.load(std::memory_order_acquire);
    if (seq != head_ + 1) return false;
    out = c.value;
    c.seq.store(head_ + mask_ + 1, std::memory_order_release);
    ++head_;
    return true;
  }

  /// Single consumer: is there something to pop?
  bool ready() const { return cells_[head_ & mask_].seq.load(std::memory_order_acquire) == head_ + 1; }

 private:
  struct Cell {
    std::atomic<std::size_t> seq{0};
    T value{};
  };
  std::size_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(kCacheLine) std::atomic<std::size_t> tail_{0};
  alignas(kCacheLine) std::size_t head_ = 0;
};

template <class T>
class SpscRing {
 public:
  explicit SpscRing(std::size_t capacity)
      : mask_(round_up_pow2(capacity) - 1), buf_(std::make_unique<T[]>(mask_ + 1)) {}

  bool full() const {
    return tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_acquire) > mask_;
  }
  bool push(const T& v) {
    const std::size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) > mask_) return false;
    buf_[t & mask_] = v;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  bool pop(T& out) {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    out = buf_[h & mask_];
    head_.store(h + 1, std::memory_order_release);
    return true;
  }

 private:
  std::size_t mask_;
  std::unique_ptr<T[]> buf_;
  alignas(kCacheLine) std::atomic<std::size_t> tail_{0};
  alignas(kCacheLine) std::atomic<std::size_t> head_{0};
};

}  // namespace mrc::io
