#include "sim/run.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>
#include <stdexcept>
#include <unordered_map>

#include "sim/hosts.hpp"

namespace mrc::sim {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(q * static_cast<double>(sorted.size()));
  const std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
}

Duration base_rtt(const Topology& topo, std::uint32_t mtu_wire, std::uint32_t ack_wire) {
  const TopoLink& l = topo.links.front();
  const std::uint64_t hops = topo.max_path_links;
  const std::uint64_t ps =
      2 * hops * l.latency * 1000 + hops * (Fabric::serialization_ps(mtu_wire, l.rate_bps) +
                                            Fabric::serialization_ps(ack_wire, l.rate_bps));
  return (ps + 500) / 1000;
}
namespace {

void check_inputs(const Topology& topo, const ConnMatrix& m, const RunConfig& cfg) {
  if (m.nodes > topo.hosts)
    throw std::invalid_argument("run: matrix has " + std::to_string(m.nodes) + " nodes, topology only " +
                                std::to_string(topo.hosts) + " hosts");
  if (cfg.evs_per_plane == 0) throw std::invalid_argument("run: evs_per_plane must be >= 1");
  if (cfg.qps_per_peer == 0 || cfg.qps_per_peer > 256)
    throw std::invalid_argument("run: qps_per_peer must be 1..256");
  const std::uint32_t nq = cfg.qps_per_peer;
  for (std::size_t i = 0; i < m.conns.size(); ++i) {
    const ConnSpec& c = m.conns[i];
    if (c.bytes < nq || c.bytes > (1ull << 31) * nq)
      throw std::invalid_argument("run: flow sizes must be qps_per_peer .. 2^31 x qps_per_peer bytes");
    if (c.src >= topo.hosts || c.dst >= topo.hosts || c.src == c.dst)
      throw std::invalid_argument("run: connection " + std::to_string(i) + " has a bad src/dst");
    if (c.after != ConnSpec::kNoDep && c.after >= m.conns.size())
      throw std::invalid_argument("run: connection " + std::to_string(i) + " depends on a missing one");
  }
}

/// The ordered host pairs of a matrix: each connection knows its pair, each pair how many
/// connections it carries (max_load: the most).
struct Pairs {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ends;  ///< (src, dst)
  std::vector<std::uint32_t> of_conn;
  std::uint32_t max_load = 0;
};

Pairs pair_up(const ConnMatrix& m) {
  Pairs p;
  std::unordered_map<std::uint64_t, std::uint32_t> pair_of;
  std::vector<std::uint32_t> load;
  p.of_conn.resize(m.conns.size());
  for (std::size_t i = 0; i < m.conns.size(); ++i) {
    const ConnSpec& c = m.conns[i];
    const std::uint64_t key = (static_cast<std::uint64_t>(c.src) << 32) | c.dst;
    auto [it, fresh] = pair_of.emplace(key, static_cast<std::uint32_t>(p.ends.size()));
    if (fresh) {
      p.ends.emplace_back(c.src, c.dst);
      load.push_back(0);
    }
    p.of_conn[i] = it->second;
    ++load[it->second];
  }
  p.max_load = load.empty() ? 0 : *std::max_element(load.begin(), load.end());
  return p;
}

/// The connections that wait for each connection's arrival (ConnSpec::after), as CSR: those of
/// connection i are list[start[i] .. start[i + 1]).
struct Dependents {
  std::vector<std::uint32_t> start, list;
};

Dependents dependents(const ConnMatrix& m) {
  Dependents d;
  d.start.assign(m.conns.size() + 1, 0);
  for (const auto& c : m.conns)
    if (c.after != ConnSpec::kNoDep) ++d.start[c.after + 1];
  for (std::size_t i = 0; i < m.conns.size(); ++i) d.start[i + 1] += d.start[i];
  d.list.resize(d.start.back());
  std::vector<std::uint32_t> fill(d.start.begin(), d.start.end() - 1);
  for (std::uint32_t i = 0; i < m.conns.size(); ++i)
    if (m.conns[i].after != ConnSpec::kNoDep) d.list[fill[m.conns[i].after]++] = i;
  return d;
}

/// FCTs and failure totals of the finished run (flows' counters already filled).
void flow_statistics(RunResult& r) {
  std::vector<double> fcts;
  for (FlowResult& f : r.flows) {
    r.bytes_failed += f.bytes_failed;
    if (f.bytes_failed > 0) ++r.failed;
    if (f.finish == kNever || !f.ok) continue;  // statistics over successful connections
    f.fct_us = static_cast<double>(f.finish - f.conn.start) / 1000.0;
    r.last_finish_us = std::max(r.last_finish_us, static_cast<double>(f.finish) / 1000.0);
    fcts.push_back(f.fct_us);
    ++r.finished;
  }
  std::sort(fcts.begin(), fcts.end());
  if (!fcts.empty()) {
    r.fct_min = fcts.front();
    r.fct_max = fcts.back();
    r.fct_p50 = percentile(fcts, 0.50);
    r.fct_p99 = percentile(fcts, 0.99);
  }
}

/// Counters per pair (a connection reports its pair's sender QPs) and totals over the pairs.
template <class Hosts>
void collect_counters(const Hosts& hosts, const Pairs& pairs, std::uint32_t nq, RunResult& r) {
  std::vector<engine::QpCounters> pair_ctr(pairs.ends.size());
  for (std::size_t pi = 0; pi < pairs.ends.size(); ++pi) {
    engine::QpCounters& pc = pair_ctr[pi];
    for (std::uint32_t q = 0; q < nq; ++q) hosts.add_counters(pi * nq + q, pc, r.tx_cnp);
    r.tx_data += pc.tx_data;
    r.tx_rtx += pc.tx_rtx;
    r.timeouts += pc.timeouts;
    r.rtx_nack += pc.rtx_nack;
    r.rtx_loss += pc.rtx_loss;
    r.rtx_timeout += pc.rtx_timeout;
    r.rtx_port += pc.rtx_port;
    r.ev_transitions += pc.ev_transitions;
    r.rtx_spurious += pc.rtx_spurious;
    r.rx_dup += pc.rx_dup;
    r.tx_sack += pc.tx_sack + pc.tx_ack;  // MRC counts SACKs, RoCE ACKs (the other stays 0)
    r.tx_nack += pc.tx_nack;
  }
  for (std::size_t i = 0; i < r.flows.size(); ++i) r.flows[i].qp = pair_ctr[pairs.of_conn[i]];
}

/// The run itself, for one host transport (MrcHosts or RoceHosts).
template <class Hosts>
RunResult run_hosts(const Topology& topo, const ConnMatrix& m, const RunConfig& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint32_t nq = cfg.qps_per_peer;
  RunResult r;
  r.mtu_wire = Hosts::mtu_wire(cfg);
  r.ack_wire = Hosts::ack_wire(cfg);
  r.base_rtt = base_rtt(topo, r.mtu_wire, r.ack_wire);
  const double rate = topo.links.front().rate_bps;
  r.nscc =
      cc::NsccConfig::derive(static_cast<std::uint64_t>(rate) * topo.planes,
                             static_cast<std::uint32_t>(r.base_rtt), r.mtu_wire, cfg.fabric.queue.trimming);
  const Pairs pairs = pair_up(m);

  Fabric net(topo, cfg.fabric);
  for (const LinkFault& f : cfg.faults) net.schedule_fault(f);
  HostSetup setup{topo, cfg, net, r.base_rtt, r.nscc, 1, pairs.max_load};
  for (const auto& c : m.conns) setup.max_part = std::max(setup.max_part, (c.bytes + nq - 1) / nq);
  Hosts hosts(setup);
  for (std::size_t pi = 0; pi < pairs.ends.size(); ++pi) {
    const auto [s, d] = pairs.ends[pi];
    for (std::uint32_t q = 0; q < nq; ++q) {
      const std::size_t k = pi * nq + q;
      hosts.connect(k, s, d, q, static_cast<std::uint32_t>(k * 7 + 1) & 0xFFFFFF,
                    static_cast<std::uint32_t>(k * 13 + 5) & 0xFFFFFF);
    }
  }
  hosts.qp_memory_idle(r);

  const Dependents deps = dependents(m);
  r.flows.resize(m.conns.size());
  for (std::size_t i = 0; i < m.conns.size(); ++i) r.flows[i].conn = m.conns[i];
  std::vector<std::uint32_t> parts_done(m.conns.size(), 0), parts_arrived(m.conns.size(), 0);
  std::vector<std::uint32_t> ready;  // dependents whose dependency has just arrived
  std::uint32_t remaining = static_cast<std::uint32_t>(m.conns.size());

  // Part q of connection i: its bytes split evenly, the remainder on the first parts.
  auto part_bytes = [&](std::uint32_t i, std::uint64_t q) {
    const std::uint64_t b = m.conns[i].bytes;
    return b / nq + (q < b % nq ? 1 : 0);
  };
  auto on_completion = [&](const engine::Completion& c) {
    if (c.is_recv) {
      if (!c.has_imm || c.imm >= m.conns.size()) return;
      FlowResult& f = r.flows[c.imm];
      if (++parts_arrived[c.imm] != nq) return;
      f.arrived = net.now();
      for (std::uint32_t k = deps.start[c.imm]; k < deps.start[c.imm + 1]; ++k) ready.push_back(deps.list[k]);
      return;
    }
    if ((c.wr_id >> 8) >= m.conns.size()) return;
    const auto i = static_cast<std::uint32_t>(c.wr_id >> 8);
    FlowResult& f = r.flows[i];
    if (c.status != engine::WcStatus::kSuccess) f.bytes_failed += part_bytes(i, c.wr_id & 0xFF);
    if (++parts_done[i] != nq) return;
    f.finish = net.now();
    f.ok = f.bytes_failed == 0;
    --remaining;
  };
  net.set_activity_hook([&](std::uint32_t h) {
    engine::Completion c;
    while (hosts.poll_completion(h, c)) on_completion(c);
  });

  auto post = [&](std::uint32_t i) {
    r.flows[i].posted = net.now();
    for (std::uint32_t q = 0; q < nq; ++q) {
      engine::SendWr wr;
      wr.wr_id = (static_cast<std::uint64_t>(i) << 8) | q;
      wr.with_imm = true;
      wr.imm = i;
      wr.length = static_cast<std::uint32_t>(part_bytes(i, q));
      hosts.post(static_cast<std::size_t>(pairs.of_conn[i]) * nq + q, wr, net.now());
    }
    net.kick(m.conns[i].src);
  };

  // Timed starts: (start, connection), earliest first; dependents join when their dependency arrives.
  using Start = std::pair<Time, std::uint32_t>;
  std::priority_queue<Start, std::vector<Start>, std::greater<>> starts;
  for (std::uint32_t i = 0; i < m.conns.size(); ++i)
    if (m.conns[i].after == ConnSpec::kNoDep) starts.emplace(m.conns[i].start, i);
  r.sample_interval = cfg.sample_interval;
  Time next_sample = cfg.sample_interval > 0 ? cfg.sample_interval : kNever;
  std::vector<std::uint32_t> sampled;  // pairs
  for (const std::uint32_t i : cfg.sample_conns) {
    if (i >= m.conns.size()) throw std::invalid_argument("run: sampled connection out of range");
    sampled.push_back(pairs.of_conn[i]);
  }
  std::sort(sampled.begin(), sampled.end());
  sampled.erase(std::unique(sampled.begin(), sampled.end()), sampled.end());
  if (cfg.sample_conns.empty())
    for (std::uint32_t pi = 0; pi < pairs.ends.size(); ++pi) sampled.push_back(pi);
  auto pair_placed = [&](std::uint32_t pi) {
    std::uint64_t b = 0;
    for (std::uint32_t q = 0; q < nq; ++q) b += hosts.bytes_placed(static_cast<std::size_t>(pi) * nq + q);
    return b;
  };
  auto placed = [&] {
    std::uint64_t b = 0;
    for (const std::uint32_t pi : sampled) b += pair_placed(pi);
    return b;
  };

  std::uint64_t next_progress = 0;
  Progress prog;
  prog.limit = cfg.limit;
  prog.flows = static_cast<std::uint32_t>(m.conns.size());
  for (const ConnSpec& c : m.conns) prog.bytes += c.bytes;
  auto report = [&](bool last) {
    prog.now = net.now();
    prog.events = net.stats().events;
    prog.flows_done = prog.flows - remaining;
    prog.bytes_done = 0;
    for (std::uint32_t pi = 0; pi < pairs.ends.size(); ++pi) prog.bytes_done += pair_placed(pi);
    prog.last = last;
    cfg.progress(prog);
  };

  for (;;) {
    for (const std::uint32_t i : ready) starts.emplace(std::max(m.conns[i].start, net.now()), i);
    ready.clear();
    while (!starts.empty() && starts.top().first <= net.now()) {
      const std::uint32_t i = starts.top().second;
      starts.pop();
      post(i);
    }
    if (remaining == 0) break;
    if (cfg.progress && net.stats().events >= next_progress) {
      report(false);
      next_progress = net.stats().events + (1u << 16);
    }
    // One event at a time up to the next start or sample (completions it causes queue dependents).
    const Time bound = std::min(starts.empty() ? kNever : starts.top().first, next_sample);
    if (bound <= cfg.limit) {
      if (bound * 1000 > net.now_ps() && net.step_ps(bound * 1000 - 1)) continue;
      net.advance_to(bound);
      if (bound == next_sample) {
        r.samples.push_back(placed());
        next_sample += cfg.sample_interval;
      }
      continue;
    }
    // No start or sample before the limit: step until an event makes a dependent ready, ends the
    // run or is due for a progress report (the checks above would change nothing before that).
    const std::uint64_t report_at = cfg.progress ? next_progress : std::numeric_limits<std::uint64_t>::max();
    bool stepped;
    do {
      stepped = net.step(cfg.limit);
    } while (stepped && ready.empty() && remaining != 0 && net.stats().events < report_at);
    if (!stepped) break;
  }
  if (cfg.progress) report(true);
  r.end = net.now();
  r.net = net.stats();
  r.pool_packets = net.pool_size();

  collect_counters(hosts, pairs, nq, r);
  hosts.qp_memory_end(r);
  flow_statistics(r);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.events_per_s = r.wall_s > 0 ? static_cast<double>(r.net.events) / r.wall_s : 0;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.peak_rss_kb = ru.ru_maxrss;
  return r;
}

}  // namespace

