// A small, allocation-free (after warm-up) discrete-event queue for the simulators.
//
// Entries are PODs (time, seq, kind, index): `kind` says what happened and `index` names the object
// it happened to (a packet slot, a node, ...), so the queue holds no callbacks and allocates nothing
// per event. Events pop in (time, seq) order; seq is assigned at push, so events scheduled for the
// same instant run in the order they were scheduled (deterministic FIFO tie-break).
//
// Implementation: an implicit 4-ary min-heap in one vector (shallower than a binary heap, and the
// four children of a node share a cache line or two).
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/time.hpp"

namespace mrc::sim {

struct QueuedEvent {
  Time time = 0;
  std::uint64_t seq = 0;    ///< unique, increasing in push order
  std::uint32_t index = 0;  ///< caller-defined object index
  std::uint8_t kind = 0;    ///< caller-defined event kind
};

class EventQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  void clear() { heap_.clear(); }

  /// Schedules an event; returns its sequence number (usable as a generation stamp).
  std::uint64_t push(Time time, std::uint8_t kind, std::uint32_t index) {
    const QueuedEvent e{time, next_seq_++, index, kind};
    std::size_t pos = heap_.size();
    heap_.push_back(e);
    while (pos > 0) {
      const std::size_t parent = (pos - 1) / kArity;
      if (!before(e, heap_[parent])) break;
      heap_[pos] = heap_[parent];
      pos = parent;
    }
    heap_[pos] = e;
    return e.seq;
  }

  /// The earliest event; the queue must not be empty.
  const QueuedEvent& top() const {
    assert(!heap_.empty());
    return heap_.front();
  }

  /// Removes and returns the earliest event; the queue must not be empty.
  QueuedEvent pop() {
    assert(!heap_.empty());
    const QueuedEvent out = heap_.front();
    const QueuedEvent last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return out;
    std::size_t pos = 0;
    for (;;) {
      const std::size_t first = pos * kArity + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = first + kArity < n ? first + kArity : n;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (before(heap_[c], heap_[best])) best = c;
      }
      if (!before(heap_[best], last)) break;
      heap_[pos] = heap_[best];
      pos = best;
    }
    heap_[pos] = last;
    return out;
  }

 private:
  static constexpr std::size_t kArity = 4;
  static bool before(const QueuedEvent& a, const QueuedEvent& b) {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }

  std::vector<QueuedEvent> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace mrc::sim
