#include "api/ctl_service.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

#include "api/ctl_proto.hpp"
#include "engine/qp.hpp"

namespace mrc::api {

using nlohmann::json;

bool process_privileged(int pid) {
  if (pid == 0 && ::geteuid() == 0) return true;
  std::ifstream f(pid == 0 ? std::string("/proc/self/status") : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream in(line.substr(4));
      unsigned real = 1, effective = 1;
      in >> real >> effective;
      if (effective == 0) return true;
    }
    if (line.rfind("CapEff:", 0) == 0) {
      constexpr unsigned kCapNetAdmin = 12;
      const std::uint64_t caps = std::stoull(line.substr(7), nullptr, 16);
      return (caps >> kCapNetAdmin) & 1u;
    }
  }
  return false;
}

namespace {

/// An enum from `key`, checked against its last enumerator before the cast (casting a value the
/// enum cannot hold is undefined behaviour). Out of range it is refused when the call uses it
/// (`used`), else it becomes `unused` (the call ignores the field, as it always did).
template <class E>
E json_enum(const json& in, const char* key, E last, bool used, E unused, const char* refusal) {
  const auto v = json_get<std::uint32_t>(in, key);
  if (v <= static_cast<std::uint32_t>(last)) return static_cast<E>(v);
  if (used) throw std::invalid_argument(refusal);
  return unused;
}

mrc_ctl_profile_state json_state(const json& in, bool used) {
  return json_enum(in, "state", MRC_CTL_PROFILE_ONLINE, used, MRC_CTL_PROFILE_INIT, "unknown profile state");
}

constexpr const char* kNotPrivileged = "this handle is not privileged (needs uid 0 or CAP_NET_ADMIN)";

/// Caps what a reply repeats of a request (an unknown op, a parse error quoting the input).
std::string clip(std::string s, std::size_t n = 256) {
  if (s.size() > n) s.replace(n, std::string::npos, "...");
  return s;
}

}  // namespace

/// A decoded request with its response under construction.
struct CtlService::Request {
  const json& in;
  json& out;
  std::string& why;
};

CtlService::CtlService(ProfileStore& store, io::UdpEndpoint* udp, bool poll_events, CtlHooks hooks)
    : store_(store), udp_(udp), poll_events_(poll_events && udp != nullptr), hooks_(std::move(hooks)) {
  if (udp_) {
    store_.set_num_ports(udp_->num_planes());
    WireRules w;
    w.canonical = [u = udp_](std::uint32_t v) { return u->canonical_ev(v); };
    if (udp_->config().ev_mode == io::EvMode::kSrv6) {
      w.srv6_check = [block = udp_->config().srv6.block_bits](const EvBytes& e) {
        std::vector<std::uint16_t> usids;
        std::string why = srv6_usids(e, block, usids);
        if (why.empty() && block + 16 * usids.size() > 112)
          why = "SRv6 EV has " + std::to_string(usids.size()) + " uSIDs; at most " +
                std::to_string((112 - block) / 16) + " fit with the final uSID";
        return why;
      };
    }
    store_.set_wire_rules(std::move(w));
  }
  store_.set_event_sink([this](const EvEventRecord& r) { on_store_event(r); });
}

CtlService::~CtlService() {
  store_.set_event_sink(nullptr);
}

void CtlService::pump() {
  if (!poll_events_) return;
  std::lock_guard lk(pump_mu_);
  engine::Event e;
  while (udp_->poll_event(e)) on_engine_event(e);
}

void CtlService::on_engine_event(const engine::Event& e) {
  switch (e.type) {
    case engine::EventType::kEvState:
      store_.on_engine_ev_state(e.ev, e.to);
      return;
    case engine::EventType::kEvProbeResponse:
    case engine::EventType::kEvProbeTimeout: {
      std::lock_guard lk(probe_mu_);
      auto it = probes_.find(e.req_id);
      if (it == probes_.end() || it->second.answered || it->second.timed_out) return;
      if (e.type == engine::EventType::kEvProbeTimeout) {
        it->second.timed_out = true;
      } else {
        it->second.answered = true;
        it->second.rtt = e.rtt_ns;
        it->second.adj = e.adj_svc_time;
        it->second.port =
            static_cast<std::uint8_t>(e.ev.port + 1);  // answers come back on the request's plane
        it->second.order = answer_order_++;
      }
      probe_cv_.notify_all();
      return;
    }
    default:
      return;
  }
}

