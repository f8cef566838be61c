// The endpoint process's EV-format, EV and CC profiles (mrc_ctl.h), and what a QP takes from them.
// Seam between the application API (a QP names its profiles at INIT) and the controller API (which
// creates and changes them, in process or through the control socket).
//
// Every profile follows INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT; which attributes may change in
// which state is the table of docs/protocol.md §7.3 (anything else is EINVAL). Profile ID 0 is the
// built-in default (read-only). Thread-safe: one mutex, never taken on the data path.
//
// EV values for the engine (docs/decisions.md D31, D37): an STEV/UDP EV is the first 4 bytes of
// the expanded EV, big-endian (source port << 16 | flow label), put in the endpoint's canonical form
// (WireRules::canonical); an SRv6 EV is an index into srv6_paths(), the endpoint-wide table of
// expanded 32-byte SRv6 EVs (destination address + SRH segment) this store fills and the endpoint
// loads as its uSID path list.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/ev_expand.hpp"
#include "cc/cc.hpp"
#include "engine/types.hpp"
#include "mrc/mrc_ctl.h"

namespace mrc::api {

/// The service's EV-format mask bit for "the request brings the field widths" (the client turns
/// OCP's MRC_CTL_EV_FMT_PROFILE_OP + MRC_CTL_EV_FMT_OP_MODIFY_FIELDS into it).
inline constexpr std::uint32_t kWireFmtModifyFields = 1u << 3;

/// What a QP gets from its EV and CC profiles when it moves to INIT.
struct QpProfiles {
  std::vector<engine::Ev> evs;     ///< active EVs (port-interleaved) then backups
  std::uint32_t active_count = 0;  ///< 0 = all active
  std::uint32_t ev_min_active = 1;
  cc::Config cc;
};

/// Capacities reported by mrc_ctl_query_device.
struct StoreLimits {
  std::uint32_t max_fmt_profiles = 64;
  std::uint32_t max_ev_profiles = 64;
  std::uint32_t max_evs = 1u << 20;  ///< across all profiles
  std::uint32_t max_evs_profile = 65536;
  std::uint32_t count_align = 1;
  std::uint32_t max_cc_profiles = 64;
  std::uint32_t auto_evs_per_port = 32;  ///< AUTO profiles and profile 0
  std::uint32_t auto_backups_per_port = 8;
};

/// One EV of a profile's array.
struct EvEntry {
  EvBytes raw{};          ///< as the controller gave it (EXP) or the generator made it (GEN)
  EvBytes expanded{};     ///< wire form
  std::uint8_t port = 0;  ///< 1-based; 0 = unpopulated
  std::uint32_t state = MRC_CTL_EV_GOOD;
  engine::Ev engine_ev;  ///< value and 0-based port for the engine
};

struct EvFmtInfo {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  std::uint32_t mode = 0;
  std::vector<std::uint32_t> widths;
};

struct EvProfileInfo {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  std::uint32_t mode = 0;
  std::uint64_t fmt_id = 0;
  std::uint32_t count = 0;
  std::uint32_t min_active = 1;
  std::uint32_t event_mask = 0;
  std::vector<EvField> fields;
  std::vector<EvEntry> entries;
  std::uint32_t users = 0;
};

struct CcProfileInfo {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  bool algorithm_set = false;
  cc::Algorithm algorithm = cc::Algorithm::kNone;
  bool config_set = false;
  mrc_ctl_cc_nscc_cfg config{};
  std::uint32_t users = 0;
};

/// A modify request, already decoded from the C structs; `mask` holds the C attr-mask bits.
struct EvFmtModify {
  std::uint32_t mask = 0;
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  std::uint32_t mode = 0;
  std::vector<std::uint32_t> widths;
};

struct EvOpEntry {
  EvBytes ev{};
  std::uint8_t port = 0;
  EvBytes ev_new{};
  std::uint8_t port_new = 0;
  std::uint32_t state = 0;
  std::uint32_t flags = 0;
};

struct EvModify {
  std::uint32_t mask = 0;
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  std::uint32_t mode = 0;
  std::uint64_t fmt_id = 0;
  std::uint32_t count = 0;
  std::uint32_t min_active = 0;
  std::uint32_t event_mask = 0;
  mrc_ctl_ev_op op = MRC_CTL_EV_OP_REPLACE_EV;
  std::vector<EvOpEntry> entries;    ///< in and out (QUERY_EV_STATE fills state)
  std::uint32_t query_capacity = 0;  ///< QUERY_EV_ARRAY: room in the caller's array
  mrc_ctl_ev_fields_op fields_op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  std::vector<EvField> fields;
  std::uint32_t fields_capacity = 0;  ///< FIELDS_OP QUERY: room in the caller's array
};

/// Results of an EV-profile call beyond the errno.
struct EvResult {
  std::uint32_t done = 0;    ///< EV_OP entries processed
  std::uint32_t needed = 0;  ///< E2BIG: entries / fields needed
  std::vector<EvOpEntry> entries;
  std::vector<EvField> fields;
  /// Engine changes to apply to live QPs: (EV, denied) in order.
  std::vector<std::pair<engine::Ev, bool>> deny;
};

struct CcModify {
  std::uint32_t mask = 0;
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  bool algorithm_null = false;  ///< ALGORITHM given as NULL: no CC
  std::string algorithm;
  bool config_present = false;
  mrc_ctl_cc_nscc_cfg config{};
};

/// An EV state change of a profile's EV that matches the profile's event mask.
struct EvEventRecord {
  std::uint64_t profile_id = 0;
  EvBytes raw{};
  std::uint8_t port = 0;
  std::uint32_t state = 0;
};

/// How the endpoint behind the store puts EVs on the wire. CtlService sets them from its
/// UdpEndpoint; without one (`mrc ctl --offline`) values are the plain wire forms and every SRv6 EV
/// is taken.
struct WireRules {
  /// UDP/STEV: the engine value of a wire form (ev_value_be32) as that endpoint's receivers recover
  /// and reflect it (io::UdpEndpoint::canonical_ev), so the sender recognises its EV in SACKs.
  std::function<std::uint32_t(std::uint32_t)> canonical;
  /// SRv6: "" when the endpoint can send this expanded EV, else why (the EV is refused, EINVAL).
  std::function<std::string(const EvBytes&)> srv6_check;
};

class ProfileStore {
 public:
  explicit ProfileStore(const StoreLimits& limits = {});

