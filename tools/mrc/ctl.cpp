// `mrc ctl`: the MRC controller (mrc_ctl.h) on the command line, talking to an endpoint's control
// socket (--socket PATH, default $MRC_CTL_SOCKET), or with --offline to an in-process profile
// store that only validates and expands.
//
//   mrc ctl apply FILE                     EV-format, EV and CC profiles from one TOML file
//   mrc ctl show [--json]                  profiles, EV states per port, port counters
//   mrc ctl evs PROFILE                    each EV in wire form (UDP sport, flow label, SRv6 DA/SRH)
//   mrc ctl probe --dgid A --port N --ev HEX [--count K]   EV probes, RTTs
//   mrc ctl events [--count K]             follow EV events
//   mrc ctl deny|allow PROFILE EV PORT     controller EV state
//   mrc ctl --offline --config FILE evs 1  expand a config without an endpoint
#include "api/ctl.hpp"

#include <arpa/inet.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/ctl_proto.hpp"
#include "api/ev_expand.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::tools {
namespace {

struct CtlOptions {
  std::string socket;
  bool offline = false;
  std::uint32_t ports = 1;
  std::string config;  ///< applied first (offline)
  std::string file;    ///< apply
  bool json = false;
  std::uint64_t profile = 0;
  std::string ev;
  std::uint32_t port = 1;
  bool all_copies = false;
  std::string dgid;
  std::uint32_t count = 1;
  std::uint32_t timeout_ms = 1000;
  std::string fmt_mode = "stev";
};
CtlOptions g_ctl;
CLI::App* g_apply = nullptr;
CLI::App* g_show = nullptr;
CLI::App* g_evs = nullptr;
CLI::App* g_probe = nullptr;
CLI::App* g_events = nullptr;
CLI::App* g_deny = nullptr;
CLI::App* g_allow = nullptr;

struct CtlError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(mrc_ctl_context* c, int rc, const std::string& what) {
  if (rc != 0) throw CtlError(what + ": " + std::strerror(rc) + " (" + mrc_ctl_last_error(c) + ")");
}

// ---- TOML config ---------------------------------------------------------------------------------

class Toml {
 public:
  explicit Toml(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const toml::node* n, const std::string& msg) const {
    std::ostringstream o;
    o << file_;
    if (n != nullptr && n->source().begin.line > 0) o << ':' << n->source().begin.line;
    o << ": " << msg;
    throw CtlError(o.str());
  }
  void keys(const toml::table& t, std::initializer_list<const char*> allowed) const {
    const std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto& [k, v] : t)
      if (!ok.count(std::string(k.str()))) fail(&v, "unknown key '" + std::string(k.str()) + "'");
  }
  std::uint64_t uint(const toml::table& t, const char* key, std::uint64_t max,
                     const std::uint64_t* def = nullptr) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      if (def) return *def;
      fail(&t, std::string("missing '") + key + "'");
    }
    const auto* i = n->as_integer();
    if (i == nullptr || i->get() < 0 || static_cast<std::uint64_t>(i->get()) > max)
      fail(n, std::string("'") + key + "' must be an integer 0.." + std::to_string(max));
    return static_cast<std::uint64_t>(i->get());
  }
  float real(const toml::table& t, const char* key, float def) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return def;
    if (const auto* i = n->as_integer()) return static_cast<float>(i->get());
    if (const auto* f = n->as_floating_point()) return static_cast<float>(f->get());
    fail(n, std::string("'") + key + "' must be a number");
  }
  std::string str(const toml::table& t, const char* key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr || !n->is_string()) fail(n ? n : &t, std::string("'") + key + "' must be a string");
    return n->as_string()->get();
  }
  const toml::array* array(const toml::table& t, const char* key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return nullptr;
    if (!n->is_array()) fail(n, std::string("'") + key + "' must be an array");
    return n->as_array();
  }
  const toml::table& table(const toml::node& n, const char* what) const {
    if (!n.is_table()) fail(&n, std::string(what) + " entries must be tables");
    return *n.as_table();
  }
  api::EvBytes ev(const toml::table& t, const char* key) const {
    try {
      return api::ev_from_hex(str(t, key));
    } catch (const std::invalid_argument& e) {
      fail(t.get(key), e.what());
    }
  }

 private:
  std::string file_;
};

mrc_ctl_ev make_ev(const api::EvBytes& b, std::uint8_t port) {
  mrc_ctl_ev e{};
  std::memcpy(e.val, b.data(), b.size());
  e.port = port;
  return e;
}

/// Moves an existing profile back to INIT so the file defines it from scratch.
template <typename Attr, typename Modify, typename Query>
void reset_profile(mrc_ctl_context* c, std::uint64_t id, Modify modify, Query query,
                   const std::string& what) {
  Attr a{};
  if (query(c, id, &a, 1u << 1) != 0) return;  // CUR_STATE; ENOENT: nothing to reset
  if (a.cur_profile_state == MRC_CTL_PROFILE_ONLINE) {
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    check(c, modify(c, id, &a, 1u << 0), what + " to OFFLINE");
  }
  if (a.cur_profile_state != MRC_CTL_PROFILE_INIT) {
    a.profile_state = MRC_CTL_PROFILE_INIT;
    check(c, modify(c, id, &a, 1u << 0), what + " to INIT");
  }
}

