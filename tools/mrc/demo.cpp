#include "demo.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cc/nscc.hpp"
#include "cli_checks.hpp"
#include "common/rng.hpp"
#include "engine/endpoint.hpp"
#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "sim/pathnet.hpp"

namespace mrc::tools {
namespace {

// The built-in scenario: 100 Gb/s ports, paths of 2..3 us one way (the spread stays below NSCC's
// target delay, so path diversity does not read as queueing), 128 active EVs per QP spread over the
// planes plus 8 backups per plane, NSCC sized for the sum of the ports.
constexpr double kPortRateBps = 100e9;
constexpr Duration kPathDelay = 2_us;
constexpr Duration kDelaySpread = 1_us;
constexpr std::uint32_t kActiveEvs = 128;
constexpr std::uint32_t kBackupPerPlane = 8;
constexpr std::uint32_t kPmtu = 4096;
constexpr std::uint32_t kPacketOverhead = 64;  // headers + ICRC, for NSCC's nominal packet
constexpr std::uint32_t kFailPlane = 0;
constexpr std::uint64_t kMaxMessage = 1ull << 30;
constexpr Time kTimeLimit = 10'000_ms;  // virtual time
constexpr std::size_t kShownEvChanges = 5;
constexpr double kRecoveryFraction = 0.9;
constexpr std::uint32_t kRecoveryHoldRtts = 10;  // goodput must hold the target this long

struct EvChange {
  Time time = 0;
  std::uint32_t node = 0;
  engine::Event ev;
};

struct Result {
  DemoOptions opt;
  Duration base_rtt = 0;
  std::uint32_t active_evs = 0, backup_evs = 0;
  std::uint32_t messages = 0;
  bool completed = false;
  std::string status = "incomplete";
  Time t_done = 0;
  bool failed = false;
  Time t_fail = 0;
  std::uint64_t acked_at_fail = 0;
  double gbps_before = 0, gbps_after = 0, gbps_overall = 0;
  bool recovered = false;
  std::uint64_t recovery_rtts = 0;
  Duration recovery_ns = 0;
  double recovery_target_gbps = 0;
  std::uint64_t lost_on_dead_plane = 0;  ///< data packets the dead plane dropped
  Duration redelivered_ns = 0;           ///< failure -> the last of them delivered again
  engine::QpCounters req, rsp;
  sim::NetStats net;
  std::map<std::string, std::uint64_t> ev_changes;  ///< "FROM->TO" -> count
  std::uint64_t ev_change_total = 0;
  std::vector<EvChange> first_ev_changes;
  bool verified = false;
  std::uint64_t bad_bytes = 0;
  std::uint64_t first_bad = 0;
};

double gbps(std::uint64_t bytes, Duration ns) {
  return ns == 0 ? 0.0 : static_cast<double>(bytes) * 8.0 / static_cast<double>(ns);
}

double us(Duration ns) {
  return static_cast<double>(ns) / 1000.0;
}

/// Acknowledged bytes as a step function of time, sampled whenever the count changed.
class AckTrace {
 public:
  void note(Time t, std::uint64_t acked) {
    if (points_.empty() || points_.back().second != acked) points_.emplace_back(t, acked);
  }
  std::uint64_t at(Time t) const {
    auto it = std::upper_bound(points_.begin(), points_.end(), t,
                               [](Time v, const std::pair<Time, std::uint64_t>& p) { return v < p.first; });
    return it == points_.begin() ? 0 : std::prev(it)->second;
  }

