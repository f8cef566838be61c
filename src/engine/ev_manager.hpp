// Per-QP entropy-value manager: which EVs carry traffic, on which plane, in which state.
//
// Active EVs are split equally across ports; each port also has a backup pool. Selection is a
// round-robin over eligible ports and a uniformly random GOOD EV within the port, so QPs sharing a
// profile do not synchronise. State machine (docs/protocol.md §4.5):
//   GOOD -ECN echo / trim NACK-> SKIP -skip_duration-> GOOD
//   GOOD|SKIP -untrimmed loss / timeout / ALWAYS_SKIP-> ASSUMED_BAD (replaced by a backup of its port)
//   ASSUMED_BAD -probe_success_threshold consecutive probe answers-> GOOD (back to active or backup)
//   any -controller deny-> DENIED (never recovers by itself) -controller allow-> GOOD
// Every transition is reported through the callback given at construction.
//
// Memory (D54): the EV list is an immutable table shared by the QPs made from one list (the
// Endpoint keeps it, Endpoint::shared_ev_table), with the slots (6 bytes an EV: state, role, GOOD
// list position), GOOD lists and ports of a manager whose EVs never changed state; a QP reads those
// until its first change, then copies them. A SKIP EV's expiry is in the SKIP list (D74), what only
// an EV that failed or lost a packet needs (probing, loss history) in a side table, and the delivery
// times of the EVs come with the first delivery: a QP end that never sends holds none of them.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/rng.hpp"
#include "engine/types.hpp"

namespace mrc::engine {

class EvManager {
 public:
  static constexpr std::uint16_t kNone = 0xFFFF;

  struct Transition {
    std::uint16_t slot;
    Ev ev;
    EvState from, to;
    EvCause cause;
  };
  /// Receives transitions; stored by the owner (the QP) and turned into events.
  using Sink = void (*)(void* ctx, const Transition& t, Time now);

  struct Params {
    std::uint32_t min_active = 1;
    std::uint32_t probe_success_threshold = 3;
    Duration skip_duration = 10'000;   ///< how long SKIP lasts
    Duration probe_interval = 40'000;  ///< ASSUMED_BAD probe cadence
    /// Consecutive picks that return the same EV while it stays GOOD and eligible (1 = a new
    /// choice per packet). A driver that coalesces same-EV packets (UDP GSO) raises it.
    std::uint32_t burst = 1;
  };

  /// What the managers made from one EV list share, never written: the EVs, and the slots, GOOD
  /// lists, ports and backup pool of a manager none of whose EVs changed state.
  struct Table;
  /// `evs[0, active_count)` are active (0 = all), the rest backups; null if a port >= num_ports,
  /// no EV or too many.
  static std::shared_ptr<const Table> make_table(std::span<const Ev> evs, std::uint32_t active_count,
                                                 std::uint32_t num_ports);
  /// Whether `t` was made from `evs` and `active_count`.
  static bool same_table(const Table& t, std::span<const Ev> evs, std::uint32_t active_count);

  EvManager() = default;
  EvManager(const EvManager&) = delete;  // reads through pointers into its own tables
  EvManager& operator=(const EvManager&) = delete;
  /// A manager of its own table (make_table's arguments).
  bool init(std::span<const Ev> evs, std::uint32_t active_count, std::uint32_t num_ports, const Params& p,
            std::uint64_t seed, Sink sink, void* ctx);
  /// A manager of a table shared with other QPs; false if null.
  bool init(std::shared_ptr<const Table> table, const Params& p, std::uint64_t seed, Sink sink, void* ctx);

  /// Picks a GOOD active EV on a port in `ports` (round-robin over ports), or the previous pick
  /// again while its burst (Params::burst) lasts. kNone if none.
  std::uint16_t pick(std::uint32_t ports);
  /// For a retransmission of a packet sent at `since`: a GOOD active EV of `ports` that has
  /// delivered a packet sent after `since` (its path worked after the loss), among a few random
  /// candidates; else the candidate that delivered most recently. Bursts do not apply.
  std::uint16_t pick_proven(std::uint32_t ports, Time since);
  /// A first transmission sent at `sent` on `slot` was acknowledged. True when it ends a streak
  /// (LossHistory::streak): the EV survived its last confirmed loss (D57).
  bool on_delivered(std::uint16_t slot, Time sent) {
    if (delivered_.empty()) delivered_.assign(n_, 0);  // the QP's first delivery
    Time& d = delivered_[slot];
    if (sent <= d) return false;
    d = sent;
    const std::uint16_t c = sl_[slot].cold;
    if (c == kNone || cold_[c].loss.streak == 0) return false;
    cold_[c].loss.streak = 0;
    return true;
  }
  /// A GOOD (else any usable) EV on `port`, for ACK traffic on the plane data arrived on.
  std::uint16_t pick_on_port(std::uint8_t port);
  /// Ports that currently have at least one GOOD active EV.
  std::uint32_t ports_with_good() const;

