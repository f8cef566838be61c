// `mrc ctl` profile files (config/profiles.toml; docs/api.md): the TOML text of [[ev_format]],
// [[ev_profile]] and [[cc_profile]] tables, checked value by value (type, range, unknown key,
// duplicate ID, missing key, empty file, not TOML) into the mrc_ctl.h structures a controller then
// applies. Nothing here touches a profile store. Every error is a ProfileTomlError naming the file
// and, where there is one, the line of the value at fault (or of its table when a key is missing).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "mrc/mrc_ctl.h"

struct mrc_ctl_context;

namespace mrc::api {

/// A profile file that cannot be read or does not check ("file:line: what"; `mrc ctl` exit 2).
struct ProfileTomlError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Where one table of the file and its keys are: 0 = no line (the key is missing).
struct TomlLines {
  std::uint32_t line = 0;                     ///< the table
  std::map<std::string, std::uint32_t> keys;  ///< each key's value
  std::uint32_t key(const std::string& k) const {
    const auto it = keys.find(k);
    return it == keys.end() ? 0 : it->second;
  }
};

struct FmtDef {
  TomlLines at;
  std::uint64_t id = 0;
  mrc_ctl_ev_fmt_mode mode = MRC_CTL_EV_FMT_MODE_STEV;
  std::vector<mrc_ctl_ev_fmt_field> widths;
};
struct EvDef {
  TomlLines at;
  std::uint64_t id = 0;
  mrc_ctl_ev_mode mode = MRC_CTL_EV_MODE_AUTO;
  std::uint64_t fmt_id = 0;
  std::uint32_t count = 0;
  std::vector<mrc_ctl_ev_field> fields;
  std::vector<std::uint32_t> field_lines;  ///< the line of each 'fields' entry
  std::vector<mrc_ctl_ev_op_entry> evs, deny;
  std::vector<std::uint32_t> ev_lines, deny_lines;  ///< the entry each op came from
  std::uint32_t min_active = 1;
  std::uint32_t event_mask = 0;
};
struct CcDef {
  TomlLines at;
  std::uint64_t id = 0;
  std::string algorithm;
  mrc_ctl_cc_nscc_cfg cfg{};
};

/// One checked profile file.
struct ProfileFile {
  std::string file;
  std::vector<FmtDef> fmts;
  std::vector<EvDef> evps;
  std::vector<CcDef> ccs;
  std::uint32_t ports_needed = 0;  ///< highest port an EV or deny entry names
  std::uint32_t port_line = 0;     ///< where
  std::uint64_t port_profile = 0;
  /// "file:line" (just "file" for line 0), the start of every message about the file.
  std::string at(std::uint32_t line) const { return line > 0 ? file + ":" + std::to_string(line) : file; }
};

/// At most this many EVs (copies included) listed by the 'evs' entries of one file: the most a
/// profile store holds (StoreLimits::max_evs); more is refused before it is built.
inline constexpr std::uint64_t kMaxListedEvs = 1u << 20;

/// Checks the TOML text of a profile file; `name` (the file) starts every message.
ProfileFile parse_profiles(const std::string& text, const std::string& name);

/// The largest profile file load_profiles() reads: kMaxListedEvs EVs written out one to a line
/// (about 100 bytes each with an SRv6 address) take about 100 MB; a larger file is not a profile
/// file, and read whole it would take as much memory.
inline constexpr std::size_t kProfileFileMaxBytes = std::size_t{256} << 20;

/// Reads a profile file (no such file, a directory, not a regular file, permission denied, over
/// kProfileFileMaxBytes, ... are named as such) and checks it.
ProfileFile load_profiles(const std::string& path);

/// What apply_profiles did: rc 0, or the first refusal (an errno value) and its message
/// ("file:line: what: why", ending in "(nothing was changed)" once the file is rolled back).
struct ApplyResult {
  int rc = 0;
  std::string message;
};

/// Applies a checked file through a controller handle, all or nothing: the profiles it names are
/// saved first (ctl_save_profiles), each is torn down to INIT and defined from the file (formats,
/// then EV profiles, then CC profiles, each brought ONLINE), and on the first refusal every one is
/// put back as it was. `ev_online` (optional) is called after each EV profile goes ONLINE. The one
/// implementation of a profile file's calls: `mrc ctl apply` and fuzz/fuzz_profile.cpp use it.
ApplyResult apply_profiles(mrc_ctl_context* c, const ProfileFile& f,
                           const std::function<void(const EvDef&)>& ev_online = {});

}  // namespace mrc::api
