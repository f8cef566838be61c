#include "sim/run.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
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

/// One run for one host transport (MrcHosts or RoceHosts): set up in the constructor, then run().
template <class Hosts>
class Runner {
 public:
  Runner(const Topology& topo, const ConnMatrix& m, const RunConfig& cfg)
      : t0_(std::chrono::steady_clock::now()),
        m_(m),
        cfg_(cfg),
        nq_(cfg.qps_per_peer),
        pairs_(pair_up(m)),
        deps_(dependents(m)),
        net_(topo, cfg.fabric) {
    r_.mtu_wire = Hosts::mtu_wire(cfg);
    r_.ack_wire = Hosts::ack_wire(cfg);
    r_.base_rtt = base_rtt(topo, r_.mtu_wire, r_.ack_wire);
    const double rate = topo.links.front().rate_bps;
    r_.nscc = cc::NsccConfig::derive(static_cast<std::uint64_t>(rate) * topo.planes,
                                     static_cast<std::uint32_t>(r_.base_rtt), r_.mtu_wire,
                                     cfg.fabric.queue.trimming);
    for (const LinkFault& f : cfg.faults) net_.schedule_fault(f);
    HostSetup setup{topo, cfg, net_, r_.base_rtt, r_.nscc, 1, pairs_.max_load};
    for (const auto& c : m.conns) setup.max_part = std::max(setup.max_part, (c.bytes + nq_ - 1) / nq_);
    hosts_.emplace(setup);
    for (std::size_t pi = 0; pi < pairs_.ends.size(); ++pi) {
      const auto [s, d] = pairs_.ends[pi];
      for (std::uint32_t q = 0; q < nq_; ++q) {
        const std::size_t k = pi * nq_ + q;
        hosts_->connect(k, s, d, q, static_cast<std::uint32_t>(k * 7 + 1) & 0xFFFFFF,
                        static_cast<std::uint32_t>(k * 13 + 5) & 0xFFFFFF);
      }
    }
    hosts_->qp_memory_idle(r_);

    r_.flows.resize(m.conns.size());
    for (std::size_t i = 0; i < m.conns.size(); ++i) r_.flows[i].conn = m.conns[i];
    parts_done_.assign(m.conns.size(), 0);
    parts_arrived_.assign(m.conns.size(), 0);
    remaining_ = static_cast<std::uint32_t>(m.conns.size());
    net_.set_activity_hook([this](std::uint32_t h) {
      engine::Completion c;
      while (hosts_->poll_completion(h, c)) on_completion(c);
    });
    for (std::uint32_t i = 0; i < m.conns.size(); ++i)
      if (m.conns[i].after == ConnSpec::kNoDep) starts_.emplace(m.conns[i].start, i);

    r_.sample_interval = cfg.sample_interval;
    next_sample_ = cfg.sample_interval > 0 ? cfg.sample_interval : kNever;
    for (const std::uint32_t i : cfg.sample_conns) {
      if (i >= m.conns.size()) throw std::invalid_argument("run: sampled connection out of range");
      sampled_.push_back(pairs_.of_conn[i]);
    }
    std::sort(sampled_.begin(), sampled_.end());
    sampled_.erase(std::unique(sampled_.begin(), sampled_.end()), sampled_.end());
    if (cfg.sample_conns.empty())
      for (std::uint32_t pi = 0; pi < pairs_.ends.size(); ++pi) sampled_.push_back(pi);

    prog_.limit = cfg.limit;
    prog_.flows = static_cast<std::uint32_t>(m.conns.size());
    for (const ConnSpec& c : m.conns) prog_.bytes += c.bytes;
  }

  RunResult run() {
    loop();
    if (cfg_.progress) report(true);
    r_.end = net_.now();
    r_.net = net_.stats();
    r_.pool_packets = net_.pool_size();
    collect_counters(*hosts_, pairs_, nq_, r_);
    hosts_->qp_memory_end(r_);
    flow_statistics(r_);
    r_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    r_.events_per_s = r_.wall_s > 0 ? static_cast<double>(r_.net.events) / r_.wall_s : 0;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    r_.peak_rss_kb = ru.ru_maxrss;
    return std::move(r_);
  }

 private:
  // Part q of connection i: its bytes split evenly, the remainder on the first parts.
  std::uint64_t part_bytes(std::uint32_t i, std::uint64_t q) const {
    const std::uint64_t b = m_.conns[i].bytes;
    return b / nq_ + (q < b % nq_ ? 1 : 0);
  }

