// `mrc ctl` profile files: TOML reading with file:line errors (see profile_toml.hpp).
#include "api/profile_toml.hpp"

// toml++ is the system's compiled library (Debian: libtomlplusplus-dev), as its CMake target says,
// also where the target's flags are not seen (the fuzz build compiles this file on its own): its
// parser then stays uninstrumented, like every other library a fuzz target links.
#ifndef TOML_HEADER_ONLY
#define TOML_HEADER_ONLY 0
#define TOML_SHARED_LIB 1
#endif
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "api/ctl_proto.hpp"
#include "api/ev_expand.hpp"
#include "api/profile_store.hpp"
#include "common/small_file.hpp"
#include "engine/types.hpp"

namespace mrc::api {
namespace {

[[noreturn]] void fail_input(const std::string& what) {
  throw ProfileTomlError(what);
}

/// The line of a value (0: none).
std::uint32_t line_of(const toml::node* n) {
  return n != nullptr && n->source().begin.line > 0 ? static_cast<std::uint32_t>(n->source().begin.line) : 0;
}

/// Where a table and each of its keys are.
TomlLines lines_of(const toml::table& t) {
  TomlLines l;
  l.line = line_of(&t);
  for (const auto& [k, v] : t) l.keys.emplace(std::string(k.str()), line_of(&v));
  return l;
}

constexpr std::uint64_t kMaxId = static_cast<std::uint64_t>(INT64_MAX);  // TOML integers are int64
constexpr std::uint64_t kMaxCopies = 65536;

/// A TOML value as a message shows it: 300, nan, the string "13", an array, ...
std::string describe(const toml::node& n) {
  if (const auto* i = n.as_integer()) return std::to_string(i->get());
  if (const auto* f = n.as_floating_point()) {
    if (std::isnan(f->get())) return "nan";
    std::ostringstream o;
    o << f->get();
    return o.str();
  }
  if (const auto* s = n.as_string()) return "the string \"" + s->get() + "\"";
  if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
  if (n.is_array()) return "an array";
  if (n.is_table()) return "a table";
  return "a date or time";
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

/// Reads one TOML file's values; every error names the file, the line of the value at fault (or
/// of its table when the key is missing), the key and the rule (exit 2).
class Toml {
 public:
  explicit Toml(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }
  std::string at(const toml::node* n) const {
    std::string s = file_;
    if (n != nullptr && n->source().begin.line > 0) s += ":" + std::to_string(n->source().begin.line);
    return s;
  }
  [[noreturn]] void fail(const toml::node* n, const std::string& msg) const {
    throw ProfileTomlError(at(n) + ": " + msg);
  }
  void keys(const toml::table& t, const std::vector<std::string>& allowed, const std::string& in) const {
    for (const auto& [k, v] : t)
      if (std::find(allowed.begin(), allowed.end(), k.str()) == allowed.end())
        fail(&v, "unknown key '" + std::string(k.str()) + "' in " + in + " (keys: " + join(allowed) + ")");
  }
  /// An integer in [lo, hi]; a missing key is `def`, or an error naming `in` when there is none.
  std::uint64_t uint(const toml::table& t, const char* key, std::uint64_t lo, std::uint64_t hi,
                     const std::string& in, const std::optional<std::uint64_t>& def = std::nullopt) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      if (def) return *def;
      fail(&t, in + ": missing '" + key + "' (an integer in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "])");
    }
    const auto* i = n->as_integer();
    if (i == nullptr || i->get() < 0 || static_cast<std::uint64_t>(i->get()) < lo ||
        static_cast<std::uint64_t>(i->get()) > hi)
      fail(n, std::string("'") + key + "' must be an integer in [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "], not " + describe(*n));
    return static_cast<std::uint64_t>(i->get());
  }
  /// A finite number that a float holds (the C API's NSCC settings are floats).
  float real(const toml::table& t, const char* key, float def) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return def;
    double v = 0;
    if (const auto* i = n->as_integer())
      v = static_cast<double>(i->get());
    else if (const auto* f = n->as_floating_point())
      v = f->get();
    else
      fail(n, std::string("'") + key + "' must be a finite number, not " + describe(*n));
    if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max())
      fail(n, std::string("'") + key + "' must be a finite number, not " + describe(*n));
    return static_cast<float>(v);
  }
  /// One of `names` (a string).
  std::string choice(const toml::table& t, const char* key, const std::vector<std::string>& names,
                     const std::string& in) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) fail(&t, in + ": missing '" + key + "' (one of " + join(names) + ")");
    const auto* s = n->as_string();
    if (s == nullptr || std::find(names.begin(), names.end(), s->get()) == names.end())
      fail(n, std::string("'") + key + "' must be one of " + join(names) + ", not " + describe(*n));
    return s->get();
  }
  std::string str(const toml::table& t, const char* key, const std::string& in) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) fail(&t, in + ": missing '" + key + "'");
    if (!n->is_string()) fail(n, std::string("'") + key + "' must be a string, not " + describe(*n));
    return n->as_string()->get();
  }
  const toml::array* array(const toml::table& t, const char* key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return nullptr;
    if (!n->is_array()) fail(n, std::string("'") + key + "' must be an array, not " + describe(*n));
    return n->as_array();
  }
  const toml::table& table(const toml::node& n, const char* what) const {
    if (!n.is_table()) fail(&n, std::string(what) + " entries must be tables, not " + describe(n));
    return *n.as_table();
  }
  EvBytes ev(const toml::table& t, const char* key, const std::string& in) const {
    const std::string s = str(t, key, in);
    try {
      return ev_from_hex(s);
    } catch (const std::invalid_argument& e) {
      fail(t.get(key), std::string("'") + key + "' \"" + s + "\" is not an EV: " + e.what());
    }
  }

 private:
  std::string file_;
};

