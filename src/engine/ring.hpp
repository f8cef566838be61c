// Ring<T>: a FIFO in one array that grows only when asked. A Qp's send queue, receive-WR queue,
// control-packet queue and failover second-copy queue are Rings (the PSN-indexed record of sent
// packets is not a FIFO and has its own type).
//
// An element keeps its slot (its index in the array) while it is queued, so another record can
// name it (the send queue's slot is TxRec::wqe), until reserve() repacks a grown ring from slot 0.
// Nothing is allocated until the first reserve(): a QP that never uses a queue holds no storage
// for it. The capacity need not be a power of two (the send queue holds exactly sq_depth WRs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mrc::engine {

template <class T>
class Ring {
 public:
  /// Makes room for `capacity` elements (no-op when there is already that much), keeping the queued
  /// ones in order; when it reallocates, the head moves to slot 0.
  void reserve(std::uint32_t capacity) {
    if (capacity <= cap()) return;
    std::vector<T> grown(capacity);
    for (std::uint32_t i = 0; i < count_; ++i) grown[i] = (*this)[i];
    buf_.swap(grown);
    cap_ = capacity;
    head_ = 0;
  }
  bool allocated() const { return !buf_.empty(); }
  std::uint32_t capacity() const { return cap(); }
  std::uint32_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == cap(); }

  /// i-th element from the head (i < size()).
  T& operator[](std::uint32_t i) { return buf_[wrap(head_ + i)]; }
  const T& operator[](std::uint32_t i) const { return buf_[wrap(head_ + i)]; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }

  /// Appends `v` (the ring must not be full) and returns its slot.
  std::uint32_t push_back(const T& v) {
    const std::uint32_t s = wrap(head_ + count_);
    buf_[s] = v;
    ++count_;
    return s;
  }
  void pop_front() {
    head_ = next_slot(head_);
    --count_;
  }
  /// Removes the i-th element, the later ones moving up one place.
  void erase(std::uint32_t i) {
    for (std::uint32_t j = i; j + 1 < count_; ++j) (*this)[j] = (*this)[j + 1];
    --count_;
  }
  /// Empties the ring; the storage stays and the next element goes to the head's slot.
  void clear() { count_ = 0; }

  // Slots: stable names of queued elements.
  std::uint32_t head_slot() const { return head_; }
  /// Where the next push_back goes (one past the newest element).
  std::uint32_t tail_slot() const { return wrap(head_ + count_); }
  std::uint32_t next_slot(std::uint32_t s) const { return s + 1 == cap() ? 0 : s + 1; }
  T& slot(std::uint32_t s) { return buf_[s]; }
  const T& slot(std::uint32_t s) const { return buf_[s]; }

  std::size_t memory_bytes() const { return buf_.capacity() * sizeof(T); }

 private:
  std::uint32_t cap() const { return cap_; }
  /// i < 2 * capacity: a compare instead of a division.
  std::uint32_t wrap(std::uint32_t i) const { return i >= cap() ? i - cap() : i; }

  std::vector<T> buf_;
  std::uint32_t cap_ = 0;  ///< buf_.size(), kept so that no index computes it
  std::uint32_t head_ = 0, count_ = 0;
};

}  // namespace mrc::engine
