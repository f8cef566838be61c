// QP lifecycle, the transmit scheduler (control replies or the requester's packets) and what the
// QP passes on to its Requester: timers, plane changes, EV events.
#include "engine/qp.hpp"

#include <algorithm>
#include <cerrno>

#include "engine/tx.hpp"

namespace mrc::engine {

Qp::Qp(Endpoint& ep, std::uint32_t qpn, const QpConfig& cfg)
    : ep_(ep),
      qpn_(qpn),
      cfg_(cfg),
      rng_(cfg.seed ^ (0x9E3779B97F4A7C15ULL * qpn)),
      req_(*this, ep, qpn, cfg_, remote_, ctr_),
      rx_(ep, qpn, cfg_, ctr_) {
  EvManager::Params p;
  p.min_active = cfg.ev_min_active;
  p.probe_success_threshold = ep.config().tun.probe_success_threshold;
  p.burst = ep.config().tun.ev_burst;
  req_.evs().init(ep.shared_ev_table(cfg.evs, cfg.active_count), p, rng_.next(), &Qp::ev_sink, this);
  std::vector<Ev>().swap(cfg_.evs);  // the EV manager has them (shared with the endpoint's other QPs)
  req_.update_timing();
}

int Qp::to_init() {
  if (state_ != QpState::kReset) return EINVAL;
  state_ = QpState::kInit;
  return 0;
}

int Qp::to_rtr(const QpRemote& r, Time now) {
  (void)now;
  if (state_ != QpState::kInit) return EINVAL;
  if (r.qpn > kPsnMask || r.rq_psn > kPsnMask || r.sq_psn > kPsnMask || r.peer_mpr_dest == 0 ||
      r.peer_max_wimm_dest == 0)
    return EINVAL;
  remote_ = r;
  wire_ext_ = r.wire_ext;
  auth_on_ = r.auth.on;
  peer_ = r.peer;
  dest_qpn_ = r.qpn;
  req_.update_window();
  rx_.start(r.rq_psn);
  state_ = QpState::kRtr;
  return 0;
}

int Qp::to_rts(Time now) {
  if (state_ != QpState::kRtr) return EINVAL;
  req_.start(now);
  state_ = QpState::kRts;
  return 0;
}

int Qp::to_rts(std::uint32_t sq_psn, Time now) {
  if (state_ != QpState::kRtr || sq_psn > kPsnMask) return EINVAL;
  remote_.sq_psn = sq_psn;
  return to_rts(now);
}

void Qp::to_error(Time now) {
  if (state_ == QpState::kError) return;
  fail_all(WcStatus::kFlushed, Requester::kNil, now);
}

void Qp::fail_all(WcStatus first_status, std::uint32_t failing_wqe, Time now) {
  const bool had_state = state_ != QpState::kError;
  state_ = QpState::kError;
  req_.fail_all(first_status,
                failing_wqe);  // its completions first: the send queue's, then the receive queue's
  rx_.flush_recvs();
  ctrl_.clear();
  if (had_state) {
    Event e;
    e.type = EventType::kQpError;
    e.qpn = qpn_;
    e.time = now;
    e.peer = peer_;
    ep_.push_event(e);
  }
}

int Qp::reconfigure(const QpConfig& cfg) {
  if (state_ != QpState::kInit && state_ != QpState::kRtr) return EINVAL;
  if (state_ == QpState::kInit) {
    cfg_.pmtu = cfg.pmtu;
    cfg_.mpr_dest = cfg.mpr_dest;
    cfg_.max_wimm_dest = cfg.max_wimm_dest;
    cfg_.trim_nack_dest_supported = cfg.trim_nack_dest_supported;
    cfg_.pkey = cfg.pkey;
    rx_.refresh();
  }
  cfg_.mpr = cfg.mpr;
  req_.update_window();
  cfg_.max_wimm = cfg.max_wimm;
  cfg_.timeout = cfg.timeout;
  cfg_.retry_linear = cfg.retry_linear;
  cfg_.retry_exp = cfg.retry_exp;
  return 0;
}

int Qp::post_send(const SendWr& wr, Time now) {
  if (state_ != QpState::kRts) return EINVAL;
  return req_.post_send(wr, now);
}

void Qp::ev_sink(void* ctx, const EvManager::Transition& t, Time now) {
  static_cast<Qp*>(ctx)->emit_ev_event(t, now);
}

void Qp::emit_ev_event(const EvManager::Transition& t, Time now) {
  ++ctr_.ev_transitions;
  if (!ep_.config().events) return;
  Event e;
  e.type = EventType::kEvState;
  e.qpn = qpn_;
  e.ev = t.ev;
  e.from = t.from;
  e.to = t.to;
  e.cause = t.cause;
  e.time = now;
  e.peer = peer_;
  ep_.push_event(e);
}

void Qp::set_plane_usable(std::uint8_t port, bool usable, EvCause cause, Time now) {
  (void)cause;
  req_.evs().set_port_usable(port, usable, now);  // applies the SKIP expiries due first
  if (!usable && state_ == QpState::kRts) req_.resend_in_flight_on(port, now);
  ep_.mark_tx_ready(this);
}

void Qp::set_peer_ports(std::uint32_t mask, Time now) {
  const std::uint32_t changed = mask ^ peer_ports_;
  peer_ports_ = mask;
  for (std::uint8_t p = 0; p < ep_.config().num_ports; ++p) {
    if (!((changed >> p) & 1u)) continue;
    const bool up = (mask >> p) & 1u;
    if (((ep_.port_mask() >> p) & 1u) == 0) continue;  // locally down anyway
    set_plane_usable(p, up, up ? EvCause::kPortUp : EvCause::kPortDown, now);
  }
}

std::size_t Qp::memory_bytes() const {
  return sizeof(Qp) + req_.heap_bytes() + cfg_.evs.capacity() * sizeof(Ev) + rx_.heap_bytes() +
         ctrl_.memory_bytes();
}

void Qp::on_timer(Time now) {
  if (state_ != QpState::kRts) return;
  req_.on_timer(now);
  if (state_ != QpState::kRts) return;  // the RTO's retries ran out, or a fatal NAK was confirmed
  ep_.mark_tx_ready(this);
}

namespace {
// Every cache line of [first, end).
void prefetch_lines(const void* first, const void* end) {
  const auto* b =
      reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(first) & ~std::uintptr_t{63});
  for (; b < static_cast<const char*>(end); b += 64) __builtin_prefetch(b);
}
}  // namespace