void CtlService::on_store_event(const EvEventRecord& r) {
  std::lock_guard lk(cq_mu_);
  for (auto& [id, cq] : cqs_) {
    if (cq.events.size() >= cq.cqe) {
      ++cq.pending_drops;  // never overrun: count what is lost, report it with the next event
      continue;
    }
    cq.events.push_back(r);
    cq.drops.push_back(cq.pending_drops);
    cq.pending_drops = 0;
  }
}

int CtlService::load_srv6_paths(std::string& why) {
  if (udp_ == nullptr || udp_->config().ev_mode != io::EvMode::kSrv6) return 0;
  std::lock_guard lk(srv6_mu_);
  const std::vector<EvBytes> table = store_.srv6_paths();
  if (table.empty() || table.size() == srv6_loaded_) return 0;
  std::vector<std::vector<std::uint16_t>> paths(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    // The store's check passed for every entry, so this only fails on a bad block length.
    if (std::string w = srv6_usids(table[i], udp_->config().srv6.block_bits, paths[i]); !w.empty()) {
      why = w;
      return EINVAL;
    }
  }
  bool ok = false;
  udp_->execute([&](engine::Endpoint&) { ok = udp_->set_srv6_paths(std::move(paths), why); });
  if (!ok) return EINVAL;
  srv6_loaded_ = table.size();
  return 0;
}

std::uint32_t CtlService::peer_for(const std::uint8_t gid[16], int plane, int& rc) {
  io::IpAddr a;
  if (!io::IpAddr::from_gid(gid, udp_->config().planes.front().family, a)) {
    rc = EINVAL;
    return 0;
  }
  std::uint32_t handle = 0;
  std::lock_guard lk(peer_mu_);  // one lookup-or-add at a time: no two stand-ins for one address
  udp_->execute([&](engine::Endpoint&) {
    // Answers are attributed to the peer the endpoint knows at that address (a QP's, registered
    // with all its plane addresses): reuse it, or the engine drops them as another peer's.
    for (std::uint32_t p = 0; p < udp_->num_planes() && handle == 0; ++p)
      if (plane < 0 || p == static_cast<std::uint32_t>(plane)) handle = udp_->peer_at(p, a);
    // Unknown: a stand-in known by this address on every plane.
    if (handle == 0) handle = udp_->add_peer(std::vector<io::IpAddr>(udp_->num_planes(), a));
  });
  if (handle == 0) rc = EINVAL;
  return handle;
}