RunResult run_matrix(const Topology& topo, const ConnMatrix& m, const RunConfig& cfg) {
  check_inputs(topo, m, cfg);
  if (cfg.transport == Transport::kRoce) return run_hosts<RoceHosts>(topo, m, cfg);
  return run_hosts<MrcHosts>(topo, m, cfg);
}

std::string format_report(const RunResult& r) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "flows %zu finished %u  FCT us min/p50/p99/max %.1f / %.1f / %.1f / %.1f\n"
                "data %llu rtx %llu sack %llu nack %llu timeouts %llu  trims %llu ecn %llu drops %llu\n"
                "events %llu (%.2f M/s)  hops %llu  wall %.2f s  peak RSS %.1f MB  sim end %.1f us\n"
                "base_rtt %llu ns  mtu_wire %u  ack_wire %u  pool %zu packets\n",
                r.flows.size(), r.finished, r.fct_min, r.fct_p50, r.fct_p99, r.fct_max,
                static_cast<unsigned long long>(r.tx_data), static_cast<unsigned long long>(r.tx_rtx),
                static_cast<unsigned long long>(r.tx_sack), static_cast<unsigned long long>(r.tx_nack),
                static_cast<unsigned long long>(r.timeouts), static_cast<unsigned long long>(r.net.trimmed),
                static_cast<unsigned long long>(r.net.ecn_marked),
                static_cast<unsigned long long>(r.net.dropped()),
                static_cast<unsigned long long>(r.net.events), r.events_per_s / 1e6,
                static_cast<unsigned long long>(r.net.hops), r.wall_s,
                static_cast<double>(r.peak_rss_kb) / 1024.0, static_cast<double>(r.end) / 1000.0,
                static_cast<unsigned long long>(r.base_rtt), r.mtu_wire, r.ack_wire, r.pool_packets);
  return buf;
}

}  // namespace mrc::sim
