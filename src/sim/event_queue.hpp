// A small, allocation-free (after warm-up) discrete-event queue for the simulators.
//
// Entries are PODs (time, seq, kind, index): `kind` says what happened and `index` names the object
// it happened to (a packet slot, a node, ...), so the queue holds no callbacks and allocates nothing
// per event. Events pop in (time, seq) order. push(time, kind, index) assigns seq in push order, so
// events scheduled for the same instant run in the order they were scheduled (FIFO tie-break);
// push_keyed() takes the caller's seq instead (the Fabric's tie-break key, which must not depend on
// push order: see fabric.hpp, parallel runs). A queue uses one of the two, not both.
//
// Implementation: a calendar queue. Time is cut into slots of 2^slot_shift time units; `cur_` is the
// slot being run. Events of slots <= cur_ are in `near_`, a short run sorted by (time, seq);
// events of the next kRingSlots - 1 slots wait, unordered, in per-slot singly linked lists (the
// ring); later ones in `far_`, a 4-ary min-heap (in the simulators: faults, far timers). When near_
// runs dry, cur_ moves to the earliest non-empty slot of the ring or far_ and that slot's events
// move into near_. So near_ stays small (the events of one slot) and a push is O(1) unless it is
// beyond the ring. A push into the past (slot <= cur_) simply joins near_: any push order is
// allowed and the order stays exact. The earliest non-empty slot of the ring and that of far_ are
// kept up to date (ring_next_, far_next_), so that moving on finds the next slot with one compare
// and the ring's bitmap is scanned once per loaded ring slot.
#pragma once
#include <algorithm>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/time.hpp"
#include "sim/mapped_array.hpp"

namespace mrc::sim {

struct QueuedEvent {
  Time time = 0;
  std::uint64_t seq = 0;    ///< push order (push) or the caller's tie-break key (push_keyed)
  std::uint32_t index = 0;  ///< caller-defined object index
  std::uint8_t kind = 0;    ///< caller-defined event kind
};

class EventQueue {
 public:
  /// Slots of 2^slot_shift time units (choose about the time between two events); the ring covers
  /// kRingSlots of them, which should reach past most events when they are scheduled.
  explicit EventQueue(unsigned slot_shift = 0)
      : shift_(slot_shift), near_(16), head_(kRingSlots), bits_(kRingWords) {
    std::fill_n(head_.data(), kRingSlots, kNil);
  }

  void reserve(std::size_t n) {
    ev_.reserve(n);
    next_.reserve(n);
  }
  bool empty() const { return near_head_ == near_end_ && in_ring_ == 0 && far_.empty(); }
  std::size_t size() const { return near_end_ - near_head_ + in_ring_ + far_.size(); }
  void clear() {
    near_head_ = near_end_ = 0;
    far_.clear();
    ev_.clear();
    next_.clear();
    free_ = kNil;
    std::fill_n(head_.data(), kRingSlots, kNil);
    bits_.assign(kRingWords, 0);
    in_ring_ = 0;
    cur_ = 0;
    ring_next_ = far_next_ = kNoSlot;
  }

  /// Schedules an event; returns its sequence number (usable as a generation stamp).
  std::uint64_t push(Time time, std::uint8_t kind, std::uint32_t index) {
    return push_keyed(time, kind, index, next_seq_++);
  }