void apply_config(mrc_ctl_context* c, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream o;
    o << path << ':' << e.source().begin.line << ": " << e.description();
    throw CtlError(o.str());
  }
  const Toml rd(path);
  rd.keys(root, {"ev_format", "ev_profile", "cc_profile"});
  const toml::array* fmts = rd.array(root, "ev_format");
  const toml::array* evps = rd.array(root, "ev_profile");
  const toml::array* ccs = rd.array(root, "cc_profile");
  const auto ids = [&](const toml::array* a, const char* what) {
    std::vector<std::uint64_t> v;
    if (a)
      for (const toml::node& n : *a) v.push_back(rd.uint(rd.table(n, what), "id", UINT64_MAX));
    return v;
  };
  // Tear down what the file redefines: EV profiles first (their formats are busy while ONLINE).
  for (const auto id : ids(evps, "ev_profile"))
    reset_profile<mrc_ctl_ev_profile_attr>(c, id, mrc_ctl_modify_ev_profile, mrc_ctl_query_ev_profile,
                                           "EV profile " + std::to_string(id));
  for (const auto id : ids(fmts, "ev_format"))
    reset_profile<mrc_ctl_ev_fmt_profile_attr>(c, id, mrc_ctl_modify_ev_fmt_profile,
                                               mrc_ctl_query_ev_fmt_profile,
                                               "EV format " + std::to_string(id));
  for (const auto id : ids(ccs, "cc_profile"))
    reset_profile<mrc_ctl_cc_profile_attr>(c, id, mrc_ctl_modify_cc_profile, mrc_ctl_query_cc_profile,
                                           "CC profile " + std::to_string(id));

  const std::map<std::string, mrc_ctl_ev_fmt_mode> fmt_modes{{"stev", MRC_CTL_EV_FMT_MODE_STEV},
                                                             {"srv6", MRC_CTL_EV_FMT_MODE_SRV6},
                                                             {"udp", MRC_CTL_EV_FMT_MODE_UDP}};
  if (fmts)
    for (const toml::node& n : *fmts) {
      const toml::table& t = rd.table(n, "ev_format");
      rd.keys(t, {"id", "mode", "widths"});
      const std::uint64_t id = rd.uint(t, "id", UINT64_MAX);
      const auto mode = fmt_modes.find(rd.str(t, "mode"));
      if (mode == fmt_modes.end()) rd.fail(t.get("mode"), "mode must be stev, srv6 or udp");
      std::vector<mrc_ctl_ev_fmt_field> widths;
      const toml::array* w = rd.array(t, "widths");
      if (w == nullptr) rd.fail(&t, "missing 'widths'");
      for (const toml::node& x : *w) {
        const auto* i = x.as_integer();
        if (i == nullptr || i->get() < 1 || i->get() > 32) rd.fail(&x, "a width is an integer 1..32");
        widths.push_back({static_cast<std::uint32_t>(i->get())});
      }
      mrc_ctl_ev_fmt_profile_attr a{};
      a.profile_state = MRC_CTL_PROFILE_OFFLINE;
      a.ev_fmt_mode = mode->second;
      a.ev_fmt_op.fmt_fields = widths.data();
      a.ev_fmt_op.fmt_field_count = static_cast<std::uint32_t>(widths.size());
      const std::string where =
          path + ":" + std::to_string(t.source().begin.line) + ": EV format " + std::to_string(id);
      check(c,
            mrc_ctl_modify_ev_fmt_profile(c, id, &a,
                                          MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE),
            where);
      a.profile_state = MRC_CTL_PROFILE_ONLINE;
      check(c,
            mrc_ctl_modify_ev_fmt_profile(
                c, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODIFY_FIELDS),
            where);
    }

  const std::map<std::string, mrc_ctl_ev_mode> ev_modes{
      {"auto", MRC_CTL_EV_MODE_AUTO}, {"explicit", MRC_CTL_EV_MODE_EXP}, {"generated", MRC_CTL_EV_MODE_GEN}};
  if (evps)
    for (const toml::node& n : *evps) {
      const toml::table& t = rd.table(n, "ev_profile");
      rd.keys(t, {"id", "mode", "format", "count", "min_active", "event_mask", "fields", "evs", "deny"});
      const std::uint64_t id = rd.uint(t, "id", UINT64_MAX);
      const std::string where =
          path + ":" + std::to_string(t.source().begin.line) + ": EV profile " + std::to_string(id);
      const auto mode = ev_modes.find(rd.str(t, "mode"));
      if (mode == ev_modes.end()) rd.fail(t.get("mode"), "mode must be auto, explicit or generated");
      std::vector<mrc_ctl_ev_field> fields;
      if (const toml::array* fa = rd.array(t, "fields"))
        for (const toml::node& x : *fa) {
          const toml::table& f = rd.table(x, "fields");
          rd.keys(f, {"width", "init", "min", "max", "mask"});
          const std::uint64_t zero = 0;
          fields.push_back({static_cast<std::uint32_t>(rd.uint(f, "width", 32)),
                            static_cast<std::uint32_t>(rd.uint(f, "init", UINT32_MAX, &zero)),
                            static_cast<std::uint32_t>(rd.uint(f, "min", UINT32_MAX, &zero)),
                            static_cast<std::uint32_t>(rd.uint(f, "max", UINT32_MAX, &zero)),
                            static_cast<std::uint32_t>(rd.uint(f, "mask", UINT32_MAX, &zero))});
        }
      std::vector<mrc_ctl_ev_op_entry> evs;
      if (const toml::array* ea = rd.array(t, "evs"))
        for (const toml::node& x : *ea) {
          const toml::table& e = rd.table(x, "evs");
          rd.keys(e, {"ev", "port", "copies"});
          const std::uint64_t one = 1;
          const auto copies = rd.uint(e, "copies", 65536, &one);
          mrc_ctl_ev_op_entry op{};
          op.ev_new = make_ev(rd.ev(e, "ev"), static_cast<std::uint8_t>(rd.uint(e, "port", 255)));
          op.state = MRC_CTL_EV_GOOD;
          evs.insert(evs.end(), copies, op);  // duplicates weight a path
        }
      if (mode->second != MRC_CTL_EV_MODE_EXP && !evs.empty())
        rd.fail(t.get("evs"), "'evs' needs mode = \"explicit\"");
      const std::uint64_t nevs = evs.size();
      mrc_ctl_ev_profile_attr a{};
      a.profile_state = MRC_CTL_PROFILE_OFFLINE;
      a.ev_mode = mode->second;
      std::uint32_t mask = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE;
      if (mode->second != MRC_CTL_EV_MODE_AUTO) {
        a.ev_fmt_profile_id = rd.uint(t, "format", UINT64_MAX);
        a.ev_count = static_cast<std::uint32_t>(rd.uint(t, "count", UINT32_MAX, nevs ? &nevs : nullptr));
        a.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY;
        a.ev_fields_op.fields = fields.data();
        a.ev_fields_op.field_count = static_cast<std::uint32_t>(fields.size());
        mask |= MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
      }
      check(c, mrc_ctl_modify_ev_profile(c, id, &a, mask), where);
      if (!evs.empty()) {
        a = {};
        a.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
        a.ev_op.entries = evs.data();
        a.ev_op.num_entries = static_cast<std::uint32_t>(evs.size());
        check(c, mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP), where + " evs");
      }
      if (const toml::array* da = rd.array(t, "deny")) {
        std::vector<mrc_ctl_ev_op_entry> deny;
        for (const toml::node& x : *da) {
          const toml::table& e = rd.table(x, "deny");
          rd.keys(e, {"ev", "port"});
          mrc_ctl_ev_op_entry op{};
          op.ev = make_ev(rd.ev(e, "ev"), static_cast<std::uint8_t>(rd.uint(e, "port", 255)));
          op.state = MRC_CTL_EV_DENIED;
          op.flags = MRC_CTL_EV_OP_F_ALL_COPIES;
          deny.push_back(op);
        }
        a = {};
        a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
        a.ev_op.entries = deny.data();
        a.ev_op.num_entries = static_cast<std::uint32_t>(deny.size());
        check(c, mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP), where + " deny");
      }
      a = {};
      a.profile_state = MRC_CTL_PROFILE_ONLINE;
      const std::uint64_t one = 1;
      a.ev_min_active = static_cast<std::uint32_t>(rd.uint(t, "min_active", UINT32_MAX, &one));
      if (const toml::array* m = rd.array(t, "event_mask"))
        for (const toml::node& x : *m) {
          const auto* s = x.as_string();
          if (s && s->get() == "good")
            a.ev_event_mask |= MRC_CTL_EV_GOOD;
          else if (s && s->get() == "assumed_bad")
            a.ev_event_mask |= MRC_CTL_EV_ASSUMED_BAD;
          else
            rd.fail(&x, "event_mask takes \"good\" and \"assumed_bad\"");
        }
      check(c,
            mrc_ctl_modify_ev_profile(
                c, id, &a,
                MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK),
            where + " to ONLINE");
    }

  if (ccs)
    for (const toml::node& n : *ccs) {
      const toml::table& t = rd.table(n, "cc_profile");
      rd.keys(t, {"id", "algorithm", "base_rtt", "target_delay", "max_cwnd", "gamma", "max_md_jump", "fi",
                  "fi_scale", "eta", "qa_gate", "qa_threshold", "adjust_bytes_threshold",
                  "adjust_period_threshold", "disable_qa"});
      const std::uint64_t id = rd.uint(t, "id", UINT64_MAX);
      const std::string where =
          path + ":" + std::to_string(t.source().begin.line) + ": CC profile " + std::to_string(id);
      const std::string algo = rd.str(t, "algorithm");
      mrc_ctl_cc_nscc_cfg cfg = api::ProfileStore::nscc_to_ctl(cc::NsccConfig{});
      const auto u32 = [&](const char* k, std::uint32_t& v) {
        const std::uint64_t d = v;
        v = static_cast<std::uint32_t>(rd.uint(t, k, UINT32_MAX, &d));
      };
      const auto u8 = [&](const char* k, std::uint8_t& v) {
        const std::uint64_t d = v;
        v = static_cast<std::uint8_t>(rd.uint(t, k, 255, &d));
      };
      u32("base_rtt", cfg.base_rtt);
      u32("target_delay", cfg.target_delay);
      u32("max_cwnd", cfg.max_cwnd);
      cfg.gamma = rd.real(t, "gamma", cfg.gamma);
      cfg.max_md_jump = rd.real(t, "max_md_jump", cfg.max_md_jump);
      cfg.fi = rd.real(t, "fi", cfg.fi);
      cfg.fi_scale = rd.real(t, "fi_scale", cfg.fi_scale);
      cfg.eta = rd.real(t, "eta", cfg.eta);
      u8("qa_gate", cfg.qa_gate);
      u32("qa_threshold", cfg.qa_threshold);
      u32("adjust_bytes_threshold", cfg.adjust_bytes_threshold);
      u32("adjust_period_threshold", cfg.adjust_period_threshold);
      u8("disable_qa", cfg.disable_qa);
      mrc_ctl_cc_profile_attr a{};
      a.profile_state = MRC_CTL_PROFILE_OFFLINE;
      a.algorithm = algo == "none" ? nullptr : algo.c_str();
      check(c, mrc_ctl_modify_cc_profile(c, id, &a, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            where);
      a.profile_state = MRC_CTL_PROFILE_ONLINE;
      a.cc_config = &cfg;
      a.cc_config_len = sizeof(cfg);
      check(c,
            mrc_ctl_modify_cc_profile(
                c, id, &a, MRC_CTL_CC_PROFILE_STATE | (a.algorithm ? MRC_CTL_CC_PROFILE_CONFIG : 0)),
            where + " to ONLINE");
    }
}

