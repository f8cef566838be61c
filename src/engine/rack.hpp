// Rack: the requester's time-based loss detection (RFC 8985 RACK as the model, D43). It keeps the
// send time and RTT of the newest packet known delivered (by send time); a packet still in flight
// that was sent before it is lost once it is a reorder window later than that RTT would have
// brought its SACK; until then the reorder timer waits for the oldest such packet. Packets sent
// after the newest delivered one are the tail probe's job, not RACK's.
//
// Sprayed over paths with queues of different depths, the newest packet delivered is usually one
// that took a short path, so its RTT understates how long the others take (D63). Rack therefore
// also keeps the largest RTT of recent SACKs, and the caller may hold a packet whose path is known
// alive to that slower expectation.
#pragma once
#include <algorithm>
#include <cstdint>

#include "common/time.hpp"
#include "engine/sent_packets.hpp"
#include "engine/windowed_max.hpp"

namespace mrc::engine {

class Rack {
 public:
  /// A packet sent at `sent` is known delivered, `rtt` after it left (SACK coalescing included).
  /// Only a newer send time moves the reference.
  void on_delivered(Time sent, Duration rtt) {
    if (sent > sent_) {
      sent_ = sent;
      rtt_ = rtt;
    }
  }
  /// A reliability probe sent at `sent` was answered `rtt` after it left: everything sent before it
  /// should have been reported by now, so its send time becomes the reference. Its RTT does not
  /// (D83): a probe is a small control packet, sent and switched ahead of data, so it overtakes
  /// the data sent just before it (4 KiB serialised at each hop, SACK coalescing), and a data
  /// packet held to the probe's RTT was declared lost while still on its way. The reference keeps
  /// the newest data packet's RTT when that is longer.
  void on_probe_answered(Time sent, Duration rtt) {
    if (sent > sent_) {
      sent_ = sent;
      rtt_ = std::max(rtt_, rtt);
    }
  }
  /// An acknowledgement at `now` reported packets whose newest first transmission left at
  /// `newest_sent`: RACK's reference, and (coalescing included) a sample of the largest RTT of the
  /// last `window`, how long the slowest path in use takes (D63).
  void on_ack(Time newest_sent, Time now, Duration window) {
    on_delivered(newest_sent, now - newest_sent);
    slowest_.update(now, now - newest_sent, window);
  }
  Duration slowest_rtt() const { return slowest_.get(); }

  /// How far a first transmission sent at `sent` and delivered `rtt` after it came behind
  /// RACK's expectation: > 0 when a later-sent packet had been reported before it (reordering the
  /// reorder window must cover), else 0.
  Duration excess(Time sent, Duration rtt) const { return sent < sent_ && rtt > rtt_ ? rtt - rtt_ : 0; }

  /// Declares lost (calls `lost(psn)`, which must take the PSN out of flight) every packet of
  /// `sent` that RACK can judge and whose time is up at `now`, oldest first; sets the reorder
  /// timer for the first one whose time is not up yet. A packet's time is up a reorder window after
  /// the newest delivered packet's RTT, or, when `alive(rec)` says its path has delivered a packet
  /// sent after it, not before `slow_wait` (0: no such bound).
  template <class Lost, class Alive>
  void detect(const SentPackets& sent, Duration reorder_window, Duration slow_wait, Time now, Lost&& lost,
              Alive&& alive) {
    timer_ = kNever;
    const Duration wait = rtt_ + reorder_window;
    while (!sent.none_in_flight()) {
      const std::uint32_t psn = sent.oldest();
      const TxRec& r = sent.rec(psn);
      if (r.sent >= sent_) break;  // nothing sent after it is known delivered
      const Duration w = slow_wait > wait && alive(r) ? slow_wait : wait;
      if (r.sent + w > now) {
        timer_ = r.sent + w;
        break;
      }
      lost(psn);
    }
  }
  template <class Lost>
  void detect(const SentPackets& sent, Duration reorder_window, Time now, Lost&& lost) {
    detect(sent, reorder_window, 0, now, lost, [](const TxRec&) { return false; });
  }

  /// When detect() must run again (kNever: no packet waits for RACK).
  Time timer() const { return timer_; }
  Time newest_delivered_sent() const { return sent_; }
  Duration rtt() const { return rtt_; }

 private:
  Time sent_ = 0;        ///< send time of the newest packet known delivered
  Duration rtt_ = 0;     ///< its RTT
  Time timer_ = kNever;  ///< reorder timer: the oldest packet sent before sent_ is lost then
  WindowedMax slowest_;  ///< recent SACKs' largest RTT (D63)
};

}  // namespace mrc::engine