 private:
  std::vector<std::pair<Time, std::uint64_t>> points_;
};

Result simulate(const DemoOptions& opt) {
  Result r;
  r.opt = opt;

  sim::PathNetConfig nc;
  nc.planes = opt.planes;
  nc.paths_per_plane = opt.paths;
  nc.port_rate_bps = kPortRateBps;
  nc.path.delay = kPathDelay;
  nc.path.loss = opt.loss;
  nc.delay_spread = kDelaySpread;
  nc.mtu_wire_bytes = kPmtu + kPacketOverhead;
  nc.seed = opt.seed;
  sim::PathNet net(nc);
  r.base_rtt = net.base_rtt();

  engine::EndpointConfig ec;
  ec.num_ports = opt.planes;
  ec.tun.base_rtt_hint = r.base_rtt;
  ec.seed = opt.seed * 2 + 1;
  engine::Endpoint requester(ec);
  ec.seed = opt.seed * 2 + 2;
  engine::Endpoint responder(ec);
  const std::uint32_t node_req = net.add_node(requester);
  const std::uint32_t node_rsp = net.add_node(responder);

  std::vector<std::uint8_t> src(opt.size), dst(opt.size, 0);
  Rng fill(opt.seed ^ 0xC0FFEEull);
  for (std::size_t i = 0; i < src.size(); i += 8) {
    const std::uint64_t w = fill.next();
    std::memcpy(src.data() + i, &w, std::min<std::size_t>(8, src.size() - i));
  }
  const engine::MemoryRegion* src_mr =
      requester.memory().register_region(src.data(), src.size(), engine::access::kLocalWrite);
  const engine::MemoryRegion* dst_mr =
      responder.memory().register_region(dst.data(), dst.size(), engine::access::kAll);
  if (src_mr == nullptr || dst_mr == nullptr) {
    r.status = "memory registration failed";
    return r;
  }

  const std::uint32_t active_per_plane = std::max(1u, kActiveEvs / opt.planes);
  engine::QpConfig qc;
  qc.pmtu = kPmtu;
  qc.evs = engine::make_ev_set(opt.planes, active_per_plane, kBackupPerPlane);
  qc.active_count = active_per_plane * opt.planes;
  qc.cc.algorithm = cc::Algorithm::kNscc;
  qc.cc.nscc = cc::NsccConfig::derive(static_cast<std::uint64_t>(kPortRateBps) * opt.planes,
                                      static_cast<std::uint32_t>(r.base_rtt), kPmtu + kPacketOverhead, true);
  qc.seed = opt.seed;
  r.active_evs = qc.active_count;
  r.backup_evs = static_cast<std::uint32_t>(qc.evs.size()) - qc.active_count;
  int err = 0;
  const std::uint32_t qp_req = requester.create_qp(qc, &err);
  const std::uint32_t qp_rsp = qp_req != 0 ? responder.create_qp(qc, &err) : 0;
  if (qp_rsp == 0) {
    r.status = "create_qp failed (errno " + std::to_string(err) + ")";
    return r;
  }
  engine::QpRemote to_rsp;
  to_rsp.peer = node_rsp;
  to_rsp.qpn = qp_rsp;
  to_rsp.sq_psn = 0x100000;
  to_rsp.rq_psn = 0x200000;
  to_rsp.peer_mpr_dest = qc.mpr_dest;
  to_rsp.peer_max_wimm_dest = qc.max_wimm_dest;
  to_rsp.wire_ext = true;  // both ends are this implementation (D45)
  engine::QpRemote to_req = to_rsp;
  to_req.peer = node_req;
  to_req.qpn = qp_req;
  std::swap(to_req.sq_psn, to_req.rq_psn);
  if (requester.connect_qp(qp_req, to_rsp, 0) != 0 || responder.connect_qp(qp_rsp, to_req, 0) != 0) {
    r.status = "connect_qp failed";
    return r;
  }

  // The whole buffer as a few large RDMA WRITEs (one for sizes up to 1 GiB).
  for (std::uint64_t off = 0; off < opt.size; off += kMaxMessage) {
    engine::SendWr wr;
    wr.wr_id = r.messages;
    wr.local_addr = reinterpret_cast<std::uint64_t>(src.data() + off);
    wr.length = static_cast<std::uint32_t>(std::min(kMaxMessage, opt.size - off));
    wr.lkey = src_mr->lkey;
    wr.remote_addr = reinterpret_cast<std::uint64_t>(dst.data() + off);
    wr.rkey = dst_mr->rkey;
    if (const int rc = requester.post_send(qp_req, wr, net.now()); rc != 0) {
      r.status = "post_send failed (errno " + std::to_string(rc) + ")";
      return r;
    }
    ++r.messages;
  }
  net.kick(node_req);

  // Data packets the dead plane dropped, and when each was delivered again.
  std::map<std::uint32_t, bool> lost_psns;  // psn -> re-delivered
  Time last_redelivery = 0;
  net.set_observer([&](const sim::PacketRecord& rec) {
    if (rec.src != node_req || rec.tc == engine::TrafficClass::kControl) return;
    if (!rec.delivered && rec.cause == sim::DropCause::kPathDead) {
      lost_psns.emplace(rec.psn, false);
    } else if (rec.delivered) {
      auto it = lost_psns.find(rec.psn);
      if (it != lost_psns.end() && !it->second) {
        it->second = true;
        last_redelivery = rec.time;
      }
    }
  });
  const engine::Qp* qp = requester.qp(qp_req);
  AckTrace trace;
  std::uint32_t completions = 0;
  bool all_ok = true;
  const std::uint64_t half = opt.size / 2;
  net.run_while(
      [&] {
        const std::uint64_t acked = qp->counters().bytes_acked;
        trace.note(net.now(), acked);
        if (!opt.no_failure && !r.failed && acked >= half) {
          net.kill_plane(kFailPlane, net.now());
          r.failed = true;
          r.t_fail = net.now();
          r.acked_at_fail = acked;
        }
        engine::Completion c;
        while (requester.poll_completion(c)) {
          ++completions;
          if (c.status != engine::WcStatus::kSuccess) {
            if (all_ok) r.status = engine::to_string(c.status);
            all_ok = false;
          }
        }
        return completions < r.messages;
      },
      kTimeLimit);
  r.completed = completions == r.messages && all_ok;
  if (completions == r.messages) {
    r.t_done = net.now();
    if (all_ok) r.status = "success";
  }

  // Goodput and recovery, from acknowledged bytes.
  if (r.t_done > 0) {
    r.gbps_overall = gbps(opt.size, r.t_done);
    if (r.failed) {
      r.gbps_before = gbps(r.acked_at_fail, r.t_fail);
      r.gbps_after = gbps(opt.size - r.acked_at_fail, r.t_done - r.t_fail);
      r.recovery_target_gbps = kRecoveryFraction * r.gbps_before * (opt.planes - 1) / opt.planes;
      // Recovered = every packet the dead plane dropped has been delivered again, and from then on
      // goodput averaged over kRecoveryHoldRtts base RTTs stays at the target (one-RTT windows
      // alone would count a dip from the 1% random loss as a failure to recover).
      const Duration w = r.base_rtt;
      r.lost_on_dead_plane = lost_psns.size();
      r.redelivered_ns = last_redelivery > r.t_fail ? last_redelivery - r.t_fail : 0;
      const Duration hold = kRecoveryHoldRtts * w;
      for (Time t = r.t_fail + r.redelivered_ns; t + hold <= r.t_done; t += w) {
        bool holds = true;
        for (Time u = t; u + hold <= std::min(r.t_done, t + 2 * hold) && holds; u += w)
          holds = gbps(trace.at(u + hold) - trace.at(u), hold) >= r.recovery_target_gbps;
        if (holds) {
          r.recovered = true;
          r.recovery_ns = t - r.t_fail;
          break;
        }
      }
      r.recovery_rtts = (r.recovery_ns + w - 1) / w;
    }
  }

  r.req = qp->counters();
  if (const engine::Qp* q = responder.qp(qp_rsp)) r.rsp = q->counters();
  r.net = net.stats();

  engine::Event e;
  std::vector<EvChange> changes;
  for (std::uint32_t node : {node_req, node_rsp}) {
    engine::Endpoint& ep = node == node_req ? requester : responder;
    while (ep.poll_event(e)) {
      if (e.type != engine::EventType::kEvState) continue;
      changes.push_back(EvChange{e.time, node, e});
    }
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const EvChange& a, const EvChange& b) { return a.time < b.time; });
  for (const EvChange& c : changes) {
    ++r.ev_changes[std::string(engine::to_string(c.ev.from)) + "->" + engine::to_string(c.ev.to)];
    if (r.first_ev_changes.size() < kShownEvChanges) r.first_ev_changes.push_back(c);
  }
  r.ev_change_total = changes.size();