// ---- reading profiles back ------------------------------------------------------------------------

const char* state_name(std::uint32_t s) {
  switch (s) {
    case MRC_CTL_EV_GOOD:
      return "GOOD";
    case MRC_CTL_EV_ASSUMED_BAD:
      return "ASSUMED_BAD";
    case MRC_CTL_EV_DENIED:
      return "DENIED";
    default:
      return "UNKNOWN";
  }
}
const char* profile_state_name(mrc_ctl_profile_state s) {
  return s == MRC_CTL_PROFILE_ONLINE ? "ONLINE" : s == MRC_CTL_PROFILE_OFFLINE ? "OFFLINE" : "INIT";
}

struct EvProfileView {
  mrc_ctl_ev_profile_attr attr{};
  std::vector<mrc_ctl_ev_op_entry> entries;
  std::vector<std::uint32_t> widths;
  std::vector<api::EvField> fields;
  mrc_ctl_ev_fmt_mode fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
};

EvProfileView read_ev_profile(mrc_ctl_context* c, std::uint64_t id) {
  EvProfileView v;
  const std::string what = "EV profile " + std::to_string(id);
  check(c,
        mrc_ctl_query_ev_profile(c, id, &v.attr,
                                 MRC_CTL_EV_PROFILE_CUR_STATE | MRC_CTL_EV_PROFILE_MODE |
                                     MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                     MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK),
        what);
  if (v.attr.ev_mode == MRC_CTL_EV_MODE_AUTO) return v;
  // E2BIG sizing: ask with no room, learn the count, ask again.
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  int rc = mrc_ctl_query_ev_profile(c, id, &q, MRC_CTL_EV_PROFILE_EV_OP);
  if (rc == E2BIG) {
    v.entries.resize(q.ev_op.num_entries);
    q.ev_op.entries = v.entries.data();
    rc = mrc_ctl_query_ev_profile(c, id, &q, MRC_CTL_EV_PROFILE_EV_OP);
  }
  check(c, rc, what + " EV array");
  v.entries.resize(q.ev_op.num_entries);
  q = {};
  q.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_QUERY;
  rc = mrc_ctl_query_ev_profile(c, id, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP);
  std::vector<mrc_ctl_ev_field> f;
  if (rc == E2BIG) {
    f.resize(q.ev_fields_op.field_count);
    q.ev_fields_op.fields = f.data();
    rc = mrc_ctl_query_ev_profile(c, id, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP);
  }
  check(c, rc, what + " fields");
  for (const auto& x : f) v.fields.push_back({x.width, x.init_val, x.min_val, x.max_val, x.mask});
  mrc_ctl_ev_fmt_profile_attr fa{};
  std::vector<mrc_ctl_ev_fmt_field> w(api::kEvBits);
  fa.ev_fmt_op.fmt_fields = w.data();
  fa.ev_fmt_op.fmt_field_count = static_cast<std::uint32_t>(w.size());
  check(c,
        mrc_ctl_query_ev_fmt_profile(c, v.attr.ev_fmt_profile_id, &fa,
                                     MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_QUERY_FIELDS),
        "EV format " + std::to_string(v.attr.ev_fmt_profile_id));
  for (std::uint32_t i = 0; i < fa.ev_fmt_op.fmt_field_count; ++i) v.widths.push_back(w[i].width);
  v.fmt_mode = fa.ev_fmt_mode;
  return v;
}