  /// Profile ID 0 (EV or CC) is the built-in default: an AUTO EV set over every port and NSCC with
  /// its default configuration. Returns 0, or ENOENT (unknown ID) / EINVAL (profile not ONLINE,
  /// or no EV left that is not DENIED). On success both profiles count one more user (taking
  /// them OFFLINE is EBUSY) until release().
  int acquire(std::uint64_t ev_profile_id, std::uint64_t cc_profile_id, std::uint32_t num_ports,
              QpProfiles& out);
  void release(std::uint64_t ev_profile_id, std::uint64_t cc_profile_id);

  /// Ports (planes) of the endpoint: valid EV ports are 1..num_ports.
  void set_num_ports(std::uint32_t n);
  std::uint32_t num_ports() const;
  const StoreLimits& limits() const { return limits_; }
  std::uint32_t evs_in_use() const;

  // --- controller operations: 0 or an errno; `why` says what was wrong ------------------------
  int modify_ev_fmt(std::uint64_t id, const EvFmtModify& m, std::string& why);
  int query_ev_fmt(std::uint64_t id, EvFmtInfo& out) const;
  int modify_ev(std::uint64_t id, const EvModify& m, EvResult& r, std::string& why);
  /// Query ops of EV_OP (QUERY_EV_STATE / QUERY_EV_ARRAY) and FIELDS_OP QUERY.
  int query_ev(std::uint64_t id, const EvModify& q, EvProfileInfo& out, EvResult& r, std::string& why) const;
  int modify_cc(std::uint64_t id, const CcModify& m, std::string& why);
  int query_cc(std::uint64_t id, CcProfileInfo& out) const;

  std::vector<std::uint64_t> ev_fmt_ids() const;
  std::vector<std::uint64_t> ev_ids() const;
  std::vector<std::uint64_t> cc_ids() const;

  /// A QP's EV changed state in the engine: every ONLINE profile holding that EV (not DENIED)
  /// takes the new state; changes matching the profile's event mask go to the event sink.
  void on_engine_ev_state(const engine::Ev& ev, engine::EvState to);
  /// Receives EV events (called with the store's lock held: must not call back into the store).
  void set_event_sink(std::function<void(const EvEventRecord&)> sink);

  /// Set before any profile exists (the values of existing EVs are not recomputed).
  void set_wire_rules(WireRules rules);
  /// Expanded SRv6 EVs; an SRv6 EV's engine value is its index here. The table only grows.
  std::vector<EvBytes> srv6_paths() const;
  /// The engine value of an expanded EV of format mode `mode` (an SRv6 EV is added to srv6_paths()
  /// if new: EV probes may name any path). 0, or EINVAL with `why` when the endpoint cannot send it.
  int engine_value(std::uint32_t mode, const EvBytes& expanded, std::uint32_t& out, std::string& why);

