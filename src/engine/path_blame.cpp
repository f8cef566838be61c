#include "engine/path_blame.hpp"

#include <algorithm>
#include <cmath>

namespace mrc::engine {

bool PathBlame::on_confirmed_loss(EvManager::LossHistory& h, std::uint64_t sent, std::uint32_t active) {
  const auto sent32 = static_cast<std::uint32_t>(sent);
  const auto confirmed16 = static_cast<std::uint16_t>(++confirmed_);
  if (h.streak != 0 || h.losses != 0) {
    // A burst: since this EV's last counted loss, the QP lost more than half of what it sent (an
    // overloaded receiver drops whatever comes, on every plane). Its losses there are one event.
    const std::uint32_t span_sent = sent32 - h.sent_at;
    const std::uint32_t span_lost = static_cast<std::uint16_t>(confirmed16 - h.confirmed_at - 1);
    if (2 * span_lost > span_sent) return false;
  }
  h.sent_at = sent32;
  h.confirmed_at = confirmed16;
  if (h.streak < 0xFFFF) ++h.streak;  // until the EV delivers again (EvManager::on_delivered)
  if (sent - mark_ > (1u << 16)) {    // keep the rate recent: halve the window
    mark_ += (sent - mark_) / 2;
    losses_ = (losses_ + 1) / 2;
  }
  const double carried = static_cast<double>(sent32 - h.since) / std::max<std::uint32_t>(active, 1) + 1.0;
  if (h.losses == 0 || carried > 4096.0) {
    h.losses = 0;
    h.counted = 0;
    h.since = sent32;
  }
  if (h.losses < 0xFFFF) ++h.losses;
  const double others = losses_ > h.counted ? losses_ - h.counted : 0;
  const double rate = others / static_cast<double>(std::max<std::uint64_t>(sent - mark_, 1));
  bool blame = false;
  // A dead path's signature: `streak` losses in a row with nothing delivered between, which random
  // loss at the reference rate gives with probability rate^(streak - 1).
  if (h.streak >= 2) blame = std::pow(rate, h.streak - 1) < kStreakP;
  // A gray path: more losses in the packets the EV carried since its window opened than the
  // reference rate explains: P(Poisson(lambda) >= k), k = losses after the first.
  if (!blame && h.losses >= 2) {
    // The reference without any of this EV's losses, counted or still in its streak.
    const double others_all = losses_ - std::min<std::uint32_t>(h.counted + h.streak, losses_);
    const double lambda =
        carried * others_all / static_cast<double>(std::max<std::uint64_t>(sent - mark_, 1));
    const std::uint32_t k = h.losses - 1;
    double term = std::exp(-lambda), below = 0;
    for (std::uint32_t i = 0; i < k; ++i) {
      below += term;
      term *= lambda / (i + 1);
    }
    blame = 1.0 - below < kCountP;
  }
  if (!blame) return false;
  h.losses = 0;
  h.counted = 0;
  h.streak = 0;
  return true;
}

}  // namespace mrc::engine
