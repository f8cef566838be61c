// Impairment of received packets, applied by the UDP endpoint before Endpoint::receive. It stands
// in for netem (not built into this kernel) and needs no privileges, so it also works on loopback.
//
// Decisions (drop, duplicate, trim, reorder, jitter) come from one seeded RNG, in packet order, so
// a given seed and arrival sequence always gives the same fates. Delayed and reordered packets are
// copied into a preallocated hold pool; nothing is allocated per packet.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.hpp"
#include "common/time.hpp"
#include "engine/types.hpp"

namespace mrc::io {

struct ImpairConfig {
  double drop = 0;          ///< probability [0,1] a packet is dropped
  double duplicate = 0;     ///< probability it is delivered twice
  double reorder = 0;       ///< probability it is held back by `reorder_delay` (others overtake it)
  double trim = 0;          ///< probability a data packet is cut to its header stack (RxMeta.trimmed)
  double trim_lasthop = 0;  ///< same, marked RxMeta.trimmed_lasthop
  Duration delay = 0;       ///< fixed extra delay for every packet
  Duration jitter = 0;      ///< plus uniform [0, jitter)
  Duration reorder_delay = 50'000;
  std::uint64_t seed = 1;
  std::uint32_t hold_slots = 4096;  ///< packets that can be held at once (delay / reorder)

  bool enabled() const {
    return drop > 0 || duplicate > 0 || reorder > 0 || trim > 0 || trim_lasthop > 0 || delay > 0 ||
           jitter > 0;
  }
  /// Packets may be held (needs the hold pool).
  bool holds() const { return reorder > 0 || delay > 0 || jitter > 0; }
};

/// The longest delay, jitter or reorder_delay parse_impair takes: one hour.
inline constexpr Duration kMaxImpairDelay = 3'600'000'000'000ull;

/// Parses "key=value" items separated by ',' ';' whitespace or newlines ('#' starts a comment).
/// Keys: drop, dup (duplicate), reorder, trim, trim_lasthop: percent, "5" or "5%";
/// delay, jitter, reorder_delay: a duration "10us", "2ms", "500ns" (no unit = microseconds), at most
/// kMaxImpairDelay;
/// seed, hold_slots: integers. Unknown keys and bad values fail with a message in `err`.
bool parse_impair(std::string_view spec, ImpairConfig& out, std::string& err);
/// The largest file load_impair_file() reads (a line of key=value pairs).
inline constexpr std::size_t kImpairFileMaxBytes = std::size_t{1} << 20;
/// Reads a small key=value file (same syntax as parse_impair); a missing, non-regular or larger
/// file is refused with the reason.
bool load_impair_file(const std::string& path, ImpairConfig& out, std::string& err);
/// The configuration in parse_impair syntax.
std::string to_string(const ImpairConfig& c);

struct ImpairStats {
  std::uint64_t seen = 0, dropped = 0, duplicated = 0, reordered = 0, trimmed = 0, delayed = 0;
  std::uint64_t hold_overflow = 0;  ///< hold pool full: delivered without delay
  std::uint64_t delivered = 0;
};

/// Length of the header stack of a data packet (what a trimming switch keeps), or 0 if the packet
/// carries no payload (control packets are never trimmed) or does not decode.
std::size_t trimmed_length(std::span<const std::uint8_t> pkt);

class Impairment {
 public:
  Impairment(const ImpairConfig& cfg, std::size_t max_packet);

  const ImpairConfig& config() const { return cfg_; }
  const ImpairStats& stats() const { return stats_; }
  bool enabled() const { return cfg_.enabled(); }

  /// Decides the fate of one received packet. `deliver(bytes, meta)` is called zero or more times
  /// now; held copies come out of release().
  template <class Deliver>
  void on_packet(std::span<const std::uint8_t> pkt, engine::RxMeta meta, Time now, Deliver&& deliver);
  /// Delivers held packets whose time has come.
  template <class Deliver>
  void release(Time now, Deliver&& deliver);
  /// Earliest release time of a held packet (kNever if none).
  Time next_release() const { return heap_.empty() ? kNever : heap_.front().at; }
  std::size_t held() const { return heap_.size(); }

 private:
  struct Held {
    Time at;
    std::uint64_t seq;
    std::uint32_t slot;
    std::uint32_t len;
    engine::RxMeta meta;
  };
  static bool later(const Held& a, const Held& b) { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  bool hold(std::span<const std::uint8_t> pkt, const engine::RxMeta& meta, Time at);
  void pop_front();

  ImpairConfig cfg_;
  std::size_t max_packet_;
  Rng rng_;
  ImpairStats stats_;
  std::vector<std::uint8_t> pool_;
  std::vector<std::uint32_t> free_;
  std::vector<Held> heap_;
  std::uint64_t seq_ = 0;
};

template <class Deliver>
void Impairment::on_packet(std::span<const std::uint8_t> pkt, engine::RxMeta meta, Time now,
                           Deliver&& deliver) {
  ++stats_.seen;
  if (rng_.chance(cfg_.drop)) {
    ++stats_.dropped;
    return;
  }
  const bool trim = rng_.chance(cfg_.trim);
  const bool trim_lh = !trim && rng_.chance(cfg_.trim_lasthop);
  if (trim || trim_lh) {
    const std::size_t hl = trimmed_length(pkt);
    if (hl != 0) {
      pkt = pkt.first(hl);
      meta.trimmed = trim;
      meta.trimmed_lasthop = trim_lh;
      ++stats_.trimmed;
    }
  }
  const int copies = rng_.chance(cfg_.duplicate) ? 2 : 1;
  if (copies == 2) ++stats_.duplicated;
  for (int i = 0; i < copies; ++i) {
    Duration extra = cfg_.delay;
    if (cfg_.jitter > 0) extra += rng_.next() % cfg_.jitter;
    if (rng_.chance(cfg_.reorder)) {
      extra += cfg_.reorder_delay;
      ++stats_.reordered;
    }
    if (extra > 0 && hold(pkt, meta, now + extra)) {
      ++stats_.delayed;
      continue;
    }
    ++stats_.delivered;
    deliver(pkt, meta);
  }
}

template <class Deliver>
void Impairment::release(Time now, Deliver&& deliver) {
  while (!heap_.empty() && heap_.front().at <= now) {
    const Held h = heap_.front();
    pop_front();
    ++stats_.delivered;
    deliver(std::span<const std::uint8_t>(pool_.data() + std::size_t{h.slot} * max_packet_, h.len), h.meta);
    free_.push_back(h.slot);
  }
}

}  // namespace mrc::io
