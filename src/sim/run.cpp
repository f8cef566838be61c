#include "sim/run.hpp"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "sim/hosts.hpp"
#include "sim/partition.hpp"
#include "sim/spin_barrier.hpp"

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

/// CPU time of the calling thread, ns (a system call: about a microsecond on a virtual machine).
std::uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

/// The monotonic clock, ns (no system call: what a thread's share of each window is timed with).
std::uint64_t busy_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

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
void collect_counters(const Hosts& hosts, const Pairs& pairs, std::uint32_t nq, Ranks* ranks, RunResult& r) {
  std::vector<engine::QpCounters> pair_ctr(pairs.ends.size());
  for (std::size_t pi = 0; pi < pairs.ends.size(); ++pi)
    for (std::uint32_t q = 0; q < nq; ++q) hosts.add_counters(pi * nq + q, pair_ctr[pi], r.tx_cnp);
  if (ranks != nullptr) {  // each rank counted the QP ends it holds
    static_assert(std::is_trivially_copyable_v<engine::QpCounters> &&
                  sizeof(engine::QpCounters) % sizeof(std::uint64_t) == 0);
    std::vector<std::uint64_t> v(pair_ctr.size() * (sizeof(engine::QpCounters) / sizeof(std::uint64_t)));
    if (!v.empty()) std::memcpy(v.data(), pair_ctr.data(), v.size() * sizeof(std::uint64_t));
    ranks->sum(v);
    if (!v.empty())
      std::memcpy(static_cast<void*>(pair_ctr.data()), v.data(), v.size() * sizeof(std::uint64_t));
    ranks->sum(std::span<std::uint64_t>(&r.tx_cnp, 1));
  }
  for (std::size_t pi = 0; pi < pairs.ends.size(); ++pi) {
    engine::QpCounters& pc = pair_ctr[pi];
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

/// Distributed: every rank wrote the fields of the flows whose ends it holds (the source: posted,
/// finish, ok, bytes_failed; the destination: arrived); the others keep the defaults.
void merge_flows(Ranks& ranks, std::vector<FlowResult>& flows) {
  const std::size_t n = flows.size();
  std::vector<std::uint64_t> lo(3 * n), add(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    lo[3 * i] = flows[i].posted;
    lo[3 * i + 1] = flows[i].finish;
    lo[3 * i + 2] = flows[i].arrived;
    add[2 * i] = flows[i].bytes_failed;
    add[2 * i + 1] = flows[i].ok ? 1 : 0;
  }
  ranks.min(lo);
  ranks.sum(add);
  for (std::size_t i = 0; i < n; ++i) {
    flows[i].posted = lo[3 * i];
    flows[i].finish = lo[3 * i + 1];
    flows[i].arrived = lo[3 * i + 2];
    flows[i].bytes_failed = add[2 * i];
    flows[i].ok = add[2 * i + 1] != 0;
  }
}

/// Distributed: the sum of every rank's partitions' statistics (peaks: the largest).
void reduce_stats(Ranks& ranks, FabricStats& st) {
  std::vector<std::uint64_t> v = {st.events,     st.sent,   st.delivered,  st.hops,          st.trimmed,
                                  st.ecn_marked, st.bad_tx, st.pfc_pauses, st.reconvergences};
  for (const std::uint64_t d : st.drops) v.push_back(d);
  ranks.sum(v);
  std::size_t i = 0;
  for (std::uint64_t* f : {&st.events, &st.sent, &st.delivered, &st.hops, &st.trimmed, &st.ecn_marked,
                           &st.bad_tx, &st.pfc_pauses, &st.reconvergences})
    *f = v[i++];
  for (std::uint64_t& d : st.drops) d = v[i++];
  ranks.max(std::span<std::uint64_t>(&st.peak_data_bytes, 1));
}

/// One run for one host transport (MrcHosts or RoceHosts): set up in the constructor, then run().
/// With several partitions, each is one Fabric; this rank's partitions (all of them unless the run
/// is distributed: p % ranks == rank) are numbered in order, the i-th runs on thread i % threads.
template <class Hosts>
class Runner {
 public:
  Runner(const Topology& topo, const ConnMatrix& m, const RunConfig& cfg)
      : t0_(std::chrono::steady_clock::now()),
        m_(m),
        cfg_(cfg),
        nq_(cfg.qps_per_peer),
        pairs_(pair_up(m)),
        deps_(dependents(m)) {
    if (cfg.ranks != nullptr && cfg.ranks->size() > 1) {
      ranks_ = cfg.ranks;
      nranks_ = ranks_->size();
      rank_ = ranks_->rank();
    }
    window_ = lookahead_ps(topo);
    threads_ = std::max<std::uint32_t>(1, cfg.threads);
    parts_ = cfg.partitions > 0 ? cfg.partitions : threads_ * nranks_;
    if (parts_ < nranks_)
      throw std::invalid_argument("run: " + std::to_string(nranks_) +
                                  " ranks need at least as many partitions");
    if (window_ == 0) {
      if (parts_ > 1) throw std::invalid_argument("run: a parallel run needs every link latency > 0");
      window_ = 1'000'000;  // 1 us: only how often the runner looks at the run
    }
    for (std::uint32_t p = rank_; p < parts_; p += nranks_) local_.push_back(p);
    threads_ = std::min(threads_, static_cast<std::uint32_t>(local_.size()));
    window_cpu_ns_.assign(threads_, 0);
    part_of_node_ = partition_nodes(topo, m, parts_);
    nets_.assign(parts_, nullptr);
    // The fabrics share the caller's topology (not owned: it outlives the run), no copy each.
    const std::shared_ptr<const Topology> shared_topo(std::shared_ptr<const Topology>{}, &topo);
    for (const std::uint32_t p : local_) {
      owned_.push_back(parts_ > 1
                           ? std::make_unique<Fabric>(shared_topo, cfg.fabric, part_of_node_, p, parts_)
                           : std::make_unique<Fabric>(shared_topo, cfg.fabric));
      owned_ptrs_.push_back(owned_.back().get());
      nets_[p] = owned_.back().get();
    }
    incoming_.resize(parts_);
    r_.mtu_wire = Hosts::mtu_wire(cfg);
    r_.ack_wire = Hosts::ack_wire(cfg);
    r_.base_rtt = base_rtt(topo, r_.mtu_wire, r_.ack_wire);
    const double rate = topo.links.front().rate_bps;
    r_.nscc = cc::NsccConfig::derive(static_cast<std::uint64_t>(rate) * topo.planes,
                                     static_cast<std::uint32_t>(r_.base_rtt), r_.mtu_wire,
                                     cfg.fabric.queue.trimming);
    for (Fabric* net : owned_nets())
      for (const LinkFault& f : cfg.faults) net->schedule_fault(f);
    const std::uint64_t qps = 2 * pairs_.ends.size() * nq_;  // both ends of every connection's QPs
    HostSetup setup{topo, cfg, nets_, part_of_node_, r_.base_rtt, r_.nscc, 1, pairs_.max_load, qps};
    for (const auto& c : m.conns) setup.max_part = std::max(setup.max_part, (c.bytes + nq_ - 1) / nq_);
    hosts_.emplace(setup);
    // All QPs are made before any is connected, then each rank learns the QPNs the others made.
    for (std::size_t pi = 0; pi < pairs_.ends.size(); ++pi)
      for (std::uint32_t q = 0; q < nq_; ++q)
        hosts_->create(pi * nq_ + q, pairs_.ends[pi].first, pairs_.ends[pi].second, q);
    hosts_->share();
    for (std::size_t k = 0; k < pairs_.ends.size() * nq_; ++k)
      hosts_->connect(k, static_cast<std::uint32_t>(k * 7 + 1) & 0xFFFFFF,
                      static_cast<std::uint32_t>(k * 13 + 5) & 0xFFFFFF);
    hosts_->qp_memory_idle(r_);
    for (std::uint32_t i = 0; i < m.conns.size(); ++i)
      for (std::uint32_t q = 0; q < nq_; ++q)
        hosts_->post_recv(static_cast<std::size_t>(pairs_.of_conn[i]) * nq_ + q, i);

    r_.flows.resize(m.conns.size());
    for (std::size_t i = 0; i < m.conns.size(); ++i) r_.flows[i].conn = m.conns[i];
    parts_done_.assign(m.conns.size(), 0);
    parts_arrived_.assign(m.conns.size(), 0);
    remaining_.assign(parts_, 0);
    for (const ConnSpec& c : m.conns) ++remaining_[part_of_node_[c.src]];
    for (const std::uint32_t p : local_) {
      Fabric& net = *nets_[p];
      net.set_activity_hook([this, p](std::uint32_t h) {
        engine::Completion c;
        while (hosts_->poll_completion(h, c)) on_completion(p, c);
      });
      net.set_call_hook([this](std::uint32_t i) { post(i); });
    }
    for (std::uint32_t i = 0; i < m.conns.size(); ++i) {
      Fabric* net = nets_[part_of_node_[m.conns[i].src]];
      if (m.conns[i].after == ConnSpec::kNoDep && net != nullptr)
        net->schedule_call(m.conns[i].start * 1000, i);
    }

    r_.sample_interval = cfg.sample_interval;
    next_sample_ps_ = cfg.sample_interval > 0 ? cfg.sample_interval * 1000 : kNever;
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
    stop_ps_ = cfg.limit >= kNever / 1000 ? kNever : cfg.limit * 1000 + 1000;
    // Progress reports are collective: made if any rank wants them (the tool asks on rank 0 only).
    std::uint64_t want = cfg.progress ? 1 : 0;
    if (ranks_ != nullptr) ranks_->max(std::span<std::uint64_t>(&want, 1));
    want_progress_ = want != 0;
  }

  RunResult run() {
    loop();
    if (want_progress_) report(true);
    r_.end = 0;
    for (Fabric* net : owned_nets()) {
      r_.end = std::max(r_.end, net->last_event());
      merge_stats(r_.net, net->stats());
      r_.pool_packets += net->pool_size();
    }
    account_window();
    r_.threads = threads_;
    r_.partitions = parts_;
    r_.ranks = nranks_;
    std::uint64_t work = work_ns_, span = span_ns_, pool = r_.pool_packets;
    if (ranks_ != nullptr) {
      ranks_->max(std::span<std::uint64_t>(&r_.end, 1));
      reduce_stats(*ranks_, r_.net);
      ranks_->sum(std::span<std::uint64_t>(&work, 1));
      ranks_->max(std::span<std::uint64_t>(&span, 1));
      ranks_->sum(std::span<std::uint64_t>(&pool, 1));
      r_.pool_packets = pool;
      ranks_->sum(std::span<std::uint64_t>(&sent_bytes_, 1));
      ranks_->max(std::span<std::uint64_t>(&max_sent_bytes_, 1));
      r_.rank_bytes = sent_bytes_;
      r_.rank_window_bytes = max_sent_bytes_;
      merge_flows(*ranks_, r_.flows);
    }
    r_.work_s = static_cast<double>(work) * 1e-9;
    r_.span_s = static_cast<double>(span) * 1e-9;
    hosts_->finish(r_.end);
    collect_counters(*hosts_, pairs_, nq_, ranks_, r_);
    hosts_->qp_memory_end(r_);
    flow_statistics(r_);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    r_.peak_rss_kb = ru.ru_maxrss;
    if (ranks_ != nullptr) {
      std::vector<std::uint64_t> rss(nranks_, 0);
      rss[rank_] = static_cast<std::uint64_t>(ru.ru_maxrss);
      ranks_->sum(rss);
      r_.rank_rss_kb.assign(rss.begin(), rss.end());
      r_.peak_rss_kb = *std::max_element(r_.rank_rss_kb.begin(), r_.rank_rss_kb.end());
    }
    r_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    r_.events_per_s = r_.wall_s > 0 ? static_cast<double>(r_.net.events) / r_.wall_s : 0;
    return std::move(r_);
  }

 private:
  /// This rank's Fabrics (asked for every window: a list kept, not one built per call).
  const std::vector<Fabric*>& owned_nets() const { return owned_ptrs_; }

  // Part q of connection i: its bytes split evenly, the remainder on the first parts.
  std::uint64_t part_bytes(std::uint32_t i, std::uint64_t q) const {
    const std::uint64_t b = m_.conns[i].bytes;
    return b / nq_ + (q < b % nq_ ? 1 : 0);
  }

  // On partition p's thread: a receive completion is the destination's, a send completion the
  // source's, so each flow's fields and counters have one writer.
  void on_completion(std::uint32_t p, const engine::Completion& c) {
    Fabric& net = *nets_[p];
    if (c.is_recv) {
      if (!c.has_imm || c.imm >= m_.conns.size()) return;
      FlowResult& f = r_.flows[c.imm];
      if (++parts_arrived_[c.imm] != nq_) return;
      f.arrived = net.now();
      // A dependent's source is in this partition (partition_nodes).
      for (std::uint32_t k = deps_.start[c.imm]; k < deps_.start[c.imm + 1]; ++k) {
        const std::uint32_t j = deps_.list[k];
        net.schedule_call(m_.conns[j].start * 1000, j);
      }
      return;
    }
    if ((c.wr_id >> 8) >= m_.conns.size()) return;
    const auto i = static_cast<std::uint32_t>(c.wr_id >> 8);
    FlowResult& f = r_.flows[i];
    if (c.status != engine::WcStatus::kSuccess) f.bytes_failed += part_bytes(i, c.wr_id & 0xFF);
    if (++parts_done_[i] != nq_) return;
    f.finish = net.now();
    f.ok = f.bytes_failed == 0;
    --remaining_[p];
  }

  /// Posts connection i: one WRITE_WITH_IMM per QP of its pair (on its source's partition).
  void post(std::uint32_t i) {
    const std::uint32_t src = m_.conns[i].src;
    Fabric& net = *nets_[part_of_node_[src]];
    r_.flows[i].posted = net.now();
    for (std::uint32_t q = 0; q < nq_; ++q) {
      engine::SendWr wr;
      wr.wr_id = (static_cast<std::uint64_t>(i) << 8) | q;
      wr.with_imm = true;
      wr.imm = i;
      wr.length = static_cast<std::uint32_t>(part_bytes(i, q));
      hosts_->post(static_cast<std::size_t>(pairs_.of_conn[i]) * nq_ + q, wr, net.now());
    }
    net.kick(src);
  }

  /// Bytes placed at the receivers of pair pi that this rank holds.
  std::uint64_t pair_placed(std::uint32_t pi) const {
    std::uint64_t b = 0;
    for (std::uint32_t q = 0; q < nq_; ++q) b += hosts_->bytes_placed(static_cast<std::size_t>(pi) * nq_ + q);
    return b;
  }

  /// Connections not completed whose sources this rank holds.
  std::uint64_t local_remaining() const {
    std::uint64_t n = 0;
    for (const std::uint32_t p : local_) n += remaining_[p];
    return n;
  }

  std::uint64_t local_events() const {
    std::uint64_t n = 0;
    for (const Fabric* net : owned_nets()) n += net->stats().events;
    return n;
  }

  // Collective: the whole run's position (every rank's partitions), reported on the ranks that
  // asked for it.
  void report(bool last) {
    std::uint64_t now = 0;
    for (const Fabric* net : owned_nets()) now = std::max(now, net->now());
    std::uint64_t v[3] = {local_events(), local_remaining(), 0};
    for (std::uint32_t pi = 0; pi < pairs_.ends.size(); ++pi) v[2] += pair_placed(pi);
    if (ranks_ != nullptr) {
      ranks_->max(std::span<std::uint64_t>(&now, 1));
      ranks_->sum(v);
    }
    prog_.now = now;
    prog_.events = v[0];
    prog_.flows_done = prog_.flows - static_cast<std::uint32_t>(v[1]);
    prog_.bytes_done = v[2];
    prog_.last = last;
    if (cfg_.progress) cfg_.progress(prog_);
  }

  // The last window's CPU time per thread into work_ns_ and span_ns_.
  void account_window() {
    std::uint64_t most = 0;
    for (std::uint64_t& ns : window_cpu_ns_) {
      work_ns_ += ns;
      most = std::max(most, ns);
      ns = 0;
    }
    span_ns_ += most;
  }

  // Between windows, on the calling thread while the others wait: samples, progress, the end of the
  // run; false = stop, else window_end_ is the end of the next window. Distributed: every decision
  // is taken from values reduced over the ranks, so each rank takes the same.
  bool next_window() {
    account_window();
    std::uint64_t v[3] = {local_remaining(), failed_.load() ? 1u : 0u, local_events()};
    Time next = kNever;
    if (ranks_ != nullptr) {  // reduced in the exchange just before
      std::copy(ctl_, ctl_ + 3, v);
      next = ctl_[3];
    } else {  // the messages not yet taken count: they are queued at the next window's start
      for (Fabric* net : owned_nets()) next = std::min({next, net->next_event_ps(), net->next_message_ps()});
    }
    if (v[1] != 0) {
      if (!failed_.load()) other_failed_ = true;
      return false;
    }
    if (v[0] == 0) return false;
    // Windows lie on a grid of the lookahead from time 0 (D68): one that a sample cut short goes
    // on from there to the grid line; otherwise the next starts at the grid line at or before the
    // next event (nothing happens before it) and not before the last one's end. Lazy switch ports
    // wake inside the grid interval their dequeue is due in, so the start is the same with them.
    const Time start = t_ % window_ != 0 ? t_
                       : next == kNever  ? kNever
                                         : std::max(t_, next / window_ * window_);
    while (next_sample_ps_ < stop_ps_ && next_sample_ps_ <= start) {
      std::uint64_t b = 0;
      for (const std::uint32_t pi : sampled_) b += pair_placed(pi);
      if (ranks_ != nullptr) ranks_->sum(std::span<std::uint64_t>(&b, 1));
      r_.samples.push_back(b);
      next_sample_ps_ += cfg_.sample_interval * 1000;
    }
    if (start >= stop_ps_) return false;
    if (want_progress_ && v[2] >= next_progress_) {
      report(false);
      next_progress_ = v[2] + (1u << 16);
    }
    const Time end = start > kNever - window_ ? kNever : (start / window_ + 1) * window_;
    t_ = window_end_ = std::min({end, stop_ps_, next_sample_ps_});
    ++r_.windows;
    return true;
  }

  // A partition's share of a window on thread `tid`: first it takes the messages the others sent
  // it during the last window (from this rank's partitions directly, from the others' through
  // exchange()), then it runs the window's events (unless run_events is false: the run's end). The
  // senders meanwhile write their other outboxes (Fabric::flip_outboxes). An exception stops the
  // run (rethrown by loop()).
  void work(std::uint32_t tid, bool run_events) {
    const std::uint64_t t0 = per_window_cpu_ ? busy_ns() : 0;
    try {
      for (std::size_t i = tid; i < local_.size(); i += threads_) {
        const std::uint32_t p = local_[i];
        std::size_t in = 0;
        std::vector<Incoming>& from = incoming_[p];
        for (std::uint32_t q = 0; q < parts_; ++q) {
          if (q == p) continue;
          if (nets_[q] != nullptr) {
            nets_[p]->take_messages(*nets_[q]);
            continue;
          }
          for (; in < from.size() && from[in].from == q; ++in) nets_[p]->take_packed(from[in].record);
        }
        from.clear();
        if (run_events) nets_[p]->run_window(window_end_);
      }
    } catch (...) {
      fail();
    }
    if (per_window_cpu_) window_cpu_ns_[tid] += busy_ns() - t0;
  }

  void fail() {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true);
  }

  // Distributed, on thread 0 between windows (and before the first): our partitions' outboxes for
  // other ranks' go out, theirs for ours come in (incoming_, sorted by sender, taken at the start
  // of the next window). The same round of messages carries what next_window() decides on (ctl_):
  // connections left, failures, events, and the next event, which after the messages are taken is
  // the earliest of the queues and of the messages sent (a message queued behind another on its
  // link arrives after it).
  void exchange() {
    const std::uint64_t t0 = per_window_cpu_ ? busy_ns() : 0;
    std::uint64_t mine[4] = {local_remaining(), 0, local_events(), kNever};
    for (Fabric* net : owned_nets())
      mine[3] = std::min({mine[3], net->next_event_ps(), net->next_message_ps()});
    send_.clear();
    send_counts_.assign(nranks_, 0);
    try {
      for (std::uint32_t r = 0; r < nranks_; ++r) {
        const std::size_t at = send_.size();
        for (const std::uint32_t p : local_)
          for (std::uint32_t q = r; q < parts_; q += nranks_)
            if (nets_[q] == nullptr) nets_[p]->pack_messages(q, send_);
        send_counts_[r] = send_.size() - at;
      }
    } catch (...) {
      fail();
    }
    mine[1] = failed_.load() ? 1 : 0;
    sent_bytes_ += send_.size();
    max_sent_bytes_ = std::max<std::uint64_t>(max_sent_bytes_, send_.size());
    std::vector<std::uint64_t> every;
    ranks_->exchange(send_, send_counts_, recv_, recv_counts_, mine, every);  // every rank, failed or not
    ctl_[0] = ctl_[1] = ctl_[2] = 0;
    ctl_[3] = kNever;
    for (std::uint32_t r = 0; r < nranks_; ++r) {
      for (int i = 0; i < 3; ++i) ctl_[i] += every[4 * r + i];
      ctl_[3] = std::min(ctl_[3], every[4 * r + 3]);
    }
    try {
      const std::span<const std::uint8_t> all(recv_);
      for (std::size_t at = 0; at < all.size();) {
        const Fabric::Packed rec = Fabric::packed_record(all.subspan(at));
        if (rec.to >= parts_ || nets_[rec.to] == nullptr)
          throw std::runtime_error("run: packets for a partition of another rank");
        incoming_[rec.to].push_back(Incoming{rec.from, all.subspan(at, rec.size)});
        at += rec.size;
      }
      for (const std::uint32_t p : local_)
        std::stable_sort(incoming_[p].begin(), incoming_[p].end(),
                         [](const Incoming& a, const Incoming& b) { return a.from < b.from; });
    } catch (...) {
      fail();
    }
    if (per_window_cpu_) window_cpu_ns_[0] += busy_ns() - t0;
  }

  void loop() {
    // One thread: its CPU time over the whole loop is both the work and the span. Several: each
    // thread's share of each window on the monotonic clock (the CPU clock is a system call, which
    // at four reads a window per thread took a third of incast128's wall time at 2 threads).
    per_window_cpu_ = threads_ > 1;
    const std::uint64_t loop_t0 = per_window_cpu_ ? 0 : thread_cpu_ns();
    // Two barriers a window: the serial part (exchange with the other ranks, outboxes flipped, the
    // next window decided) between them on thread 0, then every thread takes its partitions'
    // messages and runs them.
    SpinBarrier barrier(threads_);
    const bool cross = ranks_ != nullptr;
    auto worker = [&](std::uint32_t tid) {
      for (;;) {
        barrier.wait();  // the next window is set, or stop_
        if (stop_.load(std::memory_order_relaxed)) return;
        work(tid, true);
        barrier.wait();
      }
    };
    std::vector<std::thread> pool;
    for (std::uint32_t tid = 1; tid < threads_; ++tid) pool.emplace_back(worker, tid);
    for (;;) {
      if (cross) exchange();
      // (After a failure a partition may have left messages untaken: the run stops, unflipped.)
      if (parts_ > 1 && !failed_.load())
        for (Fabric* net : owned_nets()) net->flip_outboxes();
      if (!next_window()) stop_.store(true, std::memory_order_relaxed);
      barrier.wait();
      if (stop_.load(std::memory_order_relaxed)) break;
      work(0, true);
      barrier.wait();
    }
    for (std::thread& t : pool) t.join();
    // The last window's messages, into their queues (their packets are in the pools).
    if (parts_ > 1 && !failed_.load())
      for (std::uint32_t tid = 0; tid < threads_; ++tid) work(tid, false);
    // Lazy switch ports catch up on what was due in the last window (D68): the counters are then
    // those of every event before its end. (What they send another partition stays in an outbox:
    // the pools' sizes, not reported as results, depend on the partitioning.)
    if (!failed_.load())
      for (Fabric* net : owned_nets()) net->settle_ports(window_end_);
    if (!per_window_cpu_) window_cpu_ns_[0] += thread_cpu_ns() - loop_t0;
    if (error_) std::rethrow_exception(error_);
    if (other_failed_) throw std::runtime_error("run: stopped because another rank failed");
  }

  /// A record of packed messages from another rank's partition `from`.
  struct Incoming {
    std::uint32_t from = 0;
    std::span<const std::uint8_t> record;
  };

  const std::chrono::steady_clock::time_point t0_;
  const ConnMatrix& m_;
  const RunConfig& cfg_;
  const std::uint32_t nq_;
  RunResult r_;
  const Pairs pairs_;
  const Dependents deps_;
  Ranks* ranks_ = nullptr;  ///< nullptr unless the run is distributed over several ranks
  std::uint32_t nranks_ = 1, rank_ = 0;
  std::uint32_t threads_ = 1, parts_ = 1;
  std::vector<std::uint32_t> part_of_node_;
  std::vector<std::uint32_t> local_;  ///< this rank's partitions
  std::vector<std::unique_ptr<Fabric>> owned_;
  std::vector<Fabric*> owned_ptrs_;  ///< owned_ as plain pointers (owned_nets())
  std::vector<Fabric*> nets_;        ///< per partition; nullptr: another rank's
  std::vector<std::vector<Incoming>> incoming_;
  /// This window's bytes to the other ranks (by rank) and from them (all of them, by rank).
  std::vector<std::uint8_t> send_, recv_;
  std::vector<std::uint64_t> send_counts_, recv_counts_;
  std::optional<Hosts> hosts_;
  std::vector<std::uint32_t> parts_done_, parts_arrived_;
  std::vector<std::uint32_t> remaining_;  ///< per partition: its sources' connections not completed
  std::vector<std::uint32_t> sampled_;    ///< pairs whose placed bytes are sampled
  Time window_ = 0;                       ///< ps
  Time t_ = 0, window_end_ = 0, stop_ps_ = kNever, next_sample_ps_ = kNever;
  std::uint64_t next_progress_ = 0;
  bool want_progress_ = false;
  /// Distributed: connections left, failures, events, next event (ps), over every rank, from the
  /// exchange before next_window().
  std::uint64_t ctl_[4] = {};
  std::uint64_t sent_bytes_ = 0, max_sent_bytes_ = 0;  ///< to other ranks: in all, in one window
  bool other_failed_ = false;
  std::atomic<bool> stop_{false}, failed_{false};
  std::vector<std::uint64_t> window_cpu_ns_;  ///< per thread, this window (written by that thread)
  bool per_window_cpu_ = true;                ///< false: one thread, timed over the whole loop
  std::uint64_t work_ns_ = 0, span_ns_ = 0;
  std::mutex error_mu_;
  std::exception_ptr error_;
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