void Qp::prefetch_rx(bool feedback, bool macs) const {
  // Addresses only: a read of a field (auth_on_) would wait for the very line being fetched, and
  // the event before this packet's arrival, which this prefetch is meant to overlap, with it.
  prefetch_lines(this, &cfg_.evs);                                   // identity, state and the remote copies
  prefetch_lines(&ctr_.rx_data, &ctr_.rtx_nack);                     // the rx counters
  if (macs) prefetch_lines(&remote_.auth.rx, &remote_.auth.rx + 1);  // the MAC key
  if (feedback) {
    prefetch_lines(&req_, &req_ + 1);
  } else {
    prefetch_lines(&ctrl_, this + 1);
    req_.prefetch_deadline();  // the endpoint asks for it afterwards
  }
}

void Qp::prefetch_tx_lines() const {
  prefetch_lines(this, &cfg_.evs);           // identity, state and the remote copies
  prefetch_lines(&ctr_, &ctr_.rx_data);      // the tx counters
  prefetch_lines(&peer_ports_, &ctrl_run_);  // the requester and the control queue
}

void Qp::prefetch_tx_records() const {
  if (!ctrl_.empty()) __builtin_prefetch(&ctrl_.front());
  req_.prefetch_records();
}

bool Qp::poll_tx(TxPacket& out, Time now, std::uint32_t free_ports) {
  if (state_ == QpState::kReset || state_ == QpState::kInit) return false;
  const std::uint32_t ports = usable_ports(free_ports);
  if (ports == 0) return false;
  req_.evs().expire_skips(now);  // before a control packet picks its EV
  // Control (SACK/NACK/NAK) goes first: the responder's feedback never waits behind data. A backlog
  // of it (a peer's probe flood, a window of trim NACKs) must not starve this QP's own requests
  // though: after kCtrlRun control packets in a row the requester gets a turn (D14).
  if (!ctrl_.empty() && ctrl_run_ < kCtrlRun && poll_ctrl(out, ports, now)) {
    ++ctrl_run_;
    return true;
  }
  ctrl_run_ = 0;
  if (state_ == QpState::kRts && req_.poll(out, ports, now)) return true;
  if (ctrl_.empty() || !poll_ctrl(out, ports, now)) return false;
  ctrl_run_ = 1;
  return true;
}

bool Qp::poll_ctrl(TxPacket& out, std::uint32_t ports, Time now) {
  const CtrlTx c = ctrl_.front();
  sack_more_ = false;
  if (!build_ctrl(out, c, ports, now)) return false;
  ctrl_.pop_front();
  // The rest of the arrivals (D3). It answers no packet (the trigger's PSN may be a probe's, which
  // a later data packet takes, D22).
  if (sack_more_) queue_untriggered_sack(c.port, c.entropy, now);
  return true;
}

bool Qp::finish_tx(TxPacket& out, const wire::Packet& p, std::uint16_t slot, TrafficClass tc) {
  out.wire_ext = ep_.config().wire_ext && wire_ext_;
  if (!encode_tx(out, p, ep_.config().icrc, auth_on_ ? &remote_.auth.tx : nullptr)) {
    ++ctr_.tx_encode_errors;
    return false;
  }
  out.ev = req_.evs().ev(slot);
  out.port = out.ev.port;
  out.peer = peer_;
  out.qpn = qpn_;
  out.tc = tc;
  return true;
}

}  // namespace mrc::engine