  /// Schedules an event that pops in (time, seq) order with the given seq (unique among the events
  /// of one instant, or their order among themselves is unspecified); returns seq.
  std::uint64_t push_keyed(Time time, std::uint8_t kind, std::uint32_t index, std::uint64_t seq) {
    const Time slot = time >> shift_;
    const Time ahead = slot - cur_ - 1;  // huge when the slot is <= cur_
    const std::uint32_t n = free_;
    // The rest is a tail call: the usual path then saves no registers.
    if (ahead >= kRingSlots - 1 || n == kNil) [[unlikely]]
      return push_slow(time, kind, index, seq);
    // Field by field: a QueuedEvent built on the stack and copied whole is read back over its
    // narrow stores, which stalls store forwarding. First: the arguments' registers are then free
    // for the rest (no registers to save); the members are read after the byte store either way.
    QueuedEvent& d = ev_[n];
    d.time = time;
    d.seq = seq;
    d.index = index;
    d.kind = kind;
    const std::size_t r = slot & kRingMask;
    std::uint32_t* next = next_.data();
    free_ = next[n];
    next[n] = head_[r];
    head_[r] = n;
    bits_[r / 64] |= std::uint64_t{1} << (r % 64);
    ++in_ring_;
    ring_next_ = std::min(ring_next_, slot);
    return seq;
  }

  /// The earliest event; the queue must not be empty.
  const QueuedEvent& top() {
    settle();
    return near_[near_head_];
  }

  /// The i-th next event if it is among those of the current slot (else nullptr), without looking
  /// further: i = 0 is top() when that is cheap.
  const QueuedEvent* peek(std::size_t i) const {
    return near_head_ + i < near_end_ ? &near_[near_head_ + i] : nullptr;
  }

  /// Removes the earliest event into `out` if the queue has one due at or before `limit`; false
  /// (nothing removed) otherwise. One look at the queue for what empty(), top() and pop() would do.
  bool pop_due(Time limit, QueuedEvent& out) {
    if (near_head_ == near_end_) [[unlikely]] {
      if (in_ring_ == 0 && far_.empty()) return false;
      refill();
    }
    const QueuedEvent& e = near_[near_head_];
    if (e.time > limit) return false;
    out = e;
    if (++near_head_ == near_end_) near_head_ = near_end_ = 0;
    return true;
  }

  /// Removes and returns the earliest event; the queue must not be empty.
  QueuedEvent pop() {
    settle();
    const QueuedEvent out = near_[near_head_];
    if (++near_head_ == near_end_) near_head_ = near_end_ = 0;
    return out;
  }

 private:
  static constexpr std::size_t kRingSlots = 1u << 16;
  static constexpr std::size_t kRingMask = kRingSlots - 1;
  static constexpr std::size_t kRingWords = kRingSlots / 64;  ///< of bits_
  static constexpr std::uint32_t kNil = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::size_t kInsertionSortMax = 32;
  static constexpr Time kNoSlot = std::numeric_limits<Time>::max();  ///< ring_next_, far_next_: none

  static bool before(const QueuedEvent& a, const QueuedEvent& b) {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }

  // An implicit 4-ary min-heap on (time, seq) in one vector.
  class Heap {
   public:
    bool empty() const { return v_.empty(); }
    std::size_t size() const { return v_.size(); }
    void clear() { v_.clear(); }
    const QueuedEvent& top() const { return v_.front(); }
    void push(const QueuedEvent& e) {
      std::size_t pos = v_.size();
      v_.push_back(e);
      while (pos > 0) {
        const std::size_t parent = (pos - 1) / kArity;
        if (!before(e, v_[parent])) break;
        v_[pos] = v_[parent];
        pos = parent;
      }
      v_[pos] = e;
    }
    QueuedEvent pop() {
      const QueuedEvent out = v_.front();
      const QueuedEvent last = v_.back();
      v_.pop_back();
      const std::size_t n = v_.size();
      if (n == 0) return out;
      std::size_t pos = 0;
      for (;;) {
        const std::size_t first = pos * kArity + 1;
        if (first >= n) break;
        std::size_t best = first;
        const std::size_t end = first + kArity < n ? first + kArity : n;
        for (std::size_t c = first + 1; c < end; ++c) {
          if (before(v_[c], v_[best])) best = c;
        }
        if (!before(v_[best], last)) break;
        v_[pos] = v_[best];
        pos = best;
      }
      v_[pos] = last;
      return out;
    }