  for (std::size_t i = 0; i < src.size(); ++i) {
    if (src[i] != dst[i]) {
      if (r.bad_bytes == 0) r.first_bad = i;
      ++r.bad_bytes;
    }
  }
  r.verified = r.bad_bytes == 0;
  return r;
}

std::string ev_change_line(const EvChange& c) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "t=%.3f us %s ev %u (plane %u): %s -> %s (%s)", us(c.time),
                c.node == 0 ? "requester" : "responder", c.ev.ev.value, static_cast<unsigned>(c.ev.ev.port),
                engine::to_string(c.ev.from), engine::to_string(c.ev.to), engine::to_string(c.ev.cause));
  return buf;
}

std::string recovery_line(const Result& r) {
  char buf[160];
  if (!r.failed) return "recovery: n/a (no failure)";
  if (!r.recovered) return "recovery: not reached before completion";
  std::snprintf(buf, sizeof buf, "recovery: %llu base RTTs (%.2f us)",
                static_cast<unsigned long long>(r.recovery_rtts), us(r.recovery_ns));
  return buf;
}

void print_text(const Result& r) {
  const DemoOptions& o = r.opt;
  std::printf(
      "mrc demo: %.2f MiB RDMA WRITE (%u message%s) on 1 QP over %u planes x %u paths, %.0f Gb/s ports\n",
      static_cast<double>(o.size) / (1 << 20), r.messages, r.messages == 1 ? "" : "s", o.planes, o.paths,
      kPortRateBps / 1e9);
  std::printf("network: path delay %.1f-%.1f us, loss %.2f%% per path, base RTT %.3f us, seed %llu\n",
              us(kPathDelay), us(kPathDelay + kDelaySpread), o.loss * 100.0, us(r.base_rtt),
              static_cast<unsigned long long>(o.seed));
  std::printf("QP: %u active EVs + %u backup EVs, NSCC\n", r.active_evs, r.backup_evs);
  if (r.failed) {
    std::printf("failure: plane %u killed at %.3f us (%.1f%% of bytes acknowledged)\n", kFailPlane,
                us(r.t_fail), 100.0 * static_cast<double>(r.acked_at_fail) / static_cast<double>(o.size));
  } else {
    std::printf("failure: none\n");
  }
  if (r.t_done > 0) {
    std::printf("completion: %s at %.3f us\n", r.status.c_str(), us(r.t_done));
  } else {
    std::printf("completion: %s\n", r.status.c_str());
  }
  if (r.failed) {
    std::printf("goodput: before failure %.1f Gb/s, after %.1f Gb/s, overall %.1f Gb/s\n", r.gbps_before,
                r.gbps_after, r.gbps_overall);
  } else {
    std::printf("goodput: overall %.1f Gb/s\n", r.gbps_overall);
  }
  std::printf(
      "retransmissions: %llu (nack %llu, loss %llu, timeout %llu, port %llu), timeouts %llu, "
      "second copies after the failure %llu\n",
      static_cast<unsigned long long>(r.req.tx_rtx), static_cast<unsigned long long>(r.req.rtx_nack),
      static_cast<unsigned long long>(r.req.rtx_loss), static_cast<unsigned long long>(r.req.rtx_timeout),
      static_cast<unsigned long long>(r.req.rtx_port), static_cast<unsigned long long>(r.req.timeouts),
      static_cast<unsigned long long>(r.req.tx_dup));
  std::printf("trims: %llu in the network, %llu trimmed packets received; NACKs: %llu sent, %llu received\n",
              static_cast<unsigned long long>(r.net.trimmed),
              static_cast<unsigned long long>(r.rsp.rx_trimmed),
              static_cast<unsigned long long>(r.rsp.tx_nack), static_cast<unsigned long long>(r.req.rx_nack));
  std::printf("EV state changes: %llu\n", static_cast<unsigned long long>(r.ev_change_total));
  for (const auto& [k, v] : r.ev_changes)
    std::printf("  %-24s %llu\n", k.c_str(), static_cast<unsigned long long>(v));
  for (const EvChange& c : r.first_ev_changes) std::printf("  %s\n", ev_change_line(c).c_str());
  std::printf("network: %llu packets sent, %llu delivered, %llu dropped (loss %llu, dead path %llu)\n",
              static_cast<unsigned long long>(r.net.sent), static_cast<unsigned long long>(r.net.delivered),
              static_cast<unsigned long long>(r.net.dropped),
              static_cast<unsigned long long>(r.net.drops_by(sim::DropCause::kLoss)),
              static_cast<unsigned long long>(r.net.drops_by(sim::DropCause::kPathDead)));
  if (r.verified) {
    std::printf("verify: OK (%llu bytes match)\n", static_cast<unsigned long long>(o.size));
  } else {
    std::printf("verify: FAILED (%llu bytes differ, first at offset %llu)\n",
                static_cast<unsigned long long>(r.bad_bytes), static_cast<unsigned long long>(r.first_bad));
  }
  if (r.failed)
    std::printf(
        "failover: %llu data packets lost on the dead plane, all delivered again %.2f us (%.1f base RTTs) "
        "after it\n",
        static_cast<unsigned long long>(r.lost_on_dead_plane), us(r.redelivered_ns),
        static_cast<double>(r.redelivered_ns) / static_cast<double>(r.base_rtt));
  std::printf("%s\n", recovery_line(r).c_str());
}

