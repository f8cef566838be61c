#include "sim/run.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>

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
  if (cfg.transport == Transport::kRoce)
    throw std::invalid_argument(
        "run: transport \"roce\" is not available yet (RoCEv2 baseline pending in src/sim/roce.*)");
  if (cfg.evs_per_plane == 0) throw std::invalid_argument("run: evs_per_plane must be >= 1");
  for (const auto& c : m.conns) {
    if (c.bytes == 0 || c.bytes > (1u << 31))
      throw std::invalid_argument("run: flow sizes must be 1 .. 2^31 bytes (one RDMA WRITE)");
  }
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r;
  const std::uint32_t ovh = cfg.fabric.wire_overhead;
  r.mtu_wire = cfg.pmtu + static_cast<std::uint32_t>(wire::header_size(wire::Opcode::kWriteMiddle, true)) +
               static_cast<std::uint32_t>(wire::kIcrcSize) + ovh;
  r.ack_wire =
      static_cast<std::uint32_t>(wire::header_size(wire::Opcode::kSack, false) + wire::kIcrcSize) + ovh;
  r.base_rtt = base_rtt(topo, r.mtu_wire, r.ack_wire);
  const double rate = topo.links.front().rate_bps;
  r.nscc =
      cc::NsccConfig::derive(static_cast<std::uint64_t>(rate) * topo.planes,
                             static_cast<std::uint32_t>(r.base_rtt), r.mtu_wire, cfg.fabric.queue.trimming);

  Fabric net(topo, cfg.fabric);
  for (const LinkFault& f : cfg.faults) net.schedule_fault(f);
  engine::EndpointConfig ec;
  ec.num_ports = topo.planes;
  ec.icrc = cfg.icrc;
  ec.tun = cfg.tun;
  ec.tun.base_rtt_hint = r.base_rtt;
  std::vector<std::unique_ptr<engine::Endpoint>> eps;
  eps.reserve(topo.hosts);
  for (std::uint32_t h = 0; h < topo.hosts; ++h) {
    ec.seed = cfg.seed * 1000003u + h;
    eps.push_back(std::make_unique<engine::Endpoint>(ec));
    net.attach(h, *eps.back());
  }
  // One shared source and one shared sink buffer (contents are not checked), registered per host.
  std::uint64_t max_bytes = 1;
  for (const auto& c : m.conns) max_bytes = std::max(max_bytes, c.bytes);
  std::vector<std::uint8_t> src_buf(max_bytes, 0x5a), dst_buf(max_bytes, 0);
  std::vector<const engine::MemoryRegion*> src_mr(topo.hosts, nullptr), dst_mr(topo.hosts, nullptr);
  auto reg = [&](std::vector<const engine::MemoryRegion*>& v, std::uint32_t h, std::vector<std::uint8_t>& b) {
    if (v[h] == nullptr) v[h] = eps[h]->memory().register_region(b.data(), b.size(), engine::access::kAll);
    if (v[h] == nullptr) throw std::runtime_error("run: memory registration failed");
  };

  engine::QpConfig qc;
  qc.pmtu = cfg.pmtu;
  qc.sq_depth = cfg.sq_depth;
  qc.rq_depth = cfg.rq_depth;
  qc.mpr = qc.mpr_dest = cfg.mpr;
  qc.evs = engine::make_ev_set(topo.planes, cfg.evs_per_plane, 0);
  qc.active_count = topo.planes * cfg.evs_per_plane;
  qc.cc.algorithm = cfg.nscc ? cc::Algorithm::kNscc : cc::Algorithm::kNone;
  qc.cc.nscc = r.nscc;
  r.flows.resize(m.conns.size());
  std::vector<std::uint32_t> src_qpn(m.conns.size());
  // Per host: (qpn -> flow index) for completion matching; QPNs are small and dense per endpoint.
  std::vector<std::vector<std::uint32_t>> flow_of(topo.hosts);
  for (std::size_t i = 0; i < m.conns.size(); ++i) {
    const ConnSpec& c = m.conns[i];
    r.flows[i].conn = c;
    reg(src_mr, c.src, src_buf);
    reg(dst_mr, c.dst, dst_buf);
    qc.seed = cfg.seed * 7919u + i;
    int err = 0;
    const std::uint32_t qa = eps[c.src]->create_qp(qc, &err);
    const std::uint32_t qb = eps[c.dst]->create_qp(qc, &err);
    if (qa == 0 || qb == 0)
      throw std::runtime_error("run: create_qp failed (errno " + std::to_string(err) + ")");
    engine::QpRemote ra, rb;
    ra.peer = c.dst;
    ra.qpn = qb;
    ra.sq_psn = static_cast<std::uint32_t>(i * 7 + 1) & 0xFFFFFF;
    ra.rq_psn = static_cast<std::uint32_t>(i * 13 + 5) & 0xFFFFFF;
    rb.peer = c.src;
    rb.qpn = qa;
    rb.sq_psn = ra.rq_psn;
    rb.rq_psn = ra.sq_psn;
    ra.peer_mpr_dest = rb.peer_mpr_dest = cfg.mpr;
    if (eps[c.src]->connect_qp(qa, ra, 0) != 0 || eps[c.dst]->connect_qp(qb, rb, 0) != 0)
      throw std::runtime_error("run: connect_qp failed");
    src_qpn[i] = qa;
    auto& fo = flow_of[c.src];
    if (fo.size() <= qa) fo.resize(qa + 1, ~0u);
    fo[qa] = static_cast<std::uint32_t>(i);
  }

  std::uint32_t remaining = static_cast<std::uint32_t>(m.conns.size());
  net.set_activity_hook([&](std::uint32_t h) {
    engine::Completion c;
    while (eps[h]->poll_completion(c)) {
      if (c.is_recv || c.qpn >= flow_of[h].size() || flow_of[h][c.qpn] == ~0u) continue;
      FlowResult& f = r.flows[flow_of[h][c.qpn]];
      if (f.finish != kNever) continue;
      f.finish = net.now();
      f.ok = c.status == engine::WcStatus::kSuccess;
      --remaining;
    }
  });

  std::vector<std::uint32_t> order(m.conns.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return m.conns[a].start < m.conns[b].start; });
  std::size_t next = 0;
  std::uint64_t next_progress = 0;
  while (remaining > 0) {
    if (cfg.progress && net.stats().events >= next_progress) {
      cfg.progress(net.now(), static_cast<std::uint32_t>(m.conns.size()) - remaining,
                   static_cast<std::uint32_t>(m.conns.size()));
      next_progress = net.stats().events + (1u << 16);
    }
    const Time next_start = next < order.size() ? m.conns[order[next]].start : kNever;
    if (next_start == kNever || next_start > cfg.limit) {
      if (!net.step(cfg.limit)) break;
      continue;
    }
    // Everything strictly before the flow's start, then post it at exactly its start.
    while (next_start > 0 && net.step_ps(next_start * 1000 - 1)) {
    }
    net.advance_to(next_start);
    const std::uint32_t i = order[next++];
    const ConnSpec& c = m.conns[i];
    engine::SendWr wr;
    wr.wr_id = i;
    wr.local_addr = reinterpret_cast<std::uint64_t>(src_buf.data());
    wr.length = static_cast<std::uint32_t>(c.bytes);
    wr.lkey = src_mr[c.src]->lkey;
    wr.remote_addr = reinterpret_cast<std::uint64_t>(dst_buf.data());
    wr.rkey = dst_mr[c.dst]->rkey;
    if (eps[c.src]->post_send(src_qpn[i], wr, net.now()) != 0)
      throw std::runtime_error("run: post_send failed");
    net.kick(c.src);
  }
  if (cfg.progress)
    cfg.progress(net.now(), static_cast<std::uint32_t>(m.conns.size()) - remaining,
                 static_cast<std::uint32_t>(m.conns.size()));
  r.end = net.now();
  r.net = net.stats();
  r.pool_packets = net.pool_size();

  std::vector<double> fcts;
  for (std::size_t i = 0; i < r.flows.size(); ++i) {
    FlowResult& f = r.flows[i];
    const ConnSpec& c = f.conn;
    if (const engine::Qp* q = eps[c.src]->qp(src_qpn[i])) f.qp = q->counters();
    r.tx_data += f.qp.tx_data;
    r.tx_rtx += f.qp.tx_rtx;
    r.timeouts += f.qp.timeouts;
    r.rtx_nack += f.qp.rtx_nack;
    r.rtx_loss += f.qp.rtx_loss;
    r.rtx_timeout += f.qp.rtx_timeout;
    r.rtx_port += f.qp.rtx_port;
    if (f.finish == kNever) continue;
    f.fct_us = static_cast<double>(f.finish - c.start) / 1000.0;
    fcts.push_back(f.fct_us);
    ++r.finished;
  }
  for (std::uint32_t h = 0; h < topo.hosts; ++h) {
    for (std::uint32_t q : eps[h]->qpns()) {
      if (const engine::Qp* qp = eps[h]->qp(q)) {
        r.tx_sack += qp->counters().tx_sack;
        r.tx_nack += qp->counters().tx_nack;
        r.ev_transitions += qp->counters().ev_transitions;
      }
    }
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