std::string hex_trim(const api::EvBytes& b, std::size_t bytes) {
  return api::ev_hex(b).substr(0, 2 * bytes);
}

std::string ipv6(const std::uint8_t* p) {
  char buf[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, p, buf, sizeof(buf)) ? buf : "?";
}

/// The wire form of one expanded EV (mrc_ctl.h: STEV bytes 0-1 sport, 2-3 flow label; UDP bytes
/// 0-1 sport; SRv6 bytes 0-15 destination, 16-31 SRH segment).
nlohmann::json wire_form(mrc_ctl_ev_fmt_mode mode, const api::EvBytes& x) {
  nlohmann::json j;
  const auto u16 = [&](int i) {
    return (x[static_cast<std::size_t>(i)] << 8) | x[static_cast<std::size_t>(i) + 1];
  };
  if (mode == MRC_CTL_EV_FMT_MODE_SRV6) {
    j["srv6_da"] = ipv6(x.data());
    const bool srh = std::any_of(x.begin() + 16, x.end(), [](std::uint8_t b) { return b != 0; });
    j["srh_segment"] = srh ? nlohmann::json(ipv6(x.data() + 16)) : nlohmann::json(nullptr);
  } else {
    j["udp_sport"] = u16(0);
    if (mode == MRC_CTL_EV_FMT_MODE_STEV) j["flow_label"] = u16(2);
    j["engine_value"] = api::ev_value_be32(x);
  }
  return j;
}

