// `mrc ctl`: the MRC controller (mrc_ctl.h) on the command line, talking to an endpoint's control
// socket (--socket PATH, default $MRC_CTL_SOCKET, else --pid PID or the only endpoint `mrc ctl list`
// shows), or with --offline to an in-process profile
// store that only validates and expands.
//
//   mrc ctl list [--json]                  the endpoint processes serving a control socket (D46)
//   mrc ctl apply FILE                     EV-format, EV and CC profiles from one TOML file
//   mrc ctl show [--json]                  profiles, EV states per port, port counters
//   mrc ctl evs PROFILE                    each EV in wire form (UDP sport, flow label, SRv6 DA/SRH)
//   mrc ctl probe --dgid A --port N --ev HEX [--count K]   EV probes, RTTs
//   mrc ctl events [--count K]             follow EV events
//   mrc ctl deny|allow PROFILE EV PORT     controller EV state
//   mrc ctl --offline --config FILE evs 1  expand a config without an endpoint
#include "api/ctl.hpp"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/ctl_discovery.hpp"
#include "api/ctl_proto.hpp"
#include "api/ev_expand.hpp"
#include "api/profile_toml.hpp"
#include "cli_checks.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::tools {
namespace {

struct CtlOptions {
  std::string socket;
  long pid = 0;
  std::string device;
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
CLI::App* g_list = nullptr;
CLI::App* g_apply = nullptr;
CLI::App* g_show = nullptr;
CLI::App* g_evs = nullptr;
CLI::App* g_probe = nullptr;
CLI::App* g_events = nullptr;
CLI::App* g_deny = nullptr;
CLI::App* g_allow = nullptr;

// Exit status (tools/mrc/main.cpp): 1 the run failed, 2 bad input (an option, an argument, a file).
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct CtlError : std::runtime_error {
  explicit CtlError(const std::string& what, int code = kExitFailed)
      : std::runtime_error(what), exit_code(code) {}
  int exit_code;
};

[[noreturn]] void bad_input(const std::string& what) {
  throw CtlError(what, kExitUsage);
}

/// The exit status for an errno of the controller API: EINVAL, ENOENT, E2BIG and ERANGE say the
/// request was wrong (bad input); EBUSY, ENOSPC, EPERM, EIO, ... that the run failed.
int exit_code_of(int rc) {
  return rc == EINVAL || rc == ENOENT || rc == E2BIG || rc == ERANGE ? kExitUsage : kExitFailed;
}

/// Why the last call failed, in the endpoint's words (errno text only when it gave none).
std::string why_text(mrc_ctl_context* c, int rc) {
  const char* w = mrc_ctl_last_error(c);
  return w != nullptr && *w != '\0' ? std::string(w) : std::string(std::strerror(rc));
}

void check(mrc_ctl_context* c, int rc, const std::string& what) {
  if (rc != 0) throw CtlError(what + ": " + why_text(c, rc), exit_code_of(rc));
}

// ---- TOML config ---------------------------------------------------------------------------------

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

mrc_ctl_ev make_ev(const api::EvBytes& b, std::uint8_t port) {
  mrc_ctl_ev e{};
  std::memcpy(e.val, b.data(), b.size());
  e.port = port;
  return e;
}

// A profile file is read and checked value by value before anything is applied
// (src/api/profile_toml.hpp).
using ConfigFile = api::ProfileFile;
using api::CcDef;
using api::EvDef;
using api::FmtDef;

ConfigFile load_config(const std::string& path) {
  try {
    return api::load_profiles(path);
  } catch (const api::ProfileTomlError& e) {
    bad_input(e.what());
  }
}

/// "entry N: rest" -> N and "rest" (REPLACE_EV / MODIFY_EV_STATE failures).
bool entry_index(const std::string& why, std::size_t& i, std::string& rest) {
  if (why.rfind("entry ", 0) != 0) return false;
  char* end = nullptr;
  i = std::strtoul(why.c_str() + 6, &end, 10);
  if (end == why.c_str() + 6 || std::strncmp(end, ": ", 2) != 0) return false;
  rest = end + 2;
  return true;
}

std::string sport_warning(mrc_ctl_context* c, std::uint64_t id);

/// Applies a file all or nothing (api::apply_profiles); warns about low source ports once it is in.
void apply_config(mrc_ctl_context* c, const ConfigFile& f) {
  std::vector<std::string> warnings;
  const api::ApplyResult r = api::apply_profiles(c, f, [&](const EvDef& d) {
    if (d.mode == MRC_CTL_EV_MODE_AUTO) return;
    if (const std::string w = sport_warning(c, d.id); !w.empty()) {
      const std::uint32_t n = d.mode == MRC_CTL_EV_MODE_EXP ? d.at.key("evs") : d.at.key("fields");
      warnings.push_back(f.at(n) + ": EV profile " + std::to_string(d.id) + ": " + w);
    }
  });
  if (r.rc != 0) throw CtlError(r.message, exit_code_of(r.rc));
  for (const std::string& w : warnings) std::fprintf(stderr, "mrc ctl: warning: %s\n", w.c_str());
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

std::vector<std::uint64_t> list(mrc_ctl_context* c, mrc_ctl_profile_kind kind) {
  std::uint32_t n = 0;
  int rc = mrc_ctl_list_profiles(c, kind, nullptr, &n);
  std::vector<std::uint64_t> ids(n);
  if (rc == E2BIG) rc = mrc_ctl_list_profiles(c, kind, ids.data(), &n);
  check(c, rc, "list profiles");
  ids.resize(n);
  return ids;
}

/// "no EV profile N" and what there is instead.
std::string no_ev_profile(mrc_ctl_context* c, std::uint64_t id) {
  std::string s = "no EV profile " + std::to_string(id);
  if (g_ctl.offline && g_ctl.config.empty() && g_ctl.file.empty())
    return s + " (--offline starts with profile 0 only: add --config FILE)";
  std::vector<std::string> ids;
  for (const auto x : list(c, MRC_CTL_PROFILE_KIND_EV)) ids.push_back(std::to_string(x));
  return s + " (the EV profiles are " + join(ids) + ")";
}

struct EvProfileView {
  mrc_ctl_ev_profile_attr attr{};
  std::vector<mrc_ctl_ev_op_entry> entries;
  std::vector<std::uint32_t> widths;
  std::vector<api::EvField> fields;
  mrc_ctl_ev_fmt_mode fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
};

EvProfileView read_ev_profile(mrc_ctl_context* c, std::uint64_t id, const char* cmd = "evs") {
  EvProfileView v;
  const std::string what = "EV profile " + std::to_string(id);
  const int qrc = mrc_ctl_query_ev_profile(c, id, &v.attr,
                                           MRC_CTL_EV_PROFILE_CUR_STATE | MRC_CTL_EV_PROFILE_MODE |
                                               MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                               MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK);
  if (qrc == ENOENT) bad_input(std::string(cmd) + ": " + no_ev_profile(c, id));
  check(c, qrc, what);
  if (v.attr.ev_mode == MRC_CTL_EV_MODE_AUTO) return v;
  // E2BIG sizing: ask with no room, learn the count, ask again.
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  int rc = mrc_ctl_query_ev_profile(c, id, &q, MRC_CTL_EV_PROFILE_EV_OP);
  if (rc == E2BIG) {
    v.entries.resize(static_cast<std::size_t>(q.ev_op.entry_count));
    q.ev_op.entries = v.entries.data();
    rc = mrc_ctl_query_ev_profile(c, id, &q, MRC_CTL_EV_PROFILE_EV_OP);
  }
  check(c, rc, what + " EV array");
  v.entries.resize(static_cast<std::size_t>(q.ev_op.entry_count));
  q = {};
  q.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS;
  rc = mrc_ctl_query_ev_profile(c, id, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP);
  std::vector<mrc_ctl_ev_field> f;
  if (rc == E2BIG) {
    f.resize(static_cast<std::size_t>(q.ev_fields_op.field_count));
    q.ev_fields_op.fields = f.data();
    rc = mrc_ctl_query_ev_profile(c, id, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP);
  }
  check(c, rc, what + " fields");
  for (const auto& x : f) v.fields.push_back({x.width, x.init_val, x.min_val, x.max_val, x.mask});
  mrc_ctl_ev_fmt_profile_attr fa{};
  std::vector<mrc_ctl_ev_fmt_field> w(api::kEvBits);
  fa.ev_fmt_op.fmt_fields = w.data();
  fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
  fa.ev_fmt_op.fmt_field_count = static_cast<int>(w.size());
  check(c,
        mrc_ctl_query_ev_fmt_profile(c, v.attr.ev_fmt_profile_id, &fa,
                                     MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP),
        "EV format " + std::to_string(v.attr.ev_fmt_profile_id));
  for (int i = 0; i < fa.ev_fmt_op.fmt_field_count; ++i)
    v.widths.push_back(w[static_cast<std::size_t>(i)].width);
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

/// The low-source-port check (ProfileStore::low_sport_warning) on a profile's EVs as they are now.
std::string sport_warning(mrc_ctl_context* c, std::uint64_t id) {
  const EvProfileView v = read_ev_profile(c, id);
  std::vector<api::EvBytes> expanded;
  for (const auto& e : v.entries) {
    api::EvBytes raw{}, x{};
    std::memcpy(raw.data(), e.ev.val, raw.size());
    if (api::expand(v.widths, v.fields, raw, x)) expanded.push_back(x);
  }
  return api::ProfileStore::low_sport_warning(v.fmt_mode, expanded);
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
  // phy_port_mask is 32 bits, bit N = port N (1-based): ports 1..31.
  for (std::uint8_t p = 1; p < 32; ++p) {
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
    fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
    fa.ev_fmt_op.fmt_field_count = static_cast<int>(w.size());
    check(c,
          mrc_ctl_query_ev_fmt_profile(
              c, id, &fa,
              MRC_CTL_EV_FMT_PROFILE_CUR_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP),
          "EV format " + std::to_string(id));
    std::vector<std::uint32_t> widths;
    for (int i = 0; i < fa.ev_fmt_op.fmt_field_count; ++i)
      widths.push_back(w[static_cast<std::size_t>(i)].width);
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

std::uint32_t fmt_mode_of(const std::string& name) {
  return name == "srv6"  ? MRC_CTL_EV_FMT_MODE_SRV6
         : name == "udp" ? MRC_CTL_EV_FMT_MODE_UDP
                         : MRC_CTL_EV_FMT_MODE_STEV;
}

int cmd_probe(mrc_ctl_context* c) {
  std::vector<mrc_ctl_ep_req> req(g_ctl.count);
  const api::EvBytes ev = api::ev_from_hex(g_ctl.ev);  // checked by the option's validator
  for (std::uint32_t i = 0; i < g_ctl.count; ++i) {
    mrc_ctl_ep_req& r = req[i];
    r.req_id = static_cast<std::uint16_t>(::getpid() + i);
    parse_gid(g_ctl.dgid, r.dgid.raw);  // checked by the option's validator
    r.ev_fmt_mode = static_cast<mrc_ctl_ev_fmt_mode>(fmt_mode_of(g_ctl.fmt_mode));
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
  if (cq == nullptr) check(c, errno, "events: create event CQ");
  std::uint32_t seen = 0;
  mrc_ctl_ev_event ev[64];
  while (g_ctl.count == 0 || seen < g_ctl.count) {
    const int n = mrc_ctl_poll_ev_event(cq, 64, ev);
    if (n < 0) {
      const std::string why = why_text(c, -n);
      mrc_ctl_destroy_ev_event_cq(cq);
      throw CtlError("events: poll events: " + why, exit_code_of(-n));
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
  const char* cmd = deny ? "deny" : "allow";
  std::string ev_text = g_ctl.ev;
  for (char& ch : ev_text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  mrc_ctl_ev_profile_attr q{};
  const int qrc = mrc_ctl_query_ev_profile(c, g_ctl.profile, &q, MRC_CTL_EV_PROFILE_CUR_STATE);
  if (qrc == ENOENT) bad_input(std::string(cmd) + ": " + no_ev_profile(c, g_ctl.profile));
  check(c, qrc, std::string(cmd) + ": EV profile " + std::to_string(g_ctl.profile));
  mrc_ctl_ev_op_entry e{};
  e.ev = make_ev(api::ev_from_hex(g_ctl.ev), static_cast<std::uint8_t>(g_ctl.port));  // validated
  e.state = deny ? MRC_CTL_EV_DENIED : MRC_CTL_EV_GOOD;
  e.flags = g_ctl.all_copies ? MRC_CTL_EV_OP_F_ALL_COPIES : 0;
  mrc_ctl_ev_profile_attr a{};
  a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
  a.ev_op.entries = &e;
  a.ev_op.entry_count = 1;
  const int rc = mrc_ctl_modify_ev_profile(c, g_ctl.profile, &a, MRC_CTL_EV_PROFILE_EV_OP);
  if (rc == ENOENT)
    bad_input(std::string(cmd) + ": EV " + ev_text + " on port " + std::to_string(g_ctl.port) +
              " is not in EV profile " + std::to_string(g_ctl.profile));
  std::size_t i = 0;
  std::string rest;
  if (rc != 0 && entry_index(why_text(c, rc), i, rest))
    throw CtlError(std::string(cmd) + ": EV profile " + std::to_string(g_ctl.profile) + ": " + rest,
                   exit_code_of(rc));
  check(c, rc, std::string(cmd) + ": EV profile " + std::to_string(g_ctl.profile));
  std::printf("EV profile %llu: EV %s on port %u %s\n", static_cast<unsigned long long>(g_ctl.profile),
              ev_text.c_str(), g_ctl.port, deny ? "DENIED" : "GOOD");
  return 0;
}

/// `mrc ctl list`: every endpoint process serving a control socket in the runtime directory.
int cmd_list() {
  const std::string dir = api::ctl_dir();
  if (dir.empty()) bad_input("list: MRC_CTL_DIR=none: endpoints serve no control socket");
  // Each endpoint is asked for its planes: a bad timeout would list every one as not answering.
  std::chrono::milliseconds timeout;
  if (std::string why; !api::ctl_reply_timeout(timeout, why)) bad_input(why);
  nlohmann::json out = nlohmann::json::array();
  if (!g_ctl.json) std::printf("%-8s %-16s %-12s %-6s %s\n", "PID", "COMMAND", "DEVICE", "PLANES", "SOCKET");
  for (const api::CtlListing& l : api::list_ctl_sockets(dir)) {
    // What the endpoint says about itself; one that does not answer is listed as such.
    int planes = -1;
    if (mrc_ctl_context* c = mrc_ctl_open(l.path.c_str())) {
      mrc_ctl_device_attr a{};
      if (mrc_ctl_query_device(c, &a) == 0) planes = std::popcount(a.phy_port_mask);
      mrc_ctl_close(c);
    }
    if (g_ctl.json) {
      out.push_back({{"pid", l.pid},
                     {"command", l.command},
                     {"device", l.device},
                     {"socket", l.path},
                     {"planes", planes >= 0 ? nlohmann::json(planes) : nlohmann::json(nullptr)}});
    } else {
      std::printf("%-8ld %-16s %-12s %-6s %s\n", l.pid, l.command.c_str(), l.device.c_str(),
                  planes >= 0 ? std::to_string(planes).c_str() : "-", l.path.c_str());
    }
  }
  if (g_ctl.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

/// The socket of --pid (and --device), or of the only endpoint listed: "" when there is none.
std::string discovered_socket(std::string& label) {
  const std::string dir = api::ctl_dir();
  if (dir.empty()) return {};
  std::vector<api::CtlListing> found;
  for (api::CtlListing& l : api::list_ctl_sockets(dir))
    if ((g_ctl.pid == 0 || l.pid == g_ctl.pid) && (g_ctl.device.empty() || l.device == g_ctl.device))
      found.push_back(std::move(l));
  const std::string which = g_ctl.pid != 0 ? "process " + std::to_string(g_ctl.pid) : std::string("endpoint");
  if (found.empty()) {
    if (g_ctl.pid != 0 || !g_ctl.device.empty())
      bad_input("no control socket of " + which + (g_ctl.device.empty() ? "" : " device " + g_ctl.device) +
                " in " + dir + " (`mrc ctl list` shows the endpoints)");
    return {};
  }
  if (found.size() > 1)
    bad_input(std::to_string(found.size()) + " control sockets in " + dir +
              " match; choose one with --socket PATH, --pid PID or --device NAME (`mrc ctl list`)");
  label = found[0].path + " (" + which + " " + found[0].device + ")";
  return found[0].path;
}

/// Opens the endpoint's control socket, or says why not: a path that is missing, a directory or
/// not a socket is bad input (2); a socket nobody listens on means the endpoint is gone (1).
mrc_ctl_context* open_socket(const std::string& path, const std::string& label) {
  // mrc_ctl_open refuses a bad $MRC_CTL_TIMEOUT with EINVAL, as it does a path too long: ask first.
  std::chrono::milliseconds timeout;
  if (std::string why; !api::ctl_reply_timeout(timeout, why)) bad_input(why);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      bad_input(label +
                ": no such file (is the endpoint running? it serves the socket its device "
                "config names as ctl_socket)");
    if (e == EACCES) bad_input(label + ": permission denied");
    bad_input(label + ": " + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) bad_input(label + ": is a directory, not a control socket");
  if (!S_ISSOCK(st.st_mode))
    bad_input(label + ": is not a control socket (a UNIX socket an endpoint serves)");
  mrc_ctl_context* c = mrc_ctl_open(path.c_str());
  if (c != nullptr) return c;
  const int e = errno;
  if (e == EINVAL) bad_input(label + ": too long for a UNIX socket path (at most 107 bytes)");
  if (e == ECONNREFUSED) throw CtlError(label + ": connection refused (no endpoint is listening on it)");
  if (e == EACCES) throw CtlError(label + ": permission denied");
  throw CtlError(label + ": cannot connect: " + std::strerror(e));
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

CLI::Validator ev_hex_check() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          api::ev_from_hex(s);
        } catch (const std::invalid_argument& e) {
          return std::string("must be an EV of 1..64 hex digits (big-endian), got '") + s + "' (" + e.what() +
                 ")";
        }
        return {};
      },
      "HEX", "ev_hex");
}

CLI::Validator address_check() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::uint8_t gid[16];
        return parse_gid(s, gid) ? std::string() : "must be an IPv4 or IPv6 address, got '" + s + "'";
      },
      "ADDRESS", "address");
}

CLI::Validator one_of(std::vector<std::string> names) {
  return CLI::Validator(
      [names](std::string& s) -> std::string {
        if (std::find(names.begin(), names.end(), s) != names.end()) return {};
        return "must be one of " + join(names) + ", got '" + s + "'";
      },
      join(names, "|"), "one_of");
}

CLI::Option* g_ports_opt = nullptr;

}  // namespace

CLI::App* add_ctl_command(CLI::App& app) {
  CLI::App* ctl =
      app.add_subcommand("ctl", "MRC controller: EV and CC profiles, EV probes and events (mrc_ctl.h)");
  ctl->require_subcommand(1);
  ctl->fallthrough();  // `mrc ctl events --offline` as well as `mrc ctl --offline events`
  CLI::Option* socket =
      ctl->add_option("--socket", g_ctl.socket, "control socket of the endpoint (default $MRC_CTL_SOCKET)");
  CLI::Option* pid =
      ctl->add_option("--pid", g_ctl.pid, "the endpoint process with this pid (`mrc ctl list`)")
          ->check(CLI::Range(1L, 4194304L))
          ->excludes(socket);
  CLI::Option* device =
      ctl->add_option("--device", g_ctl.device, "its device (when a process serves several)")
          ->excludes(socket);
  ctl->add_flag("--offline", g_ctl.offline, "no endpoint: validate and expand profiles in this process")
      ->excludes(socket)
      ->excludes(pid)
      ->excludes(device);
  g_list =
      ctl->add_subcommand("list", "endpoint processes serving a control socket (runtime directory, D46)");
  g_list->add_flag("--json", g_ctl.json, "JSON output");
  g_ports_opt = ctl->add_option("--ports", g_ctl.ports,
                                "ports of the offline endpoint (default: the highest port the files name, "
                                "at least 1)")
                    ->check(uint_range(1, engine::kMaxPorts));
  ctl->add_option("--config", g_ctl.config, "apply this TOML file first (with --offline)");
  g_apply = ctl->add_subcommand("apply", "apply EV-format, EV and CC profiles from a TOML file");
  g_apply->add_option("file", g_ctl.file, "TOML file")->required();
  g_show = ctl->add_subcommand("show", "profiles, EV states per port, port counters");
  g_show->add_flag("--json", g_ctl.json, "JSON output");
  g_evs = ctl->add_subcommand("evs", "each EV of a profile in its wire form");
  g_evs->add_option("profile", g_ctl.profile, "EV profile ID")->required()->check(uint_range(0, UINT64_MAX));
  g_evs->add_flag("--json", g_ctl.json, "JSON output");
  g_probe = ctl->add_subcommand("probe", "send EV probes and print their RTTs (needs an endpoint)");
  g_probe->add_option("--dgid", g_ctl.dgid, "peer address on the probe's port")
      ->required()
      ->check(address_check());
  g_probe->add_option("--port", g_ctl.port, "local port (1-based)")->check(uint_range(1, engine::kMaxPorts));
  g_probe->add_option("--ev", g_ctl.ev, "expanded EV, big-endian hex")->required()->check(ev_hex_check());
  g_probe->add_option("--mode", g_ctl.fmt_mode, "EV format: stev, srv6 or udp")
      ->check(one_of({"stev", "srv6", "udp"}));
  g_probe->add_option("--count", g_ctl.count, "probes")->check(uint_range(1, 1024));
  g_probe->add_option("--timeout-ms", g_ctl.timeout_ms, "wait this long for the answers")
      ->check(uint_range(1, 3'600'000));
  g_events =
      ctl->add_subcommand("events", "follow EV events (profiles with an event mask; needs an endpoint)");
  g_events->add_option("--count", g_ctl.count, "stop after this many (0 = follow)")
      ->check(uint_range(0, UINT32_MAX));
  for (CLI::App** sub : {&g_deny, &g_allow}) {
    *sub = ctl->add_subcommand(sub == &g_deny ? "deny" : "allow",
                               sub == &g_deny ? "deny an EV (DENIED)" : "allow an EV again (GOOD)");
    (*sub)
        ->add_option("profile", g_ctl.profile, "EV profile ID")
        ->required()
        ->check(uint_range(0, UINT64_MAX));
    (*sub)->add_option("ev", g_ctl.ev, "raw EV, big-endian hex")->required()->check(ev_hex_check());
    (*sub)
        ->add_option("port", g_ctl.port, "port (1-based)")
        ->required()
        ->check(uint_range(1, engine::kMaxPorts));
    (*sub)->add_flag("--all-copies", g_ctl.all_copies, "every copy of the EV");
  }
  return ctl;
}

int run_ctl() {
  Handle h;
  try {
    // Offline there is no endpoint: nothing sends probes or produces events. Say so now rather
    // than wait for what cannot come.
    if (g_ctl.offline && g_events->parsed())
      bad_input(
          "events: --offline has no endpoint to produce EV events; give --socket PATH (or set "
          "MRC_CTL_SOCKET) of a running endpoint");
    if (g_ctl.offline && g_probe->parsed())
      bad_input(
          "probe: --offline has no endpoint to send EV probes from; give --socket PATH (or set "
          "MRC_CTL_SOCKET) of a running endpoint");
    if (g_list->parsed()) {
      if (g_ctl.offline) bad_input("list: --offline has no endpoints to list");
      return cmd_list();
    }
    std::vector<ConfigFile> files;  // checked before anything is applied
    if (g_ctl.offline) {
      if (!g_ctl.config.empty()) files.push_back(load_config(g_ctl.config));
      if (g_apply->parsed()) files.push_back(load_config(g_ctl.file));
      // The offline endpoint has the ports the files name unless --ports says otherwise.
      std::uint32_t ports = 1;
      for (const ConfigFile& f : files) ports = std::max(ports, f.ports_needed);
      if (g_ports_opt->count() > 0) {
        for (const ConfigFile& f : files)
          if (f.ports_needed > g_ctl.ports)
            bad_input(f.at(f.port_line) + ": EV profile " + std::to_string(f.port_profile) + ": port " +
                      std::to_string(f.ports_needed) + " is above --ports " + std::to_string(g_ctl.ports) +
                      " (this file needs --ports " + std::to_string(f.ports_needed) +
                      "; without --ports the offline endpoint has the ports the files name)");
        ports = g_ctl.ports;
      }
      h.store.set_num_ports(ports);
      h.service = std::make_unique<api::CtlService>(h.store, nullptr, false);
      h.ctx = api::ctl_open_embedded(*h.service, true);
      if (!g_ctl.config.empty()) apply_config(h.ctx, files.front());
    } else {
      if (!g_ctl.config.empty()) bad_input("--config goes with --offline; use `apply FILE` on an endpoint");
      std::string path = g_ctl.socket, label = "--socket " + g_ctl.socket;
      if (path.empty() && std::getenv("MRC_CTL_SOCKET")) {
        path = std::getenv("MRC_CTL_SOCKET");
        label = "MRC_CTL_SOCKET=" + path;
      }
      if (path.empty()) path = discovered_socket(label);
      if (path.empty())
        bad_input(
            "no control socket: give --socket PATH (or set MRC_CTL_SOCKET), or --offline; no endpoint "
            "process serves one in " +
            (api::ctl_dir().empty() ? std::string("the runtime directory (MRC_CTL_DIR=none)")
                                    : api::ctl_dir()));
      if (g_apply->parsed()) files.push_back(load_config(g_ctl.file));
      h.ctx = open_socket(path, label);
    }
    if (g_apply->parsed()) {
      apply_config(h.ctx, files.back());
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
    return e.exit_code;
  }
  return kExitFailed;
}

}  // namespace mrc::tools
