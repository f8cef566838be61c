// Endpoint: demultiplexes packets to QPs, schedules transmission across QPs, runs endpoint
// (node-scoped) operations: EV probes and port-status updates.
#include "engine/endpoint.hpp"

#include <algorithm>
#include <cassert>
#include <cerrno>

#include "engine/qp.hpp"
#include "engine/tx.hpp"

namespace mrc::engine {

namespace {
constexpr std::size_t kMaxEpTx = 1024;
constexpr std::size_t kMaxVerify = 64;               ///< port-status checks outstanding (D40)
constexpr std::uint32_t kVerifyProbeBit = 1u << 23;  ///< BTH.PSN of our own checks; API probes are < 2^16
constexpr Duration kVerifyTimeout = 100'000'000;     ///< 100 ms

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
      port_up_mask_(cfg.num_ports >= 32 ? 0xFFFFFFFFu : (1u << cfg.num_ports) - 1),
      rng_(cfg.seed ^ 0x9E3779B97F4A7C15ULL) {}

Endpoint::~Endpoint() = default;

void Endpoint::refresh_deadlines() const {
  for (const std::uint32_t i : dirty_) {
    slot_[i].dirty = 0;
    const Qp* q = qps_[i].get();
    due_.set(i, q != nullptr ? q->next_deadline() : kNever);
  }
  dirty_.clear();
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
  std::uint8_t max_port = 0;  // without an early exit (vectorised): a bad port is the exception
  for (const Ev& e : cfg.evs) max_port = std::max(max_port, e.port);
  return max_port < cfg_.num_ports;
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
  slot_.push_back(QpSlot{});
  due_.add_index();
  if (err) *err = 0;
  return qpn;
}

std::shared_ptr<const EvManager::Table> Endpoint::shared_ev_table(std::span<const Ev> evs,
                                                                  std::uint32_t active_count) {
  if (!last_ev_table_ || !EvManager::same_table(*last_ev_table_, evs, active_count))
    last_ev_table_ = EvManager::make_table(evs, active_count, cfg_.num_ports);
  return last_ev_table_;
}

int Endpoint::destroy_qp(std::uint32_t qpn) {
  Qp* q = qp(qpn);
  if (q == nullptr) return EINVAL;
  tx_ready_.erase(std::remove(tx_ready_.begin(), tx_ready_.end(), qpn - kFirstQpn), tx_ready_.end());
  slot_[qpn - kFirstQpn].ready = 0;
  qps_[qpn - kFirstQpn].reset();
  touch(qpn - kFirstQpn);  // leaves the timer heap
  return 0;
}

int Endpoint::reconfigure_qp(std::uint32_t qpn, const QpConfig& cfg) {
  Qp* q = qp(qpn);
  if (q == nullptr || !valid_qp_config(cfg)) return EINVAL;
  if (q->state() != QpState::kReset) return q->reconfigure(cfg);
  tx_ready_.erase(std::remove(tx_ready_.begin(), tx_ready_.end(), qpn - kFirstQpn), tx_ready_.end());
  slot_[qpn - kFirstQpn].ready = 0;
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
  if (rc == 0) {
    // Start from what the peer last said of its ports (an update that arrived before this QP
    // was connected names only the QPs connected then).
    if (const std::uint32_t* known = known_peer_ports(remote.peer)) q->set_peer_ports(*known, now);
  }
  if (rc == 0 && remote.auth.on) any_auth_ = true;
  if (rc == 0) {
    auto it = std::find_if(peer_ext_.begin(), peer_ext_.end(),
                           [&](const auto& e) { return e.first == remote.peer; });
    if (it == peer_ext_.end()) it = peer_ext_.insert(peer_ext_.end(), {remote.peer, false});
    it->second = remote.wire_ext;
  }
  return rc;
}

bool Endpoint::peer_wire_ext(std::uint32_t peer) const {
  if (!cfg_.wire_ext) return false;
  for (const auto& e : peer_ext_)
    if (e.first == peer) return e.second;
  return false;
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

void Endpoint::push_event(const Event& e) {
  if (!cfg_.events) return;
  if (cfg_.tun.max_events != 0 && events_.size() >= cfg_.tun.max_events) {
    events_.pop_front();
    ++events_lost_;
    ++counters_.events_dropped;
  }
  events_.push_back(e);
}

bool Endpoint::poll_event(Event& out) {
  if (events_lost_ > 0) {  // the loss is reported before the (newer) events that survived it
    out = Event{};
    out.type = EventType::kEventsDropped;
    out.dropped = events_lost_;
    events_lost_ = 0;
    return true;
  }
  if (events_.empty()) return false;
  out = events_.front();
  events_.pop_front();
  return true;
}

void Endpoint::mark_tx_ready(Qp* q) {
  const std::uint32_t i = q->qpn() - kFirstQpn;
  if (slot_[i].ready) return;
  slot_[i].ready = 1;
  tx_ready_.push_back(i);
}

void Endpoint::receive(std::span<const std::uint8_t> pkt, const RxMeta& meta, Time now) {
  // The destination QP, looked up once from the BTH bytes decode() reads it from (touched below).
  // The wire extensions are read if that QP (for an endpoint packet: the peer) agreed to them.
  Qp* q = nullptr;
  bool ext = false;
  std::uint32_t dest = 0;
  if (pkt.size() >= 8) {
    dest = bth_dest_qp(pkt);
    if (dest == wire::kEpQpn) {
      ext = peer_wire_ext(meta.peer);
    } else {
      q = find_qp(dest);
      ext = cfg_.wire_ext && q != nullptr && q->peer_wire_ext();
    }
  }
  wire::Packet p;
  wire::DecodeOptions opt;
  opt.trimmed = meta.trimmed || meta.trimmed_lasthop;
  // A trimmed header has no payload and no ICRC; a driver that carries no payload (no_payload)
  // delivers zeros the sender's ICRC does not cover.
  opt.verify_icrc = cfg_.icrc && !opt.trimmed && !meta.no_payload;
  opt.icrc_xor = meta.icrc_xor;
  opt.icrc_any_ipv4_id = meta.icrc_any_ipv4_id;
  opt.ext = ext;
  opt.out_is_fresh = true;
  if (any_auth_ && !authenticate(pkt, meta, opt)) return;
  if (wire::decode(pkt, p, opt) != wire::Error::kOk) {
    ++counters_.rx_bad_packet;
    return;
  }
  // Every AETH syndrome 0x00-0x1F is an ACK (IBTA; a peer without end-to-end credits sends 0x1F, F9):
  // the QPs see the one value they compare against.
  if (p.bth.opcode == wire::Opcode::kAck && wire::aeth::is_ack(p.aeth.syndrome))
    p.aeth.syndrome = wire::aeth::kAck;
  if (p.bth.dest_qp == wire::kEpQpn) {
    handle_endpoint_packet(p, meta, now);
    return;
  }
  if (q != nullptr) touch(dest - kFirstQpn);  // as qp() does (q is QP `dest`)
  if (q == nullptr || q->state() == QpState::kReset || q->state() == QpState::kInit) {
    ++counters_.rx_unknown_qp;
    return;
  }
  // Only the connected peer may talk to a QP, with the QP's partition key.
  if (meta.peer != q->peer()) {
    ++counters_.rx_wrong_peer;
    return;
  }
  if (!pkey_match(p.bth.pkey, q->config().pkey)) {
    ++counters_.rx_bad_pkey;
    return;
  }
  q->on_packet(p, meta, now);
}

void Endpoint::prefetch_rx(std::uint32_t qpn, bool feedback) const {
  if (!cfg_.prefetch) return;
  if (const Qp* q = find_qp(qpn)) q->prefetch_rx(feedback, any_auth_);
}

bool Endpoint::authenticate(std::span<const std::uint8_t>& pkt, const RxMeta& meta,
                            wire::DecodeOptions& opt) {
  if (pkt.size() < 8) return true;  // no BTH: decode refuses it
  const std::uint32_t dest = bth_dest_qp(pkt);
  if (dest == wire::kEpQpn) {
    // Endpoint packets from a peer with authenticated QPs carry the tag of one of them (D40).
    const Qp* cand[kMaxEpKeyTries];
    const std::size_t n = ep_key_candidates(meta.peer, cand);
    if (n == 0) return true;
    bool ok = false;
    for (std::size_t i = 0; i < n && !ok; ++i) ok = mac_valid(cand[i]->remote().auth.rx, pkt);
    if (!ok) {
      ++counters_.rx_auth_failed;
      ++counters_.rx_ep_refused;
      return false;
    }
  } else {
    const Qp* q = qp(dest);
    if (q == nullptr || !q->auth_on()) return true;
    // A trimmed packet lost its tag with its payload, so it cannot be told from a forgery: dropped,
    // the sender recovers it as a loss.
    if (opt.trimmed || !mac_valid(q->remote().auth.rx, pkt)) {
      ++counters_.rx_auth_failed;
      return false;
    }
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
    // By index: an idle QP is passed over without touching its (for many QPs, cold) state.
    const std::uint32_t i = tx_ready_[tx_rr_];
    if (now < slot_[i].idle_until) {  // as the last poll: nothing, and nothing changed
      ++tx_rr_;
      ++tried;
      continue;
    }
    Qp* q = qps_[i].get();
    touch(i);
    if (q->poll_tx(out, now, free_ports)) {
      // A QP this send left with nothing it may send leaves the ready list now, not at the next
      // poll, which would only find that out (and a driver can then skip that poll: settle_tx).
      if (q->tx_done())
        leave_ready_at(tx_rr_);
      else
        ++tx_rr_;
      if (cfg_.prefetch) prefetch_next_tx(now);
      return true;
    }
    if (!q->wants_tx()) {
      leave_ready_at(tx_rr_);
      --n;
      continue;
    }
    slot_[i].idle_until = q->idle_until();
    ++tx_rr_;
    ++tried;
  }
  return false;
}

// settle_tx() only with one QP at all: the poll at `at` would visit it first, and no other QP can
// join the ready list before then, so taking it off now leaves the list as that poll would. (With
// two QPs ready when the poll comes, the round robin would visit them in a different order.)
bool Endpoint::settle_one(Time at) {
  const std::uint32_t i = tx_ready_[0];
  if (!qps_[i]->settle_blocked(at)) return false;
  slot_[i].ready = 0;
  tx_ready_.clear();
  tx_rr_ = 0;
  return true;
}

// The next poll (a packet's serialisation from now) starts with the next QP that is not idle: a
// software pipeline fetches the records of that one, whose lines were fetched at the last poll, and
// the lines of the one after (a few idle ones are looked past).
void Endpoint::prefetch_next_tx(Time now) const {
  const std::size_t n = tx_ready_.size();
  bool first = true;
  for (std::size_t k = 0, j = tx_rr_; k < 6 && k + 1 < n; ++k, ++j) {
    if (j >= n) j = 0;
    if (slot_[tx_ready_[j]].idle_until > now) continue;
    const Qp& q = *qps_[tx_ready_[j]];
    if (!first) {
      q.prefetch_tx_lines();
      return;
    }
    q.prefetch_tx_records();
    first = false;
  }
}

Time Endpoint::next_deadline() const {
  refresh_deadlines();
  Time t = due_.min();
#ifndef NDEBUG
  {  // the heap must agree with a scan of every QP (a missed touch() would lose a timer)
    Time scan = kNever;
    for (const auto& q : qps_)
      if (q) scan = std::min(scan, q->next_deadline());
    assert(scan == t);
  }
#endif
  for (const PendingProbe& p : probes_) t = std::min(t, p.deadline);
  for (const VerifyProbe& v : verify_) t = std::min(t, v.deadline);
  return t;
}

void Endpoint::expire_skips(Time now) {
  for (const auto& q : qps_)
    if (q) q->evs().expire_skips(now);
}

void Endpoint::on_timer(Time now) {
  // The due QPs in QPN order, as a scan of every QP would visit them. They stay in the heap,
  // touched, and take their new deadlines at the next refresh_deadlines().
  refresh_deadlines();
  due_.collect_due(now, fired_);
  for (const std::uint32_t i : fired_) touch(i);
  std::sort(fired_.begin(), fired_.end());
  for (const std::uint32_t i : fired_) {
    Qp* q = qps_[i].get();
    if (q && q->next_deadline() <= now) q->on_timer(now);
  }
  // An unanswered port-status check leaves the update in force (the peer may be busy or gone).
  verify_.erase(
      std::remove_if(verify_.begin(), verify_.end(), [&](const VerifyProbe& v) { return v.deadline <= now; }),
      verify_.end());
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
  for (std::uint32_t i = 0; i < qps_.size(); ++i) {
    Qp* q = qps_[i].get();
    if (!q || (q->state() != QpState::kRtr && q->state() != QpState::kRts)) continue;
    touch(i);
    if (((q->peer_port_mask() >> port) & 1u) != 0)
      q->set_plane_usable(port, up, up ? EvCause::kPortUp : EvCause::kPortDown, now);
    if (std::find(peers.begin(), peers.end(), q->remote().peer) == peers.end())
      peers.push_back(q->remote().peer);
  }
  // Tell every peer at once so they stop (or resume) sending to this plane.
  for (const std::uint32_t peer : peers) send_port_status(peer, now);
}

std::size_t Endpoint::ep_key_candidates(std::uint32_t peer, const Qp* (&out)[kMaxEpKeyTries]) const {
  // The sender tags with its authenticated QP of lowest QPN (ep_tx_key), which is our QP to it with
  // the lowest remote QPN: that one is tried first, then a few others (one side may have connected
  // a QP the other has not yet).
  std::size_t n = 0;
  for (const auto& q : qps_) {
    if (!q || !q->remote().auth.on || q->remote().peer != peer || q->state() == QpState::kReset ||
        q->state() == QpState::kInit)
      continue;
    if (n < kMaxEpKeyTries) {
      out[n++] = q.get();
    } else if (q->remote().qpn < out[kMaxEpKeyTries - 1]->remote().qpn) {
      out[kMaxEpKeyTries - 1] = q.get();
    } else {
      continue;
    }
    for (std::size_t i = n - 1; i > 0 && out[i]->remote().qpn < out[i - 1]->remote().qpn; --i)
      std::swap(out[i], out[i - 1]);
  }
  return n;
}

const MacKey* Endpoint::ep_tx_key(std::uint32_t peer) const {
  for (const auto& q : qps_)  // qps_ is in QPN order: the first match has the lowest QPN
    if (q && q->remote().auth.on && q->remote().peer == peer && q->state() != QpState::kReset &&
        q->state() != QpState::kInit)
      return &q->remote().auth.tx;
  return nullptr;
}

bool Endpoint::has_qp_with(std::uint32_t peer) const {
  for (const auto& q : qps_)
    if (q && q->remote().peer == peer && (q->state() == QpState::kRtr || q->state() == QpState::kRts))
      return true;
  return false;
}

bool Endpoint::queue_ep_tx(std::unique_ptr<EpTx> t) {
  if (ep_tx_.size() >= kMaxEpTx) {
    ++counters_.ep_tx_dropped;
    return false;
  }
  ep_tx_.push_back(std::move(t));
  return true;
}

std::uint32_t* Endpoint::known_peer_ports(std::uint32_t peer) {
  for (auto& [p, mask] : peer_ports_)
    if (p == peer) return &mask;
  return nullptr;
}

void Endpoint::apply_peer_ports(std::uint32_t peer, std::uint32_t mask, Time now) {
  std::uint32_t* known = known_peer_ports(peer);
  if (known != nullptr && *known == mask) return;
  if (known == nullptr)
    peer_ports_.emplace_back(peer, mask);
  else
    *known = mask;
  Event e;
  e.type = EventType::kPortStatus;
  e.peer = peer;
  e.port_mask = mask;
  e.time = now;
  push_event(e);
  for (std::uint32_t i = 0; i < qps_.size(); ++i) {
    Qp* q = qps_[i].get();
    if (q && q->remote().peer == peer && (q->state() == QpState::kRtr || q->state() == QpState::kRts)) {
      touch(i);
      q->set_peer_ports(mask, now);
    }
  }
}

void Endpoint::verify_peer_ports(std::uint32_t peer, std::uint8_t port, Time now) {
  for (const VerifyProbe& v : verify_)
    if (v.peer == peer) return;  // one check per peer at a time
  if (verify_.size() >= kMaxVerify) return;
  auto t = std::make_unique<EpTx>();
  t->pkt.bth.opcode = wire::Opcode::kEndpointRequest;
  t->pkt.bth.dest_qp = wire::kEpQpn;
  t->pkt.bth.psn = kVerifyProbeBit | static_cast<std::uint32_t>(rng_.next() & 0x7FFFFF);
  t->pkt.erth.op = wire::EpOp::kEvProbe;
  t->peer = peer;
  t->ev = Ev{0, port};
  const std::uint32_t psn = t->pkt.bth.psn;
  if (!queue_ep_tx(std::move(t))) return;
  verify_.push_back(VerifyProbe{peer, psn, now + kVerifyTimeout});
}

int Endpoint::send_ev_probe(std::uint32_t peer, const Ev& ev, std::uint16_t req_id, Duration timeout,
                            Time now) {
  if (ev.port >= cfg_.num_ports) return EINVAL;
  if (!((port_up_mask_ >> ev.port) & 1u)) return ENETDOWN;
  for (const PendingProbe& p : probes_)
    if (p.peer == peer && p.req_id == req_id) return EBUSY;
  auto t = std::make_unique<EpTx>();
  t->pkt.bth.opcode = wire::Opcode::kEndpointRequest;
  t->pkt.bth.dest_qp = wire::kEpQpn;
  t->pkt.bth.psn = req_id;
  t->pkt.erth.op = wire::EpOp::kEvProbe;
  t->pkt.erth.entropy = ev.value;
  t->peer = peer;
  t->ev = ev;
  if (!queue_ep_tx(std::move(t))) return EAGAIN;
  probes_.push_back(PendingProbe{peer, req_id, ev, now, now + timeout});
  return 0;
}

int Endpoint::send_port_status(std::uint32_t peer, Time now) {
  (void)now;
  // Sent on every usable port: any one copy arriving is enough.
  for (std::uint8_t p = 0; p < cfg_.num_ports; ++p) {
    if (!((port_up_mask_ >> p) & 1u)) continue;
    auto t = std::make_unique<EpTx>();
    t->pkt.bth.opcode = wire::Opcode::kEndpointRequest;
    t->pkt.bth.dest_qp = wire::kEpQpn;
    t->pkt.erth.op = wire::EpOp::kPortStatusUpdate;
    t->pkt.erth.port_status_mask = port_up_mask_;
    t->peer = peer;
    t->ev = Ev{0, p};
    if (!queue_ep_tx(std::move(t))) return EAGAIN;
  }
  return 0;
}

void Endpoint::handle_endpoint_packet(const wire::Packet& p, const RxMeta& meta, Time now) {
  if (meta.peer == kNoPeer) {  // an answer could not be sent, and an update names nobody we know
    ++counters_.rx_ep_refused;
    return;
  }
  if (p.bth.opcode == wire::Opcode::kEndpointRequest) {
    if (p.erth.op == wire::EpOp::kPortStatusUpdate) {
      // D40: the update is a hint. The sender sends it on each of its usable ports, so one that
      // leaves out the plane it arrived on is not genuine. One that takes planes away from QPs is
      // acted on at once (a real failure must be fast) and checked by an EV probe on the arrival
      // plane, whose answer carries the peer's real port mask: a forged update costs one round
      // trip, not the planes.
      const std::uint32_t mask = p.erth.port_status_mask;
      if (((mask >> meta.port) & 1u) == 0) {
        ++counters_.rx_ep_refused;
        return;
      }
      const std::uint32_t* known = known_peer_ports(meta.peer);
      const std::uint32_t before = known == nullptr ? 0xFFFFFFFFu : *known;
      if (before == mask) return;  // a copy from another port
      apply_peer_ports(meta.peer, mask, now);
      if ((before & ~mask) != 0 && has_qp_with(meta.peer)) verify_peer_ports(meta.peer, meta.port, now);
      return;  // not answered: the sender repeats it on every port instead
    }
    // EV probe: answer on the plane it came in on, reflecting its EV.
    auto t = std::make_unique<EpTx>();
    t->pkt.bth.opcode = wire::Opcode::kEndpointResponse;
    t->pkt.bth.dest_qp = wire::kEpQpn;
    t->pkt.bth.psn = p.bth.psn;
    t->pkt.eeth.op = p.erth.op;
    t->pkt.eeth.entropy = p.erth.entropy;
    t->pkt.eeth.tx_timestamp = p.erth.tx_timestamp;
    t->pkt.eeth.port_status_mask = port_up_mask_;
    t->pkt.eeth.port_status_valid = true;
    t->peer = meta.peer;
    t->ev = Ev{meta.ev, meta.port};
    t->arrived = now;
    queue_ep_tx(std::move(t));
    return;
  }
  if (p.bth.opcode != wire::Opcode::kEndpointResponse) return;
  if ((p.bth.psn & kVerifyProbeBit) != 0) {
    // The answer to a port-status check (D40): the peer's own mask, from a probe of ours.
    for (std::size_t i = 0; i < verify_.size(); ++i) {
      if (verify_[i].peer != meta.peer || verify_[i].psn != p.bth.psn) continue;
      verify_[i] = verify_.back();
      verify_.pop_back();
      // Without the wire extension the answer carries no mask (D44): it only proves the peer is
      // reachable on this plane, and the update stands.
      if (!p.eeth.port_status_valid) return;
      const std::uint32_t mask = p.eeth.port_status_mask;
      const std::uint32_t* known = known_peer_ports(meta.peer);
      if (known != nullptr && *known != mask && ((mask >> meta.port) & 1u) != 0) {
        ++counters_.port_status_corrected;
        apply_peer_ports(meta.peer, mask, now);
      }
      return;
    }
    return;
  }
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
    out.wire_ext = peer_wire_ext(t.peer);
    const bool ok = encode_tx(out, t.pkt, cfg_.icrc, any_auth_ ? ep_tx_key(t.peer) : nullptr);
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
