// PlaneLosses: the requester's plane-failure inference (D18, D59). Per plane it keeps the send time
// of the newest first transmission known delivered there and how many packets sent after it have
// been declared lost since. A run of losses with nothing delivered in between means the plane has
// failed — unless random loss makes such runs anyway: the run must be one that random loss at the
// QP's rate makes less often than 1e-5 (D59: 3 losses up to ~2 %, 4 at 5 %, never more than 8).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/time.hpp"

namespace mrc::engine {

class PlaneLosses {
 public:
  static constexpr std::uint32_t kMaxRun = 8;  ///< D59: the threshold is raised at most to this

  void init(std::uint32_t planes) {
    delivered_sent_.assign(planes, 0);
    first_lost_sent_.assign(planes, 0);
    losses_.assign(planes, 0);
  }
  /// A first transmission sent at `sent` on `plane` was delivered: the run there ends.
  void on_delivered(std::uint8_t plane, Time sent) {
    if (sent > delivered_sent_[plane]) {
      delivered_sent_[plane] = sent;
      losses_[plane] = 0;
    }
  }
  /// A packet sent at `sent` on `plane` was declared lost at `now`. True when that makes the plane
  /// failed: a run of threshold(base_run, rate()) losses (base_run 0: inference off) whose oldest
  /// was sent at least `min_silence` ago (D62: a plane whose queue is deeper than the others'
  /// delivers its "lost" packets soon after RACK gave up on them; a dead one stays silent); the run
  /// starts over. `rate` (the QP's random loss rate) is asked only when the run is long enough.
  template <class Rate>
  bool on_lost(std::uint8_t plane, Time sent, Time now, Duration min_silence, std::uint32_t base_run,
               Rate&& rate) {
    if (sent <= delivered_sent_[plane]) return false;  // sent before a delivery: says nothing new
    const std::uint32_t run = ++losses_[plane];
    if (run == 1 || sent < first_lost_sent_[plane]) first_lost_sent_[plane] = sent;
    if (base_run == 0 || run < base_run) return false;
    if (now < first_lost_sent_[plane] + min_silence) return false;
    if (run < threshold(base_run, rate())) return false;
    losses_[plane] = 0;
    return true;
  }
  /// The run of losses that random loss at `rate` makes less often than 1e-5, at least `base_run`,
  /// at most kMaxRun (D59).
  static std::uint32_t threshold(std::uint32_t base_run, double rate) {
    std::uint32_t k = base_run;
    double p = std::pow(rate, k);
    while (p >= 1e-5 && k < kMaxRun) {
      ++k;
      p *= rate;
    }
    return k;
  }
  std::uint32_t run(std::uint8_t plane) const { return losses_[plane]; }
  /// Send time of the newest first transmission known delivered on `plane`.
  Time delivered_sent(std::uint8_t plane) const { return delivered_sent_[plane]; }
  std::size_t heap_bytes() const {
    return (delivered_sent_.capacity() + first_lost_sent_.capacity()) * sizeof(Time) +
           losses_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::vector<Time> delivered_sent_;
  std::vector<Time> first_lost_sent_;  ///< send time of the run's oldest loss
  std::vector<std::uint32_t> losses_;
};

}  // namespace mrc::engine