int cmd_evs(mrc_ctl_context* c) {
  const EvProfileView v = read_ev_profile(c, g_ctl.profile);
  if (v.attr.ev_mode == MRC_CTL_EV_MODE_AUTO) {
    std::printf("EV profile %llu is AUTO: the transport picks its EVs\n",
                static_cast<unsigned long long>(g_ctl.profile));
    return 0;
  }
  const std::size_t raw_bytes = (api::raw_bits(v.fields) + 7) / 8;
  std::size_t fmt_bits = 0;
  for (auto w : v.widths) fmt_bits += w;
  nlohmann::json all = nlohmann::json::array();
  for (std::size_t i = 0; i < v.entries.size(); ++i) {
    api::EvBytes raw{}, x{};
    std::memcpy(raw.data(), v.entries[i].ev.val, raw.size());
    if (!api::expand(v.widths, v.fields, raw, x))
      throw CtlError("EV " + std::to_string(i) + " does not expand");
    nlohmann::json j = wire_form(v.fmt_mode, x);
    j["index"] = i;
    j["port"] = v.entries[i].ev.port;
    j["raw"] = hex_trim(raw, std::max<std::size_t>(raw_bytes, 1));
    j["expanded"] = hex_trim(x, (fmt_bits + 7) / 8);
    j["state"] = state_name(v.entries[i].state);
    if (g_ctl.json) {
      all.push_back(j);
      continue;
    }
    std::printf("%5zu port %u raw %s expanded %s", i, static_cast<unsigned>(v.entries[i].ev.port),
                j["raw"].get<std::string>().c_str(), j["expanded"].get<std::string>().c_str());
    if (v.fmt_mode == MRC_CTL_EV_FMT_MODE_SRV6) {
      std::printf(" srv6_da %s", j["srv6_da"].get<std::string>().c_str());
      if (!j["srh_segment"].is_null()) std::printf(" srh %s", j["srh_segment"].get<std::string>().c_str());
    } else {
      std::printf(" udp_sport %d", j["udp_sport"].get<int>());
      if (j.contains("flow_label")) std::printf(" flow_label 0x%04x", j["flow_label"].get<unsigned>());
    }
    std::printf(" %s\n", state_name(v.entries[i].state));
  }
  if (g_ctl.json) std::printf("%s\n", all.dump(2).c_str());
  return 0;
}

std::vector<std::uint64_t> list(mrc_ctl_context* c, mrc_ctl_profile_kind kind) {
  std::uint32_t n = 0;
  int rc = mrc_ctl_list_profiles(c, kind, nullptr, &n);
  std::vector<std::uint64_t> ids(n);
  if (rc == E2BIG) rc = mrc_ctl_list_profiles(c, kind, ids.data(), &n);
  check(c, rc, "list profiles");
  ids.resize(n);
  return ids;
}

const char* ev_mode_name(mrc_ctl_ev_mode m) {
  return m == MRC_CTL_EV_MODE_AUTO ? "auto" : m == MRC_CTL_EV_MODE_EXP ? "explicit" : "generated";
}