  const Ev& ev(std::uint16_t slot) const { return evs_[slot]; }
  EvState state(std::uint16_t slot) const { return sl_[slot].state; }
  std::uint16_t find(std::uint32_t value, std::uint8_t port) const;
  std::size_t size() const { return n_; }
  bool is_active(std::uint16_t slot) const { return sl_[slot].role == Role::kActive; }
  /// Active EVs on usable ports.
  std::uint32_t active_usable() const;
  /// Per-EV loss history for blaming (PathBlame, D43, D57, D58): confirmed losses in its current
  /// window, how many of them count in the QP's reference rate (only once the EV delivered again),
  /// its streak (confirmed losses since it last delivered anything); at its last counted loss the
  /// QP's count of confirmed losses (low 16 bits) and of first transmissions (low 32 bits), and the
  /// latter when the window started (only differences of these are used).
  struct LossHistory {
    std::uint16_t losses = 0;
    std::uint16_t counted = 0;
    std::uint16_t streak = 0;
    std::uint16_t confirmed_at = 0;
    std::uint32_t since = 0;
    std::uint32_t sent_at = 0;
  };
  /// Valid until the next call that may give another EV its side-table entry.
  LossHistory& loss_history(std::uint16_t slot) { return cold(slot).loss; }
  /// EVs in SKIP (each with its expiry), and EVs with an entry in the side table (they failed, or
  /// had a loss confirmed, or their port went down).
  std::size_t skip_entries() const { return skipped_.size(); }
  std::size_t cold_entries() const { return cold_.size(); }

  // Feedback.
  void on_skip_signal(std::uint16_t slot, EvCause cause, Time now);
  void on_failure(std::uint16_t slot, EvCause cause, Time now);
  /// Timing follows the QP's base-RTT estimate.
  void set_timing(Duration skip, Duration probe_interval) {
    params_.skip_duration = skip;
    params_.probe_interval = probe_interval;
  }
  /// A probe sent on `slot` was answered.
  void on_probe_success(std::uint16_t slot, Time now);
  /// A probe went unanswered: the next one waits twice as long (up to 32 intervals).
  void on_probe_failure(std::uint16_t slot, Time now);

  // Time-driven work.
  /// Returns SKIP EVs whose time is up to GOOD, in the order and at the times (the transitions'
  /// time) a call at each expiry would have, so it may run late: every call here that takes a time
  /// runs it first; before the others (picks, state reads) the owner does. Earliest pending
  /// expiry: next_skip_expiry().
  void expire_skips(Time now) {
    if (now >= next_skip_) expire_skips_due(now);
  }
  Time next_skip_expiry() const { return next_skip_; }
  /// Whether a usable port has no GOOD EV: then an expiry may let the QP send where it cannot now.
  /// Otherwise picks never wait for one (the last GOOD EV is never skipped, only failed).
  bool skip_may_block() const { return (good_mask_ & usable_ports_) != usable_ports_; }
  /// ASSUMED_BAD EVs due for a probe at `now` (the owner sends them and calls probe_sent()).
  std::uint16_t next_probe_due(Time now) const { return now < next_probe_ ? kNone : probe_due(now); }
  Time next_probe_time() const { return next_probe_; }
  void prefetch_timers() const { __builtin_prefetch(&next_skip_); }  ///< what the two above read
  void probe_sent(std::uint16_t slot, Time now);

  // Ports and controller.
  void set_port_usable(std::uint8_t port, bool usable, Time now);
  bool port_usable(std::uint8_t port) const { return (usable_ports_ >> port) & 1u; }
  /// Controller deny (true) / allow (false) of every copy of `value` on `port`. Returns matches.
  std::uint32_t set_denied(std::uint32_t value, std::uint8_t port, bool denied, Time now);

  struct Stats {
    std::uint64_t transitions = 0, promotions = 0, floor_hits = 0, probes = 0;
  };
  const Stats& stats() const { return stats_; }
  /// Heap bytes of its own tables and lists (the object itself and the shared table excluded).
  std::size_t heap_bytes() const;
  /// Whether it still reads the shared table's slots (no EV changed state).
  bool shares_slots() const { return slots_.empty(); }
  std::uint32_t count(EvState s) const;
  std::uint32_t active_good(std::uint8_t port) const { return pt_[port].good_len; }

