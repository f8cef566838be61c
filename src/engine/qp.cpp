// QP lifecycle, timers and the transmit scheduler shared by the requester and responder halves.
#include "engine/qp.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>

#include "engine/tx.hpp"

namespace mrc::engine {

Qp::Qp(Endpoint& ep, std::uint32_t qpn, const QpConfig& cfg)
    : ep_(ep),
      qpn_(qpn),
      cfg_(cfg),
      cc_(cfg.cc),
      rng_(cfg.seed ^ (0x9E3779B97F4A7C15ULL * qpn)),
      rtt_(cfg.cc.algorithm == cc::Algorithm::kNscc ? cfg.cc.nscc.base_rtt_ns
                                                    : ep.config().tun.base_rtt_hint),
      rx_(ep, qpn, cfg_, ctr_) {
  EvManager::Params p;
  p.min_active = cfg.ev_min_active;
  p.probe_success_threshold = ep.config().tun.probe_success_threshold;
  p.burst = ep.config().tun.ev_burst;
  evm_.init(cfg.evs, cfg.active_count, ep.config().num_ports, p, rng_.next(), &Qp::ev_sink, this);
  std::vector<Ev>().swap(cfg_.evs);  // the EV manager holds them now (a 128-EV copy is 1 KB per QP)
  update_timing();
  update_pto();
  planes_.init(ep.config().num_ports);
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
  update_window();
  rx_.start(r.rq_psn);
  state_ = QpState::kRtr;
  return 0;
}

int Qp::to_rts(Time now) {
  if (state_ != QpState::kRtr) return EINVAL;
  // The send queue and the PSN ring are allocated by the first post_send: a QP that only
  // receives (half of all QPs in a permutation) never needs them.
  snd_una_ = snd_nxt_ = remote_.sq_psn;
  sent_.start(snd_una_);
  last_progress_ = now;
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
  fail_all(WcStatus::kFlushed, kNil, now);
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
  update_window();
  cfg_.max_wimm = cfg.max_wimm;
  cfg_.timeout = cfg.timeout;
  cfg_.retry_linear = cfg.retry_linear;
  cfg_.retry_exp = cfg.retry_exp;
  return 0;
}

void Qp::update_window() {
  std::uint32_t units = std::min<std::uint32_t>(cfg_.mpr, remote_.peer_mpr_dest);
  if (peer_mpr_adv_ != 0) units = std::min<std::uint32_t>(units, peer_mpr_adv_);
  window_psns_ = units * kMprUnit;
}

std::uint32_t Qp::usable_ports(std::uint32_t free_ports) const {
  return free_ports & ep_.port_mask() & peer_ports_;
}

void Qp::update_timing() {
  const Tunables& t = ep_.config().tun;
  evm_.set_timing(t.skip_duration ? t.skip_duration : rtt_.base(),
                  t.probe_interval ? t.probe_interval : 4 * rtt_.base());
}

void Qp::on_rtt_sample(Duration rtt) {
  if (rtt_.on_sample(rtt)) update_timing();
  update_pto();
}

Duration Qp::reorder_window() const {
  const Duration w = ep_.config().tun.reorder_window;
  return w ? w : rtt_.reorder_window();
}

Duration Qp::tail_probe_delay() const {
  const Duration d = ep_.config().tun.tail_probe_delay;
  return d ? d : rtt_.tail_probe_delay(reorder_window());
}

Duration Qp::rto() const {
  if (cfg_.timeout == 0) return kNever;  // IB convention: 0 = wait forever
  const Duration base = 1024ULL << std::min<std::uint32_t>(cfg_.timeout, 24);
  if (retries_ < cfg_.retry_linear) return base;
  const std::uint32_t k = std::min<std::uint32_t>(retries_ - cfg_.retry_linear + 1, 10);
  return base << k;
}

void Qp::ev_sink(void* ctx, const EvManager::Transition& t, Time now) {
  static_cast<Qp*>(ctx)->emit_ev_event(t, now);
}

void Qp::emit_ev_event(const EvManager::Transition& t, Time now) {
  ++ctr_.ev_transitions;
  Event e;
  e.type = EventType::kEvState;
  e.qpn = qpn_;
  e.ev = t.ev;
  e.from = t.from;
  e.to = t.to;
  e.cause = t.cause;
  e.time = now;
  e.peer = remote_.peer;
  ep_.push_event(e);
}

void Qp::set_plane_usable(std::uint8_t port, bool usable, EvCause cause, Time now) {
  (void)cause;
  evm_.set_port_usable(port, usable, now);
  if (!usable) resend_in_flight_on(port, now);
  ep_.mark_tx_ready(this);
}

void Qp::resend_in_flight_on(std::uint8_t port, Time now) {
  // Packets in flight on a plane that failed are gone: resend them elsewhere right away instead
  // of waiting a reorder window for each.
  if (state_ != QpState::kRts) return;
  std::uint32_t psn = sent_.oldest();
  while (psn != SentPackets::kNone) {
    const TxRec& r = rec(psn);
    const std::uint32_t next = r.next;
    if (r.ev_slot != EvManager::kNone && evm_.ev(r.ev_slot).port == port)
      mark_lost(psn, LossCause::kPort, now);
    psn = next;
  }
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

bool Qp::wants_tx() const {
  if (state_ == QpState::kReset || state_ == QpState::kInit) return false;
  if (!ctrl_.empty()) return true;
  if (state_ != QpState::kRts) return false;
  return sent_.lost() > 0 || sq_unsent_ > 0 || !dup_queue_.empty() || tail_probe_at_ != kNever ||
         evm_.next_probe_time() != kNever;
}

std::size_t Qp::memory_bytes() const {
  return sizeof(Qp) + evm_.heap_bytes() + cfg_.evs.capacity() * sizeof(Ev) + sq_.memory_bytes() +
         sent_.memory_bytes() + probes_.capacity() * sizeof(Probe) + planes_.heap_bytes() + rx_.heap_bytes() +
         ctrl_.memory_bytes() + dup_queue_.memory_bytes() + dup_sent_.capacity() * 4;
}

Time Qp::next_deadline() const {
  if (state_ != QpState::kRts) return kNever;
  Time t = kNever;
  if (!sent_.none_in_flight()) {
    const Duration r = rto();
    if (r != kNever) t = std::min(t, sent_.rec(sent_.oldest()).sent + r);
    if (tail_probe_at_ > timer_seen_) t = std::min(t, tail_probe_at_);
    t = std::min(t, rack_.timer());
  }
  t = std::min(t, evm_.next_skip_expiry());
  if (evm_.next_probe_time() > timer_seen_) t = std::min(t, evm_.next_probe_time());
  t = std::min(t, fatal_fail_at_);
  const Duration probe_timeout = rtt_.probe_wait();
  if (live_probes_ > 0)
    for (const Probe& p : probes_)
      if (p.live) t = std::min(t, p.sent + probe_timeout);
  return t;
}

void Qp::on_timer(Time now) {
  if (state_ != QpState::kRts) return;
  timer_seen_ = now;
  evm_.expire_skips(now);
  const Duration probe_timeout = rtt_.probe_wait();
  for (Probe& p : probes_) {
    if (live_probes_ == 0) break;
    if (!p.live || p.sent + probe_timeout > now) continue;
    p.live = false;
    --live_probes_;
    if (!p.tail && p.ev_slot != EvManager::kNone) evm_.on_probe_failure(p.ev_slot, now);
  }
  if (rack_.timer() <= now) detect_losses(now);
  if (!sent_.none_in_flight()) {
    const Duration r = rto();
    if (r != kNever && rec(sent_.oldest()).sent + r <= now) on_rto(now);
  }
  if (fatal_fail_at_ <= now) check_fatal_nak(now);
  if (state_ != QpState::kRts) return;
  ep_.mark_tx_ready(this);
}

bool Qp::poll_tx(TxPacket& out, Time now, std::uint32_t free_ports) {
  if (state_ == QpState::kReset || state_ == QpState::kInit) return false;
  const std::uint32_t ports = usable_ports(free_ports);
  if (ports == 0) return false;
  // Control (SACK/NACK/NAK) goes first: the responder's feedback never waits behind data. A backlog
  // of it (a peer's probe flood, a window of trim NACKs) must not starve this QP's own requests
  // though: after kCtrlRun control packets in a row the requester gets a turn (D14).
  if (!ctrl_.empty() && ctrl_run_ < kCtrlRun && poll_ctrl(out, ports, now)) {
    ++ctrl_run_;
    return true;
  }
  ctrl_run_ = 0;
  if (state_ == QpState::kRts && poll_requester(out, ports, now)) return true;
  if (ctrl_.empty() || !poll_ctrl(out, ports, now)) return false;
  ctrl_run_ = 1;
  return true;
}

bool Qp::poll_ctrl(TxPacket& out, std::uint32_t ports, Time now) {
  const CtrlTx c = ctrl_.front();
  sack_more_ = false;
  if (!build_ctrl(out, c, ports, now)) return false;
  ctrl_.pop_front();
  if (sack_more_) {
    // The rest of the arrivals (D3). It answers no packet: no trigger, no echo, no probe (the
    // trigger's PSN may be a probe's, which a later data packet takes, D22).
    CtrlTx more;
    more.op = wire::Opcode::kSack;
    more.no_trigger = true;
    more.port = c.port;
    more.entropy = c.entropy;
    more.arrived = now;
    queue_ctrl(more);
  }
  return true;
}

bool Qp::poll_requester(TxPacket& out, std::uint32_t ports, Time now) {
  evm_.expire_skips(now);
  // 1. Probes: ASSUMED_BAD EVs due for a probe, a bounded number at a time, so that many bad EVs
  //    cannot flood the peer (whose answers, late, would fail the probes and keep the EVs bad);
  //    then a tail-loss probe after silence.
  const std::uint16_t due =
      live_probes_ < ep_.config().tun.probes_in_flight ? evm_.next_probe_due(now) : EvManager::kNone;
  if (due != EvManager::kNone && ((ports >> evm_.ev(due).port) & 1u)) {
    if (send_probe(out, due, false, now)) return true;
  }
  if (tail_probe_at_ <= now) {
    if (sent_.none_in_flight()) {
      tail_probe_at_ = kNever;
    } else {
      // Tail-loss probe (D43): no SACK for the newest packet within a PTO. Resend it (RFC 8985's
      // TLP): if it was lost the resend repairs it; either way its SACK, which names the resend,
      // lets RACK judge every packet sent before.
      if (tlp_backoff_ < 4) ++tlp_backoff_;
      update_pto();
      mark_lost(sent_.newest(), LossCause::kTail, now);
      tail_probe_at_ = now + pto_;
    }
  }
  // 2. Retransmissions, oldest gap first.
  std::uint32_t psn = 0;
  if (sent_.lost() > 0 && sent_.next_lost(snd_una_, snd_nxt_, psn)) {
    const TxRec& r = rec(psn);
    // A (dynamic) MPR shrink can leave lost packets past the window edge: they wait.
    if (static_cast<std::uint32_t>(psn_diff(psn, snd_una_)) >= window_psns()) return false;
    if (!cc_.can_send(r.len + kPktOverhead)) return false;
    const std::uint16_t slot = evm_.pick_proven(ports, r.sent);
    if (slot == EvManager::kNone) return false;
    // D56: the previous copy went on a plane now known failed: a second copy follows.
    const bool dup = ep_.config().tun.failover_dup && r.ev_slot != EvManager::kNone &&
                     plane_failed(evm_.ev(r.ev_slot).port) && blame_.lossy(ctr_.tx_data);
    if (!build_data(out, psn, true, slot, now)) return false;
    if (dup) queue_dup(psn);
    return true;
  }
  // 2b. Second copies of failover retransmissions (D56), before new data.
  if (!dup_queue_.empty() && poll_dup(out, ports)) return true;
  // 3. New data within the MPR window, the WIMM limit and the congestion window.
  if (sq_unsent_ == 0) return false;
  if (static_cast<std::uint32_t>(psn_diff(snd_nxt_, snd_una_)) >= window_psns()) return false;
  SendWqe& w = sq_.slot(sq_seg_);
  if (w.sent_pkts == 0 && w.wr.with_imm &&
      wimm_outstanding_ >= std::min<std::uint32_t>(cfg_.max_wimm, remote_.peer_max_wimm_dest))
    return false;
  const std::uint32_t offset = w.sent_pkts * cfg_.pmtu;
  const std::uint32_t len = std::min(cfg_.pmtu, w.wr.length - std::min(w.wr.length, offset));
  if (!cc_.can_send(len + kPktOverhead)) return false;
  const std::uint16_t slot = evm_.pick(ports);
  if (slot == EvManager::kNone) return false;
  if (static_cast<std::uint32_t>(psn_diff(snd_nxt_, snd_una_)) >= sent_.slots())
    sent_.grow(snd_una_, snd_nxt_);
  psn = snd_nxt_;
  snd_nxt_ = psn_add(snd_nxt_, 1);
  if (w.sent_pkts == 0) {
    w.first_psn = psn;
    if (w.wr.with_imm) ++wimm_outstanding_;
  }
  TxRec& r = rec(psn);
  r = TxRec{};
  r.wqe = sq_seg_;
  r.offset = offset;
  r.len = len;
  if (++w.sent_pkts == w.npkts) {
    sq_seg_ = sq_.next_slot(sq_seg_);
    --sq_unsent_;
  }
  return build_data(out, psn, false, slot, now);
}

bool Qp::finish_tx(TxPacket& out, const wire::Packet& p, std::uint16_t slot, TrafficClass tc) {
  out.wire_ext = ep_.config().wire_ext && remote_.wire_ext;
  if (!encode_tx(out, p, ep_.config().icrc, remote_.auth.on ? &remote_.auth.tx : nullptr)) {
    ++ctr_.tx_encode_errors;
    return false;
  }
  out.ev = evm_.ev(slot);
  out.port = out.ev.port;
  out.peer = remote_.peer;
  out.qpn = qpn_;
  out.tc = tc;
  return true;
}

}  // namespace mrc::engine