  /// The named profiles as they are now (an ID with no profile is saved as absent), for restore():
  /// what makes `mrc ctl apply` all or nothing.
  struct Snapshot;
  std::shared_ptr<const Snapshot> save(const std::vector<std::uint64_t>& fmt_ids,
                                       const std::vector<std::uint64_t>& ev_ids,
                                       const std::vector<std::uint64_t>& cc_ids) const;
  /// Puts the saved profiles back as they were (one saved as absent is removed). A profile that QPs
  /// use now is left as it is and named in `why` (EBUSY); the others are still restored.
  int restore(const Snapshot& saved, std::string& why);

  /// NSCC settings checked and converted (shared with the TOML loader): "" or the error.
  static std::string nscc_from_ctl(const mrc_ctl_cc_nscc_cfg& in, cc::NsccConfig& out);
  static mrc_ctl_cc_nscc_cfg nscc_to_ctl(const cc::NsccConfig& in);

  /// Source ports below this are privileged (binding them needs CAP_NET_BIND_SERVICE).
  static constexpr std::uint32_t kLowSportLimit = 1024;
  /// The profile check for expanded EVs of format mode `fmt_mode` (STEV / UDP: bytes 0-1 are the
  /// UDP source port): "" or a warning saying how many of them, and which ports, are below
  /// kLowSportLimit. A warning, not a refusal: the spec allows any source port, but such EVs only
  /// leave an endpoint that may bind them (docs/decisions.md D37), and port 0 never does.
  static std::string low_sport_warning(std::uint32_t fmt_mode, std::span<const EvBytes> expanded);

 private:
  /// Where each (raw EV, port) is in a profile's array, so an EV op finds its entry without
  /// scanning (OCP's walkthrough fills 65,536 entries one REPLACE_EV "first unpopulated" call
  /// each). Indices per key are kept in descending order: the first occurrence is at the back.
  /// Built on first use from the entries; a copy starts empty and invalid, so a modify that edits
  /// a copy of the profile never carries a stale index back.
  struct EvKeyHash {
    std::size_t operator()(const std::pair<EvBytes, std::uint8_t>& k) const noexcept;
  };
  struct EvIndex {
    std::unordered_map<std::pair<EvBytes, std::uint8_t>, std::vector<std::uint32_t>, EvKeyHash> at;
    bool valid = false;
    EvIndex() = default;
    EvIndex(const EvIndex&) {}
    EvIndex& operator=(const EvIndex&) {
      at.clear();
      valid = false;
      return *this;
    }
    EvIndex(EvIndex&&) = default;
    EvIndex& operator=(EvIndex&&) = default;
  };
  struct EvProfile : EvProfileInfo {
    bool fmt_set = false, count_set = false, fields_set = false, min_active_set = false,
         event_mask_set = false;
    std::vector<std::pair<EvBytes, std::uint8_t>> denied;  ///< GEN: expanded EVs skipped on regeneration
    EvIndex index;
  };
  static void build_index(EvProfile& p);
  /// The entries holding (raw, port), first occurrence at the back; null when none does.
  static const std::vector<std::uint32_t>* find_entries(const EvProfile& p, const EvBytes& raw,
                                                        std::uint8_t port);
  int apply_ev_op(std::uint64_t id, EvProfile& p, const EvModify& m, EvResult& r, std::string& why);
  int query_ev_op(const EvProfile& p, const EvModify& m, EvResult& r, std::string& why) const;
  std::string check_ev_config(const EvProfile& p) const;
  bool fill_entry(const EvProfile& p, const EvBytes& raw, std::uint8_t port, EvEntry& e, std::string& why);
  /// "" or why a generated EV cannot be sent.
  std::string regenerate(EvProfile& p);
  bool value_locked(std::uint32_t mode, const EvBytes& expanded, std::uint32_t& out, std::string& why);
  void set_entry_state(std::uint64_t id, EvProfile& p, EvEntry& e, std::uint32_t state);

  StoreLimits limits_;
  mutable std::mutex mu_;
  std::uint32_t num_ports_ = 1;
  std::map<std::uint64_t, EvFmtInfo> fmts_;
  std::map<std::uint64_t, EvProfile> evs_;
  std::map<std::uint64_t, CcProfileInfo> ccs_;
  std::vector<EvBytes> srv6_paths_;
  WireRules wire_;
  std::function<void(const EvEventRecord&)> sink_;
};

}  // namespace mrc::api