nlohmann::json to_json(const Result& r) {
  using nlohmann::json;
  const DemoOptions& o = r.opt;
  json j;
  j["config"] = {{"size", o.size},
                 {"messages", r.messages},
                 {"planes", o.planes},
                 {"paths_per_plane", o.paths},
                 {"port_rate_gbps", kPortRateBps / 1e9},
                 {"path_delay_us", {us(kPathDelay), us(kPathDelay + kDelaySpread)}},
                 {"loss", o.loss},
                 {"seed", o.seed},
                 {"failure", !o.no_failure},
                 {"active_evs", r.active_evs},
                 {"backup_evs", r.backup_evs},
                 {"base_rtt_us", us(r.base_rtt)}};
  j["completion"] = {{"status", r.status}, {"completed", r.completed}, {"time_us", us(r.t_done)}};
  j["failure"] =
      r.failed ? json{{"plane", kFailPlane}, {"time_us", us(r.t_fail)}, {"acked_bytes", r.acked_at_fail}}
               : json(nullptr);
  j["goodput_gbps"] = {{"overall", r.gbps_overall}};
  if (r.failed) {
    j["goodput_gbps"]["before_failure"] = r.gbps_before;
    j["goodput_gbps"]["after_failure"] = r.gbps_after;
  }
  j["retransmissions"] = {{"total", r.req.tx_rtx},        {"nack", r.req.rtx_nack},
                          {"loss", r.req.rtx_loss},       {"timeout", r.req.rtx_timeout},
                          {"port", r.req.rtx_port},       {"timeouts", r.req.timeouts},
                          {"second_copies", r.req.tx_dup}};
  j["trims"] = {{"network", r.net.trimmed}, {"received", r.rsp.rx_trimmed}};
  j["nacks"] = {{"sent", r.rsp.tx_nack}, {"received", r.req.rx_nack}};
  json changes = json::array();
  for (const EvChange& c : r.first_ev_changes) {
    changes.push_back({{"time_us", us(c.time)},
                       {"node", c.node == 0 ? "requester" : "responder"},
                       {"ev", c.ev.ev.value},
                       {"plane", c.ev.ev.port},
                       {"from", engine::to_string(c.ev.from)},
                       {"to", engine::to_string(c.ev.to)},
                       {"cause", engine::to_string(c.ev.cause)}});
  }
  j["ev_state_changes"] = {{"total", r.ev_change_total}, {"by_transition", r.ev_changes}, {"first", changes}};
  json drops;
  for (int c = 0; c < static_cast<int>(sim::DropCause::kCount); ++c)
    drops[sim::to_string(static_cast<sim::DropCause>(c))] = r.net.drops[c];
  j["network"] = {{"sent", r.net.sent},
                  {"delivered", r.net.delivered},
                  {"dropped", r.net.dropped},
                  {"drops", drops},
                  {"events", r.net.events}};
  j["verify"] = {{"ok", r.verified}, {"bad_bytes", r.bad_bytes}};
  if (!r.verified) j["verify"]["first_bad_offset"] = r.first_bad;
  if (r.failed && r.recovered) {
    j["recovery"] = {{"base_rtts", r.recovery_rtts},
                     {"us", us(r.recovery_ns)},
                     {"target_gbps", r.recovery_target_gbps},
                     {"lost_on_dead_plane", r.lost_on_dead_plane},
                     {"redelivered_us", us(r.redelivered_ns)}};
  } else {
    j["recovery"] = nullptr;
  }
  return j;
}

}  // namespace

