// SentPackets: the requester's record of every PSN it has sent and not yet retired, [una, nxt)
// (the sent-packet tracker, as ngtcp2's rtb is QUIC's). One TxRec per PSN in a ring indexed by
// PSN modulo its size, which starts at 16 records and doubles while packets in flight need it (up
// to the window); and the list of the packets in flight in send order, oldest
// first, linked by PSN, which RACK's loss detection, the RTO and the tail-loss probe walk from
// its ends. A record stays in the ring after it leaves the list (acknowledged or declared lost)
// until the cumulative acknowledgement retires its PSN. A record is 32 bytes: the links are
// 16-bit PSN distances (the window is at most 255 x 128 PSNs), the payload length 16 bits (the
// PMTU is at most 4096) and the byte offset in the message is not kept (its PSN's distance from
// the WR's first PSN times the PMTU).
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/psn.hpp"
#include "common/time.hpp"
#include "engine/ev_manager.hpp"

namespace mrc::engine {

/// TxRec::flags
/// kOnlyLatest: every earlier copy was trimmed (a trim NACK answered it), so only the latest can
/// arrive and its send time times the SACK (D81).
enum TxFlags : std::uint8_t { kSacked = 1, kInFlight = 2, kLost = 4, kValid = 8, kOnlyLatest = 16 };

struct TxRec {
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;  ///< no PSN (list ends)
  Time sent = 0;
  std::uint32_t wqe = 0;  ///< slot of its WR in the send queue
  /// ns from the first transmission to the latest (saturating; 0 while tx_count is 1): a SACK that
  /// says the first copy arrived gives an RTT sample even after a retransmission (D63).
  std::uint32_t since_first = 0;
  std::uint16_t len = 0;  ///< payload bytes
  /// Neighbours in the in-flight list as PSN distances from this one (SentPackets; 0: none).
  std::int16_t prev = 0, next = 0;
  std::uint16_t ev_slot = EvManager::kNone;
  /// EV of a transmission declared lost without a NACK. Its loss counts against the EV (PathBlame)
  /// only once a SACK acknowledges the retransmission (D57): a lost SACK must not kill a path.
  std::uint16_t suspect_slot = EvManager::kNone;
  std::uint8_t tx_count = 0;
  std::uint8_t flags = 0;          ///< TxFlags
  std::uint8_t lost_cause = 0;     ///< Requester::LossCause of the pending retransmission
  std::uint8_t suspect_cause = 0;  ///< EvCause
};
static_assert(sizeof(TxRec) == 32);

class SentPackets {
 public:
  static constexpr std::uint32_t kNone = TxRec::kNone;

  /// The most records a ring may hold: the list's 16-bit distances reach no further.
  static constexpr std::uint32_t kMaxSlots = 1u << 15;

  /// Allocates `slots` records (a power of two); the ring may grow to `max_slots` (one too, at
  /// most kMaxSlots).
  void init(std::uint32_t slots, std::uint32_t max_slots) {
    assert(max_slots <= kMaxSlots);
    ring_.assign(slots, TxRec{});
    mask_ = slots - 1;
    max_ = max_slots;
  }
  bool allocated() const { return !ring_.empty(); }
  std::uint32_t slots() const { return static_cast<std::uint32_t>(ring_.size()); }
  /// The most slots the window can need: no PSN this far below nxt can still be tracked.
  std::uint32_t max_slots() const { return max_; }
  /// The record of `psn` (in [una, nxt)).
  TxRec& rec(std::uint32_t psn) { return ring_[psn & mask_]; }
  const TxRec& rec(std::uint32_t psn) const { return ring_[psn & mask_]; }
  /// Doubles the ring, keeping the records of [una, nxt). The caller's window keeps it within
  /// max_slots.
  void grow(std::uint32_t una, std::uint32_t nxt) {
    const auto slots = static_cast<std::uint32_t>(ring_.size() * 2);
    std::vector<TxRec> g(slots);
    for (std::uint32_t psn = una; psn != nxt; psn = psn_add(psn, 1)) g[psn & (slots - 1)] = rec(psn);
    ring_.swap(g);
    mask_ = slots - 1;
  }

