#include "sim/hosts.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>

#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "wire/packet.hpp"

namespace mrc::sim {

namespace {
/// What each end of QP `e` learns of the other (sq_psn: the source's first send PSN).
std::pair<engine::QpRemote, engine::QpRemote> remotes(const QpEnds& e, std::uint32_t sq_psn,
                                                      std::uint32_t rq_psn) {
  engine::QpRemote ra, rb;
  ra.wire_ext = rb.wire_ext = true;  // both ends are this implementation (D45)
  ra.peer = e.dst;
  rb.peer = e.src;
  ra.sq_psn = rb.rq_psn = sq_psn;
  ra.rq_psn = rb.sq_psn = rq_psn;
  ra.qpn = e.dst_qp;
  rb.qpn = e.src_qp;
  return {ra, rb};
}
}  // namespace

// --- MRC ---------------------------------------------------------------------------------------------

std::uint32_t MrcHosts::mtu_wire(const RunConfig& cfg) {
  return cfg.pmtu + static_cast<std::uint32_t>(wire::header_size(wire::Opcode::kWriteMiddle, true)) +
         static_cast<std::uint32_t>(wire::kIcrcSize) + cfg.fabric.wire_overhead;
}

std::uint32_t MrcHosts::ack_wire(const RunConfig& cfg) {
  return static_cast<std::uint32_t>(wire::header_size(wire::Opcode::kSack, false) + wire::kIcrcSize) +
         cfg.fabric.wire_overhead;
}

MrcHosts::MrcHosts(const HostSetup& s)
    : ranks_(s.cfg.ranks),
      dst_bufs_(s.nets.size()),
      part_(s.part_of_node.begin(), s.part_of_node.begin() + s.topo.hosts),
      src_mr_(s.topo.hosts, nullptr),
      dst_mr_(s.topo.hosts, nullptr),
      dst_addr_(s.topo.hosts, 0),
      dst_rkey_(s.topo.hosts, 0) {
  const RunConfig& cfg = s.cfg;
  src_buf_.assign_zero(std::max<std::size_t>(s.max_part, 1));  // (a region needs an address)
  seed_ = cfg.seed;
  for (std::size_t p = 0; p < s.nets.size(); ++p)
    if (s.nets[p] != nullptr) dst_bufs_[p].assign_zero(std::max<std::size_t>(s.max_part, 1));
  engine::EndpointConfig ec;
  ec.num_ports = s.topo.planes;
  ec.icrc = cfg.icrc;
  ec.events = false;
  // Some 1,000 QPs (2-10 KB each) outgrow the caches: then prefetching their state pays (a2a64,
  // a2a128, perm1024: 8-15 % measured); with a few hundred it costs 3-5 % (perm128, incast128).
  ec.prefetch = s.qps >= cfg.prefetch_qps;
  ec.tun = cfg.tun;
  ec.tun.base_rtt_hint = s.base_rtt;
  eps_.resize(s.topo.hosts);
  for (std::uint32_t h = 0; h < s.topo.hosts; ++h) {
    if (s.nets[part_[h]] == nullptr) continue;
    ec.seed = cfg.seed * 1000003u + h;
    eps_[h] = std::make_unique<engine::Endpoint>(ec);
    s.nets[part_[h]]->attach(h, *eps_[h]);
  }
  qc_.pmtu = cfg.pmtu;
  // Every connection of a pair may be posted before the first completes (a ring step waits for
  // its predecessor's arrival, not for its own previous send).
  qc_.sq_depth = std::max(cfg.sq_depth, s.max_load);
  qc_.rq_depth = std::max(cfg.rq_depth, s.max_load);
  qc_.max_wimm = qc_.max_wimm_dest =
      static_cast<std::uint16_t>(std::min<std::uint32_t>(0xFFFF, std::max<std::uint32_t>(128, s.max_load)));
  mpr_ = cfg.mpr;
  if (mpr_ == 0) {
    const double rate = s.topo.links.front().rate_bps;
    const double bdp = rate * s.topo.planes / 8 * static_cast<double>(s.base_rtt) * 1e-9;
    const double units = std::ceil(4 * bdp / (128.0 * cfg.pmtu));
    mpr_ = static_cast<std::uint8_t>(std::clamp(units, 2.0, 8.0));
  }
  qc_.mpr = qc_.mpr_dest = mpr_;
  qc_.evs = engine::make_ev_set(s.topo.planes, cfg.evs_per_plane, 0);
  qc_.active_count = s.topo.planes * cfg.evs_per_plane;
  qc_.cc.algorithm = cfg.nscc ? cc::Algorithm::kNscc : cc::Algorithm::kNone;
  qc_.cc.nscc = s.nscc;
}

void MrcHosts::create(std::size_t k, std::uint32_t src, std::uint32_t dst, std::uint32_t q) {
  (void)q;
  auto reg = [](engine::Endpoint& e, const engine::MemoryRegion*& mr, const MappedArray<std::uint8_t>& b) {
    if (mr == nullptr) mr = e.memory().register_region(b.data(), b.size(), engine::access::kAll);
    if (mr == nullptr) throw std::runtime_error("run: memory registration failed");
  };
  qc_.seed = seed_ * 7919u + k;
  int err = 0;
  QpEnds e{src, dst, 0, 0};
  if (eps_[src]) {
    reg(*eps_[src], src_mr_[src], src_buf_);
    e.src_qp = eps_[src]->create_qp(qc_, &err);
    if (e.src_qp == 0) throw std::runtime_error("run: create_qp failed (errno " + std::to_string(err) + ")");
  }
  if (eps_[dst]) {
    reg(*eps_[dst], dst_mr_[dst], dst_bufs_[part_[dst]]);
    dst_addr_[dst] = reinterpret_cast<std::uint64_t>(dst_bufs_[part_[dst]].data());
    dst_rkey_[dst] = dst_mr_[dst]->rkey;
    e.dst_qp = eps_[dst]->create_qp(qc_, &err);
    if (e.dst_qp == 0) throw std::runtime_error("run: create_qp failed (errno " + std::to_string(err) + ")");
  }
  if (qps_.size() <= k) qps_.resize(k + 1);
  qps_[k] = e;
}

namespace {
/// Distributed: each QP end was made by one rank (the others hold 0), so a sum gives every rank
/// every QPN; the same for per-host values.
void share_qpns(Ranks* ranks, std::vector<QpEnds>& qps) {
  if (ranks == nullptr) return;
  std::vector<std::uint64_t> v(2 * qps.size());
  for (std::size_t k = 0; k < qps.size(); ++k) {
    v[2 * k] = qps[k].src_qp;
    v[2 * k + 1] = qps[k].dst_qp;
  }
  ranks->sum(v);
  for (std::size_t k = 0; k < qps.size(); ++k) {
    qps[k].src_qp = static_cast<std::uint32_t>(v[2 * k]);
    qps[k].dst_qp = static_cast<std::uint32_t>(v[2 * k + 1]);
  }
}
}  // namespace

void MrcHosts::share() {
  share_qpns(ranks_, qps_);
  if (ranks_ == nullptr) return;
  ranks_->sum(dst_addr_);
  ranks_->sum(dst_rkey_);
}

void MrcHosts::connect(std::size_t k, std::uint32_t sq_psn, std::uint32_t rq_psn) {
  const QpEnds& e = qps_[k];
  auto [ra, rb] = remotes(e, sq_psn, rq_psn);
  ra.peer_mpr_dest = rb.peer_mpr_dest = mpr_;
  ra.peer_max_wimm_dest = rb.peer_max_wimm_dest = qc_.max_wimm_dest;
  if ((eps_[e.src] && eps_[e.src]->connect_qp(e.src_qp, ra, 0) != 0) ||
      (eps_[e.dst] && eps_[e.dst]->connect_qp(e.dst_qp, rb, 0) != 0))
    throw std::runtime_error("run: connect_qp failed");
}

void MrcHosts::post_recv(std::size_t k, std::uint64_t wr_id) {
  const QpEnds& e = qps_[k];
  if (eps_[e.dst] && eps_[e.dst]->post_recv(e.dst_qp, wr_id) != 0)
    throw std::runtime_error("run: post_recv failed");
}

void MrcHosts::post(std::size_t k, engine::SendWr wr, Time now) {
  const QpEnds& e = qps_[k];
  wr.local_addr = reinterpret_cast<std::uint64_t>(src_buf_.data());
  wr.lkey = src_mr_[e.src]->lkey;
  wr.remote_addr = dst_addr_[e.dst];
  wr.rkey = static_cast<std::uint32_t>(dst_rkey_[e.dst]);
  const int rc = eps_[e.src]->post_send(e.src_qp, wr, now);
  if (rc != 0) throw std::runtime_error("run: post_send failed (errno " + std::to_string(rc) + ")");
}

std::uint64_t MrcHosts::bytes_placed(std::size_t k) const {
  if (!eps_[qps_[k].dst]) return 0;
  const engine::Qp* qp = ep(qps_[k].dst).qp(qps_[k].dst_qp);
  return qp != nullptr ? qp->counters().bytes_placed : 0;
}

void MrcHosts::finish(Time now) {
  for (const auto& e : eps_)
    if (e) e->expire_skips(now);
}

void MrcHosts::add_counters(std::size_t k, engine::QpCounters& pc, std::uint64_t& cnp) const {
  (void)cnp;
  const engine::Qp* a = eps_[qps_[k].src] ? ep(qps_[k].src).qp(qps_[k].src_qp) : nullptr;
  const engine::Qp* b = eps_[qps_[k].dst] ? ep(qps_[k].dst).qp(qps_[k].dst_qp) : nullptr;
  if (a != nullptr) {
    const engine::QpCounters& x = a->counters();
    pc.tx_data += x.tx_data;
    pc.tx_rtx += x.tx_rtx;
    pc.timeouts += x.timeouts;
    pc.rtx_nack += x.rtx_nack;
    pc.rtx_loss += x.rtx_loss;
    pc.rtx_timeout += x.rtx_timeout;
    pc.rtx_port += x.rtx_port;
    pc.ev_transitions += x.ev_transitions;
    pc.rtx_spurious += x.rtx_spurious;
  }
  if (b != nullptr) {
    pc.ev_transitions += b->counters().ev_transitions;
    pc.tx_sack += b->counters().tx_sack;
    pc.tx_nack += b->counters().tx_nack;
    pc.rx_dup += b->counters().rx_dup;
  }
}

void MrcHosts::qp_memory_idle(RunResult& r) const {
  std::uint64_t b = 0;
  for (const QpEnds& e : qps_) {
    if (eps_[e.src]) b += ep(e.src).qp(e.src_qp)->memory_bytes();
    if (eps_[e.dst]) b += ep(e.dst).qp(e.dst_qp)->memory_bytes();
  }
  if (ranks_ != nullptr) ranks_->sum(std::span<std::uint64_t>(&b, 1));
  r.qps = 2 * qps_.size();
  r.qp_bytes_idle = r.qps ? static_cast<double>(b) / static_cast<double>(r.qps) : 0;
}

void MrcHosts::qp_memory_end(RunResult& r) const {
  std::uint64_t v[4] = {};  // sender bytes, receiver bytes, senders, receivers
  for (const auto& e : eps_) {
    if (!e) continue;
    for (const std::uint32_t qpn : e->qpns()) {
      const engine::Qp* q = static_cast<const engine::Endpoint&>(*e).qp(qpn);
      const bool sender = q->counters().tx_data > 0;
      v[sender ? 0 : 1] += q->memory_bytes();
      ++v[sender ? 2 : 3];
    }
  }
  if (ranks_ != nullptr) ranks_->sum(v);
  r.qp_bytes_sender = v[2] ? static_cast<double>(v[0]) / static_cast<double>(v[2]) : 0;
  r.qp_bytes_receiver = v[3] ? static_cast<double>(v[1]) / static_cast<double>(v[3]) : 0;
}

// --- RoCEv2 ----------------------------------------------------------------------------------------

std::uint32_t RoceHosts::mtu_wire(const RunConfig& cfg) {
  return cfg.roce.mtu + static_cast<std::uint32_t>(RoceNic::kBthSize + RoceNic::kIcrcSize) +
         cfg.fabric.wire_overhead;
}

std::uint32_t RoceHosts::ack_wire(const RunConfig& cfg) {
  return static_cast<std::uint32_t>(RoceNic::kBthSize + RoceNic::kAethSize + RoceNic::kIcrcSize) +
         cfg.fabric.wire_overhead;
}

RoceHosts::RoceHosts(const HostSetup& s) : planes_(s.topo.planes), ranks_(s.cfg.ranks) {
  RoceConfig rc = s.cfg.roce;
  rc.line_rate_bps = s.topo.links.front().rate_bps;
  rc.wire_overhead = s.cfg.fabric.wire_overhead;
  rc.num_ports = s.topo.planes;
  rc.cnp = rc.dcqcn;
  nics_.resize(s.topo.hosts);
  for (std::uint32_t h = 0; h < s.topo.hosts; ++h) {
    Fabric* net = s.nets[s.part_of_node[h]];
    if (net == nullptr) continue;
    rc.seed = s.cfg.seed * 1000003u + h;
    nics_[h] = std::make_unique<RoceNic>(rc);
    net->attach(h, *nics_[h]);
  }
}

void RoceHosts::create(std::size_t k, std::uint32_t src, std::uint32_t dst, std::uint32_t q) {
  const std::uint32_t port = (q + dst) % planes_;
  QpEnds e{src, dst, 0, 0};
  if (nics_[src]) e.src_qp = nics_[src]->create_qp(port);
  if (nics_[dst]) e.dst_qp = nics_[dst]->create_qp(port);
  if (qps_.size() <= k) qps_.resize(k + 1);
  qps_[k] = e;
}

void RoceHosts::share() {
  share_qpns(ranks_, qps_);
}

void RoceHosts::connect(std::size_t k, std::uint32_t sq_psn, std::uint32_t rq_psn) {
  const QpEnds& e = qps_[k];
  const auto [ra, rb] = remotes(e, sq_psn, rq_psn);
  if ((nics_[e.src] && nics_[e.src]->connect_qp(e.src_qp, ra, 0) != 0) ||
      (nics_[e.dst] && nics_[e.dst]->connect_qp(e.dst_qp, rb, 0) != 0))
    throw std::runtime_error("run: RoCE connect_qp failed");
}

void RoceHosts::post(std::size_t k, engine::SendWr wr, Time now) {
  const int rc = nics_[qps_[k].src]->post_send(qps_[k].src_qp, wr, now);
  if (rc != 0) throw std::runtime_error("run: post_send failed (errno " + std::to_string(rc) + ")");
}

std::uint64_t RoceHosts::bytes_placed(std::size_t k) const {
  if (!nics_[qps_[k].dst]) return 0;
  return nics_[qps_[k].dst]->qp_counters(qps_[k].dst_qp).bytes_received;
}

void RoceHosts::add_counters(std::size_t k, engine::QpCounters& pc, std::uint64_t& cnp) const {
  if (nics_[qps_[k].src]) {
    const RoceQpCounters& a = nics_[qps_[k].src]->qp_counters(qps_[k].src_qp);
    pc.tx_data += a.tx_data;
    pc.tx_rtx += a.tx_rtx;
    pc.timeouts += a.timeouts;
  }
  if (nics_[qps_[k].dst]) {
    const RoceQpCounters& b = nics_[qps_[k].dst]->qp_counters(qps_[k].dst_qp);
    pc.tx_ack += b.tx_ack;
    pc.tx_nack += b.tx_nak;
    cnp += b.tx_cnp;
  }
}

}  // namespace mrc::sim
