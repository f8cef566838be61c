#include "engine/ev_manager.hpp"

#include <algorithm>
#include <cassert>

namespace mrc::engine {

std::shared_ptr<const EvManager::Table> EvManager::make_table(std::span<const Ev> evs,
                                                              std::uint32_t active_count,
                                                              std::uint32_t num_ports) {
  const std::size_t n = evs.size();
  if (num_ports == 0 || num_ports > kMaxPorts || n == 0 || n >= kNone) return nullptr;
  for (const Ev& e : evs)
    if (e.port >= num_ports) return nullptr;
  auto t = std::make_shared<Table>();
  t->evs.assign(evs.begin(), evs.end());
  t->active_arg = active_count;
  if (active_count == 0 || active_count > n) active_count = static_cast<std::uint32_t>(n);
  t->slots.assign(n, Slot{});
  t->ports.assign(num_ports, Port{});
  // Each port's GOOD list gets room for its active EVs, in port order.
  for (std::size_t i = 0; i < active_count; ++i) ++t->ports[evs[i].port].target;
  std::uint16_t off = 0;
  for (Port& port : t->ports) {
    port.good_off = off;
    off = static_cast<std::uint16_t>(off + port.target);
  }
  t->good.assign(active_count, kNone);
  for (std::size_t i = 0; i < n; ++i) {
    Slot& s = t->slots[i];
    const auto slot = static_cast<std::uint16_t>(i);
    if (i < active_count) {
      s.role = Role::kActive;
      Port& p = t->ports[evs[i].port];
      ++p.active;
      s.good_pos = p.good_len;
      t->good[p.good_off + p.good_len++] = slot;
    } else {
      s.role = Role::kBackup;
      t->backup.push_back(slot);
    }
  }
  // Backups are taken LIFO; reverse so the first-listed backup of a port is promoted first.
  std::reverse(t->backup.begin(), t->backup.end());
  return t;
}

bool EvManager::same_table(const Table& t, std::span<const Ev> evs, std::uint32_t active_count) {
  if (t.active_arg != active_count || t.evs.size() != evs.size()) return false;
  // Without an early exit: every QP of a profile compares equal to the end (create_qp, D54).
  std::uint32_t diff = 0;
  for (std::size_t i = 0; i < evs.size(); ++i)
    diff |= (evs[i].value ^ t.evs[i].value) | static_cast<std::uint32_t>(evs[i].port ^ t.evs[i].port);
  return diff == 0;
}

bool EvManager::init(std::span<const Ev> evs, std::uint32_t active_count, std::uint32_t num_ports,
                     const Params& p, std::uint64_t seed, Sink sink, void* ctx) {
  return init(make_table(evs, active_count, num_ports), p, seed, sink, ctx);
}

bool EvManager::init(std::shared_ptr<const Table> table, const Params& p, std::uint64_t seed, Sink sink,
                     void* ctx) {
  if (!table) return false;
  table_ = std::move(table);
  evs_ = table_->evs.data();
  n_ = table_->evs.size();
  num_ports_ = static_cast<std::uint32_t>(table_->ports.size());
  usable_ports_ = num_ports_ == 32 ? 0xFFFFFFFFu : (1u << num_ports_) - 1;
  params_ = p;
  rng_.reseed(seed);
  sink_ = sink;
  ctx_ = ctx;
  slots_.clear();
  good_.clear();
  ports_.clear();
  backup_.clear();
  sl_ = table_->slots.data();
  gd_ = table_->good.data();
  pt_ = table_->ports.data();
  cold_.clear();
  delivered_.clear();
  skipped_.clear();
  probing_.clear();
  good_mask_ = 0;
  for (std::uint32_t port = 0; port < num_ports_; ++port)
    if (pt_[port].good_len != 0) good_mask_ |= 1u << port;
  burst_slot_ = kNone;
  burst_left_ = 0;
  return true;
}

void EvManager::good_add(std::uint16_t slot) {
  assert(!slots_.empty());  // own()
  Slot& s = slots_[slot];
  const std::uint8_t port = evs_[slot].port;
  Port& p = ports_[port];
  assert(p.good_len < p.target);
  s.good_pos = p.good_len;
  good_[p.good_off + p.good_len++] = slot;
  good_mask_ |= 1u << port;
}

void EvManager::good_remove(std::uint16_t slot) {
  Slot& s = slots_[slot];
  if (s.good_pos == kNone) return;
  const std::uint8_t port = evs_[slot].port;
  Port& p = ports_[port];
  const std::uint16_t last = good_[p.good_off + --p.good_len];
  good_[p.good_off + s.good_pos] = last;
  slots_[last].good_pos = s.good_pos;
  s.good_pos = kNone;
  if (p.good_len == 0) good_mask_ &= ~(1u << port);
}

bool EvManager::has_backup(std::uint8_t port) const {
  return std::any_of(backup_.begin(), backup_.end(), [&](std::uint16_t b) { return evs_[b].port == port; });
}

std::uint16_t EvManager::next_good(std::uint32_t eligible) {
  std::uint32_t p = rr_port_ % num_ports_;
  while (!((eligible >> p) & 1u)) p = (p + 1) % num_ports_;
  rr_port_ = p + 1;
  return random_good(static_cast<std::uint8_t>(p));
}

std::uint16_t EvManager::pick(std::uint32_t ports) {
  const std::uint32_t eligible = ports & usable_ports_ & good_mask_;
  if (eligible == 0) return kNone;
  if (burst_left_ != 0) {
    // good_pos is set only while the slot is GOOD and active.
    if (sl_[burst_slot_].good_pos != kNone && ((eligible >> evs_[burst_slot_].port) & 1u)) {
      --burst_left_;
      return burst_slot_;
    }
  }
  burst_slot_ = next_good(eligible);
  burst_left_ = params_.burst > 1 ? params_.burst - 1 : 0;
  return burst_slot_;
}

std::uint16_t EvManager::pick_proven(std::uint32_t ports, Time since) {
  // A lost retransmission holds the window's left edge for another loss-detection delay, which is
  // what turns a path failure into a goodput dip (D38). A few tries suffice: after a failure most
  // EVs are proven.
  constexpr int kTries = 4;
  const std::uint32_t eligible = ports & usable_ports_ & good_mask_;
  if (eligible == 0) return kNone;
  std::uint16_t best = kNone;
  for (int i = 0; i < kTries; ++i) {
    const std::uint16_t slot = next_good(eligible);
    if (delivered(slot) > since) return slot;
    if (best == kNone || delivered(slot) > delivered(best)) best = slot;
  }
  return best;
}

std::uint16_t EvManager::pick_on_port(std::uint8_t port) {
  if (port < num_ports_ && pt_[port].good_len != 0) return random_good(port);
  // No GOOD EV on that plane: any active EV of a usable port, starting with `port`.
  std::uint16_t fallback = kNone;
  for (std::size_t i = 0; i < n_; ++i) {
    const Slot& s = sl_[i];
    if (s.role != Role::kActive || !port_usable(evs_[i].port)) continue;
    if (evs_[i].port == port) return static_cast<std::uint16_t>(i);
    if (fallback == kNone || s.state == EvState::kGood) fallback = static_cast<std::uint16_t>(i);
  }
  if (fallback == kNone && good_mask_ != 0) return pick(good_mask_);
  return fallback;
}

std::uint32_t EvManager::ports_with_good() const {
  return good_mask_ & usable_ports_;
}

std::uint16_t EvManager::find(std::uint32_t value, std::uint8_t port) const {
  for (std::size_t i = 0; i < n_; ++i)
    if (evs_[i].value == value && evs_[i].port == port) return static_cast<std::uint16_t>(i);
  return kNone;
}

void EvManager::set_state(std::uint16_t slot, EvState to, EvCause cause, Time now) {
  assert(!slots_.empty());  // own()
  Slot& s = slots_[slot];
  if (s.state == to) return;
  if (s.state == EvState::kSkip && cause != EvCause::kSkipExpired) {
    // Left SKIP some other way (failed, denied, its port down): its expiry goes, so that every
    // entry of skipped_ is a SKIP EV and a scan reads no slot before its entry's time.
    const auto it =
        std::find_if(skipped_.begin(), skipped_.end(), [&](const Skipped& e) { return e.slot == slot; });
    if (it != skipped_.end()) skipped_.erase(it);
  }
  const Transition t{slot, evs_[slot], s.state, to, cause};
  s.state = to;
  ++stats_.transitions;
  if (sink_) sink_(ctx_, t, now);
}

std::uint32_t EvManager::active_usable() const {
  std::uint32_t n = 0;
  for (std::uint32_t p = 0; p < num_ports_; ++p)
    if (port_usable(static_cast<std::uint8_t>(p))) n += pt_[p].active;
  return n;
}

void EvManager::on_skip_signal(std::uint16_t slot, EvCause cause, Time now) {
  expire_skips(now);
  // Only an active GOOD or SKIP EV changes: nothing to copy the shared table for otherwise.
  if (sl_[slot].role != Role::kActive ||
      (sl_[slot].state != EvState::kGood && sl_[slot].state != EvState::kSkip))
    return;
  own();
  Slot& s = slots_[slot];
  if (s.role != Role::kActive) return;
  const Time until = now + params_.skip_duration;
  if (s.state == EvState::kSkip) {
    for (Skipped& e : skipped_) {
      if (e.slot == slot) {
        e.until = std::max(e.until, until);  // (next_skip_ may now be early: that pass finds it later)
        break;
      }
    }
    return;
  }
  if (s.state != EvState::kGood) return;
  // Skipping moves traffic to the other EVs; with no other GOOD EV it would only stall the QP.
  const std::uint8_t port = evs_[slot].port;
  const std::uint32_t others = ports_with_good() & ~(1u << port);
  if (others == 0 && ports_[port].good_len == 1) return;
  good_remove(slot);
  skipped_.push_back({until, slot});
  next_skip_ = std::min(next_skip_, until);
  set_state(slot, EvState::kSkip, cause, now);
}

void EvManager::on_failure(std::uint16_t slot, EvCause cause, Time now) {
  expire_skips(now);
  if (sl_[slot].role != Role::kActive ||
      (sl_[slot].state != EvState::kGood && sl_[slot].state != EvState::kSkip))
    return;
  own();
  Slot& s = slots_[slot];
  if (s.role != Role::kActive || (s.state != EvState::kGood && s.state != EvState::kSkip)) return;
  const std::uint8_t port = evs_[slot].port;
  // ev_min_active floor: never let failures shrink the usable active set below the floor when no
  // backup can take the EV's place; such an EV is only skipped for a while.
  if (!has_backup(port) && active_usable() <= params_.min_active) {
    ++stats_.floor_hits;
    on_skip_signal(slot, cause, now);
    return;
  }
  good_remove(slot);
  s.role = Role::kProbing;
  Cold& c = cold(slot);
  c.probe_ok = 0;
  c.probe_fails = 0;
  c.next_probe = now + params_.probe_interval;
  next_probe_ = std::min(next_probe_, c.next_probe);
  --ports_[port].active;
  probing_.push_back(slot);
  set_state(slot, EvState::kAssumedBad, cause, now);
  promote_backup(port, now);
}

void EvManager::place_good(std::uint16_t slot) {
  // A GOOD EV rejoins the active set if its port is short of EVs, else the backup pool.
  Slot& s = slots_[slot];
  Port& p = ports_[evs_[slot].port];
  if (p.active < p.target) {
    s.role = Role::kActive;
    ++p.active;
    good_add(slot);
  } else {
    s.role = Role::kBackup;
    backup_.push_back(slot);
  }
}

void EvManager::promote_backup(std::uint8_t port, Time now) {
  (void)now;
  Port& p = ports_[port];
  while (p.active < p.target) {
    // The port's last entry in the pool.
    const auto it =
        std::find_if(backup_.rbegin(), backup_.rend(), [&](std::uint16_t b) { return evs_[b].port == port; });
    if (it == backup_.rend()) break;
    const std::uint16_t b = *it;
    backup_.erase(std::next(it).base());
    Slot& s = slots_[b];
    if (s.role != Role::kBackup || s.state != EvState::kGood) continue;
    s.role = Role::kActive;
    ++p.active;
    good_add(b);
    ++stats_.promotions;
  }
}

void EvManager::on_probe_success(std::uint16_t slot, Time now) {
  expire_skips(now);
  if (sl_[slot].role != Role::kProbing) return;  // probing means the table is its own already
  own();
  Slot& s = slots_[slot];
  if (s.role != Role::kProbing || s.state != EvState::kAssumedBad) return;
  Cold& c = cold(slot);
  c.probe_fails = 0;
  if (++c.probe_ok < params_.probe_success_threshold) return;
  probing_.erase(std::find(probing_.begin(), probing_.end(), slot));
  refresh_next_probe();
  set_state(slot, EvState::kGood, EvCause::kProbeSuccess, now);
  place_good(slot);
}

void EvManager::on_probe_failure(std::uint16_t slot, Time now) {
  expire_skips(now);
  if (sl_[slot].role != Role::kProbing) return;
  Cold& c = cold(slot);
  c.probe_ok = 0;
  if (c.probe_fails < 5) ++c.probe_fails;
  c.next_probe = std::max(c.next_probe, now + probe_backoff(c));
  refresh_next_probe();
}

void EvManager::refresh_next_probe() {
  Time next = kNever;
  for (const std::uint16_t p : probing_)
    if (port_usable(evs_[p].port)) next = std::min(next, cold_[sl_[p].cold].next_probe);
  next_probe_ = next;
}

void EvManager::expire_skips_due(Time now) {
  own();
  // One pass per expiry time up to `now`, each in skipped_'s order, as a call at each would have
  // made them: the order of the GOOD lists, and so the picks, does not depend on how late this runs.
  while (next_skip_ <= now) {
    const Time at = next_skip_;
    Time next = kNever;
    std::size_t w = 0;
    for (std::size_t r = 0; r < skipped_.size(); ++r) {
      const Skipped e = skipped_[r];
      if (e.until > at) {
        next = std::min(next, e.until);
        skipped_[w++] = e;
        continue;
      }
      const Slot& s = slots_[e.slot];
      assert(s.state == EvState::kSkip);  // set_state() drops the entry of an EV leaving otherwise
      set_state(e.slot, EvState::kGood, EvCause::kSkipExpired, at);
      if (s.role == Role::kActive) good_add(e.slot);
    }
    skipped_.resize(w);
    next_skip_ = next;
  }
}

std::uint16_t EvManager::probe_due(Time now) const {
  for (const std::uint16_t slot : probing_) {
    if (cold_[sl_[slot].cold].next_probe <= now && port_usable(evs_[slot].port)) return slot;
  }
  return kNone;
}

void EvManager::probe_sent(std::uint16_t slot, Time now) {
  expire_skips(now);
  Cold& c = cold(slot);
  c.next_probe = now + probe_backoff(c);
  ++stats_.probes;
  refresh_next_probe();
}

void EvManager::set_port_usable(std::uint8_t port, bool usable, Time now) {
  expire_skips(now);
  if (port >= num_ports_ || port_usable(port) == usable) return;
  own();
  if (!usable) {
    usable_ports_ &= ~(1u << port);
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (evs_[i].port != port || s.role == Role::kDenied) continue;
      const auto slot = static_cast<std::uint16_t>(i);
      good_remove(slot);
      if (s.role == Role::kActive) --ports_[port].active;
      cold(slot).role_before_down = s.role;
      s.role = Role::kPortDown;
      set_state(slot, EvState::kAssumedBad, EvCause::kPortDown, now);
    }
    std::erase_if(backup_, [&](std::uint16_t b) { return evs_[b].port == port; });
    std::erase_if(probing_, [&](std::uint16_t sl) { return evs_[sl].port == port; });
    refresh_next_probe();
    return;
  }
  usable_ports_ |= 1u << port;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (evs_[i].port != port || s.role != Role::kPortDown) continue;
    const auto slot = static_cast<std::uint16_t>(i);
    Cold& c = cold(slot);
    if (c.role_before_down == Role::kProbing) {
      // It had failed before the port went down: the port coming back says nothing about its
      // path, so it stays ASSUMED_BAD and resumes probing.
      s.role = Role::kProbing;
      c.probe_ok = 0;
      c.probe_fails = 0;
      c.next_probe = now + params_.probe_interval;
      probing_.push_back(slot);
      continue;
    }
    set_state(slot, EvState::kGood, EvCause::kPortUp, now);
    place_good(slot);
  }
  refresh_next_probe();
}