CLI::App* add_demo_command(CLI::App& app, DemoOptions& opt) {
  CLI::App* c = app.add_subcommand(
      "demo", "One large RDMA WRITE over an in-memory multi-plane network with loss and a plane failure");
  c->footer(
      "The writer sprays one QP over every path of every plane; half way through (by acknowledged bytes)\n"
      "plane 0 dies. The report gives goodput before/after the failure, retransmissions by cause, trims,\n"
      "NACKs, EV state changes, the byte-for-byte check of the destination buffer and the recovery time:\n"
      "goodput is measured from acknowledged bytes in windows of one base RTT starting at the failure, and\n"
      "recovery is the end of the first window reaching 90% of the surviving planes' share of the\n"
      "pre-failure goodput after goodput had fallen below that level (0 if it never fell).\n"
      "Exit status: 0 if the write completed and the data verified, 1 otherwise.");
  c->add_option("--size", opt.size, "Bytes to write (suffixes: KiB, MiB, GiB, ...)")
      ->transform(CLI::AsSizeValue(false))
      ->check(uint_range(1, std::uint64_t{4} << 30))
      ->capture_default_str();
  c->add_option("--planes", opt.planes, "Network planes (NIC ports)")
      ->check(uint_range(1, engine::kMaxPorts))
      ->capture_default_str();
  c->add_option("--paths", opt.paths, "Paths per plane")->check(uint_range(1, 4096))->capture_default_str();
  c->add_option("--loss", opt.loss, "Random loss probability on every path (0.01 = 1%)")
      ->check(real_range(0.0, 0.5, "a loss probability"))
      ->capture_default_str();
  c->add_option("--seed", opt.seed, "Seed of every random choice (network and endpoints)")
      ->check(uint_range(0, ~std::uint64_t{0}))
      ->capture_default_str();
  c->add_flag("--no-failure", opt.no_failure, "Keep every plane alive");
  c->add_flag("--json", opt.json, "Print the report as JSON");
  return c;
}

int run_demo(const DemoOptions& opt) {
  if (!opt.no_failure && opt.planes < 2) {
    std::fprintf(stderr, "mrc demo: a plane failure needs at least 2 planes (or use --no-failure)\n");
    return 2;
  }
  const Result r = simulate(opt);
  if (opt.json) {
    std::printf("%s\n", to_json(r).dump(2).c_str());
  } else {
    print_text(r);
  }
  return r.completed && r.verified ? 0 : 1;
}

}  // namespace mrc::tools