  // The in-flight list, in send order. A record's links are the distances to its neighbours'
  // PSNs, all in [una, nxt), which is at most kMaxSlots PSNs wide: the distance's low 16 bits are
  // PSN subtraction's, and adding them to a PSN indexes the ring right without the 24-bit wrap.
  bool none_in_flight() const { return head_ == kNone; }
  std::uint32_t oldest() const { return head_; }  ///< PSN, kNone if none
  std::uint32_t newest() const { return tail_; }  ///< PSN, kNone if none
  /// The packet sent after `psn` (in the list), kNone if it is the newest.
  std::uint32_t next(std::uint32_t psn) const {
    const std::int32_t d = rec(psn).next;
    return d == 0 ? kNone : psn_add(psn, d);
  }
  /// Appends `psn` as the newest packet in flight.
  void push(std::uint32_t psn) {
    TxRec& r = rec(psn);
    r.next = 0;
    if (tail_ != kNone) {
      const auto d = static_cast<std::int16_t>(psn - tail_);
      r.prev = static_cast<std::int16_t>(-d);
      rec(tail_).next = d;
    } else {
      r.prev = 0;
      head_ = psn;
    }
    tail_ = psn;
  }
  /// Takes `psn` (in the list) out of it.
  void remove(std::uint32_t psn) {
    TxRec& r = rec(psn);
    const std::int32_t p = r.prev, n = r.next;
    if (p != 0)
      rec(psn + p).next = static_cast<std::int16_t>(n == 0 ? 0 : n - p);
    else
      head_ = n == 0 ? kNone : psn_add(psn, n);
    if (n != 0)
      rec(psn + n).prev = static_cast<std::int16_t>(p == 0 ? 0 : p - n);
    else
      tail_ = p == 0 ? kNone : psn_add(psn, p);
    r.prev = r.next = 0;
  }
  /// Forgets the whole list and the lost packets waiting (the QP failed); the records stay.
  void clear_in_flight() {
    head_ = tail_ = kNone;
    lost_ = 0;
  }

  // The retransmission queue: records flagged kLost, taken oldest PSN first ("oldest gap first")
  // through a cursor below which no record is lost, so finding the next costs no rescan.
  /// From `psn` on (RTS: the first PSN) nothing is lost.
  void start(std::uint32_t psn) { scan_ = psn; }
  /// Takes `psn` (in flight) out of the list as lost: it waits for its retransmission.
  void mark_lost(std::uint32_t psn) {
    remove(psn);
    TxRec& r = rec(psn);
    r.flags = static_cast<std::uint8_t>((r.flags & ~kInFlight) | kLost);
    ++lost_;
    if (psn_lt(psn, scan_)) scan_ = psn;
  }
  /// A lost record no longer waits: acknowledged after all, or resent (the caller clears kLost).
  void lost_done() {
    if (lost_ > 0) --lost_;
  }
  /// Lost packets waiting for their retransmission.
  std::uint32_t lost() const { return lost_; }
  /// The oldest lost PSN in [una, nxt); false (and the count reset) when there is none.
  bool next_lost(std::uint32_t una, std::uint32_t nxt, std::uint32_t& psn) {
    if (psn_lt(scan_, una)) scan_ = una;
    for (std::uint32_t p = scan_; psn_lt(p, nxt); p = psn_add(p, 1)) {
      if (rec(p).flags & kLost) {
        scan_ = p;
        psn = p;
        return true;
      }
    }
    scan_ = nxt;
    lost_ = 0;  // defensive: nothing was found
    return false;
  }

  std::size_t memory_bytes() const { return ring_.capacity() * sizeof(TxRec); }

 private:
  std::vector<TxRec> ring_;
  std::uint32_t mask_ = 0;
  std::uint32_t max_ = 0;
  std::uint32_t head_ = kNone, tail_ = kNone;
  std::uint32_t lost_ = 0;  ///< records flagged kLost
  std::uint32_t scan_ = 0;  ///< no lost record below this PSN
};

}  // namespace mrc::engine
