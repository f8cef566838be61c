// PathBlame: when a confirmed loss blames the EV it happened on (docs/decisions.md D43, D57, D58).
//
// Random loss hits every EV alike and must retire none; a dead or gray path loses more than the
// others. The reference is the QP's confirmed-loss rate over its recent first transmissions (a
// window of at most 2^16, halved as it fills). A loss joins the reference only once its EV delivers
// something sent after it (D57): a dead EV never does, so dead EVs cannot raise the rate the others
// are judged by. An EV is blamed on either of two tests (D58), each asking how rare its losses
// would be at the reference rate:
//   * streak (a dead path): its last s confirmed losses came with nothing delivered between them,
//     probability rate^(s-1), below 1/1000: the 2nd loss on a clean network, the 3rd at 1 % loss;
//   * count (a gray path): its losses since its window opened (at a loss; closed after 4096 packets
//     carried) in the packets it carried, about the QP's first transmissions over its active EVs:
//     Poisson tail below 1e-5, about 1/1000 over a QP's 128 EVs, since every EV is tested at each
//     of its losses.
// A burst on every plane at once (an overloaded receiver: since the EV's previous loss the QP lost
// more than half of what it sent) is one event for an EV, however many of its packets it took.
// One loss never blames. The per-EV state is EvManager::LossHistory, in the EV manager's side table.
#pragma once
#include <algorithm>
#include <cstdint>

#include "engine/ev_manager.hpp"

namespace mrc::engine {

class PathBlame {
 public:
  static constexpr double kStreakP = 1e-3;
  static constexpr double kCountP = 1e-5;

  /// A loss on an EV with history `h` was confirmed when the QP had sent `sent` first
  /// transmissions over `active` usable EVs. True when the EV is to be blamed (its window closes).
  bool on_confirmed_loss(EvManager::LossHistory& h, std::uint64_t sent, std::uint32_t active);
  /// The EV delivered again after confirmed losses (EvManager::on_delivered ended its streak): its
  /// last loss joins the reference.
  void on_survived(EvManager::LossHistory& h) {
    ++losses_;
    if (h.losses > 0 && h.counted < h.losses) ++h.counted;
  }
  /// D56: the QP sees random loss, at least 1e-4 of its recent first transmissions (two losses or
  /// more), so a resend may well be lost too.
  bool lossy(std::uint64_t sent) const {
    constexpr std::uint64_t kPacketsPerLoss = 10'000;
    return losses_ >= 2 && std::uint64_t{losses_} * kPacketsPerLoss >= sent - mark_;
  }
  /// The reference rate: losses survived per first transmission, over the recent window.
  double rate(std::uint64_t sent) const {
    return static_cast<double>(losses_) / static_cast<double>(std::max<std::uint64_t>(sent - mark_, 1));
  }

 private:
  std::uint64_t mark_ = 0;
  std::uint32_t losses_ = 0;
  std::uint32_t confirmed_ = 0;  ///< confirmed losses, all (only differences are used)
};

}  // namespace mrc::engine