mrc_ctl_ev make_ev(const EvBytes& b, std::uint8_t port) {
  mrc_ctl_ev e{};
  std::memcpy(e.val, b.data(), b.size());
  e.port = port;
  return e;
}

/// The file's text, or why it cannot be read (no such file, a directory, permission denied, over
/// the size limit, ...).
std::string read_file(const std::string& path) {
  std::string text, err;
  if (!read_small_file(path, "a TOML file, e.g. config/profiles.toml", kProfileFileMaxBytes, text, err))
    fail_input(err);
  return text;
}

}  // namespace

ProfileFile parse_profiles(const std::string& text, const std::string& name) {
  const std::string& path = name;
  ProfileFile f;
  f.file = path;
  const Toml rd(path);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    std::ostringstream o;
    o << path;
    if (e.source().begin.line > 0) o << ':' << e.source().begin.line;
    o << ": not TOML: " << e.description();
    fail_input(o.str());
  }
  for (const auto& [k, v] : root)
    if (k.str() != "ev_format" && k.str() != "ev_profile" && k.str() != "cc_profile")
      rd.fail(&v, "unknown key '" + std::string(k.str()) +
                      "' (a profile file has [[ev_format]], [[ev_profile]] and [[cc_profile]] tables)");
  const auto entries = [&](const char* key) {
    std::vector<const toml::table*> v;
    const toml::node* n = root.get(key);
    if (n == nullptr) return v;
    if (!n->is_array_of_tables())
      rd.fail(n, std::string("'") + key + "' must be an array of tables: write [[" + key + "]] before each");
    for (const toml::node& x : *n->as_array()) v.push_back(x.as_table());
    return v;
  };
  const auto fmt_tables = entries("ev_format");
  const auto ev_tables = entries("ev_profile");
  const auto cc_tables = entries("cc_profile");
  if (fmt_tables.empty() && ev_tables.empty() && cc_tables.empty())
    fail_input(
        path +
        ": defines no profile (a profile file has [[ev_format]], [[ev_profile]] or [[cc_profile]] tables)");

  // The ID first (it names the entry in later messages), once per kind.
  const auto read_id = [&](const toml::table& t, const char* kind,
                           std::map<std::uint64_t, const toml::node*>& seen) {
    const std::uint64_t id = rd.uint(t, "id", 1, kMaxId, std::string(kind));
    const toml::node* n = t.get("id");
    if (auto [it, fresh] = seen.emplace(id, n); !fresh)
      rd.fail(n, std::string(kind) + " " + std::to_string(id) + " is defined twice (first at line " +
                     std::to_string(it->second->source().begin.line) + ")");
    return id;
  };

  std::map<std::uint64_t, const toml::node*> seen;
  std::uint64_t listed_evs = 0;  // over every EV profile of the file, at most kMaxListedEvs
  for (const toml::table* t : fmt_tables) {
    FmtDef d;
    d.at = lines_of(*t);
    d.id = read_id(*t, "ev_format", seen);
    const std::string in = "ev_format " + std::to_string(d.id);
    rd.keys(*t, {"id", "mode", "widths"}, in);
    const std::string mode = rd.choice(*t, "mode", {"stev", "srv6", "udp"}, in);
    d.mode = mode == "stev"   ? MRC_CTL_EV_FMT_MODE_STEV
             : mode == "srv6" ? MRC_CTL_EV_FMT_MODE_SRV6
                              : MRC_CTL_EV_FMT_MODE_UDP;
    const toml::array* w = rd.array(*t, "widths");
    if (w == nullptr) rd.fail(t, in + ": missing 'widths' (the bits of each format field, e.g. [16, 16])");
    if (w->empty()) rd.fail(t->get("widths"), "'widths' is empty: a format has at least one field");
    for (const toml::node& x : *w) {
      const auto* i = x.as_integer();
      if (i == nullptr || i->get() < 1 || i->get() > 32)
        rd.fail(&x, "a width must be an integer in [1, 32], not " + describe(x));
      d.widths.push_back({static_cast<std::uint8_t>(i->get())});
    }
    f.fmts.push_back(std::move(d));
  }

  seen.clear();
  for (const toml::table* t : ev_tables) {
    EvDef d;
    d.at = lines_of(*t);
    d.id = read_id(*t, "ev_profile", seen);
    const std::string in = "ev_profile " + std::to_string(d.id);
    rd.keys(*t, {"id", "mode", "format", "count", "min_active", "event_mask", "fields", "evs", "deny"}, in);
    const std::string mode = rd.choice(*t, "mode", {"auto", "explicit", "generated"}, in);
    d.mode = mode == "auto"       ? MRC_CTL_EV_MODE_AUTO
             : mode == "explicit" ? MRC_CTL_EV_MODE_EXP
                                  : MRC_CTL_EV_MODE_GEN;
    if (d.mode == MRC_CTL_EV_MODE_AUTO) {
      for (const char* k : {"format", "count", "fields", "evs", "deny"})
        if (const toml::node* n = t->get(k))
          rd.fail(n, std::string("'") + k +
                         "' does not go with mode = \"auto\" (an AUTO profile takes id, mode, min_active "
                         "and event_mask; the transport picks its EVs)");
    } else {
      d.fmt_id = rd.uint(*t, "format", 1, kMaxId, in);
      const toml::array* fa = rd.array(*t, "fields");
      if (fa == nullptr)
        rd.fail(t, in + ": missing 'fields' (one table per format field: width, init, min, max, mask)");
      if (fa->empty()) rd.fail(t->get("fields"), "'fields' is empty: a profile has at least one field");
      for (const toml::node& x : *fa) {
        d.field_lines.push_back(line_of(&x));
        const toml::table& e = rd.table(x, "fields");
        const std::string fin = in + " field";
        rd.keys(e, {"width", "init", "min", "max", "mask"}, fin);
        d.fields.push_back({static_cast<std::uint32_t>(rd.uint(e, "width", 1, 32, fin)),
                            static_cast<std::uint32_t>(rd.uint(e, "init", 0, UINT32_MAX, fin, 0)),
                            static_cast<std::uint32_t>(rd.uint(e, "min", 0, UINT32_MAX, fin, 0)),
                            static_cast<std::uint32_t>(rd.uint(e, "max", 0, UINT32_MAX, fin, 0)),
                            static_cast<std::uint32_t>(rd.uint(e, "mask", 0, UINT32_MAX, fin, 0))});
      }
    }
    const auto port_of = [&](const toml::table& e, const std::string& ein) {
      const auto port = static_cast<std::uint32_t>(rd.uint(e, "port", 1, engine::kMaxPorts, ein));
      if (port > f.ports_needed) {
        f.ports_needed = port;
        f.port_line = line_of(e.get("port"));
        f.port_profile = d.id;
      }
      return static_cast<std::uint8_t>(port);
    };
    if (const toml::array* ea = rd.array(*t, "evs")) {
      if (d.mode != MRC_CTL_EV_MODE_EXP)
        rd.fail(t->get("evs"),
                "'evs' needs mode = \"explicit\" (a generated profile makes its EVs from "
                "'fields' and 'count')");
      for (const toml::node& x : *ea) {
        const toml::table& e = rd.table(x, "evs");
        const std::string ein = in + " EV";
        rd.keys(e, {"ev", "port", "copies"}, ein);
        const EvBytes ev = rd.ev(e, "ev", ein);
        const std::uint8_t port = port_of(e, ein);
        const auto copies = rd.uint(e, "copies", 1, kMaxCopies, ein, 1);
        listed_evs += copies;
        if (listed_evs > kMaxListedEvs)
          rd.fail(&x, "the 'evs' entries list more than " + std::to_string(kMaxListedEvs) +
                          " EVs (copies included), more than a profile store holds");
        mrc_ctl_ev_op_entry op{};
        op.ev_new = make_ev(ev, port);
        op.state = MRC_CTL_EV_GOOD;
        d.evs.insert(d.evs.end(), copies, op);  // duplicates weight a path
        d.ev_lines.insert(d.ev_lines.end(), copies, line_of(&x));
      }
    }
    if (d.mode == MRC_CTL_EV_MODE_EXP) {
      if (t->get("evs") == nullptr) rd.fail(t, in + ": missing 'evs' (an explicit profile lists its EVs)");
      if (d.evs.empty()) rd.fail(t->get("evs"), "'evs' is empty: an explicit profile lists at least one EV");
      const std::uint64_t listed = d.evs.size();
      const std::uint64_t count = rd.uint(*t, "count", 1, UINT32_MAX, in, listed);
      if (count != listed)
        rd.fail(t->get("count"), "'count' is " + std::to_string(count) + " but 'evs' lists " +
                                     std::to_string(listed) + " EVs (copies included)");
      d.count = static_cast<std::uint32_t>(count);
    } else if (d.mode == MRC_CTL_EV_MODE_GEN) {
      d.count = static_cast<std::uint32_t>(rd.uint(*t, "count", 1, UINT32_MAX, in));
    }
    if (const toml::array* da = rd.array(*t, "deny"))
      for (const toml::node& x : *da) {
        const toml::table& e = rd.table(x, "deny");
        const std::string ein = in + " deny entry";
        rd.keys(e, {"ev", "port"}, ein);
        mrc_ctl_ev_op_entry op{};
        const EvBytes ev = rd.ev(e, "ev", ein);
        op.ev = make_ev(ev, port_of(e, ein));
        op.state = MRC_CTL_EV_DENIED;
        op.flags = MRC_CTL_EV_OP_F_ALL_COPIES;
        d.deny.push_back(op);
        d.deny_lines.push_back(line_of(&x));
      }
    d.min_active = static_cast<std::uint32_t>(rd.uint(*t, "min_active", 1, UINT32_MAX, in, 1));
    if (const toml::array* m = rd.array(*t, "event_mask"))
      for (const toml::node& x : *m) {
        const auto* s = x.as_string();
        if (s && s->get() == "good")
          d.event_mask |= MRC_CTL_EV_GOOD;
        else if (s && s->get() == "assumed_bad")
          d.event_mask |= MRC_CTL_EV_ASSUMED_BAD;
        else
          rd.fail(&x, "event_mask takes \"good\" and \"assumed_bad\", not " + describe(x));
      }
    f.evps.push_back(std::move(d));
  }

  seen.clear();
  for (const toml::table* t : cc_tables) {
    CcDef d;
    d.at = lines_of(*t);
    d.id = read_id(*t, "cc_profile", seen);
    const std::string in = "cc_profile " + std::to_string(d.id);
    static const std::vector<std::string> nscc_keys{"base_rtt",
                                                    "target_delay",
                                                    "max_cwnd",
                                                    "gamma",
                                                    "max_md_jump",
                                                    "fi",
                                                    "fi_scale",
                                                    "eta",
                                                    "qa_gate",
                                                    "qa_threshold",
                                                    "adjust_bytes_threshold",
                                                    "adjust_period_threshold",
                                                    "disable_qa"};
    std::vector<std::string> allowed{"id", "algorithm"};
    allowed.insert(allowed.end(), nscc_keys.begin(), nscc_keys.end());
    rd.keys(*t, allowed, in);
    d.algorithm = rd.str(*t, "algorithm", in + " (\"uet-1.0-nscc\" or \"none\")");
    if (d.algorithm == "none") {
      for (const auto& k : nscc_keys)
        if (const toml::node* n = t->get(k))
          rd.fail(n, "'" + k + "' needs algorithm = \"uet-1.0-nscc\" (algorithm \"none\" takes no settings)");
    }
    mrc_ctl_cc_nscc_cfg& cfg = d.cfg;
    cfg = ProfileStore::nscc_to_ctl(cc::NsccConfig{});
    const auto u32 = [&](const char* k, std::uint32_t& v, std::uint64_t lo) {
      v = static_cast<std::uint32_t>(rd.uint(*t, k, lo, UINT32_MAX, in, v));
    };
    u32("base_rtt", cfg.base_rtt, 1);
    u32("target_delay", cfg.target_delay, 1);
    u32("max_cwnd", cfg.max_cwnd, 1);
    cfg.gamma = rd.real(*t, "gamma", cfg.gamma);
    cfg.max_md_jump = rd.real(*t, "max_md_jump", cfg.max_md_jump);
    cfg.fi = rd.real(*t, "fi", cfg.fi);
    cfg.fi_scale = rd.real(*t, "fi_scale", cfg.fi_scale);
    cfg.eta = rd.real(*t, "eta", cfg.eta);
    cfg.qa_gate = static_cast<std::uint8_t>(rd.uint(*t, "qa_gate", 0, 31, in, cfg.qa_gate));
    u32("qa_threshold", cfg.qa_threshold, 0);
    u32("adjust_bytes_threshold", cfg.adjust_bytes_threshold, 1);
    u32("adjust_period_threshold", cfg.adjust_period_threshold, 1);
    if (const toml::node* n = t->get("disable_qa"); n != nullptr && n->is_boolean())
      cfg.disable_qa = n->as_boolean()->get() ? 1 : 0;
    else
      cfg.disable_qa = static_cast<std::uint8_t>(rd.uint(*t, "disable_qa", 0, 1, in, cfg.disable_qa));
    f.ccs.push_back(std::move(d));
  }
  return f;
}

ProfileFile load_profiles(const std::string& path) {
  return parse_profiles(read_file(path), path);
}

}  // namespace mrc::api
