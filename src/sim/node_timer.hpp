// The timer rule of a simulated node, shared by PathNet and Fabric: one live timer event per node.
// A deadline that moved later keeps the queued event (it fires early, sees the deadline is not due
// and re-arms), so the common "RTO pushed back on every ACK" pattern costs no queue traffic; a
// deadline that moved earlier queues a new event and the old one becomes stale (recognised by its
// sequence number). A node whose deadline is still due right after on_timer() ran gets the next
// nanosecond, so a stuck deadline cannot freeze simulated time.
#pragma once
#include <cstdint>

#include "common/time.hpp"

namespace mrc::sim {

struct NodeTimer {
  std::uint64_t at = kNever;  ///< queue time of the live event (kNever: none)
  std::uint64_t seq = 0;      ///< its sequence number (valid while at != kNever)
  Time fired_at = kNever;     ///< ns of the node's last on_timer()

  /// The queue time of a new event for the node's `deadline` (ns) at `now_ns` (= `now_q` in queue
  /// units, `per_ns` of them a nanosecond), or kNever when the live event comes early enough. The
  /// caller pushes the event and keeps its sequence number in `seq`.
  std::uint64_t arm(Time deadline, Time now_ns, std::uint64_t now_q, std::uint64_t per_ns) {
    if (deadline == kNever) return kNever;
    std::uint64_t t = deadline * per_ns;
    if (deadline <= now_ns) t = fired_at == now_ns ? (now_ns + 1) * per_ns : now_q;
    if (at <= t) return kNever;
    at = t;
    return t;
  }
  /// Timer event `s` fired: true if it is the live one (which it then stops being).
  bool fire(std::uint64_t s) {
    if (at == kNever || s != seq) return false;  // superseded
    at = kNever;
    return true;
  }
};

}  // namespace mrc::sim
