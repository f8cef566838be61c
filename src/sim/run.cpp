#include "sim/run.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <stdexcept>
#include <unordered_map>

#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "wire/packet.hpp"

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

RunResult run_matrix(const Topology& topo, const ConnMatrix& m, const RunConfig& cfg) {
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
  const bool roce = cfg.transport == Transport::kRoce;
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r;
  const std::uint32_t ovh = cfg.fabric.wire_overhead;
  if (roce) {
    r.mtu_wire = cfg.roce.mtu + static_cast<std::uint32_t>(RoceNic::kBthSize + RoceNic::kIcrcSize) + ovh;
    r.ack_wire =
        static_cast<std::uint32_t>(RoceNic::kBthSize + RoceNic::kAethSize + RoceNic::kIcrcSize) + ovh;
  } else {
    r.mtu_wire = cfg.pmtu + static_cast<std::uint32_t>(wire::header_size(wire::Opcode::kWriteMiddle, true)) +
                 static_cast<std::uint32_t>(wire::kIcrcSize) + ovh;
    r.ack_wire =
        static_cast<std::uint32_t>(wire::header_size(wire::Opcode::kSack, false) + wire::kIcrcSize) + ovh;
  }
  r.base_rtt = base_rtt(topo, r.mtu_wire, r.ack_wire);
  const double rate = topo.links.front().rate_bps;
  r.nscc =
      cc::NsccConfig::derive(static_cast<std::uint64_t>(rate) * topo.planes,
                             static_cast<std::uint32_t>(r.base_rtt), r.mtu_wire, cfg.fabric.queue.trimming);

  // Pairs and their QPs; each connection knows its pair, each pair how many connections it carries.
  std::unordered_map<std::uint64_t, std::uint32_t> pair_of;
  std::vector<std::uint32_t> conn_pair(m.conns.size());
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;  // (src, dst)
  std::vector<std::uint32_t> pair_load;
  for (std::size_t i = 0; i < m.conns.size(); ++i) {
    const ConnSpec& c = m.conns[i];
    const std::uint64_t key = (static_cast<std::uint64_t>(c.src) << 32) | c.dst;
    auto [it, fresh] = pair_of.emplace(key, static_cast<std::uint32_t>(pairs.size()));
    if (fresh) {
      pairs.emplace_back(c.src, c.dst);
      pair_load.push_back(0);
    }
    conn_pair[i] = it->second;
    ++pair_load[it->second];
  }
  const std::uint32_t max_load = *std::max_element(pair_load.begin(), pair_load.end());

  Fabric net(topo, cfg.fabric);
  for (const LinkFault& f : cfg.faults) net.schedule_fault(f);
  std::vector<std::unique_ptr<engine::Endpoint>> eps;
  std::vector<std::unique_ptr<RoceNic>> nics;
  if (roce) {
    RoceConfig rc = cfg.roce;
    rc.line_rate_bps = rate;
    rc.wire_overhead = ovh;
    rc.num_ports = topo.planes;
    rc.cnp = rc.dcqcn;
    nics.reserve(topo.hosts);
    for (std::uint32_t h = 0; h < topo.hosts; ++h) {
      rc.seed = cfg.seed * 1000003u + h;
      nics.push_back(std::make_unique<RoceNic>(rc));
      net.attach(h, *nics.back());
    }
  } else {
    engine::EndpointConfig ec;
    ec.num_ports = topo.planes;
    ec.icrc = cfg.icrc;
    ec.tun = cfg.tun;
    ec.tun.base_rtt_hint = r.base_rtt;
    eps.reserve(topo.hosts);
    for (std::uint32_t h = 0; h < topo.hosts; ++h) {
      ec.seed = cfg.seed * 1000003u + h;
      eps.push_back(std::make_unique<engine::Endpoint>(ec));
      net.attach(h, *eps.back());
    }
  }
  // MRC: one shared source and one shared sink buffer (contents are not checked), registered per
  // host. RoCE WRITEs use key 0 (no memory: zeros are sent, the responder discards them).
  std::uint64_t max_part = 1;
  for (const auto& c : m.conns) max_part = std::max(max_part, (c.bytes + nq - 1) / nq);
  std::vector<std::uint8_t> src_buf(roce ? 0 : max_part, 0x5a), dst_buf(roce ? 0 : max_part, 0);
  std::vector<const engine::MemoryRegion*> src_mr(topo.hosts, nullptr), dst_mr(topo.hosts, nullptr);
  auto reg = [&](std::vector<const engine::MemoryRegion*>& v, std::uint32_t h, std::vector<std::uint8_t>& b) {
    if (v[h] == nullptr) v[h] = eps[h]->memory().register_region(b.data(), b.size(), engine::access::kAll);
    if (v[h] == nullptr) throw std::runtime_error("run: memory registration failed");
  };

  engine::QpConfig qc;
  qc.pmtu = cfg.pmtu;
  // Every connection of a pair may be posted before the first completes (a ring step waits for
  // its predecessor's arrival, not for its own previous send).
  qc.sq_depth = std::max(cfg.sq_depth, max_load);
  qc.rq_depth = std::max(cfg.rq_depth, max_load);
  qc.max_wimm = qc.max_wimm_dest =
      static_cast<std::uint16_t>(std::min<std::uint32_t>(0xFFFF, std::max<std::uint32_t>(128, max_load)));
  std::uint8_t mpr = cfg.mpr;
  if (mpr == 0) {
    const double bdp = rate * topo.planes / 8 * static_cast<double>(r.base_rtt) * 1e-9;
    const double units = std::ceil(4 * bdp / (128.0 * cfg.pmtu));
    mpr = static_cast<std::uint8_t>(std::clamp(units, 2.0, 8.0));
  }
  qc.mpr = qc.mpr_dest = mpr;
  qc.evs = engine::make_ev_set(topo.planes, cfg.evs_per_plane, 0);
  qc.active_count = topo.planes * cfg.evs_per_plane;
  qc.cc.algorithm = cfg.nscc ? cc::Algorithm::kNscc : cc::Algorithm::kNone;
  qc.cc.nscc = r.nscc;
  std::vector<std::uint32_t> src_qp(pairs.size() * nq), dst_qp(pairs.size() * nq);
  for (std::size_t pi = 0; pi < pairs.size(); ++pi) {
    const auto [s, d] = pairs[pi];
    for (std::uint32_t q = 0; q < nq; ++q) {
      const std::size_t k = pi * nq + q;
      const auto sq_psn = static_cast<std::uint32_t>(k * 7 + 1) & 0xFFFFFF;
      const auto rq_psn = static_cast<std::uint32_t>(k * 13 + 5) & 0xFFFFFF;
      engine::QpRemote ra, rb;
      ra.peer = d;
      ra.sq_psn = rb.rq_psn = sq_psn;
      ra.rq_psn = rb.sq_psn = rq_psn;
      rb.peer = s;
      if (roce) {
        const std::uint32_t port = (q + d) % topo.planes;
        src_qp[k] = nics[s]->create_qp(port);
        dst_qp[k] = nics[d]->create_qp(port);
        ra.qpn = dst_qp[k];
        rb.qpn = src_qp[k];
        if (nics[s]->connect_qp(src_qp[k], ra, 0) != 0 || nics[d]->connect_qp(dst_qp[k], rb, 0) != 0)
          throw std::runtime_error("run: RoCE connect_qp failed");
        continue;
      }
      reg(src_mr, s, src_buf);
      reg(dst_mr, d, dst_buf);
      qc.seed = cfg.seed * 7919u + k;
      int err = 0;
      src_qp[k] = eps[s]->create_qp(qc, &err);
      dst_qp[k] = eps[d]->create_qp(qc, &err);
      if (src_qp[k] == 0 || dst_qp[k] == 0)
        throw std::runtime_error("run: create_qp failed (errno " + std::to_string(err) + ")");
      ra.qpn = dst_qp[k];
      rb.qpn = src_qp[k];
      ra.peer_mpr_dest = rb.peer_mpr_dest = mpr;
      ra.peer_max_wimm_dest = rb.peer_max_wimm_dest = qc.max_wimm_dest;
      if (eps[s]->connect_qp(src_qp[k], ra, 0) != 0 || eps[d]->connect_qp(dst_qp[k], rb, 0) != 0)
        throw std::runtime_error("run: connect_qp failed");
    }
  }

  if (!roce) {
    std::size_t b = 0;
    for (std::size_t k = 0; k < src_qp.size(); ++k)
      b += eps[pairs[k / nq].first]->qp(src_qp[k])->memory_bytes() +
           eps[pairs[k / nq].second]->qp(dst_qp[k])->memory_bytes();
    r.qps = 2 * src_qp.size();
    r.qp_bytes_idle = static_cast<double>(b) / static_cast<double>(r.qps);
  }

  // Dependents of each connection (CSR), and per-connection part counters.
  std::vector<std::uint32_t> dep_start(m.conns.size() + 1, 0), deps;
  for (const auto& c : m.conns)
    if (c.after != ConnSpec::kNoDep) ++dep_start[c.after + 1];
  for (std::size_t i = 0; i < m.conns.size(); ++i) dep_start[i + 1] += dep_start[i];
  deps.resize(dep_start.back());
  {
    std::vector<std::uint32_t> fill(dep_start.begin(), dep_start.end() - 1);
    for (std::uint32_t i = 0; i < m.conns.size(); ++i)
      if (m.conns[i].after != ConnSpec::kNoDep) deps[fill[m.conns[i].after]++] = i;
  }
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
      for (std::uint32_t k = dep_start[c.imm]; k < dep_start[c.imm + 1]; ++k) ready.push_back(deps[k]);
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
    if (roce) {
      while (nics[h]->poll_completion(c)) on_completion(c);
    } else {
      while (eps[h]->poll_completion(c)) on_completion(c);
    }
  });

  auto post = [&](std::uint32_t i) {
    const ConnSpec& c = m.conns[i];
    r.flows[i].posted = net.now();
    const std::uint32_t pi = conn_pair[i];
    for (std::uint32_t q = 0; q < nq; ++q) {
      const std::size_t k = static_cast<std::size_t>(pi) * nq + q;
      engine::SendWr wr;
      wr.wr_id = (static_cast<std::uint64_t>(i) << 8) | q;
      wr.with_imm = true;
      wr.imm = i;
      wr.length = static_cast<std::uint32_t>(part_bytes(i, q));
      int rc;
      if (roce) {
        rc = nics[c.src]->post_send(src_qp[k], wr, net.now());
      } else {
        wr.local_addr = reinterpret_cast<std::uint64_t>(src_buf.data());
        wr.lkey = src_mr[c.src]->lkey;
        wr.remote_addr = reinterpret_cast<std::uint64_t>(dst_buf.data());
        wr.rkey = dst_mr[c.dst]->rkey;
        if (eps[c.dst]->post_recv(dst_qp[k], i) != 0) throw std::runtime_error("run: post_recv failed");
        rc = eps[c.src]->post_send(src_qp[k], wr, net.now());
      }
      if (rc != 0) throw std::runtime_error("run: post_send failed (errno " + std::to_string(rc) + ")");
    }
    net.kick(c.src);
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
    sampled.push_back(conn_pair[i]);
  }
  std::sort(sampled.begin(), sampled.end());
  sampled.erase(std::unique(sampled.begin(), sampled.end()), sampled.end());
  if (cfg.sample_conns.empty())
    for (std::uint32_t pi = 0; pi < pairs.size(); ++pi) sampled.push_back(pi);
  auto pair_placed = [&](std::uint32_t pi) {
    std::uint64_t b = 0;
    const std::uint32_t d = pairs[pi].second;
    for (std::uint32_t q = 0; q < nq; ++q) {
      const std::uint32_t qpn = dst_qp[pi * nq + q];
      if (roce) {
        b += nics[d]->qp_counters(qpn).bytes_received;
      } else if (const engine::Qp* qp = static_cast<const engine::Endpoint&>(*eps[d]).qp(qpn)) {
        b += qp->counters().bytes_placed;
      }
    }
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
    for (std::uint32_t pi = 0; pi < pairs.size(); ++pi) prog.bytes_done += pair_placed(pi);
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

  // Counters: per pair (a connection reports its pair's sender QPs), totals over pairs.
  std::vector<engine::QpCounters> pair_ctr(pairs.size());
  for (std::size_t pi = 0; pi < pairs.size(); ++pi) {
    const auto [s, d] = pairs[pi];
    engine::QpCounters& pc = pair_ctr[pi];
    for (std::uint32_t q = 0; q < nq; ++q) {
      const std::size_t k = pi * nq + q;
      if (roce) {
        const RoceQpCounters& a = nics[s]->qp_counters(src_qp[k]);
        const RoceQpCounters& b = nics[d]->qp_counters(dst_qp[k]);
        pc.tx_data += a.tx_data;
        pc.tx_rtx += a.tx_rtx;
        pc.timeouts += a.timeouts;
        pc.tx_ack += b.tx_ack;
        pc.tx_nack += b.tx_nak;
        r.tx_cnp += b.tx_cnp;
        continue;
      }
      const engine::Qp* a = eps[s]->qp(src_qp[k]);
      const engine::Qp* b = eps[d]->qp(dst_qp[k]);
      if (a == nullptr || b == nullptr) continue;
      const engine::QpCounters& x = a->counters();
      pc.tx_data += x.tx_data;
      pc.tx_rtx += x.tx_rtx;
      pc.timeouts += x.timeouts;
      pc.rtx_nack += x.rtx_nack;
      pc.rtx_loss += x.rtx_loss;
      pc.rtx_timeout += x.rtx_timeout;
      pc.rtx_port += x.rtx_port;
      pc.ev_transitions += x.ev_transitions + b->counters().ev_transitions;
      pc.tx_sack += b->counters().tx_sack;
      pc.tx_nack += b->counters().tx_nack;
      pc.rtx_spurious += x.rtx_spurious;
      pc.rx_dup += b->counters().rx_dup;
    }
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
    r.tx_sack += roce ? pc.tx_ack : pc.tx_sack;
    r.tx_nack += pc.tx_nack;
  }
  if (!roce) {
    std::size_t sb = 0, rb = 0, sn = 0, rn = 0;
    for (std::uint32_t h = 0; h < topo.hosts; ++h)
      for (const std::uint32_t qpn : eps[h]->qpns()) {
        const engine::Qp* q = static_cast<const engine::Endpoint&>(*eps[h]).qp(qpn);
        if (q->counters().tx_data > 0) {
          sb += q->memory_bytes();
          ++sn;
        } else {
          rb += q->memory_bytes();
          ++rn;
        }
      }
    r.qp_bytes_sender = sn ? static_cast<double>(sb) / static_cast<double>(sn) : 0;
    r.qp_bytes_receiver = rn ? static_cast<double>(rb) / static_cast<double>(rn) : 0;
  }
  std::vector<double> fcts;
  for (std::size_t i = 0; i < r.flows.size(); ++i) {
    FlowResult& f = r.flows[i];
    f.qp = pair_ctr[conn_pair[i]];
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
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.events_per_s = r.wall_s > 0 ? static_cast<double>(r.net.events) / r.wall_s : 0;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.peak_rss_kb = ru.ru_maxrss;
  return r;
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