   private:
    static constexpr std::size_t kArity = 4;
    std::vector<QueuedEvent> v_;
  };

  void near_append(const QueuedEvent& e) {
    if (near_end_ == near_.size()) [[unlikely]]
      near_.resize(std::max<std::size_t>(16, 2 * near_.size()));
    near_[near_end_++] = e;
  }

  // Insertion into the sorted run near_[near_head_, near_end_): a slot holds a few events.
  void near_insert(const QueuedEvent& e) {
    near_append(e);
    std::size_t j = near_end_ - 1;
    for (; j > near_head_ && before(e, near_[j - 1]); --j) near_[j] = near_[j - 1];
    near_[j] = e;
  }

  // A push beyond the ring or into the past, or into the ring with no free node.
  [[gnu::noinline]] std::uint64_t push_slow(Time time, std::uint8_t kind, std::uint32_t index,
                                            std::uint64_t seq) {
    const Time slot = time >> shift_;
    if (slot - cur_ - 1 < kRingSlots - 1) {
      grow_nodes();
      return push_keyed(time, kind, index, seq);
    }
    if (slot > cur_) {
      far_.push(QueuedEvent{time, seq, index, kind});
      far_next_ = std::min(far_next_, slot);
    } else {
      near_insert(QueuedEvent{time, seq, index, kind});
    }
    return seq;
  }

  [[gnu::noinline]] void grow_nodes() {
    free_ = static_cast<std::uint32_t>(ev_.size());
    ev_.emplace_back();
    next_.push_back(kNil);
  }

  // Makes near_ non-empty.
  void settle() {
    assert(!empty());
    if (near_head_ == near_end_) [[unlikely]]
      refill();
  }

  // near_ is empty: moves cur_ to the earliest non-empty slot (of the ring, far_ or both) and
  // loads its events (out of line: the fast path in settle() must stay cheap to inline).
  [[gnu::noinline]] void refill() {
    const Time slot = std::min(ring_next_, far_next_);
    cur_ = slot;
    // (in_ring_ and far_ say whether there is a slot: kNoSlot is also a slot number, for times near
    // the end of time with slot_shift 0.)
    if (in_ring_ > 0 && ring_next_ == slot) {
      const std::size_t r = slot & kRingMask;
      bits_[r / 64] &= ~(std::uint64_t{1} << (r % 64));
      const std::uint32_t n = head_[r];
      head_[r] = kNil;
      assert(n != kNil && near_head_ == 0 && near_end_ == 0);
      if (next_[n] == kNil) {  // the usual slot: one event, nothing to sort
        const std::uint32_t free = free_;
        next_[n] = free;
        free_ = n;
        near_end_ = 1;
        --in_ring_;
        near_[0] = ev_[n];  // last: its byte store could alias the members (near_ is >= 16 long)
      } else {
        load_list(n);
      }
      if (in_ring_ > 0) {
        ring_next_ = next_ring_slot();
        // The events of that slot were written long ago (a link latency): fetch them while these
        // run. The links are in the small next_ array, so walking them does not wait on ev_.
        for (std::uint32_t m = head_[ring_next_ & kRingMask]; m != kNil; m = next_[m])
          __builtin_prefetch(&ev_[m]);
      } else {
        ring_next_ = kNoSlot;
      }
    }
    if (!far_.empty() && far_next_ == slot) load_far(slot);
  }

