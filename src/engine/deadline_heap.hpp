// DeadlineHeap: one deadline per index (a QP's next timer), kept in an indexed min-heap ordered by
// (deadline, index): the earliest deadline is at the root, a change costs O(log n) and gathering the
// due ones O(due), instead of a scan of every QP (a host of a 128-host all-to-all has 254).
//
// Laid out for a simulator where thousands of endpoints each keep one, touched at random: the heap
// is 4-ary and holds each deadline next to its index, so a sift reads one or two lines a level and
// compares without looking anything up, and an index's deadline and heap position share one entry
// (the check that a deadline did not change, the common case, reads one line).
#pragma once
#include <cstdint>
#include <vector>

#include "common/time.hpp"

namespace mrc::engine {

class DeadlineHeap {
 public:
  /// A new index (the next one), with no deadline.
  void add_index() { slots_.push_back(Slot{}); }
  std::size_t indices() const { return slots_.size(); }
  /// The index's deadline; kNever: none (the index is not in the heap).
  Time get(std::uint32_t i) const { return slots_[i].at; }
  /// Sets the index's deadline (kNever removes it).
  void set(std::uint32_t i, Time t) {
    Slot& s = slots_[i];
    const Time old = s.at;
    if (t == old) return;
    s.at = t;
    if (t == kNever) {
      remove_at(s.pos);
      s.pos = kNoPos;
    } else if (old == kNever) {
      heap_.push_back(Node{t, i});
      up(static_cast<std::uint32_t>(heap_.size() - 1));
    } else {
      heap_[s.pos].at = t;
      if (t < old)
        up(s.pos);
      else
        down(s.pos);
    }
  }
  /// The earliest deadline, kNever if none.
  Time min() const { return heap_.empty() ? kNever : heap_[0].at; }
  std::size_t size() const { return heap_.size(); }
  /// Replaces `out` with the indices whose deadline is <= now, in no particular order. They are
  /// the heap's top subtree of such entries, gathered breadth first.
  void collect_due(Time now, std::vector<std::uint32_t>& out) const {
    out.clear();
    if (heap_.empty() || heap_[0].at > now) return;
    out.push_back(0);
    const auto n = static_cast<std::uint32_t>(heap_.size());
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::uint32_t first = kArity * out[j] + 1;
      for (std::uint32_t c = first; c < first + kArity && c < n; ++c)
        if (heap_[c].at <= now) out.push_back(c);
    }
    for (std::uint32_t& p : out) p = heap_[p].index;
  }

 private:
  static constexpr std::uint32_t kArity = 4;
  static constexpr std::uint32_t kNoPos = 0xFFFFFFFFu;
  struct Node {
    Time at;
    std::uint32_t index;
  };
  struct Slot {
    Time at = kNever;
    std::uint32_t pos = kNoPos;  ///< in heap_ (kNoPos: at == kNever)
  };
  static bool less(const Node& a, const Node& b) { return a.at != b.at ? a.at < b.at : a.index < b.index; }
  void place(std::uint32_t pos, const Node& n) {
    heap_[pos] = n;
    slots_[n.index].pos = pos;
  }
  // Sifts with a hole: each node passed over moves once, and the sifted one is written at the end.
  void up(std::uint32_t pos) {
    const Node n = heap_[pos];
    while (pos > 0) {
      const std::uint32_t parent = (pos - 1) / kArity;
      if (!less(n, heap_[parent])) break;
      place(pos, heap_[parent]);
      pos = parent;
    }
    place(pos, n);
  }
  void down(std::uint32_t pos) {
    const Node n = heap_[pos];
    const auto size = static_cast<std::uint32_t>(heap_.size());
    for (;;) {
      const std::uint32_t first = kArity * pos + 1;
      if (first >= size) break;
      std::uint32_t m = first;
      const std::uint32_t end = first + kArity < size ? first + kArity : size;
      for (std::uint32_t c = first + 1; c < end; ++c)
        if (less(heap_[c], heap_[m])) m = c;
      if (!less(heap_[m], n)) break;
      place(pos, heap_[m]);
      pos = m;
    }
    place(pos, n);
  }
  void remove_at(std::uint32_t pos) {
    const Node last = heap_.back();
    heap_.pop_back();
    if (pos == heap_.size()) return;  // it was the last
    // The last node fills the hole; it may belong above it or below.
    place(pos, last);
    if (pos > 0 && less(last, heap_[(pos - 1) / kArity]))
      up(pos);
    else
      down(pos);
  }

  std::vector<Node> heap_;
  std::vector<Slot> slots_;  ///< per index
};

}  // namespace mrc::engine