std::uint32_t EvManager::set_denied(std::uint32_t value, std::uint8_t port, bool denied, Time now) {
  expire_skips(now);
  std::uint32_t matches = 0;
  for (std::size_t i = 0; i < n_; ++i) {
    if (evs_[i].value != value || evs_[i].port != port) continue;
    own();  // a QP without the EV keeps sharing its table
    Slot& s = slots_[i];
    ++matches;
    const auto slot = static_cast<std::uint16_t>(i);
    if (denied && s.state != EvState::kDenied) {
      good_remove(slot);
      if (s.role == Role::kActive) --ports_[port].active;
      if (s.role == Role::kBackup) std::erase(backup_, slot);
      if (s.role == Role::kProbing) {
        probing_.erase(std::find(probing_.begin(), probing_.end(), slot));
        refresh_next_probe();
      }
      const bool was_down = s.role == Role::kPortDown;
      s.role = Role::kDenied;
      set_state(slot, EvState::kDenied, EvCause::kController, now);
      if (!was_down) promote_backup(port, now);
    } else if (!denied && s.state == EvState::kDenied) {
      if (!port_usable(port)) {
        s.role = Role::kPortDown;
        cold(slot).role_before_down = Role::kBackup;
        set_state(slot, EvState::kAssumedBad, EvCause::kController, now);
        continue;
      }
      set_state(slot, EvState::kGood, EvCause::kController, now);
      place_good(slot);
    }
  }
  return matches;
}

std::uint32_t EvManager::count(EvState st) const {
  std::uint32_t n = 0;
  for (std::size_t i = 0; i < n_; ++i) n += sl_[i].state == st;
  return n;
}

std::size_t EvManager::heap_bytes() const {
  return slots_.capacity() * sizeof(Slot) + cold_.capacity() * sizeof(Cold) +
         delivered_.capacity() * sizeof(Time) + ports_.capacity() * sizeof(Port) +
         (good_.capacity() + backup_.capacity() + probing_.capacity()) * sizeof(std::uint16_t) +
         skipped_.capacity() * sizeof(Skipped);
}

}  // namespace mrc::engine