  // Moves the events of ring list n (two or more, taken off its slot) into the empty near_, sorted.
  [[gnu::noinline]] void load_list(std::uint32_t n) {
    std::uint32_t* next = next_.data();
    // The list is newest first: count it (its links are in the small next_ array), then fill near_
    // from the back, so that it is in push order. In locals: stores into near_ could alias the
    // members, which the compiler would then store and reload every event.
    std::size_t count = 0;
    for (std::uint32_t m = n; m != kNil; m = next[m]) ++count;
    if (count > near_.size()) [[unlikely]]
      near_.resize(std::max<std::size_t>(16, std::bit_ceil(count)));
    QueuedEvent* near = near_.data();
    const QueuedEvent* ev = ev_.data();
    std::uint32_t free = free_;
    for (std::size_t i = count; i > 0;) {
      near[--i] = ev[n];
      const std::uint32_t after = next[n];
      next[n] = free;
      free = n;
      n = after;
    }
    near_end_ = count;
    free_ = free;
    in_ring_ -= count;
    // Push order, then sorted by (time, seq): an insertion sort for the usual few events (push
    // order is nearly sorted when seq is the push order), std::sort for a crowded slot (keyed
    // events of one instant arrive in any order: many hosts starting at once would make the
    // insertion sort quadratic). seq is unique, so both give the one (time, seq) order.
    if (count > kInsertionSortMax) {
      sort_crowded(near, near + count);
    } else {
      for (std::size_t i = 1; i < count; ++i) {
        const QueuedEvent e = near[i];
        std::size_t j = i;
        for (; j > 0 && before(e, near[j - 1]); --j) near[j] = near[j - 1];
        near[j] = e;
      }
    }
  }

  // Out of line: std::sort's frame would make every load_list save registers. A lambda, not the
  // function: std::sort given a function pointer calls it for every comparison.
  [[gnu::noinline]] static void sort_crowded(QueuedEvent* first, QueuedEvent* last) {
    std::sort(first, last, [](const QueuedEvent& a, const QueuedEvent& b) { return before(a, b); });
  }

  // Moves far_'s events of `slot` (= cur_) into near_ (after the ring's, if any), sorted.
  [[gnu::noinline]] void load_far(Time slot) {
    while (!far_.empty() && (far_.top().time >> shift_) == slot) near_insert(far_.pop());
    far_next_ = far_.empty() ? kNoSlot : far_.top().time >> shift_;
  }

  // The first slot after cur_ with a ring entry (the ring must not be empty).
  Time next_ring_slot() const {
    const std::size_t start = (cur_ + 1) & kRingMask;
    std::size_t w = start / 64;
    std::uint64_t word = bits_[w] & (~std::uint64_t{0} << (start % 64));
    for (std::size_t i = 0; word == 0; ++i) {
      w = (w + 1) % kRingWords;  // a constant: a mask, not a division
      word = bits_[w];
      // Wrapped around to the start word: only its bits below `start` are left.
      if (i + 1 == kRingWords) word &= (std::uint64_t{1} << (start % 64)) - 1;
    }
    const std::size_t r = w * 64 + static_cast<std::size_t>(std::countr_zero(word));
    return cur_ + 1 + ((r - start) & kRingMask);
  }

  unsigned shift_;
  std::vector<QueuedEvent> near_;  ///< [near_head_, near_end_): events of slots <= cur_, sorted
  std::size_t near_head_ = 0, near_end_ = 0;
  Heap far_;
  std::vector<QueuedEvent> ev_;      ///< ring entries (free ones are chained from free_) ...
  std::vector<std::uint32_t> next_;  ///< ... and their links, apart: they are walked ahead
  /// Per ring slot: first node, kNil = empty. 256 KB, in a mapping of its own: from the heap it
  /// would take a small run into one more 2 MB huge page (sim/heap.hpp).
  MappedArray<std::uint32_t> head_;
  std::vector<std::uint64_t> bits_;  ///< per ring slot: non-empty
  std::uint32_t free_ = kNil;
  std::size_t in_ring_ = 0;
  Time cur_ = 0;
  Time ring_next_ = kNoSlot;  ///< the earliest non-empty ring slot (> cur_), kNoSlot if none
  Time far_next_ = kNoSlot;   ///< the slot of far_'s top, kNoSlot if far_ is empty
  std::uint64_t next_seq_ = 0;
};

}  // namespace mrc::sim
