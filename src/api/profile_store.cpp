#include "api/profile_store.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>

#include "engine/ev_sets.hpp"

namespace mrc::api {
namespace {

constexpr std::uint32_t kSettableStates = MRC_CTL_EV_GOOD | MRC_CTL_EV_DENIED;
constexpr std::uint32_t kEventStates = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;

std::uint32_t ctl_state(engine::EvState s) {
  switch (s) {
    case engine::EvState::kGood:
    case engine::EvState::kSkip:  // internal to the transport
      return MRC_CTL_EV_GOOD;
    case engine::EvState::kAssumedBad:
      return MRC_CTL_EV_ASSUMED_BAD;
    case engine::EvState::kDenied:
      break;
  }
  return MRC_CTL_EV_DENIED;
}

bool valid_state(std::uint32_t s) {
  return s == MRC_CTL_PROFILE_INIT || s == MRC_CTL_PROFILE_OFFLINE || s == MRC_CTL_PROFILE_ONLINE;
}

bool is_unpopulated(const EvEntry& e) {
  return e.port == 0 && e.raw == EvBytes{};
}

template <typename Map>
int find_or_create(Map& m, std::uint64_t id, std::uint32_t max, bool& created, std::string& why) {
  created = false;
  if (id == 0) {
    why = "profile 0 is the built-in default and cannot change";
    return EINVAL;
  }
  if (m.count(id)) return 0;
  if (m.size() >= max) {
    why = "no room for another profile (" + std::to_string(max) + ")";
    return ENOSPC;
  }
  m[id];
  created = true;
  return 0;
}

}  // namespace

ProfileStore::ProfileStore(const StoreLimits& limits) : limits_(limits) {}

void ProfileStore::set_num_ports(std::uint32_t n) {
  std::lock_guard lk(mu_);
  num_ports_ = std::clamp<std::uint32_t>(n, 1, engine::kMaxPorts);
}

std::uint32_t ProfileStore::num_ports() const {
  std::lock_guard lk(mu_);
  return num_ports_;
}

std::uint32_t ProfileStore::evs_in_use() const {
  std::lock_guard lk(mu_);
  std::uint32_t n = 0;
  for (const auto& [id, p] : evs_) n += static_cast<std::uint32_t>(p.entries.size());
  return n;
}

// ---- QPs ----------------------------------------------------------------------------------------

int ProfileStore::acquire(std::uint64_t ev_profile_id, std::uint64_t cc_profile_id, std::uint32_t num_ports,
                          QpProfiles& out) {
  std::lock_guard lk(mu_);
  EvProfile* evp = nullptr;
  CcProfileInfo* ccp = nullptr;
  if (ev_profile_id != 0) {
    auto it = evs_.find(ev_profile_id);
    if (it == evs_.end()) return ENOENT;
    if (it->second.state != MRC_CTL_PROFILE_ONLINE) return EINVAL;
    evp = &it->second;
  }
  if (cc_profile_id != 0) {
    auto it = ccs_.find(cc_profile_id);
    if (it == ccs_.end()) return ENOENT;
    if (it->second.state != MRC_CTL_PROFILE_ONLINE) return EINVAL;
    ccp = &it->second;
  }
  QpProfiles q;
  if (evp == nullptr || evp->mode == MRC_CTL_EV_MODE_AUTO) {
    q.evs = engine::make_ev_set(num_ports, limits_.auto_evs_per_port, limits_.auto_backups_per_port);
    q.active_count = limits_.auto_evs_per_port * num_ports;
    q.ev_min_active = evp ? evp->min_active : 1;
  } else {
    for (const EvEntry& e : evp->entries)
      if (e.state != MRC_CTL_EV_DENIED && e.engine_ev.port < num_ports) q.evs.push_back(e.engine_ev);
    if (q.evs.empty()) return EINVAL;
    q.ev_min_active = std::min<std::uint32_t>(evp->min_active, static_cast<std::uint32_t>(q.evs.size()));
  }
  if (ccp != nullptr) {
    q.cc.algorithm = ccp->algorithm;
    if (ccp->algorithm != cc::Algorithm::kNone) nscc_from_ctl(ccp->config, q.cc.nscc);
  }
  if (evp) ++evp->users;
  if (ccp) ++ccp->users;
  out = std::move(q);
  return 0;
}

void ProfileStore::release(std::uint64_t ev_profile_id, std::uint64_t cc_profile_id) {
  std::lock_guard lk(mu_);
  if (auto it = evs_.find(ev_profile_id); it != evs_.end() && it->second.users > 0) --it->second.users;
  if (auto it = ccs_.find(cc_profile_id); it != ccs_.end() && it->second.users > 0) --it->second.users;
}

// ---- EV format profiles -------------------------------------------------------------------------

int ProfileStore::modify_ev_fmt(std::uint64_t id, const EvFmtModify& m, std::string& why) {
  std::lock_guard lk(mu_);
  constexpr std::uint32_t known =
      MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | kWireFmtModifyFields;
  if (m.mask & ~known) {
    why = "attribute mask has bits a modify cannot take";
    return EINVAL;
  }
  bool created = false;
  if (int rc = find_or_create(fmts_, id, limits_.max_fmt_profiles, created, why)) return rc;
  EvFmtInfo p = fmts_[id];
  const auto fail = [&](int rc, std::string w) {
    if (created) fmts_.erase(id);
    why = std::move(w);
    return rc;
  };
  const bool to_state = m.mask & MRC_CTL_EV_FMT_PROFILE_STATE;
  if (to_state && !valid_state(m.state)) return fail(EINVAL, "unknown profile state");
  switch (p.state) {
    case MRC_CTL_PROFILE_INIT:
      if (!to_state || m.state != MRC_CTL_PROFILE_OFFLINE)
        return fail(EINVAL, "an INIT format profile can only move to OFFLINE");
      if (!(m.mask & MRC_CTL_EV_FMT_PROFILE_MODE)) return fail(EINVAL, "moving to OFFLINE needs MODE");
      break;
    case MRC_CTL_PROFILE_OFFLINE:
      break;
    case MRC_CTL_PROFILE_ONLINE:
      if (m.mask != MRC_CTL_EV_FMT_PROFILE_STATE || m.state != MRC_CTL_PROFILE_OFFLINE)
        return fail(EINVAL, "an ONLINE format profile can only move to OFFLINE");
      for (const auto& [eid, ev] : evs_)
        if (ev.fmt_id == id && ev.mode != MRC_CTL_EV_MODE_AUTO && ev.state == MRC_CTL_PROFILE_ONLINE)
          return fail(EBUSY, "EV profile " + std::to_string(eid) + " using this format is ONLINE");
      fmts_[id].state = MRC_CTL_PROFILE_OFFLINE;
      return 0;
  }
  if (m.mask & MRC_CTL_EV_FMT_PROFILE_MODE) {
    if (!ev_fmt_mode_valid(m.mode)) return fail(EINVAL, "unknown EV format mode");
    p.mode = m.mode;
  }
  if (m.mask & kWireFmtModifyFields) {
    std::uint64_t total = 0;
    for (const std::uint32_t w : m.widths) total += w;
    const auto mode = static_cast<EvFmtMode>(p.mode);
    if (total > ev_fmt_max_width(mode) || m.widths.size() > kEvBits)
      return fail(E2BIG, "format fields total " + std::to_string(total) + " bits; this mode holds " +
                             std::to_string(ev_fmt_max_width(mode)));
    if (std::string w = check_format(mode, m.widths); !w.empty()) return fail(EINVAL, w);
    p.widths = m.widths;
  }
  if (to_state) {
    if (m.state == MRC_CTL_PROFILE_ONLINE) {
      if (p.widths.empty()) return fail(EINVAL, "moving to ONLINE needs MODIFY_FIELDS");
      if (std::string w = check_format(static_cast<EvFmtMode>(p.mode), p.widths); !w.empty())
        return fail(EINVAL, w);  // MODE changed under the fields
    }
    if (m.state == MRC_CTL_PROFILE_INIT) p = EvFmtInfo{};
    p.state = m.state;
  }
  fmts_[id] = p;
  return 0;
}

int ProfileStore::query_ev_fmt(std::uint64_t id, EvFmtInfo& out) const {
  std::lock_guard lk(mu_);
  auto it = fmts_.find(id);
  if (it == fmts_.end()) return ENOENT;
  out = it->second;
  return 0;
}

// ---- EV profiles --------------------------------------------------------------------------------

bool ProfileStore::value_locked(std::uint32_t mode, const EvBytes& expanded, std::uint32_t& out,
                                std::string& why) {
  if (mode != static_cast<std::uint32_t>(EvFmtMode::kSrv6)) {
    out = ev_value_be32(expanded);
    if (wire_.canonical) out = wire_.canonical(out);
    return true;
  }
  auto it = std::find(srv6_paths_.begin(), srv6_paths_.end(), expanded);
  if (it == srv6_paths_.end()) {
    if (wire_.srv6_check) {
      if (std::string w = wire_.srv6_check(expanded); !w.empty()) {
        why = std::move(w);
        return false;
      }
    }
    it = srv6_paths_.insert(srv6_paths_.end(), expanded);
  }
  out = static_cast<std::uint32_t>(it - srv6_paths_.begin());
  return true;
}

std::string ProfileStore::check_ev_config(const EvProfile& p) const {
  if (p.mode == MRC_CTL_EV_MODE_AUTO) return {};
  auto f = fmts_.find(p.fmt_id);
  if (f == fmts_.end() || f->second.widths.empty())
    return "EV format profile " + std::to_string(p.fmt_id) + " does not exist or has no fields";
  if (!p.fields_set) return "the profile has no fields (EV_FIELDS_OP MODIFY)";
  if (std::string w = check_fields(f->second.widths, p.fields); !w.empty()) return w;
  if (p.min_active > p.count) return "ev_min_active is above ev_count";
  return {};
}

bool ProfileStore::fill_entry(const EvProfile& p, const EvBytes& raw, std::uint8_t port, EvEntry& e,
                              std::string& why) {
  if (std::string w = check_ev_config(p); !w.empty()) {
    why = w;
    return false;
  }
  if (port < 1 || port > num_ports_) {
    why = "port " + std::to_string(port) + " is not 1.." + std::to_string(num_ports_);
    return false;
  }
  const EvFmtInfo& f = fmts_.at(p.fmt_id);
  if (!expand(f.widths, p.fields, raw, e.expanded)) {
    why = "raw EV has bits set beyond the " + std::to_string(raw_bits(p.fields)) + " its fields consume";
    return false;
  }
  e.raw = raw;
  e.port = port;
  e.engine_ev.port = static_cast<std::uint8_t>(port - 1);
  return value_locked(f.mode, e.expanded, e.engine_ev.value, why);
}

std::string ProfileStore::regenerate(EvProfile& p) {
  const EvFmtInfo& f = fmts_.at(p.fmt_id);
  const std::uint64_t ports = ((std::uint64_t{1} << num_ports_) - 1) << 1;
  const auto gen = generate(f.widths, p.fields, p.count, ports, [&](const EvBytes& x, std::uint8_t port) {
    return std::find(p.denied.begin(), p.denied.end(), std::pair{x, port}) != p.denied.end();
  });
  p.entries.clear();
  for (const GeneratedEv& g : gen) {
    EvEntry e;
    e.raw = g.raw;
    e.expanded = g.expanded;
    e.port = g.port;
    e.engine_ev.port = static_cast<std::uint8_t>(g.port - 1);
    std::string why;
    if (!value_locked(f.mode, g.expanded, e.engine_ev.value, why)) return why;
    p.entries.push_back(e);
  }
  return {};
}

void ProfileStore::set_entry_state(std::uint64_t id, EvProfile& p, EvEntry& e, std::uint32_t state) {
  if (e.state == state) return;
  e.state = state;
  if (p.state == MRC_CTL_PROFILE_ONLINE && (state & p.event_mask) && sink_)
    sink_(EvEventRecord{id, e.raw, e.port, state});
}

int ProfileStore::apply_ev_op(std::uint64_t id, EvProfile& p, const EvModify& m, EvResult& r,
                              std::string& why) {
  if (m.op == MRC_CTL_EV_OP_QUERY_EV_STATE || m.op == MRC_CTL_EV_OP_QUERY_EV_ARRAY)
    return query_ev_op(p, m, r, why);
  if (m.op != MRC_CTL_EV_OP_REPLACE_EV && m.op != MRC_CTL_EV_OP_MODIFY_EV_STATE) {
    why = "unknown EV op";
    return EINVAL;
  }
  if (p.mode == MRC_CTL_EV_MODE_AUTO) {
    why = "AUTO profiles have no EV array";
    return EINVAL;
  }
  if (m.op == MRC_CTL_EV_OP_REPLACE_EV && p.mode != MRC_CTL_EV_MODE_EXP) {
    why = "REPLACE_EV needs an explicit (EXP) profile";
    return EINVAL;
  }
  if (!p.index.valid) build_index(p);
  for (const EvOpEntry& op : m.entries) {
    if (op.state == 0 || (op.state & ~kSettableStates) || std::popcount(op.state) != 1) {
      why = "entry " + std::to_string(r.done) + ": state must be GOOD or DENIED";
      return EINVAL;
    }
    EvEntry repl;
    if (m.op == MRC_CTL_EV_OP_REPLACE_EV) {
      if (!fill_entry(p, op.ev_new, op.port_new, repl, why)) {
        why = "entry " + std::to_string(r.done) + ": " + why;
        return EINVAL;
      }
      repl.state = op.state;
    }
    const std::pair key{op.ev, op.port};
    const auto it = p.index.at.find(key);
    if (it == p.index.at.end() || it->second.empty()) {
      why = "entry " + std::to_string(r.done) + ": EV not in the profile";
      return ENOENT;
    }
    // The first occurrence in array order, or every one (ALL_COPIES), lowest index first.
    std::vector<std::uint32_t>& at = it->second;
    const std::size_t n = (op.flags & MRC_CTL_EV_OP_F_ALL_COPIES) ? at.size() : 1;
    if (m.op == MRC_CTL_EV_OP_REPLACE_EV) {
      const std::pair to{repl.raw, repl.port};
      if (to == key) {
        for (std::size_t k = 0; k < n; ++k) {
          EvEntry& e = p.entries[at[at.size() - 1 - k]];
          e = repl;
          r.deny.emplace_back(e.engine_ev, e.state == MRC_CTL_EV_DENIED);
        }
      } else {
        std::vector<std::uint32_t>& dst = p.index.at[to];  // element references survive a rehash
        for (std::size_t k = 0; k < n; ++k) {
          const std::uint32_t i = at.back();
          at.pop_back();
          p.entries[i] = repl;
          r.deny.emplace_back(repl.engine_ev, repl.state == MRC_CTL_EV_DENIED);
          dst.insert(std::upper_bound(dst.begin(), dst.end(), i, std::greater<>()), i);
        }
        if (at.empty()) p.index.at.erase(key);
      }
    } else {
      for (std::size_t k = 0; k < n; ++k) {
        EvEntry& e = p.entries[at[at.size() - 1 - k]];
        set_entry_state(id, p, e, op.state);
        r.deny.emplace_back(e.engine_ev, op.state == MRC_CTL_EV_DENIED);
        if (p.mode == MRC_CTL_EV_MODE_GEN) {
          const std::pair gkey{e.expanded, e.port};
          std::erase(p.denied, gkey);
          if (op.state == MRC_CTL_EV_DENIED) p.denied.push_back(gkey);
        }
      }
    }
    ++r.done;
  }
  return 0;
}

std::size_t ProfileStore::EvKeyHash::operator()(const std::pair<EvBytes, std::uint8_t>& k) const noexcept {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ k.second;
  for (std::size_t i = 0; i < kEvBytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, k.first.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return static_cast<std::size_t>(h);
}

void ProfileStore::build_index(EvProfile& p) {
  p.index.at.clear();
  p.index.at.reserve(p.entries.size());
  for (std::size_t i = p.entries.size(); i-- > 0;)
    p.index.at[{p.entries[i].raw, p.entries[i].port}].push_back(static_cast<std::uint32_t>(i));
  p.index.valid = true;
}

const std::vector<std::uint32_t>* ProfileStore::find_entries(const EvProfile& p, const EvBytes& raw,
                                                             std::uint8_t port) {
  const auto it = p.index.at.find({raw, port});
  return it == p.index.at.end() || it->second.empty() ? nullptr : &it->second;
}

int ProfileStore::query_ev_op(const EvProfile& p, const EvModify& m, EvResult& r, std::string& why) const {
  if (m.op == MRC_CTL_EV_OP_QUERY_EV_ARRAY) {
    if (m.query_capacity < p.entries.size()) {
      r.needed = static_cast<std::uint32_t>(p.entries.size());
      why = "the array needs " + std::to_string(r.needed) + " entries";
      return E2BIG;
    }
    for (const EvEntry& e : p.entries) {
      EvOpEntry o;
      o.ev = e.raw;
      o.port = e.port;
      o.state = e.state;
      r.entries.push_back(o);
    }
    r.done = static_cast<std::uint32_t>(r.entries.size());
    return 0;
  }
  if (m.op != MRC_CTL_EV_OP_QUERY_EV_STATE) {
    why = "only QUERY_EV_STATE and QUERY_EV_ARRAY are queries";
    return EINVAL;
  }
  for (const EvOpEntry& op : m.entries) {
    const EvEntry* e = nullptr;
    if (p.index.valid) {
      if (const auto* at = find_entries(p, op.ev, op.port)) e = &p.entries[at->back()];
    } else {
      auto it = std::find_if(p.entries.begin(), p.entries.end(),
                             [&](const EvEntry& x) { return x.raw == op.ev && x.port == op.port; });
      if (it != p.entries.end()) e = &*it;
    }
    if (e == nullptr) {
      why = "entry " + std::to_string(r.done) + ": EV not in the profile";
      return ENOENT;
    }
    EvOpEntry o = op;
    o.state = e->state;
    r.entries.push_back(o);
    ++r.done;
  }
  return 0;
}

int ProfileStore::modify_ev(std::uint64_t id, const EvModify& m, EvResult& r, std::string& why) {
  std::lock_guard lk(mu_);
  constexpr std::uint32_t known = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                  MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                  MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK |
                                  MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
  if (m.mask & MRC_CTL_EV_PROFILE_VENDOR_CFG) {
    why = "this implementation has no vendor configuration";
    return EINVAL;
  }
  if (m.mask & ~known) {
    why = "attribute mask has bits a modify cannot take";
    return EINVAL;
  }
  if ((m.mask & MRC_CTL_EV_PROFILE_EV_OP) && (m.mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP)) {
    why = "EV_OP and EV_FIELDS_OP are mutually exclusive";
    return EINVAL;
  }
  // An EV op alone edits the profile in place: a modify otherwise works on a copy (kept only if
  // every step succeeds), and copying a 65,536-entry array per single-EV REPLACE_EV call was most
  // of the 38.5 s OCP's walkthrough took. EV ops keep what they did before a failing entry
  // anyway (OCP: partial success is possible). A GEN profile that is not ONLINE takes the general
  // path, which regenerates its EVs first.
  if (m.mask == MRC_CTL_EV_PROFILE_EV_OP) {
    const auto it = evs_.find(id);
    if (it != evs_.end() && it->second.state != MRC_CTL_PROFILE_INIT &&
        (it->second.mode != MRC_CTL_EV_MODE_GEN || it->second.state == MRC_CTL_PROFILE_ONLINE) &&
        !(it->second.state == MRC_CTL_PROFILE_ONLINE && m.op == MRC_CTL_EV_OP_REPLACE_EV))
      return apply_ev_op(id, it->second, m, r, why);
  }
  bool created = false;
  if (int rc = find_or_create(evs_, id, limits_.max_ev_profiles, created, why)) return rc;
  EvProfile p = evs_[id];
  const auto fail = [&](int rc, std::string w) {
    if (created) evs_.erase(id);
    why = std::move(w);
    return rc;
  };
  const bool to_state = m.mask & MRC_CTL_EV_PROFILE_STATE;
  if (to_state && !valid_state(m.state)) return fail(EINVAL, "unknown profile state");
  const bool fields_modify =
      (m.mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) && m.fields_op == MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;

  if (p.state == MRC_CTL_PROFILE_ONLINE) {
    constexpr std::uint32_t online_ok =
        MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
    if ((m.mask & ~online_ok) || fields_modify || (to_state && m.state != MRC_CTL_PROFILE_OFFLINE) ||
        ((m.mask & MRC_CTL_EV_PROFILE_EV_OP) && m.op == MRC_CTL_EV_OP_REPLACE_EV))
      return fail(EINVAL,
                  "an ONLINE EV profile only moves to OFFLINE, changes EV states and answers queries");
    if (to_state && p.users > 0) return fail(EBUSY, std::to_string(p.users) + " QP(s) use this profile");
  } else if (p.state == MRC_CTL_PROFILE_INIT) {
    if (!to_state || m.state != MRC_CTL_PROFILE_OFFLINE)
      return fail(EINVAL, "an INIT EV profile can only move to OFFLINE");
    if (m.mask & MRC_CTL_EV_PROFILE_EV_OP) return fail(EINVAL, "EV ops need an OFFLINE or ONLINE profile");
    if (!(m.mask & MRC_CTL_EV_PROFILE_MODE)) return fail(EINVAL, "moving to OFFLINE needs MODE");
    if (m.mode != MRC_CTL_EV_MODE_AUTO) {
      constexpr std::uint32_t need = MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT;
      if ((m.mask & need) != need || !fields_modify)
        return fail(EINVAL,
                    "moving an EXP/GEN profile to OFFLINE needs MODE, FMT_ID, COUNT and MODIFY_FIELDS");
    }
  }

  if (m.mask & MRC_CTL_EV_PROFILE_MODE) {
    if (m.mode != MRC_CTL_EV_MODE_AUTO && m.mode != MRC_CTL_EV_MODE_EXP && m.mode != MRC_CTL_EV_MODE_GEN)
      return fail(EINVAL, "unknown EV mode");
    if (m.mode != p.mode) p.entries.clear();
    p.mode = m.mode;
  }
  if (m.mask & MRC_CTL_EV_PROFILE_FMT_ID) {
    if (!fmts_.count(m.fmt_id))
      return fail(EINVAL, "EV format profile " + std::to_string(m.fmt_id) + " does not exist");
    if (m.fmt_id != p.fmt_id && p.mode == MRC_CTL_EV_MODE_EXP) p.entries.assign(p.entries.size(), EvEntry{});
    p.fmt_id = m.fmt_id;
    p.fmt_set = true;
  }
  if (m.mask & MRC_CTL_EV_PROFILE_COUNT) {
    if (m.count == 0 || m.count > limits_.max_evs_profile || m.count % limits_.count_align)
      return fail(EINVAL, "ev_count must be 1.." + std::to_string(limits_.max_evs_profile) +
                              " and a multiple of " + std::to_string(limits_.count_align));
    std::uint64_t others = 0;
    for (const auto& [oid, o] : evs_)
      if (oid != id) others += std::max<std::uint64_t>(o.count, o.entries.size());
    if (others + m.count > limits_.max_evs)
      return fail(E2BIG, "only " + std::to_string(limits_.max_evs - others) + " EVs are free");
    p.count = m.count;
    p.count_set = true;
    if (p.mode == MRC_CTL_EV_MODE_EXP) p.entries.resize(p.count);
  }
  if (fields_modify) {
    if (m.fields.empty() || m.fields.size() > kEvBits) return fail(EINVAL, "1..256 fields");
    if (p.mode == MRC_CTL_EV_MODE_EXP)
      p.entries.assign(p.entries.size(), EvEntry{});  // raw EVs meant other fields
    p.denied.clear();                                 // generated EVs denied under the old fields
    p.fields = m.fields;
    p.fields_set = true;
  }
  if (m.mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) {
    if (m.min_active == 0) return fail(EINVAL, "ev_min_active must be at least 1");
    p.min_active = m.min_active;
    p.min_active_set = true;
  }
  if (m.mask & MRC_CTL_EV_PROFILE_EVENT_MASK) {
    if (m.event_mask & ~kEventStates) return fail(EINVAL, "the event mask takes only GOOD and ASSUMED_BAD");
    p.event_mask = m.event_mask;
    p.event_mask_set = true;
  }
  if (p.mode != MRC_CTL_EV_MODE_AUTO && p.fields_set &&
      ((m.mask & (MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT)) || fields_modify))
    if (std::string w = check_ev_config(p); !w.empty()) return fail(EINVAL, w);
  if (p.mode == MRC_CTL_EV_MODE_GEN && p.state != MRC_CTL_PROFILE_ONLINE && check_ev_config(p).empty())
    if (std::string w = regenerate(p); !w.empty()) return fail(EINVAL, w);

  int rc = 0;
  if (m.mask & MRC_CTL_EV_PROFILE_EV_OP) rc = apply_ev_op(id, p, m, r, why);
  if (rc == 0 && (m.mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) && !fields_modify) {
    if (m.fields_capacity < p.fields.size()) {
      r.needed = static_cast<std::uint32_t>(p.fields.size());
      return fail(E2BIG, "the field array needs " + std::to_string(r.needed) + " entries");
    }
    r.fields = p.fields;
  }
  if (rc == 0 && to_state) {
    if (m.state == MRC_CTL_PROFILE_ONLINE) {
      if (p.state != MRC_CTL_PROFILE_OFFLINE) return fail(EINVAL, "only an OFFLINE profile moves to ONLINE");
      if (!p.min_active_set || !p.event_mask_set)
        return fail(EINVAL, "moving to ONLINE needs MIN_ACTIVE and EVENT_MASK");
      if (std::string w = check_ev_config(p); !w.empty()) return fail(EINVAL, w);
      if (p.mode != MRC_CTL_EV_MODE_AUTO) {
        const auto f = fmts_.find(p.fmt_id);
        if (f->second.state != MRC_CTL_PROFILE_ONLINE)
          return fail(EINVAL, "its EV format profile is not ONLINE");
      }
      if (p.mode == MRC_CTL_EV_MODE_EXP && std::any_of(p.entries.begin(), p.entries.end(), is_unpopulated))
        return fail(EINVAL, "every explicit entry must be replaced before ONLINE");
      if (p.mode == MRC_CTL_EV_MODE_GEN && p.entries.empty())
        return fail(EINVAL, "the fields generate no EV");
    }
    if (m.state == MRC_CTL_PROFILE_INIT) p = EvProfile{};
    p.state = m.state;
  }
  evs_[id] = std::move(p);
  if (rc != 0 && created && r.done == 0) evs_.erase(id);
  return rc;
}

int ProfileStore::query_ev(std::uint64_t id, const EvModify& q, EvProfileInfo& out, EvResult& r,
                           std::string& why) const {
  std::lock_guard lk(mu_);
  if (id == 0) {
    out = EvProfileInfo{};
    out.state = MRC_CTL_PROFILE_ONLINE;
    out.mode = MRC_CTL_EV_MODE_AUTO;
    out.count = limits_.auto_evs_per_port * num_ports_;
    return 0;
  }
  auto it = evs_.find(id);
  if (it == evs_.end()) {
    why = "no EV profile " + std::to_string(id);
    return ENOENT;
  }
  const EvProfile& p = it->second;
  if ((q.mask & MRC_CTL_EV_PROFILE_EV_OP) && (q.mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP)) {
    why = "EV_OP and EV_FIELDS_OP are mutually exclusive";
    return EINVAL;
  }
  // Everything but the array (a query never returns it this way; copying it cost O(EVs)).
  out.state = p.state;
  out.mode = p.mode;
  out.fmt_id = p.fmt_id;
  out.count = p.mode == MRC_CTL_EV_MODE_GEN ? static_cast<std::uint32_t>(p.entries.size()) : p.count;
  out.min_active = p.min_active;
  out.event_mask = p.event_mask;
  out.fields = p.fields;
  out.entries.clear();
  out.users = p.users;
  if (q.mask & MRC_CTL_EV_PROFILE_EV_OP) return query_ev_op(p, q, r, why);
  if (q.mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
    if (q.fields_op != MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS) {
      why = "a query takes EV_FIELDS_OP QUERY only";
      return EINVAL;
    }
    if (q.fields_capacity < p.fields.size()) {
      r.needed = static_cast<std::uint32_t>(p.fields.size());
      why = "the field array needs " + std::to_string(r.needed) + " entries";
      return E2BIG;
    }
    r.fields = p.fields;
  }
  return 0;
}

// ---- CC profiles --------------------------------------------------------------------------------

std::string ProfileStore::nscc_from_ctl(const mrc_ctl_cc_nscc_cfg& in, cc::NsccConfig& out) {
  const auto bad_frac = [](float x) { return !std::isfinite(x) || x <= 0.0f || x > 1.0f; };
  const auto bad_pos = [](float x) { return !std::isfinite(x) || x < 0.0f; };
  if (in.base_rtt == 0) return "base_rtt must be > 0";
  if (in.target_delay == 0) return "target_delay must be > 0";
  if (in.max_cwnd == 0) return "max_cwnd must be > 0";
  if (bad_frac(in.gamma)) return "gamma must be in (0, 1]";
  if (bad_frac(in.max_md_jump)) return "max_md_jump must be in (0, 1]";
  // One message per setting, starting with its name (mrc ctl points at that key of the file).
  if (bad_pos(in.fi)) return "fi must be a finite number >= 0";
  if (bad_pos(in.fi_scale)) return "fi_scale must be a finite number >= 0";
  if (bad_pos(in.eta)) return "eta must be a finite number >= 0";
  if (in.qa_gate > 31) return "qa_gate must be 0..31";
  if (in.adjust_bytes_threshold == 0) return "adjust_bytes_threshold must be > 0";
  if (in.adjust_period_threshold == 0) return "adjust_period_threshold must be > 0";
  if (in.disable_qa > 1) return "disable_qa must be 0 or 1";
  cc::NsccConfig c;
  c.base_rtt_ns = in.base_rtt;
  c.target_delay_ns = in.target_delay;
  c.max_cwnd = in.max_cwnd;
  c.gamma = in.gamma;
  c.max_md_jump = in.max_md_jump;
  c.fi = in.fi;
  c.fi_scale = in.fi_scale;
  c.eta = in.eta;
  c.qa_gate = in.qa_gate;
  c.qa_threshold_ns = in.qa_threshold;
  c.adjust_bytes_threshold = in.adjust_bytes_threshold;
  c.adjust_period_threshold_ns = in.adjust_period_threshold;
  c.disable_qa = in.disable_qa != 0;
  out = c;
  return {};
}

std::string ProfileStore::low_sport_warning(std::uint32_t fmt_mode, std::span<const EvBytes> expanded) {
  if (fmt_mode != static_cast<std::uint32_t>(EvFmtMode::kStev) &&
      fmt_mode != static_cast<std::uint32_t>(EvFmtMode::kUdp))
    return {};  // SRv6 EVs are addresses, not source ports
  std::size_t low = 0;
  std::uint32_t lo = kLowSportLimit, hi = 0;
  for (const EvBytes& x : expanded) {
    const std::uint32_t sport = (std::uint32_t{x[0]} << 8) | x[1];
    if (sport >= kLowSportLimit) continue;
    ++low;
    lo = std::min(lo, sport);
    hi = std::max(hi, sport);
  }
  if (low == 0) return {};
  std::string w = std::to_string(low) + " of its " + std::to_string(expanded.size()) +
                  " EVs are on UDP source ports below " + std::to_string(kLowSportLimit) + " (" +
                  (lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi)) +
                  "): sending from them needs CAP_NET_BIND_SERVICE";
  if (lo == 0) w += ", and source port 0 cannot be sent (its packets spread instead)";
  return w + "; keep source ports >= " + std::to_string(kLowSportLimit);
}

mrc_ctl_cc_nscc_cfg ProfileStore::nscc_to_ctl(const cc::NsccConfig& c) {
  mrc_ctl_cc_nscc_cfg o{};
  o.base_rtt = c.base_rtt_ns;
  o.target_delay = c.target_delay_ns;
  o.max_cwnd = c.max_cwnd;
  o.gamma = c.gamma;
  o.max_md_jump = c.max_md_jump;
  o.fi = c.fi;
  o.fi_scale = c.fi_scale;
  o.eta = c.eta;
  o.qa_gate = c.qa_gate;
  o.qa_threshold = c.qa_threshold_ns;
  o.adjust_bytes_threshold = c.adjust_bytes_threshold;
  o.adjust_period_threshold = c.adjust_period_threshold_ns;
  o.disable_qa = c.disable_qa ? 1 : 0;
  return o;
}

int ProfileStore::modify_cc(std::uint64_t id, const CcModify& m, std::string& why) {
  std::lock_guard lk(mu_);
  constexpr std::uint32_t known =
      MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG;
  if (m.mask & ~known) {
    why = "attribute mask has bits a modify cannot take";
    return EINVAL;
  }
  bool created = false;
  if (int rc = find_or_create(ccs_, id, limits_.max_cc_profiles, created, why)) return rc;
  CcProfileInfo p = ccs_[id];
  const auto fail = [&](int rc, std::string w) {
    if (created) ccs_.erase(id);
    why = std::move(w);
    return rc;
  };
  const bool to_state = m.mask & MRC_CTL_CC_PROFILE_STATE;
  if (to_state && !valid_state(m.state)) return fail(EINVAL, "unknown profile state");
  switch (p.state) {
    case MRC_CTL_PROFILE_INIT:
      if (!to_state || m.state != MRC_CTL_PROFILE_OFFLINE)
        return fail(EINVAL, "an INIT CC profile can only move to OFFLINE");
      if (!(m.mask & MRC_CTL_CC_PROFILE_ALGORITHM)) return fail(EINVAL, "moving to OFFLINE needs ALGORITHM");
      break;
    case MRC_CTL_PROFILE_OFFLINE:
      break;
    case MRC_CTL_PROFILE_ONLINE:
      if (m.mask != MRC_CTL_CC_PROFILE_STATE || m.state != MRC_CTL_PROFILE_OFFLINE)
        return fail(EINVAL, "an ONLINE CC profile can only move to OFFLINE");
      if (p.users > 0) return fail(EBUSY, std::to_string(p.users) + " QP(s) use this profile");
      ccs_[id].state = MRC_CTL_PROFILE_OFFLINE;
      return 0;
  }
  if (m.mask & MRC_CTL_CC_PROFILE_ALGORITHM) {
    cc::Algorithm a = cc::Algorithm::kNone;
    if (!m.algorithm_null && !cc::algorithm_from_name(m.algorithm, a))
      return fail(EINVAL, "unknown CC algorithm \"" + m.algorithm + "\"");
    p.algorithm = a;
    p.algorithm_set = true;
  }
  if (m.mask & MRC_CTL_CC_PROFILE_CONFIG) {
    if (!m.config_present) return fail(EINVAL, "CONFIG needs a struct mrc_ctl_cc_nscc_cfg");
    if (p.algorithm != cc::Algorithm::kNscc) return fail(EINVAL, "CONFIG needs ALGORITHM \"uet-1.0-nscc\"");
    cc::NsccConfig c;
    if (std::string w = nscc_from_ctl(m.config, c); !w.empty()) return fail(EINVAL, w);
    p.config = m.config;
    p.config_set = true;
  }
  if (to_state) {
    if (m.state == MRC_CTL_PROFILE_ONLINE && p.algorithm != cc::Algorithm::kNone && !p.config_set)
      return fail(EINVAL, "moving to ONLINE needs CONFIG");
    if (m.state == MRC_CTL_PROFILE_INIT) p = CcProfileInfo{};
    p.state = m.state;
  }
  ccs_[id] = p;
  return 0;
}

int ProfileStore::query_cc(std::uint64_t id, CcProfileInfo& out) const {
  std::lock_guard lk(mu_);
  if (id == 0) {
    out = CcProfileInfo{};
    out.state = MRC_CTL_PROFILE_ONLINE;
    out.algorithm_set = out.config_set = true;
    out.algorithm = cc::Algorithm::kNscc;
    out.config = nscc_to_ctl(cc::NsccConfig{});
    return 0;
  }
  auto it = ccs_.find(id);
  if (it == ccs_.end()) return ENOENT;
  out = it->second;
  return 0;
}

// ---- listings, events ---------------------------------------------------------------------------

std::vector<std::uint64_t> ProfileStore::ev_fmt_ids() const {
  std::lock_guard lk(mu_);
  std::vector<std::uint64_t> v;
  for (const auto& [id, p] : fmts_) v.push_back(id);
  return v;
}

std::vector<std::uint64_t> ProfileStore::ev_ids() const {
  std::lock_guard lk(mu_);
  std::vector<std::uint64_t> v{0};
  for (const auto& [id, p] : evs_) v.push_back(id);
  return v;
}

std::vector<std::uint64_t> ProfileStore::cc_ids() const {
  std::lock_guard lk(mu_);
  std::vector<std::uint64_t> v{0};
  for (const auto& [id, p] : ccs_) v.push_back(id);
  return v;
}

void ProfileStore::on_engine_ev_state(const engine::Ev& ev, engine::EvState to) {
  std::lock_guard lk(mu_);
  const std::uint32_t s = ctl_state(to);
  if (s == MRC_CTL_EV_DENIED) return;  // the controller's own doing, already recorded
  for (auto& [id, p] : evs_) {
    if (p.state != MRC_CTL_PROFILE_ONLINE) continue;
    for (EvEntry& e : p.entries)
      if (e.engine_ev == ev && e.state != MRC_CTL_EV_DENIED) set_entry_state(id, p, e, s);
  }
}

void ProfileStore::set_event_sink(std::function<void(const EvEventRecord&)> sink) {
  std::lock_guard lk(mu_);
  sink_ = std::move(sink);
}

std::vector<EvBytes> ProfileStore::srv6_paths() const {
  std::lock_guard lk(mu_);
  return srv6_paths_;
}

void ProfileStore::set_wire_rules(WireRules rules) {
  std::lock_guard lk(mu_);
  wire_ = std::move(rules);
}

int ProfileStore::engine_value(std::uint32_t mode, const EvBytes& expanded, std::uint32_t& out,
                               std::string& why) {
  std::lock_guard lk(mu_);
  return value_locked(mode, expanded, out, why) ? 0 : EINVAL;
}

// ---- save / restore -----------------------------------------------------------------------------

struct ProfileStore::Snapshot {
  std::map<std::uint64_t, std::optional<EvFmtInfo>> fmts;
  std::map<std::uint64_t, std::optional<EvProfile>> evs;
  std::map<std::uint64_t, std::optional<CcProfileInfo>> ccs;
};

std::shared_ptr<const ProfileStore::Snapshot> ProfileStore::save(
    const std::vector<std::uint64_t>& fmt_ids, const std::vector<std::uint64_t>& ev_ids,
    const std::vector<std::uint64_t>& cc_ids) const {
  std::lock_guard lk(mu_);
  auto s = std::make_shared<Snapshot>();
  const auto take = [](const auto& from, const std::vector<std::uint64_t>& ids, auto& to) {
    for (const std::uint64_t id : ids) {
      if (id == 0) continue;  // the built-in default never changes
      const auto it = from.find(id);
      to[id] = it == from.end() ? std::nullopt : std::optional(it->second);
    }
  };
  take(fmts_, fmt_ids, s->fmts);
  take(evs_, ev_ids, s->evs);
  take(ccs_, cc_ids, s->ccs);
  return s;
}

int ProfileStore::restore(const Snapshot& saved, std::string& why) {
  std::lock_guard lk(mu_);
  std::string busy;
  // users: QPs hold EV and CC profiles (formats only through their EV profiles, which are checked).
  const auto put = [&](auto& to, const auto& from, const char* kind, auto users_of) {
    for (const auto& [id, was] : from) {
      const auto it = to.find(id);
      if (it != to.end() && users_of(it->second) > 0) {
        // One in use when it was saved could not change since (it cannot leave ONLINE).
        if (!was || users_of(*was) == 0)
          busy += std::string(busy.empty() ? "" : ", ") + kind + " " + std::to_string(id);
        continue;
      }
      if (!was) {
        if (it != to.end()) to.erase(it);
      } else {
        to[id] = *was;
      }
    }
  };
  put(evs_, saved.evs, "EV profile", [](const EvProfile& p) { return p.users; });
  put(ccs_, saved.ccs, "CC profile", [](const CcProfileInfo& p) { return p.users; });
  put(fmts_, saved.fmts, "EV format", [](const EvFmtInfo&) { return 0u; });
  if (busy.empty()) return 0;
  why = "in use by QPs, left as they are: " + busy;
  return EBUSY;
}

}  // namespace mrc::api