int cmd_show(mrc_ctl_context* c) {
  nlohmann::json out;
  mrc_ctl_device_attr d{};
  check(c, mrc_ctl_query_device(c, &d), "query device");
  out["port_mask"] = d.phy_port_mask;
  out["ev_free"] = d.ev.ev_free_count;
  out["ports"] = nlohmann::json::array();
  for (std::uint8_t p = 1; p < 64; ++p) {
    if (!((d.phy_port_mask >> p) & 1u)) continue;
    mrc_ctl_port_attr pa{};
    mrc_ctl_port_counters pc{};
    if (mrc_ctl_query_port(c, p, &pa, MRC_CTL_PORT_ADMIN_STATE) != 0 ||
        mrc_ctl_query_port_counters(c, p, &pc) != 0)
      break;  // offline: no endpoint
    out["ports"].push_back(
        nlohmann::json{{"port", p},
                       {"admin", pa.port_admin_state == MRC_CTL_PORT_ADMIN_ENABLED ? "up" : "down"},
                       {"tx_packets", pc.tx_packets},
                       {"rx_packets", pc.rx_packets},
                       {"tx_dropped", pc.tx_dropped},
                       {"rx_ecn_ce", pc.rx_ecn_ce},
                       {"rx_trimmed", pc.rx_trimmed}});
  }
  out["ev_formats"] = nlohmann::json::array();
  for (const auto id : list(c, MRC_CTL_PROFILE_KIND_EV_FMT)) {
    mrc_ctl_ev_fmt_profile_attr fa{};
    std::vector<mrc_ctl_ev_fmt_field> w(api::kEvBits);
    fa.ev_fmt_op.fmt_fields = w.data();
    fa.ev_fmt_op.fmt_field_count = static_cast<std::uint32_t>(w.size());
    check(c,
          mrc_ctl_query_ev_fmt_profile(c, id, &fa,
                                       MRC_CTL_EV_FMT_PROFILE_CUR_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
                                           MRC_CTL_EV_FMT_PROFILE_QUERY_FIELDS),
          "EV format " + std::to_string(id));
    std::vector<std::uint32_t> widths;
    for (std::uint32_t i = 0; i < fa.ev_fmt_op.fmt_field_count; ++i) widths.push_back(w[i].width);
    out["ev_formats"].push_back(nlohmann::json{{"id", id},
                                               {"state", profile_state_name(fa.cur_profile_state)},
                                               {"mode", fa.ev_fmt_mode == MRC_CTL_EV_FMT_MODE_SRV6  ? "srv6"
                                                        : fa.ev_fmt_mode == MRC_CTL_EV_FMT_MODE_UDP ? "udp"
                                                                                                    : "stev"},
                                               {"widths", widths}});
  }
  out["ev_profiles"] = nlohmann::json::array();
  for (const auto id : list(c, MRC_CTL_PROFILE_KIND_EV)) {
    const EvProfileView v = read_ev_profile(c, id);
    nlohmann::json j{{"id", id},
                     {"state", profile_state_name(v.attr.cur_profile_state)},
                     {"mode", ev_mode_name(v.attr.ev_mode)},
                     {"count", v.attr.ev_count},
                     {"min_active", v.attr.ev_min_active},
                     {"states_per_port", nlohmann::json::object()}};
    for (const auto& e : v.entries) {
      nlohmann::json& n = j["states_per_port"][std::to_string(e.ev.port)][state_name(e.state)];
      n = n.is_null() ? 1 : n.get<int>() + 1;
    }
    out["ev_profiles"].push_back(j);
  }
  out["cc_profiles"] = nlohmann::json::array();
  for (const auto id : list(c, MRC_CTL_PROFILE_KIND_CC)) {
    mrc_ctl_cc_profile_attr a{};
    check(c, mrc_ctl_query_cc_profile(c, id, &a, MRC_CTL_CC_PROFILE_CUR_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
          "CC profile " + std::to_string(id));
    out["cc_profiles"].push_back(nlohmann::json{{"id", id},
                                                {"state", profile_state_name(a.cur_profile_state)},
                                                {"algorithm", a.algorithm ? a.algorithm : "none"}});
  }
  if (g_ctl.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("ports 0x%llx, %u EVs free\n", static_cast<unsigned long long>(d.phy_port_mask),
              d.ev.ev_free_count);
  for (const auto& p : out["ports"])
    std::printf("  port %d %s: tx %llu rx %llu tx_dropped %llu ecn_ce %llu trimmed %llu\n",
                p["port"].get<int>(), p["admin"].get<std::string>().c_str(),
                p["tx_packets"].get<unsigned long long>(), p["rx_packets"].get<unsigned long long>(),
                p["tx_dropped"].get<unsigned long long>(), p["rx_ecn_ce"].get<unsigned long long>(),
                p["rx_trimmed"].get<unsigned long long>());
  for (const auto& f : out["ev_formats"])
    std::printf("EV format %s: %s %s widths %s\n", f["id"].dump().c_str(),
                f["state"].get<std::string>().c_str(), f["mode"].get<std::string>().c_str(),
                f["widths"].dump().c_str());
  for (const auto& j : out["ev_profiles"]) {
    std::printf("EV profile %s: %s %s, %u EVs, min_active %u\n", j["id"].dump().c_str(),
                j["state"].get<std::string>().c_str(), j["mode"].get<std::string>().c_str(),
                j["count"].get<unsigned>(), j["min_active"].get<unsigned>());
    for (const auto& [port, states] : j["states_per_port"].items())
      std::printf("  port %s: %s\n", port.c_str(), states.dump().c_str());
  }
  for (const auto& j : out["cc_profiles"])
    std::printf("CC profile %s: %s %s\n", j["id"].dump().c_str(), j["state"].get<std::string>().c_str(),
                j["algorithm"].get<std::string>().c_str());
  return 0;
}

bool parse_gid(const std::string& text, std::uint8_t gid[16]) {
  io::IpAddr a;
  if (!io::IpAddr::parse(text, a)) return false;
  a.to_gid(gid);
  return true;
}

int cmd_probe(mrc_ctl_context* c) {
  std::vector<mrc_ctl_ep_req> req(g_ctl.count);
  const std::map<std::string, std::uint32_t> modes{{"stev", MRC_CTL_EV_FMT_MODE_STEV},
                                                   {"srv6", MRC_CTL_EV_FMT_MODE_SRV6},
                                                   {"udp", MRC_CTL_EV_FMT_MODE_UDP}};
  const auto mode = modes.find(g_ctl.fmt_mode);
  if (mode == modes.end()) throw CtlError("--mode must be stev, srv6 or udp");
  api::EvBytes ev{};
  try {
    ev = api::ev_from_hex(g_ctl.ev);
  } catch (const std::invalid_argument& e) {
    throw CtlError(std::string("--ev: ") + e.what());
  }
  for (std::uint32_t i = 0; i < g_ctl.count; ++i) {
    mrc_ctl_ep_req& r = req[i];
    r.req_id = static_cast<std::uint16_t>(::getpid() + i);
    if (!parse_gid(g_ctl.dgid, r.dgid)) throw CtlError("--dgid is not an IPv4 or IPv6 address");
    r.ev_fmt_mode = mode->second;
    r.req_ev = make_ev(ev, static_cast<std::uint8_t>(g_ctl.port));
  }
  std::vector<mrc_ctl_ep_rsp> rsp(g_ctl.count);
  std::uint32_t n = 0;
  const int rc = mrc_ctl_ep_batch_send_wait(c, 0, MRC_CTL_EP_OP_EV_PROBE, req.data(), g_ctl.count,
                                            std::uint64_t{g_ctl.timeout_ms} * 1'000'000, rsp.data(), &n);
  for (std::uint32_t i = 0; i < n; ++i)
    std::printf("req %u port %u rtt %.3f us%s\n", rsp[i].req_id, rsp[i].port,
                static_cast<double>(rsp[i].rtt) / 1e3, rsp[i].adj_svc_time ? " (service time removed)" : "");
  if (rc == ETIMEDOUT) {
    std::fprintf(stderr, "mrc ctl probe: %u of %u answered within %u ms\n", n, g_ctl.count, g_ctl.timeout_ms);
    return 1;
  }
  check(c, rc, "probe");
  return 0;
}

int cmd_events(mrc_ctl_context* c) {
  mrc_ctl_ev_event_cq* cq = mrc_ctl_create_ev_event_cq(c, 4096, nullptr, nullptr, 0);
  if (cq == nullptr) check(c, errno, "create event CQ");
  std::uint32_t seen = 0;
  mrc_ctl_ev_event ev[64];
  while (g_ctl.count == 0 || seen < g_ctl.count) {
    const int n = mrc_ctl_poll_ev_event(cq, 64, ev);
    if (n < 0) {
      mrc_ctl_destroy_ev_event_cq(cq);
      check(c, -n, "poll events");
    }
    for (int i = 0; i < n && (g_ctl.count == 0 || seen < g_ctl.count); ++i, ++seen) {
      api::EvBytes b{};
      std::memcpy(b.data(), ev[i].ev.val, b.size());
      std::printf("profile %llu ev %s port %u -> %s", static_cast<unsigned long long>(ev[i].profile_id),
                  api::ev_hex(b).c_str(), ev[i].ev.port, state_name(ev[i].state));
      if (ev[i].drop_count) std::printf(" (%u events lost before this one)", ev[i].drop_count);
      std::printf("\n");
      std::fflush(stdout);
    }
    if (n == 0) ::usleep(10'000);
  }
  return mrc_ctl_destroy_ev_event_cq(cq) == 0 ? 0 : 1;
}

int cmd_deny(mrc_ctl_context* c, bool deny) {
  mrc_ctl_ev_op_entry e{};
  try {
    e.ev = make_ev(api::ev_from_hex(g_ctl.ev), static_cast<std::uint8_t>(g_ctl.port));
  } catch (const std::invalid_argument& x) {
    throw CtlError(std::string("EV: ") + x.what());
  }
  e.state = deny ? MRC_CTL_EV_DENIED : MRC_CTL_EV_GOOD;
  e.flags = g_ctl.all_copies ? MRC_CTL_EV_OP_F_ALL_COPIES : 0;
  mrc_ctl_ev_profile_attr a{};
  a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
  a.ev_op.entries = &e;
  a.ev_op.num_entries = 1;
  check(c, mrc_ctl_modify_ev_profile(c, g_ctl.profile, &a, MRC_CTL_EV_PROFILE_EV_OP),
        deny ? "deny" : "allow");
  return 0;
}

/// The handle the command talks to: the control socket, or an in-process store (--offline).
struct Handle {
  api::ProfileStore store;
  std::unique_ptr<api::CtlService> service;
  mrc_ctl_context* ctx = nullptr;
  ~Handle() {
    if (ctx) mrc_ctl_close(ctx);
  }
};

}  // namespace

CLI::App* add_ctl_command(CLI::App& app) {
  CLI::App* ctl =
      app.add_subcommand("ctl", "MRC controller: EV and CC profiles, EV probes and events (mrc_ctl.h)");
  ctl->require_subcommand(1);
  ctl->add_option("--socket", g_ctl.socket, "control socket of the endpoint (default $MRC_CTL_SOCKET)");
  ctl->add_flag("--offline", g_ctl.offline, "no endpoint: validate and expand profiles in this process");
  ctl->add_option("--ports", g_ctl.ports, "ports of the offline endpoint")->check(CLI::Range(1, 32));
  ctl->add_option("--config", g_ctl.config, "apply this TOML file first (with --offline)");
  g_apply = ctl->add_subcommand("apply", "apply EV-format, EV and CC profiles from a TOML file");
  g_apply->add_option("file", g_ctl.file, "TOML file")->required();
  g_show = ctl->add_subcommand("show", "profiles, EV states per port, port counters");
  g_show->add_flag("--json", g_ctl.json, "JSON output");
  g_evs = ctl->add_subcommand("evs", "each EV of a profile in its wire form");
  g_evs->add_option("profile", g_ctl.profile, "EV profile ID")->required();
  g_evs->add_flag("--json", g_ctl.json, "JSON output");
  g_probe = ctl->add_subcommand("probe", "send EV probes and print their RTTs");
  g_probe->add_option("--dgid", g_ctl.dgid, "peer address on the probe's port")->required();
  g_probe->add_option("--port", g_ctl.port, "local port (1-based)")->check(CLI::Range(1, 32));
  g_probe->add_option("--ev", g_ctl.ev, "expanded EV, big-endian hex")->required();
  g_probe->add_option("--mode", g_ctl.fmt_mode, "EV format: stev, srv6 or udp");
  g_probe->add_option("--count", g_ctl.count, "probes")->check(CLI::Range(1, 1024));
  g_probe->add_option("--timeout-ms", g_ctl.timeout_ms, "wait this long for the answers");
  g_events = ctl->add_subcommand("events", "follow EV events (profiles with an event mask)");
  g_events->add_option("--count", g_ctl.count, "stop after this many (0 = follow)");
  for (CLI::App** sub : {&g_deny, &g_allow}) {
    *sub = ctl->add_subcommand(sub == &g_deny ? "deny" : "allow",
                               sub == &g_deny ? "deny an EV (DENIED)" : "allow an EV again (GOOD)");
    (*sub)->add_option("profile", g_ctl.profile, "EV profile ID")->required();
    (*sub)->add_option("ev", g_ctl.ev, "raw EV, big-endian hex")->required();
    (*sub)->add_option("port", g_ctl.port, "port (1-based)")->required();
    (*sub)->add_flag("--all-copies", g_ctl.all_copies, "every copy of the EV");
  }
  return ctl;
}

int run_ctl() {
  Handle h;
  try {
    if (g_ctl.offline) {
      h.store.set_num_ports(g_ctl.ports);
      h.service = std::make_unique<api::CtlService>(h.store, nullptr, false);
      h.ctx = api::ctl_open_embedded(*h.service, true);
      if (!g_ctl.config.empty()) apply_config(h.ctx, g_ctl.config);
    } else {
      std::string path = g_ctl.socket;
      if (path.empty() && std::getenv("MRC_CTL_SOCKET")) path = std::getenv("MRC_CTL_SOCKET");
      if (path.empty())
        throw CtlError("no control socket: give --socket PATH (or set MRC_CTL_SOCKET), or --offline");
      if (!g_ctl.config.empty())
        throw CtlError("--config goes with --offline; use `apply FILE` on an endpoint");
      h.ctx = mrc_ctl_open(path.c_str());
      if (h.ctx == nullptr)
        throw CtlError("cannot open control socket " + path + ": " + std::strerror(errno));
    }
    if (g_apply->parsed()) {
      apply_config(h.ctx, g_ctl.file);
      std::printf("applied %s\n", g_ctl.file.c_str());
      return 0;
    }
    if (g_show->parsed()) return cmd_show(h.ctx);
    if (g_evs->parsed()) return cmd_evs(h.ctx);
    if (g_probe->parsed()) return cmd_probe(h.ctx);
    if (g_events->parsed()) return cmd_events(h.ctx);
    if (g_deny->parsed()) return cmd_deny(h.ctx, true);
    if (g_allow->parsed()) return cmd_deny(h.ctx, false);
  } catch (const CtlError& e) {
    std::fprintf(stderr, "mrc ctl: %s\n", e.what());
    return 1;
  }
  return 1;
}

}  // namespace mrc::tools