  void on_completion(const engine::Completion& c) {
    if (c.is_recv) {
      if (!c.has_imm || c.imm >= m_.conns.size()) return;
      FlowResult& f = r_.flows[c.imm];
      if (++parts_arrived_[c.imm] != nq_) return;
      f.arrived = net_.now();
      for (std::uint32_t k = deps_.start[c.imm]; k < deps_.start[c.imm + 1]; ++k)
        ready_.push_back(deps_.list[k]);
      return;
    }
    if ((c.wr_id >> 8) >= m_.conns.size()) return;
    const auto i = static_cast<std::uint32_t>(c.wr_id >> 8);
    FlowResult& f = r_.flows[i];
    if (c.status != engine::WcStatus::kSuccess) f.bytes_failed += part_bytes(i, c.wr_id & 0xFF);
    if (++parts_done_[i] != nq_) return;
    f.finish = net_.now();
    f.ok = f.bytes_failed == 0;
    --remaining_;
  }

  /// Posts connection i: one WRITE_WITH_IMM per QP of its pair.
  void post(std::uint32_t i) {
    r_.flows[i].posted = net_.now();
    for (std::uint32_t q = 0; q < nq_; ++q) {
      engine::SendWr wr;
      wr.wr_id = (static_cast<std::uint64_t>(i) << 8) | q;
      wr.with_imm = true;
      wr.imm = i;
      wr.length = static_cast<std::uint32_t>(part_bytes(i, q));
      hosts_->post(static_cast<std::size_t>(pairs_.of_conn[i]) * nq_ + q, wr, net_.now());
    }
    net_.kick(m_.conns[i].src);
  }

  std::uint64_t pair_placed(std::uint32_t pi) const {
    std::uint64_t b = 0;
    for (std::uint32_t q = 0; q < nq_; ++q) b += hosts_->bytes_placed(static_cast<std::size_t>(pi) * nq_ + q);
    return b;
  }

  void report(bool last) {
    prog_.now = net_.now();
    prog_.events = net_.stats().events;
    prog_.flows_done = prog_.flows - remaining_;
    prog_.bytes_done = 0;
    for (std::uint32_t pi = 0; pi < pairs_.ends.size(); ++pi) prog_.bytes_done += pair_placed(pi);
    prog_.last = last;
    cfg_.progress(prog_);
  }

  void loop() {
    std::uint64_t next_progress = 0;
    for (;;) {
      for (const std::uint32_t i : ready_) starts_.emplace(std::max(m_.conns[i].start, net_.now()), i);
      ready_.clear();
      while (!starts_.empty() && starts_.top().first <= net_.now()) {
        const std::uint32_t i = starts_.top().second;
        starts_.pop();
        post(i);
      }
      if (remaining_ == 0) return;
      if (cfg_.progress && net_.stats().events >= next_progress) {
        report(false);
        next_progress = net_.stats().events + (1u << 16);
      }
      // One event at a time up to the next start or sample (completions it causes queue dependents).
      const Time bound = std::min(starts_.empty() ? kNever : starts_.top().first, next_sample_);
      if (bound <= cfg_.limit) {
        if (bound * 1000 > net_.now_ps() && net_.step_ps(bound * 1000 - 1)) continue;
        net_.advance_to(bound);
        if (bound == next_sample_) {
          std::uint64_t b = 0;
          for (const std::uint32_t pi : sampled_) b += pair_placed(pi);
          r_.samples.push_back(b);
          next_sample_ += cfg_.sample_interval;
        }
        continue;
      }
      // No start or sample before the limit: step until an event makes a dependent ready, ends the
      // run or is due for a progress report (the checks above would change nothing before that).
      const std::uint64_t report_at =
          cfg_.progress ? next_progress : std::numeric_limits<std::uint64_t>::max();
      bool stepped;
      do {
        stepped = net_.step(cfg_.limit);
      } while (stepped && ready_.empty() && remaining_ != 0 && net_.stats().events < report_at);
      if (!stepped) return;
    }
  }

  using Start = std::pair<Time, std::uint32_t>;  ///< (start, connection)
  const std::chrono::steady_clock::time_point t0_;
  const ConnMatrix& m_;
  const RunConfig& cfg_;
  const std::uint32_t nq_;
  RunResult r_;
  const Pairs pairs_;
  const Dependents deps_;
  Fabric net_;
  std::optional<Hosts> hosts_;
  std::vector<std::uint32_t> parts_done_, parts_arrived_;
  std::vector<std::uint32_t> ready_;  ///< dependents whose dependency has just arrived
  std::uint32_t remaining_ = 0;       ///< connections not completed
  /// Timed starts, earliest first; dependents join when their dependency arrives.
  std::priority_queue<Start, std::vector<Start>, std::greater<>> starts_;
  std::vector<std::uint32_t> sampled_;  ///< pairs whose placed bytes are sampled
  Time next_sample_ = kNever;
  Progress prog_;
};

}  // namespace

RunResult run_matrix(const Topology& topo, const ConnMatrix& m, const RunConfig& cfg) {
  check_inputs(topo, m, cfg);
  if (cfg.transport == Transport::kRoce) return Runner<RoceHosts>(topo, m, cfg).run();
  return Runner<MrcHosts>(topo, m, cfg).run();
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
