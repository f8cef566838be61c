// Endpoint: demultiplexes packets to QPs, schedules transmission across QPs, runs endpoint
// (node-scoped) operations: EV probes and port-status updates.
#include "engine/endpoint.hpp"

#include <algorithm>
#include <cerrno>

#include "engine/qp.hpp"
#include "engine/tx.hpp"

namespace mrc::engine {

namespace {
constexpr std::uint32_t kFirstQpn = 0x10;  // 0..2 are reserved (QPN 2 = endpoint requests)
constexpr std::size_t kMaxEpTx = 1024;

/// IBTA partition rule: same 15-bit key, and at least one side a full member (bit 15).
bool pkey_match(std::uint16_t a, std::uint16_t b) {
  return ((a ^ b) & 0x7FFF) == 0 && ((a | b) & 0x8000) != 0;
}
}  // namespace

/// A queued endpoint packet (EV probe request/response, port-status update).
struct Endpoint::EpTx {
  wire::Packet pkt;
  std::uint32_t peer = 0;
  Ev ev;
  Time arrived = 0;  ///< responses: when the request arrived (service time)
};

Endpoint::Endpoint(const EndpointConfig& cfg)
    : cfg_(cfg),
      memory_(cfg.seed ^ 0x5DEECE66DULL),
      port_up_mask_(cfg.num_ports >= 32 ? 0xFFFFFFFFu : (1u << cfg.num_ports) - 1) {}

Endpoint::~Endpoint() = default;

Qp* Endpoint::qp(std::uint32_t qpn) {
  if (qpn < kFirstQpn || qpn - kFirstQpn >= qps_.size()) return nullptr;
  return qps_[qpn - kFirstQpn].get();
}
const Qp* Endpoint::qp(std::uint32_t qpn) const {
  return const_cast<Endpoint*>(this)->qp(qpn);
}

std::vector<std::uint32_t> Endpoint::qpns() const {
  std::vector<std::uint32_t> v;
  for (std::size_t i = 0; i < qps_.size(); ++i)
    if (qps_[i]) v.push_back(static_cast<std::uint32_t>(kFirstQpn + i));
  return v;
}

bool Endpoint::valid_qp_config(const QpConfig& cfg) const {
  if (cfg.pmtu < 256 || cfg.pmtu > 4096 || (cfg.pmtu & (cfg.pmtu - 1)) != 0) return false;
  if (cfg.mpr == 0 || cfg.mpr_dest == 0 || cfg.max_wimm == 0 || cfg.max_wimm_dest == 0) return false;
  if (cfg.timeout > 24 || cfg.retry_linear > 7 || cfg.retry_exp > 25) return false;
  if (cfg.sq_depth == 0 || cfg.rq_depth == 0 || cfg.sq_depth > (1u << 20) || cfg.rq_depth > (1u << 20))
    return false;
  if (cfg.evs.empty() || cfg.evs.size() >= 0xFFFF || cfg.active_count > cfg.evs.size() ||
      cfg.ev_min_active > cfg.evs.size())
    return false;
  for (const Ev& e : cfg.evs)
    if (e.port >= cfg_.num_ports) return false;
  return true;
}

std::uint32_t Endpoint::create_qp(const QpConfig& cfg, int* err) {
  auto fail = [&](int e) {
    if (err) *err = e;
    return 0u;
  };
  if (!valid_qp_config(cfg)) return fail(EINVAL);
  if (qps_.size() + kFirstQpn > kPsnMask) return fail(ENOMEM);
  const auto qpn = static_cast<std::uint32_t>(kFirstQpn + qps_.size());
  qps_.push_back(std::make_unique<Qp>(*this, qpn, cfg));
  in_ready_.push_back(0);
  if (err) *err = 0;
  return qpn;
}

int Endpoint::destroy_qp(std::uint32_t qpn) {
  Qp* q = qp(qpn);
  if (q == nullptr) return EINVAL;
  tx_ready_.erase(std::remove(tx_ready_.begin(), tx_ready_.end(), q), tx_ready_.end());
  qps_[qpn - kFirstQpn].reset();
  return 0;
}

int Endpoint::reconfigure_qp(std::uint32_t qpn, const QpConfig& cfg) {
  Qp* q = qp(qpn);
  if (q == nullptr || !valid_qp_config(cfg)) return EINVAL;
  if (q->state() != QpState::kReset) return q->reconfigure(cfg);
  tx_ready_.erase(std::remove(tx_ready_.begin(), tx_ready_.end(), q), tx_ready_.end());
  in_ready_[qpn - kFirstQpn] = 0;
  qps_[qpn - kFirstQpn] = std::make_unique<Qp>(*this, qpn, cfg);
  return 0;
}

int Endpoint::modify_to_init(std::uint32_t qpn) {
  Qp* q = qp(qpn);
  return q ? q->to_init() : EINVAL;
}

int Endpoint::modify_to_rtr(std::uint32_t qpn, const QpRemote& remote, Time now) {
  Qp* q = qp(qpn);
  if (q == nullptr) return EINVAL;
  const int rc = q->to_rtr(remote, now);
  if (rc == 0) q->set_peer_ports(q->peer_port_mask(), now);
  if (rc == 0 && remote.auth.on) any_auth_ = true;
  return rc;
}

int Endpoint::modify_to_rts(std::uint32_t qpn, Time now) {
  Qp* q = qp(qpn);
  return q ? q->to_rts(now) : EINVAL;
}

int Endpoint::modify_to_rts(std::uint32_t qpn, std::uint32_t sq_psn, Time now) {
  Qp* q = qp(qpn);
  return q ? q->to_rts(sq_psn, now) : EINVAL;
}

int Endpoint::modify_to_error(std::uint32_t qpn, Time now) {
  Qp* q = qp(qpn);
  if (q == nullptr) return EINVAL;
  q->to_error(now);
  return 0;
}

int Endpoint::connect_qp(std::uint32_t qpn, const QpRemote& remote, Time now) {
  int rc = modify_to_init(qpn);
  if (rc == 0) rc = modify_to_rtr(qpn, remote, now);
  if (rc == 0) rc = modify_to_rts(qpn, now);
  if (rc == 0) {
    // Planes that are down locally are unusable for this QP from the start.
    Qp* q = qp(qpn);
    for (std::uint8_t p = 0; p < cfg_.num_ports; ++p)
      if (!((port_up_mask_ >> p) & 1u)) q->set_plane_usable(p, false, EvCause::kPortDown, now);
  }
  return rc;
}

QpState Endpoint::qp_state(std::uint32_t qpn) const {
  const Qp* q = qp(qpn);
  return q ? q->state() : QpState::kReset;
}

int Endpoint::post_send(std::uint32_t qpn, const SendWr& wr, Time now) {
  Qp* q = qp(qpn);
  return q ? q->post_send(wr, now) : EINVAL;
}

int Endpoint::post_recv(std::uint32_t qpn, std::uint64_t wr_id) {
  Qp* q = qp(qpn);
  return q ? q->post_recv(wr_id) : EINVAL;
}

bool Endpoint::poll_completion(Completion& out) {
  if (completions_.empty()) return false;
  out = completions_.front();
  completions_.pop_front();
  return true;
}

bool Endpoint::poll_event(Event& out) {
  if (events_.empty()) return false;
  out = events_.front();
  events_.pop_front();
  return true;
}

void Endpoint::mark_tx_ready(Qp* q) {
  const std::uint32_t i = q->qpn() - kFirstQpn;
  if (in_ready_[i]) return;
  in_ready_[i] = 1;
  tx_ready_.push_back(q);
}

void Endpoint::receive(std::span<const std::uint8_t> pkt, const RxMeta& meta, Time now) {
  wire::Packet p;
  wire::DecodeOptions opt;
  opt.trimmed = meta.trimmed || meta.trimmed_lasthop;
  opt.verify_icrc = cfg_.icrc && !opt.trimmed;
  if (any_auth_ && !authenticate(pkt, opt)) return;
  if (wire::decode(pkt, p, opt) != wire::Error::kOk) {
    ++counters_.rx_bad_packet;
    return;
  }
  if (p.bth.dest_qp == wire::kEpQpn) {
    handle_endpoint_packet(p, meta, now);
    return;
  }
  Qp* q = qp(p.bth.dest_qp);
  if (q == nullptr || q->state() == QpState::kReset || q->state() == QpState::kInit) {
    ++counters_.rx_unknown_qp;
    return;
  }
  // Only the connected peer may talk to a QP, with the QP's partition key.
  if (meta.peer != q->remote().peer) {
    ++counters_.rx_wrong_peer;
    return;
  }
  if (!pkey_match(p.bth.pkey, q->config().pkey)) {
    ++counters_.rx_bad_pkey;
    return;
  }
  q->on_packet(p, meta, now);
}

bool Endpoint::authenticate(std::span<const std::uint8_t>& pkt, wire::DecodeOptions& opt) {
  if (pkt.size() < 8) return true;  // no BTH: decode refuses it
  const Qp* q = qp((std::uint32_t{pkt[5]} << 16) | (std::uint32_t{pkt[6]} << 8) | pkt[7]);
  if (q == nullptr || !q->remote().auth.on) return true;
  // A trimmed packet lost its tag with its payload, so it cannot be told from a forgery: dropped,
  // the sender recovers it as a loss.
  if (opt.trimmed || !mac_valid(q->remote().auth.rx, pkt)) {
    ++counters_.rx_auth_failed;
    return false;
  }
  // Decode the rest as if the first tag bytes were the ICRC field, which is then not checked.
  pkt = pkt.first(pkt.size() - kMacSize + wire::kIcrcSize);
  opt.verify_icrc = false;
  return true;
}

bool Endpoint::poll_tx(TxPacket& out, Time now, std::uint32_t free_ports) {
  if ((free_ports & port_up_mask_) == 0) return false;
  if (!ep_tx_.empty() && poll_ep_tx(out, now, free_ports)) return true;
  std::size_t n = tx_ready_.size();
  for (std::size_t tried = 0; tried < n;) {
    if (tx_rr_ >= tx_ready_.size()) tx_rr_ = 0;
    Qp* q = tx_ready_[tx_rr_];
    if (q->poll_tx(out, now, free_ports)) {
      ++tx_rr_;
      return true;
    }
    if (!q->wants_tx()) {
      in_ready_[q->qpn() - kFirstQpn] = 0;
      tx_ready_[tx_rr_] = tx_ready_.back();
      tx_ready_.pop_back();
      --n;
      continue;
    }
    ++tx_rr_;
    ++tried;
  }
  return false;
}

Time Endpoint::next_deadline() const {
  Time t = kNever;
  for (const auto& q : qps_)
    if (q) t = std::min(t, q->next_deadline());
  for (const PendingProbe& p : probes_) t = std::min(t, p.deadline);
  return t;
}

void Endpoint::on_timer(Time now) {
  for (const auto& q : qps_)
    if (q && q->next_deadline() <= now) q->on_timer(now);
  for (std::size_t i = 0; i < probes_.size();) {
    if (probes_[i].deadline > now) {
      ++i;
      continue;
    }
    Event e;
    e.type = EventType::kEvProbeTimeout;
    e.peer = probes_[i].peer;
    e.req_id = probes_[i].req_id;
    e.ev = probes_[i].ev;
    e.time = now;
    push_event(e);
    probes_[i] = probes_.back();
    probes_.pop_back();
  }
}

void Endpoint::set_port_up(std::uint8_t port, bool up, Time now) {
  if (port >= cfg_.num_ports || ((port_up_mask_ >> port) & 1u) == up) return;
  if (up)
    port_up_mask_ |= 1u << port;
  else
    port_up_mask_ &= ~(1u << port);
  std::vector<std::uint32_t> peers;
  for (const auto& q : qps_) {
    if (!q || (q->state() != QpState::kRtr && q->state() != QpState::kRts)) continue;
    if (((q->peer_port_mask() >> port) & 1u) != 0)
      q->set_plane_usable(port, up, up ? EvCause::kPortUp : EvCause::kPortDown, now);
    if (std::find(peers.begin(), peers.end(), q->remote().peer) == peers.end())
      peers.push_back(q->remote().peer);
  }
  // Tell every peer at once so they stop (or resume) sending to this plane.
  for (const std::uint32_t peer : peers) send_port_status(peer, now);
}

int Endpoint::send_ev_probe(std::uint32_t peer, const Ev& ev, std::uint16_t req_id, Duration timeout,
                            Time now) {
  if (ev.port >= cfg_.num_ports) return EINVAL;
  if (!((port_up_mask_ >> ev.port) & 1u)) return ENETDOWN;
  for (const PendingProbe& p : probes_)
    if (p.peer == peer && p.req_id == req_id) return EBUSY;
  if (ep_tx_.size() >= kMaxEpTx) return EAGAIN;
  auto t = std::make_unique<EpTx>();
  t->pkt.bth.opcode = wire::Opcode::kEndpointRequest;
  t->pkt.bth.dest_qp = wire::kEpQpn;
  t->pkt.bth.psn = req_id;
  t->pkt.erth.op = wire::EpOp::kEvProbe;
  t->pkt.erth.entropy = ev.value;
  t->peer = peer;
  t->ev = ev;
  ep_tx_.push_back(std::move(t));
  probes_.push_back(PendingProbe{peer, req_id, ev, now, now + timeout});
  return 0;
}

int Endpoint::send_port_status(std::uint32_t peer, Time now) {
  (void)now;
  // Sent on every usable port: any one copy arriving is enough.
  for (std::uint8_t p = 0; p < cfg_.num_ports; ++p) {
    if (!((port_up_mask_ >> p) & 1u)) continue;
    if (ep_tx_.size() >= kMaxEpTx) return EAGAIN;
    auto t = std::make_unique<EpTx>();
    t->pkt.bth.opcode = wire::Opcode::kEndpointRequest;
    t->pkt.bth.dest_qp = wire::kEpQpn;
    t->pkt.erth.op = wire::EpOp::kPortStatusUpdate;
    t->pkt.erth.port_status_mask = port_up_mask_;
    t->peer = peer;
    t->ev = Ev{0, p};
    ep_tx_.push_back(std::move(t));
  }
  return 0;
}

void Endpoint::handle_endpoint_packet(const wire::Packet& p, const RxMeta& meta, Time now) {
  if (p.bth.opcode == wire::Opcode::kEndpointRequest) {
    if (p.erth.op == wire::EpOp::kPortStatusUpdate) {
      // The update is sent on every usable port; act on (and report) each change once.
      auto known = std::find_if(peer_ports_.begin(), peer_ports_.end(),
                                [&](const auto& pp) { return pp.first == meta.peer; });
      if (known != peer_ports_.end() && known->second == p.erth.port_status_mask) return;
      if (known == peer_ports_.end())
        peer_ports_.emplace_back(meta.peer, p.erth.port_status_mask);
      else
        known->second = p.erth.port_status_mask;
      Event e;
      e.type = EventType::kPortStatus;
      e.peer = meta.peer;
      e.port_mask = p.erth.port_status_mask;
      e.time = now;
      push_event(e);
      for (const auto& q : qps_)
        if (q && q->remote().peer == meta.peer &&
            (q->state() == QpState::kRtr || q->state() == QpState::kRts))
          q->set_peer_ports(p.erth.port_status_mask, now);
      return;  // not answered: the sender repeats it on every port instead
    }
    if (ep_tx_.size() >= kMaxEpTx) return;
    // EV probe: answer on the plane it came in on, reflecting its EV.
    auto t = std::make_unique<EpTx>();
    t->pkt.bth.opcode = wire::Opcode::kEndpointResponse;
    t->pkt.bth.dest_qp = wire::kEpQpn;
    t->pkt.bth.psn = p.bth.psn;
    t->pkt.eeth.op = p.erth.op;
    t->pkt.eeth.entropy = p.erth.entropy;
    t->pkt.eeth.tx_timestamp = p.erth.tx_timestamp;
    t->pkt.eeth.port_status_mask = port_up_mask_;
    t->peer = meta.peer;
    t->ev = Ev{meta.ev, meta.port};
    t->arrived = now;
    ep_tx_.push_back(std::move(t));
    return;
  }
  if (p.bth.opcode != wire::Opcode::kEndpointResponse) return;
  const auto req_id = static_cast<std::uint16_t>(p.bth.psn & 0xFFFF);
  for (std::size_t i = 0; i < probes_.size(); ++i) {
    const PendingProbe& pp = probes_[i];
    if (pp.peer != meta.peer || pp.req_id != req_id) continue;
    Event e;
    e.type = EventType::kEvProbeResponse;
    e.peer = meta.peer;
    e.req_id = req_id;
    e.ev = pp.ev;
    e.port_mask = p.eeth.port_status_mask;
    e.time = now;
    const Duration svc = p.eeth.svc_time_valid ? p.eeth.svc_time_ns : 0;
    e.rtt_ns = now > pp.sent + svc ? now - pp.sent - svc : 0;
    e.adj_svc_time = p.eeth.svc_time_valid;
    push_event(e);
    probes_[i] = probes_.back();
    probes_.pop_back();
    return;
  }
}

bool Endpoint::poll_ep_tx(TxPacket& out, Time now, std::uint32_t free_ports) {
  for (auto it = ep_tx_.begin(); it != ep_tx_.end(); ++it) {
    EpTx& t = **it;
    if (!((free_ports & port_up_mask_) >> t.ev.port & 1u)) continue;
    if (t.pkt.bth.opcode == wire::Opcode::kEndpointResponse) {
      t.pkt.eeth.svc_time_ns = static_cast<std::uint32_t>(std::min<Duration>(now - t.arrived, 0xFFFFFFFFu));
      t.pkt.eeth.svc_time_valid = true;
    } else {
      t.pkt.erth.tx_timestamp = static_cast<std::uint16_t>(now / wire::kTsUnitNs);
      // The probe clock starts when the request actually leaves.
      for (PendingProbe& pp : probes_)
        if (pp.peer == t.peer && pp.req_id == (t.pkt.bth.psn & 0xFFFF)) pp.sent = now;
    }
    const bool ok = encode_tx(out, t.pkt, cfg_.icrc);
    out.ev = t.ev;
    out.port = t.ev.port;
    out.peer = t.peer;
    out.qpn = 0;
    out.tc = TrafficClass::kControl;
    ep_tx_.erase(it);
    if (!ok) ++counters_.tx_encode_errors;
    return ok;
  }
  return false;
}

}  // namespace mrc::engine