 private:
  enum class Role : std::uint8_t { kActive, kBackup, kProbing, kDenied, kPortDown };
  /// What every EV needs: 6 bytes (128 EVs = 768 B a QP).
  struct Slot {
    EvState state = EvState::kGood;
    Role role = Role::kBackup;
    std::uint16_t good_pos = kNone;  ///< index in its port's GOOD list while GOOD and active
    std::uint16_t cold = kNone;      ///< its entry in cold_, once it has one
  };
  static_assert(sizeof(Slot) == 6);
  /// What only an EV that failed, had a loss confirmed or saw its port go down needs (cold_, in
  /// order of first use).
  struct Cold {
    Time next_probe = 0;
    LossHistory loss;
    std::uint16_t probe_ok = 0;
    std::uint8_t probe_fails = 0;           ///< consecutive unanswered probes: the interval doubles with each
    Role role_before_down = Role::kBackup;  ///< restored when the port comes back
  };
  /// Per port: its GOOD list, good_[good_off, good_off + good_len), which has room for its active
  /// target (only active EVs are GOOD-listed, and no more than `target` are active).
  struct Port {
    std::uint16_t good_off = 0;
    std::uint16_t good_len = 0;
    std::uint16_t target = 0;  ///< desired active count
    std::uint16_t active = 0;  ///< slots in role kActive
  };

 public:
  struct Table {
    std::vector<Ev> evs;
    std::uint32_t active_arg = 0;  ///< make_table's active_count
    std::vector<Slot> slots;
    std::vector<std::uint16_t> good;
    std::vector<Port> ports;
    std::vector<std::uint16_t> backup;
  };

 private:
  /// Before the first change: the manager's own copy of the shared slots, lists and ports.
  void own() {
    if (!slots_.empty()) return;
    slots_ = table_->slots;
    good_ = table_->good;
    ports_ = table_->ports;
    backup_ = table_->backup;
    sl_ = slots_.data();
    gd_ = good_.data();
    pt_ = ports_.data();
  }

  /// The slot's side-table entry, made on first use (references to other entries may move).
  Cold& cold(std::uint16_t slot) {
    own();
    Slot& s = slots_[slot];
    if (s.cold == kNone) {
      s.cold = static_cast<std::uint16_t>(cold_.size());
      cold_.emplace_back();
    }
    return cold_[s.cold];
  }
  Time delivered(std::uint16_t slot) const { return delivered_.empty() ? 0 : delivered_[slot]; }
  bool has_backup(std::uint8_t port) const;
  void set_state(std::uint16_t slot, EvState to, EvCause cause, Time now);
  void good_add(std::uint16_t slot);
  void good_remove(std::uint16_t slot);
  void promote_backup(std::uint8_t port, Time now);
  /// A uniformly random GOOD active EV of `port` (which has one).
  std::uint16_t random_good(std::uint8_t port) {
    const Port& p = pt_[port];
    return gd_[p.good_off + rng_.below(p.good_len)];
  }
  /// Round robin: the next port in `eligible` (non-empty, ports with GOOD EVs), a random EV of it.
  std::uint16_t next_good(std::uint32_t eligible);
  void place_good(std::uint16_t slot);
  void refresh_next_probe();
  void expire_skips_due(Time now);          ///< expire_skips() with one due
  std::uint16_t probe_due(Time now) const;  ///< next_probe_due() past next_probe_
  Duration probe_backoff(const Cold& c) const { return params_.probe_interval << c.probe_fails; }

  std::shared_ptr<const Table> table_;
  const Ev* evs_ = nullptr;  ///< the EV of each slot (the table's)
  std::size_t n_ = 0;        ///< EVs
  // Read through these: the table's until own(), then the manager's own slots_, good_, ports_.
  const Slot* sl_ = nullptr;
  const std::uint16_t* gd_ = nullptr;
  const Port* pt_ = nullptr;
  std::vector<Slot> slots_;      ///< own copies, empty until the first change (own())
  std::vector<Cold> cold_;       ///< side table (Slot::cold)
  std::vector<Time> delivered_;  ///< per slot: send time of its latest acknowledged first
                                 ///< transmission; empty until the QP's first delivery
  std::vector<Port> ports_;
  std::vector<std::uint16_t> good_;    ///< the ports' GOOD lists (Port::good_off)
  std::vector<std::uint16_t> backup_;  ///< every port's backup pool: a port's last entry is its next
  /// A SKIP slot and its expiry (extended in place by a signal while skipped): the scan reads the
  /// slot only once it expires.
  struct Skipped {
    Time until;
    std::uint16_t slot;
  };
  std::vector<Skipped> skipped_;        ///< SKIP slots, in the order they entered SKIP
  std::vector<std::uint16_t> probing_;  ///< ASSUMED_BAD slots
  std::uint32_t good_mask_ = 0;         ///< ports with a non-empty GOOD list
  Time next_skip_ = kNever;
  Time next_probe_ = kNever;
  std::uint32_t num_ports_ = 0;
  std::uint32_t usable_ports_ = 0;
  std::uint32_t rr_port_ = 0;
  std::uint16_t burst_slot_ = kNone;  ///< the EV of the current burst
  std::uint32_t burst_left_ = 0;      ///< picks it still gets
  Params params_;
  Rng rng_;
  Sink sink_ = nullptr;
  void* ctx_ = nullptr;
  Stats stats_;
};

}  // namespace mrc::engine