int CtlService::ep_batch(Request& q) {
  const auto op = json_get<std::uint32_t>(q.in, "op_type");
  const auto timeout = json_get<std::uint64_t>(q.in, "timeout");
  const json& reqs = json_array(q.in, "reqs");
  q.out["rsps"] = json::array();
  if (json_get<std::uint32_t>(q.in, "tc") > 63) {
    q.why = "req_tc is a DSCP (0..63)";
    return EINVAL;
  }
  if (op != MRC_CTL_EP_OP_EV_PROBE && op != MRC_CTL_EP_OP_PORT_STATUS_UPDATE) {
    q.why = "unknown endpoint operation";
    return ENOTSUP;
  }
  struct Item {
    std::uint16_t req_id;
    std::uint32_t peer;
    engine::Ev ev;
  };
  std::vector<Item> items;
  const std::uint32_t planes = udp_->num_planes();
  std::uint32_t port_mask = 0;
  udp_->execute([&](engine::Endpoint& ep) { port_mask = ep.port_mask(); });
  for (const json& r : reqs) {
    Item it{};
    it.req_id = json_get<std::uint16_t>(r, "req_id");
    for (const Item& other : items)
      if (other.req_id == it.req_id) {
        q.why = "req_id " + std::to_string(it.req_id) + " is used twice";
        return EINVAL;
      }
    const std::vector<std::uint64_t> gid = json_uint_array(r, "dgid", 255);
    if (gid.size() != 16) {
      q.why = "dgid must be 16 bytes";
      return EINVAL;
    }
    std::uint8_t dgid[16];
    std::copy(gid.begin(), gid.end(), dgid);
    int rc = 0;
    const int plane =
        op == MRC_CTL_EP_OP_EV_PROBE ? static_cast<int>(json_get<std::uint32_t>(r, "port")) - 1 : -1;
    if (op == MRC_CTL_EP_OP_EV_PROBE && (plane < 0 || plane >= static_cast<int>(planes))) {
      q.why = "req_ev needs a port 1.." + std::to_string(planes);
      return EINVAL;
    }
    it.peer = peer_for(dgid, plane, rc);
    if (rc != 0) {
      q.why = "dgid is not an address of this endpoint's family";
      return rc;
    }
    if (op == MRC_CTL_EP_OP_PORT_STATUS_UPDATE) {
      if (json_get<std::uint64_t>(r, "port_status") != std::uint64_t{port_mask} << 1) {
        q.why = "a port-status update carries this endpoint's usable ports; they are " +
                std::to_string(std::uint64_t{port_mask} << 1);
        return EINVAL;
      }
    } else {
      const auto port = json_get<std::uint32_t>(r, "port");
      const auto mode = json_get<std::uint32_t>(r, "ev_fmt_mode");
      if (port < 1 || port > planes || !ev_fmt_mode_valid(mode)) {
        q.why = "req_ev needs a port 1.." + std::to_string(planes) + " and a valid ev_fmt_mode";
        return EINVAL;
      }
      const EvBytes val = ev_from_hex(json_string(r, "ev"));
      it.ev.port = static_cast<std::uint8_t>(port - 1);
      if (int erc = store_.engine_value(mode, val, it.ev.value, q.why); erc != 0) return erc;
    }
    items.push_back(it);
  }
  if (int rc = load_srv6_paths(q.why); rc != 0) return rc;
  if (op == MRC_CTL_EP_OP_PORT_STATUS_UPDATE) {
    int rc = 0;
    udp_->execute([&](engine::Endpoint& ep) {
      for (const Item& it : items)
        if (rc == 0) rc = ep.send_port_status(it.peer, io::UdpEndpoint::now());
    });
    return rc;  // not answered (docs/decisions.md D19)
  }
  {
    std::lock_guard lk(probe_mu_);
    for (const Item& it : items)
      if (probes_.count(it.req_id)) {
        q.why = "req_id " + std::to_string(it.req_id) + " is still outstanding";
        return EAGAIN;
      }
    for (const Item& it : items) probes_[it.req_id] = ProbeWait{};
  }
  int send_rc = 0;
  std::size_t sent = 0;
  udp_->execute([&](engine::Endpoint& ep) {
    for (const Item& it : items) {
      send_rc = ep.send_ev_probe(it.peer, it.ev, it.req_id, timeout, io::UdpEndpoint::now());
      if (send_rc != 0) break;
      ++sent;
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout);
  std::vector<std::pair<std::uint64_t, json>> answers;
  {
    std::unique_lock lk(probe_mu_);
    const auto all_done = [&] {
      for (std::size_t i = 0; i < sent; ++i) {
        const ProbeWait& w = probes_[items[i].req_id];
        if (!w.answered && !w.timed_out) return false;
      }
      return true;
    };
    while (!all_done() && std::chrono::steady_clock::now() < deadline) {
      if (poll_events_) {
        lk.unlock();
        pump();
        lk.lock();
        probe_cv_.wait_for(lk, std::chrono::microseconds(200));
      } else {
        probe_cv_.wait_until(lk, deadline);
      }
    }
    for (std::size_t i = 0; i < sent; ++i) {
      const ProbeWait& w = probes_[items[i].req_id];
      if (w.answered)
        answers.emplace_back(
            w.order, json{{"req_id", items[i].req_id}, {"port", w.port}, {"rtt", w.rtt}, {"adj", w.adj}});
    }
    for (const Item& it : items) probes_.erase(it.req_id);
  }
  std::sort(answers.begin(), answers.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, j] : answers) q.out["rsps"].push_back(std::move(j));
  if (send_rc != 0) {
    q.why = "the engine refused request " + std::to_string(sent) + " (port down?)";
    return send_rc == ENETDOWN ? EIO : send_rc;
  }
  if (answers.size() < items.size()) {
    q.why = std::to_string(items.size() - answers.size()) + " request(s) not answered in time";
    return ETIMEDOUT;
  }
  return 0;
}

int CtlService::modify_ev(std::uint64_t id, const EvModify& m, EvResult& r, std::string& why) {
  int rc = store_.modify_ev(id, m, r, why);
  if (rc == 0) rc = load_srv6_paths(why);  // before any QP can take the new EVs
  if (!r.deny.empty() && udp_ != nullptr) {
    // Live QPs follow the controller's deny / allow at once.
    udp_->execute([&](engine::Endpoint& ep) {
      for (const std::uint32_t qpn : ep.qpns())
        if (engine::Qp* qp = ep.qp(qpn))
          for (const auto& [ev, denied] : r.deny)
            qp->evs().set_denied(ev.value, ev.port, denied, io::UdpEndpoint::now());
    });
  }
  return rc;
}

int CtlService::ev_profile(CtlSession& s, bool modify, std::uint64_t id, const EvModify& m,
                           EvProfileInfo& out, EvResult& r, std::string& why) {
  if (modify && !s.privileged) {
    why = kNotPrivileged;
    return EPERM;
  }
  return modify ? modify_ev(id, m, r, why) : store_.query_ev(id, m, out, r, why);
}

std::string CtlService::dispatch(CtlSession& s, const std::string& request) {
  json out = json::object();
  std::string why;
  int rc = EINVAL;
  try {
    const json in = parse_request(request);
    Request q{in, out, why};
    const std::string op = json_string(in, "op");
    static const char* const kQueries[] = {"query_device", "query_port", "query_ev_fmt", "query_ev",
                                           "query_cc",     "counters",   "list"};
    const bool query = std::find_if(std::begin(kQueries), std::end(kQueries),
                                    [&](const char* n) { return op == n; }) != std::end(kQueries);
    const bool needs_udp = op == "query_port" || op == "modify_port" || op == "ep_batch" || op == "counters";
    if (!query && !s.privileged) {
      why = kNotPrivileged;
      rc = EPERM;
    } else if (needs_udp && udp_ == nullptr) {
      why = "no endpoint behind this controller";
      rc = ENOTSUP;
    } else if (op == "query_device") {
      const std::uint32_t planes = udp_ ? udp_->num_planes() : store_.num_ports();
      const StoreLimits& l = store_.limits();
      out["planes"] = planes;
      out["ev"] = {l.max_fmt_profiles, l.max_ev_profiles, l.max_evs, l.max_evs - store_.evs_in_use(),
                   l.max_evs_profile,  l.count_align,     kEvBits};
      out["cc_max_profiles"] = l.max_cc_profiles;
      rc = 0;
    } else if (op == "query_port" || op == "modify_port") {
      const auto port = json_get<std::uint32_t>(in, "port");
      if (port < 1 || port > udp_->num_planes()) {
        why = "port must be 1.." + std::to_string(udp_->num_planes());
        rc = EINVAL;
      } else if (op == "modify_port") {
        const auto mask = json_get<std::uint32_t>(in, "mask");
        const auto state = json_get<std::uint32_t>(in, "admin");
        if ((mask & ~MRC_CTL_PORT_ADMIN_STATE) || state > MRC_CTL_PORT_ADMIN_ENABLED) {
          why = "unknown port attribute or admin state";
          rc = EINVAL;
        } else {
          if (mask & MRC_CTL_PORT_ADMIN_STATE) {
            bool changed = false;
            udp_->execute([&](engine::Endpoint& ep) {
              const bool was = (ep.port_mask() >> (port - 1)) & 1u;
              ep.set_port_up(static_cast<std::uint8_t>(port - 1), state != 0, io::UdpEndpoint::now());
              changed = was != (state != 0);
            });
            if (changed && hooks_.port_changed)
              hooks_.port_changed(static_cast<std::uint8_t>(port), state != 0);
          }
          rc = 0;
        }
      } else {
        std::uint32_t mask = 0;
        udp_->execute([&](engine::Endpoint& ep) { mask = ep.port_mask(); });
        out["admin"] = (mask >> (port - 1)) & 1u;
        rc = 0;
      }
    } else if (op == "modify_ev_fmt") {
      EvFmtModify m;
      m.mask = json_get<std::uint32_t>(in, "mask");
      m.state = json_state(in, m.mask & MRC_CTL_EV_FMT_PROFILE_STATE);
      m.mode = json_get<std::uint32_t>(in, "mode");
      for (const std::uint64_t w : json_uint_array(in, "widths", UINT32_MAX))
        m.widths.push_back(static_cast<std::uint32_t>(w));
      rc = store_.modify_ev_fmt(json_get<std::uint64_t>(in, "id"), m, why);
    } else if (op == "query_ev_fmt") {
      EvFmtInfo f;
      rc = store_.query_ev_fmt(json_get<std::uint64_t>(in, "id"), f);
      if (rc == ENOENT) why = "no such EV format profile";
      out["state"] = f.state;
      out["mode"] = f.mode;
      out["widths"] = f.widths;
    } else if (op == "modify_ev" || op == "query_ev") {
      EvModify m;
      m.mask = json_get<std::uint32_t>(in, "mask");
      m.state = json_state(in, op == "modify_ev" && (m.mask & MRC_CTL_EV_PROFILE_STATE));
      m.mode = json_get<std::uint32_t>(in, "mode");
      m.fmt_id = json_get<std::uint64_t>(in, "fmt_id");
      m.count = json_get<std::uint32_t>(in, "count");
      m.min_active = json_get<std::uint32_t>(in, "min_active");
      m.event_mask = json_get<std::uint32_t>(in, "event_mask");
      m.op = json_enum(in, "ev_op", MRC_CTL_EV_OP_QUERY_EV_ARRAY, m.mask & MRC_CTL_EV_PROFILE_EV_OP,
                       MRC_CTL_EV_OP_REPLACE_EV, "unknown EV op");
      for (const json& e : json_array(in, "entries")) m.entries.push_back(entry_from_json(e));
      m.query_capacity = json_get<std::uint32_t>(in, "capacity");
      m.fields_op = json_enum(in, "fields_op", MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS,
                              m.mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP, MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS,
                              "unknown EV fields op");
      for (const json& f : json_array(in, "fields")) m.fields.push_back(field_from_json(f));
      m.fields_capacity = json_get<std::uint32_t>(in, "fields_capacity");
      EvResult r;
      const std::uint64_t id = json_get<std::uint64_t>(in, "id");
      if (op == "modify_ev") {
        rc = modify_ev(id, m, r, why);
      } else {
        EvProfileInfo p;
        rc = store_.query_ev(id, m, p, r, why);
        out["state"] = p.state;
        out["mode"] = p.mode;
        out["fmt_id"] = p.fmt_id;
        out["count"] = p.count;
        out["min_active"] = p.min_active;
        out["event_mask"] = p.event_mask;
        out["users"] = p.users;
      }
      out["done"] = r.done;
      out["needed"] = r.needed;
      out["entries"] = json::array();
      for (const EvOpEntry& e : r.entries) out["entries"].push_back(to_json(e));
      out["fields"] = json::array();
      for (const EvField& f : r.fields) out["fields"].push_back(to_json(f));
    } else if (op == "modify_cc") {
      CcModify m;
      m.mask = json_get<std::uint32_t>(in, "mask");
      m.state = json_state(in, m.mask & MRC_CTL_CC_PROFILE_STATE);
      m.algorithm_null = in.at("algorithm").is_null();
      if (!m.algorithm_null) m.algorithm = json_string(in, "algorithm");
      m.config_present = !in.at("config").is_null();
      if (m.config_present) m.config = nscc_from_json(in.at("config"));
      rc = store_.modify_cc(json_get<std::uint64_t>(in, "id"), m, why);
    } else if (op == "query_cc") {
      CcProfileInfo c;
      rc = store_.query_cc(json_get<std::uint64_t>(in, "id"), c);
      if (rc == ENOENT) why = "no such CC profile";
      out["state"] = c.state;
      out["algorithm"] =
          c.algorithm == cc::Algorithm::kNone ? json(nullptr) : json(cc::algorithm_name(c.algorithm));
      out["config"] = c.config_set ? to_json(c.config) : json(nullptr);
      out["users"] = c.users;
    } else if (op == "create_cq") {
      const auto cqe = json_int64(in, "cqe");
      if (cqe < 1 || cqe > 65536) {
        why = "cqe must be 1..65536";
        rc = EINVAL;
      } else {
        std::lock_guard lk(cq_mu_);
        const std::uint64_t id = next_cq_++;
        cqs_[id].cqe = static_cast<std::uint32_t>(cqe);
        s.cqs.push_back(id);
        out["cq"] = id;
        rc = 0;
      }
    } else if (op == "destroy_cq" || op == "poll_cq") {
      const auto id = json_get<std::uint64_t>(in, "cq");
      if (std::find(s.cqs.begin(), s.cqs.end(), id) == s.cqs.end()) {
        why = "no such event CQ on this handle";
        rc = EINVAL;
      } else if (op == "destroy_cq") {
        std::lock_guard lk(cq_mu_);
        cqs_.erase(id);
        std::erase(s.cqs, id);
        rc = 0;
      } else {
        const auto n = json_int64(in, "n");
        if (n < 0) {
          why = "negative entry count";
          rc = EINVAL;
        } else {
          pump();
          std::lock_guard lk(cq_mu_);
          EventCq& cq = cqs_.at(id);
          out["events"] = json::array();
          for (std::int64_t i = 0; i < n && !cq.events.empty(); ++i) {
            const EvEventRecord& r = cq.events.front();
            out["events"].push_back(json{{"profile", r.profile_id},
                                         {"ev", ev_hex(r.raw)},
                                         {"port", r.port},
                                         {"state", r.state},
                                         {"drops", cq.drops.front()}});
            cq.events.pop_front();
            cq.drops.pop_front();
          }
          rc = 0;
        }
      }
    } else if (op == "list") {
      out["ev_fmt"] = store_.ev_fmt_ids();
      out["ev"] = store_.ev_ids();
      out["cc"] = store_.cc_ids();
      rc = 0;
    } else if (op == "save_profiles") {
      // All-or-nothing profile files (`mrc ctl apply`): the profiles a file names, kept for this
      // session until restored or dropped.
      const auto ids = [&](const char* k) {
        std::vector<std::uint64_t> v;
        for (const json& x : json_array(in, k)) {
          if (!x.is_number_unsigned())
            throw std::invalid_argument(std::string(k) + ": profile IDs are unsigned");
          v.push_back(x.get<std::uint64_t>());
        }
        return v;
      };
      s.saved = store_.save(ids("ev_fmt"), ids("ev"), ids("cc"));
      rc = 0;
    } else if (op == "restore_profiles" || op == "forget_profiles") {
      if (!s.saved) {
        why = "no saved profiles";
        rc = EINVAL;
      } else {
        rc = op == "restore_profiles" ? store_.restore(*s.saved, why) : 0;
        s.saved.reset();
      }
    } else if (op == "ep_batch") {
      rc = ep_batch(q);
    } else if (op == "counters") {
      out["planes"] = json::array();
      udp_->execute([&](engine::Endpoint& ep) {
        for (std::uint32_t p = 0; p < udp_->num_planes(); ++p) {
          const io::PlaneCounters& c = udp_->plane_counters()[p];
          out["planes"].push_back(json{{"port", p + 1},
                                       {"up", (ep.port_mask() >> p) & 1u},
                                       {"tx_packets", c.tx_packets},
                                       {"rx_packets", c.rx_packets},
                                       {"tx_dropped", c.tx_dropped},
                                       {"rx_ecn_ce", c.rx_ecn_ce},
                                       {"rx_trimmed", c.rx_trimmed}});
        }
        out["qps"] = ep.qpns().size();
      });
      rc = 0;
    } else {
      why = "unknown request \"" + clip(op, 64) + "\"";
      rc = EINVAL;
    }
  } catch (const std::bad_alloc&) {
    out = json::object();
    why = "out of memory";
    rc = ENOMEM;
  } catch (const std::exception& e) {
    out = json::object();
    why = std::string("malformed request: ") + e.what();
    rc = EINVAL;
    malformed_.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
    out = json::object();
    why = "malformed request";
    rc = EINVAL;
    malformed_.fetch_add(1, std::memory_order_relaxed);
  }
  try {
    out["rc"] = rc;
    out["why"] = rc == 0 ? std::string() : clip(why);
    // A parse error quotes the bytes it stopped at, which need not be UTF-8: replaced, never thrown.
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception&) {
    // Out of memory building the answer: still an answer.
    return R"({"rc":)" + std::to_string(ENOMEM) + R"(,"why":"out of memory"})";
  }
}

void CtlService::end_session(CtlSession& s) {
  std::lock_guard lk(cq_mu_);
  for (const std::uint64_t id : s.cqs) cqs_.erase(id);
  s.cqs.clear();
}

}  // namespace mrc::api
