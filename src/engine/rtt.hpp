// RttEstimator: a QP's round-trip measurements and the timing rules built on them (D43). The base
// RTT is the smallest sample (seeded with a hint until one arrives), srtt and rttvar are RFC 6298's
// smoothed RTT and variation, and the reordering is how far deliveries came later than RACK expected
// them, kept as a decaying maximum. From these: the reorder window RACK waits before declaring a
// packet lost, the tail-loss probe delay, and how long a reliability probe may go unanswered.
#pragma once
#include <algorithm>

#include "common/time.hpp"

namespace mrc::engine {

class RttEstimator {
 public:
  explicit RttEstimator(Duration base_hint) : base_(base_hint) {}

  /// A valid RTT sample. True when it lowered the base RTT.
  bool on_sample(Duration rtt) {
    const bool lower = rtt < base_;
    if (lower) base_ = rtt;
    if (srtt_ == 0) {
      srtt_ = rtt;
      rttvar_ = rtt / 2;
      return lower;
    }
    const Duration err = rtt > srtt_ ? rtt - srtt_ : srtt_ - rtt;
    rttvar_ = (3 * rttvar_ + err) / 4;
    srtt_ = (7 * srtt_ + rtt) / 8;
    return lower;
  }
  /// A delivery came `excess` after RACK's expectation (0: on time; a spurious retransmission
  /// passes the current window). Up at once with a quarter more as margin, down by 1/1024 of the
  /// difference per report (D64: a few hundred SACKs, tens of RTTs at full rate — RFC 8985 keeps
  /// its widened window for 16 recoveries; at 1/256 it fell back within one 4 MB message, and
  /// each fall cost another spurious retransmission).
  void on_reordering(Duration excess) {
    // In 1/1024 ns: in whole ns the step rounds to 0 below 1,024 ns and the window stuck there.
    const Duration want = (excess + excess / 4) << kReorderShift;
    if (want > reordering_)
      reordering_ = want;
    else
      reordering_ -= (reordering_ - want) >> kReorderShift;
  }

  Duration base() const { return base_; }
  Duration srtt() const { return srtt_; }  ///< 0 until the first sample
  Duration rttvar() const { return rttvar_; }
  Duration reordering() const { return reordering_ >> kReorderShift; }
  /// The paths queue: srtt is more than an eighth above the base RTT (D62, D63).
  bool queued() const { return srtt_ == 0 || srtt_ > base_ + base_ / 8; }

  /// RACK's reorder window, the largest of: a floor, an eighth of the base RTT while srtt stays
  /// within an eighth of the base (D62: paths without queues reorder by far less than RFC 8985's
  /// min_RTT/4 allows, and every repair waits this long; D64: not less, a SACK can wait behind one
  /// full packet at a port, and a sixteenth made the lossless ring's spurious retransmissions 15x),
  /// else a quarter; the reordering measured, at most one max(base, srtt); and the spread of RTTs
  /// that queueing adds (srtt - base + 4 rttvar: packets sprayed over queues of different depths).
  Duration reorder_window() const {
    const Duration spread = srtt_ > base_ ? srtt_ - base_ + 4 * rttvar_ : 4 * rttvar_;
    const Duration floor = queued() ? base_ / 4 : base_ / 8;
    return std::max({floor, std::min(reordering(), std::max(base_, srtt_)), spread});
  }
  /// D63: a packet whose path is alive waits, on queued paths, for the slowest recent SACK's RTT
  /// (`slowest`) plus the reorder window, but not beyond twice that RTT (a reordering measured on
  /// a very slow path must not double the wait); 0 on unqueued paths (no bound beyond RACK's).
  Duration slow_wait(Duration slowest, Duration window) const {
    // (queued() also holds before the first sample, when nothing is known of the paths.)
    return srtt_ != 0 && queued() ? std::min(slowest + window, 2 * slowest) : 0;
  }
  /// The newest packet's SACK is due after about srtt; allow the larger of the reorder window
  /// (`window`, which a tunable may override) and 4 rttvar beyond it. Before the first sample the
  /// queues on the way are unknown: kNoSampleBases base RTTs (D84).
  Duration tail_probe_delay(Duration window) const {
    if (srtt_ == 0) return kNoSampleBases * base_ + window;
    return std::max(srtt_, base_) + std::max(window, 4 * rttvar_);
  }
  /// D84: a fresh QP's first packets meet whatever queues the other QPs built (a 128-host
  /// all-to-all's first RTTs were 3.2-5.3 base RTTs); at 1.25 the probe resent them all.
  static constexpr Duration kNoSampleBases = 4;
  /// A probe is unanswered after 4 base RTTs, or after twice the RTO-style bound when RTTs vary (a
  /// software endpoint's scheduling jitter is many base RTTs: without this every probe "failed"
  /// and ASSUMED_BAD EVs never came back).
  Duration probe_wait() const { return std::max(4 * base_, 2 * (srtt_ + 4 * rttvar_)); }

 private:
  static constexpr unsigned kReorderShift = 10;
  Duration base_;
  Duration srtt_ = 0, rttvar_ = 0;
  Duration reordering_ = 0;  ///< in 1/1024 ns
};

}  // namespace mrc::engine
