#include "sim/roce.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace mrc::sim {

namespace {

constexpr std::uint32_t kPsnMask = 0xFFFFFF;
constexpr std::uint32_t kAckReq = 0x80;

/// Unwraps a 24-bit wire PSN to the 32-bit PSN nearest to `ref`.
std::uint32_t unwrap(std::uint32_t ref, std::uint32_t wire) {
  std::int32_t d = static_cast<std::int32_t>((wire - ref) & kPsnMask);
  if (d >= 0x800000) d -= 0x1000000;
  return ref + static_cast<std::uint32_t>(d);
}
/// a - b as a signed distance in the unwrapped PSN space.
std::int32_t diff(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b);
}

void put16(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put24(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 16);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  put16(p, v >> 16);
  put16(p + 2, v & 0xFFFF);
}
std::uint32_t get24(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | p[2];
}
std::uint32_t get32(const std::uint8_t* p) {
  return (get24(p) << 8) | p[3];
}

void put_bth(std::uint8_t* h, std::uint8_t op, std::uint32_t dest_qpn, bool ack_req, std::uint32_t psn) {
  h[0] = op;
  h[1] = 0;
  put16(h + 2, 0xFFFF);
  h[4] = 0;
  put24(h + 5, dest_qpn);
  h[8] = ack_req ? kAckReq : 0;
  put24(h + 9, psn & kPsnMask);
}

bool is_write(std::uint8_t op) {
  return op >= RoceNic::kOpWriteFirst && op <= RoceNic::kOpWriteOnlyImm;
}
bool has_reth(std::uint8_t op) {
  return op == RoceNic::kOpWriteFirst || op == RoceNic::kOpWriteOnly || op == RoceNic::kOpWriteOnlyImm;
}
bool has_imm(std::uint8_t op) {
  return op == RoceNic::kOpWriteLastImm || op == RoceNic::kOpWriteOnlyImm;
}
bool is_last(std::uint8_t op) {
  return op != RoceNic::kOpWriteFirst && op != RoceNic::kOpWriteMiddle;
}

}  // namespace

DcqcnParams DcqcnParams::paper() {
  DcqcnParams p;
  p.alpha_interval = 55_us;
  p.decrease_interval = 50_us;
  p.increase_interval = 55_us;
  p.byte_counter = 10ULL * 1024 * 1024;
  p.g = 1.0 / 256;
  p.fast_recovery_steps = 5;
  p.rate_ai_bps = 40e6;
  p.rate_hai_bps = 200e6;
  p.min_rate_bps = 1e9;
  p.cnp_interval = 50_us;
  return p;
}

const char* to_string(DcqcnStage s) {
  switch (s) {
    case DcqcnStage::kNone:
      return "none";
    case DcqcnStage::kFastRecovery:
      return "fast_recovery";
    case DcqcnStage::kAdditive:
      return "additive";
    case DcqcnStage::kHyper:
      return "hyper";
  }
  return "?";
}

struct RoceNic::Qp {
  std::uint32_t qpn = 0;
  std::uint8_t port = 0;
  std::uint16_t entropy = 0;
  bool connected = false, error = false;
  std::uint32_t peer = 0, remote_qpn = 0;
  // Requester (unwrapped PSNs).
  std::deque<Msg> sq;
  std::uint32_t next_new_psn = 0;  ///< first PSN of the next posted message
  std::uint32_t snd_una = 0, snd_nxt = 0, snd_max = 0;
  std::size_t cur = 0;  ///< index in sq of the message holding snd_nxt
  Time rto_at = kNever;
  std::uint32_t retries = 0;
  std::uint64_t next_tx_ps = 0;  ///< pacing (DCQCN)
  // DCQCN reaction point.
  DcqcnState cc;
  Time alpha_epoch = 0;
  bool cnp_in_period = false;
  Time inc_at = kNever, dec_at = kNever, last_dec = 0;
  bool decreased = false;
  std::uint64_t bc_bytes = 0;
  // Responder.
  std::uint32_t epsn = 0, msn = 0, unacked = 0;
  bool nak_sent = false;
  std::uint64_t rx_va = 0, rx_off = 0;
  std::uint32_t rx_key = 0;
  Time last_cnp = 0;
  bool cnp_sent = false;
  RoceQpCounters c;
};

namespace {

/// Brings alpha up to `now`: one EWMA step per elapsed alpha period, +g for a period that saw a CNP.
void advance_alpha(DcqcnState& cc, Time& epoch, bool& cnp_in_period, Time now, const DcqcnParams& p) {
  if (!cc.active || p.alpha_interval == 0 || now < epoch + p.alpha_interval) return;
  const std::uint64_t n = (now - epoch) / p.alpha_interval;
  cc.alpha = (1 - p.g) * cc.alpha + (cnp_in_period ? p.g : 0.0);
  if (n > 1) cc.alpha *= std::pow(1 - p.g, static_cast<double>(n - 1));
  cnp_in_period = false;
  epoch += n * p.alpha_interval;
}

}  // namespace

RoceNic::RoceNic(const RoceConfig& cfg) : cfg_(cfg), rng_(cfg.seed), zeros_(cfg.mtu, 0) {
  if (cfg_.ack_every == 0) cfg_.ack_every = 1;
  if (cfg_.mtu == 0) cfg_.mtu = 4096;
  if (cfg_.num_ports == 0 || cfg_.num_ports > 32) cfg_.num_ports = 1;
  zeros_.assign(cfg_.mtu, 0);
  ctrl_.resize(cfg_.num_ports);
}

RoceNic::~RoceNic() = default;

std::uint32_t RoceNic::add_region(std::uint8_t* base, std::size_t len) {
  regions_.push_back({base, len});
  return static_cast<std::uint32_t>(regions_.size());
}

std::uint32_t RoceNic::create_qp(std::uint32_t port) {
  if (port >= cfg_.num_ports) return 0;
  Qp q;
  q.qpn = static_cast<std::uint32_t>(qps_.size() + 1);
  q.port = static_cast<std::uint8_t>(port);
  q.entropy = static_cast<std::uint16_t>(rng_.below(65536));
  q.cc.rate_bps = q.cc.target_bps = cfg_.line_rate_bps;
  qps_.push_back(std::move(q));
  return qps_.back().qpn;
}

RoceNic::Qp* RoceNic::find(std::uint32_t qpn) {
  return qpn == 0 || qpn > qps_.size() ? nullptr : &qps_[qpn - 1];
}
const RoceNic::Qp* RoceNic::find(std::uint32_t qpn) const {
  return qpn == 0 || qpn > qps_.size() ? nullptr : &qps_[qpn - 1];
}

int RoceNic::connect_qp(std::uint32_t qpn, const engine::QpRemote& remote, Time /*now*/) {
  Qp* q = find(qpn);
  if (q == nullptr) return ENOENT;
  if (q->connected) return EINVAL;
  q->connected = true;
  q->peer = remote.peer;
  q->remote_qpn = remote.qpn & kPsnMask;
  q->next_new_psn = q->snd_una = q->snd_nxt = q->snd_max = remote.sq_psn & kPsnMask;
  q->epsn = remote.rq_psn & kPsnMask;
  return 0;
}

int RoceNic::post_send(std::uint32_t qpn, const engine::SendWr& wr, Time /*now*/) {
  Qp* q = find(qpn);
  if (q == nullptr) return ENOENT;
  if (!q->connected || q->error) return EINVAL;
  if (wr.lkey != 0) {
    if (wr.lkey > regions_.size()) return EINVAL;
    const Region& r = regions_[wr.lkey - 1];
    const auto base = reinterpret_cast<std::uintptr_t>(r.base);
    if (wr.local_addr < base || wr.local_addr - base + wr.length > r.len) return EINVAL;
  }
  Msg m;
  m.wr = wr;
  m.first_psn = q->next_new_psn;
  m.npkts = std::max<std::uint32_t>(1, (wr.length + cfg_.mtu - 1) / cfg_.mtu);
  q->next_new_psn += m.npkts;
  q->sq.push_back(m);
  return 0;
}

bool RoceNic::poll_completion(engine::Completion& out) {
  if (completions_.empty()) return false;
  out = completions_.front();
  completions_.pop_front();
  return true;
}

// --- transmit ------------------------------------------------------------------------------------------

std::uint64_t RoceNic::tx_time_ps(const Qp& q, std::uint32_t wire_bytes) const {
  const double bits = static_cast<double>(wire_bytes + cfg_.wire_overhead) * 8.0;
  return static_cast<std::uint64_t>(std::ceil(bits * 1e12 / q.cc.rate_bps));
}

void RoceNic::push_ctrl(const Ctrl& c) {
  CtrlRing& r = ctrl_[qps_[c.qp].port];
  if (r.count == r.buf.size()) {  // grow (rare: only while warming up)
    std::vector<Ctrl> bigger(r.buf.size() * 2);
    for (std::size_t i = 0; i < r.count; ++i) bigger[i] = r.buf[(r.head + i) % r.buf.size()];
    r.buf.swap(bigger);
    r.head = 0;
  }
  r.buf[(r.head + r.count) % r.buf.size()] = c;
  ++r.count;
}

void RoceNic::build_ctrl(const Ctrl& c, engine::TxPacket& out) {
  Qp& q = qps_[c.qp];
  const bool cnp = c.opcode == kOpCnp;
  put_bth(out.header, c.opcode, q.remote_qpn, false, c.psn);
  if (cnp) {
    std::memset(out.header + kBthSize, 0, kCnpSize - kBthSize);
    out.header_len = kCnpSize;
    ++q.c.tx_cnp;
  } else {
    out.header[kBthSize] = c.syndrome;
    put24(out.header + kBthSize + 1, q.msn & kPsnMask);
    out.header_len = kBthSize + kAethSize;
    if (c.syndrome == kSyndromeAck)
      ++q.c.tx_ack;
    else
      ++q.c.tx_nak;
  }
  out.payload = nullptr;
  out.payload_len = 0;
  std::memset(out.trailer, 0, kIcrcSize);
  out.trailer_len = kIcrcSize;
  out.port = q.port;
  out.ev = engine::Ev{q.entropy, 0};
  out.peer = q.peer;
  out.qpn = q.qpn;
  out.tc = engine::TrafficClass::kControl;
  out.psn = c.psn & kPsnMask;
}

bool RoceNic::build_data(Qp& q, engine::TxPacket& out, Time now) {
  const Msg& m = q.sq[q.cur];
  const std::uint32_t idx = q.snd_nxt - m.first_psn;
  const std::uint32_t off = idx * cfg_.mtu;
  const std::uint32_t len = m.wr.length > off ? std::min(cfg_.mtu, m.wr.length - off) : 0;
  const bool first = idx == 0, last = idx + 1 == m.npkts;
  std::uint8_t op = kOpWriteMiddle;
  if (first && last)
    op = m.wr.with_imm ? kOpWriteOnlyImm : kOpWriteOnly;
  else if (first)
    op = kOpWriteFirst;
  else if (last)
    op = m.wr.with_imm ? kOpWriteLastImm : kOpWriteLast;
  put_bth(out.header, op, q.remote_qpn, last, q.snd_nxt);
  std::size_t h = kBthSize;
  if (has_reth(op)) {
    put32(out.header + h, static_cast<std::uint32_t>(m.wr.remote_addr >> 32));
    put32(out.header + h + 4, static_cast<std::uint32_t>(m.wr.remote_addr));
    put32(out.header + h + 8, m.wr.rkey);
    put32(out.header + h + 12, m.wr.length);
    h += kRethSize;
  }
  if (has_imm(op)) {
    put32(out.header + h, m.wr.imm);
    h += kImmSize;
  }
  out.header_len = static_cast<std::uint16_t>(h);
  if (m.wr.lkey != 0 && len > 0) {
    const Region& r = regions_[m.wr.lkey - 1];
    out.payload = r.base + (m.wr.local_addr - reinterpret_cast<std::uintptr_t>(r.base)) + off;
  } else {
    out.payload = len > 0 ? zeros_.data() : nullptr;
  }
  out.payload_len = len;
  std::memset(out.trailer, 0, kIcrcSize);
  out.trailer_len = kIcrcSize;
  out.port = q.port;
  out.ev = engine::Ev{q.entropy, 0};
  out.peer = q.peer;
  out.qpn = q.qpn;
  const bool rtx = diff(q.snd_nxt, q.snd_max) < 0;
  out.tc = rtx ? engine::TrafficClass::kDataRtx : engine::TrafficClass::kData;
  out.psn = q.snd_nxt & kPsnMask;

  ++q.c.tx_data;
  if (rtx) ++q.c.tx_rtx;
  ++q.snd_nxt;
  if (diff(q.snd_nxt, q.snd_max) > 0) q.snd_max = q.snd_nxt;
  if (q.snd_nxt - m.first_psn == m.npkts) ++q.cur;
  if (q.rto_at == kNever) q.rto_at = now + cfg_.rto;
  if (cfg_.dcqcn) {
    const std::uint64_t now_ps = now * 1000;
    q.next_tx_ps = std::max(q.next_tx_ps, now_ps) + tx_time_ps(q, out.wire_size());
    if (q.cc.active && cfg_.dcqcn_params.byte_counter > 0) {
      q.bc_bytes += out.wire_size() + cfg_.wire_overhead;
      while (q.bc_bytes >= cfg_.dcqcn_params.byte_counter) {
        q.bc_bytes -= cfg_.dcqcn_params.byte_counter;
        rate_increase(q, false, now);
      }
    }
  }
  return true;
}

bool RoceNic::poll_tx(engine::TxPacket& out, Time now, std::uint32_t free_ports) {
  last_now_ = now;
  for (std::uint32_t p = 0; p < cfg_.num_ports; ++p) {  // control first
    CtrlRing& r = ctrl_[p];
    if ((free_ports >> p & 1U) == 0 || r.count == 0) continue;
    const Ctrl c = r.buf[r.head];
    r.head = (r.head + 1) % r.buf.size();
    --r.count;
    build_ctrl(c, out);
    return true;
  }
  const std::size_t n = qps_.size();
  const std::uint64_t now_ps = now * 1000;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = (rr_ + i) % n;
    Qp& q = qps_[k];
    if (!q.connected || q.error || q.cur >= q.sq.size() || (free_ports >> q.port & 1U) == 0) continue;
    if (cfg_.dcqcn && q.next_tx_ps > now_ps) continue;
    rr_ = (k + 1) % n;
    return build_data(q, out, now);
  }
  return false;
}

Time RoceNic::next_deadline() const {
  Time t = kNever;
  for (const Qp& q : qps_) {
    t = std::min({t, q.rto_at, q.inc_at, q.dec_at});
    if (cfg_.dcqcn && !q.error && q.cur < q.sq.size()) {
      // Pacing: wake when the next packet may go (a deadline already passed is the port's business).
      const Time at = (q.next_tx_ps + 999) / 1000;
      if (q.next_tx_ps > last_now_ * 1000) t = std::min(t, at);
    }
  }
  return t;
}

void RoceNic::on_timer(Time now) {
  last_now_ = now;
  for (Qp& q : qps_) {
    if (q.rto_at <= now) {
      q.rto_at = kNever;
      ++q.c.timeouts;
      ++q.retries;
      if (cfg_.retry_limit != 0 && q.retries > cfg_.retry_limit) {
        fail_qp(q);
        continue;
      }
      go_back(q, q.snd_una);
    }
    if (q.dec_at <= now) {
      q.dec_at = kNever;
      rate_decrease(q, now);
    }
    if (q.inc_at <= now) rate_increase(q, true, now);
  }
}

// --- receive -------------------------------------------------------------------------------------------

void RoceNic::receive(std::span<const std::uint8_t> pkt, const engine::RxMeta& meta, Time now) {
  last_now_ = now;
  if (pkt.size() < kBthSize + kIcrcSize) {
    ++counters_.rx_bad_packet;
    return;
  }
  const std::uint8_t op = pkt[0];
  Qp* q = find(get24(pkt.data() + 5));
  if (q == nullptr || !q->connected) {
    ++counters_.rx_unknown_qp;
    return;
  }
  if (meta.peer != q->peer) {
    ++counters_.rx_wrong_peer;
    return;
  }
  if (meta.trimmed) {  // must not happen (RoCE is lossless); a cut packet is a lost packet
    ++q->c.rx_trimmed;
    return;
  }
  const std::uint32_t wire_psn = get24(pkt.data() + 9);
  if (is_write(op)) {
    const std::size_t hdr = kBthSize + (has_reth(op) ? kRethSize : 0) + (has_imm(op) ? kImmSize : 0);
    if (pkt.size() < hdr + kIcrcSize || pkt.size() - hdr - kIcrcSize > cfg_.mtu) {
      ++counters_.rx_bad_packet;
      return;
    }
    on_data(*q, op, unwrap(q->epsn, wire_psn), pkt, hdr, meta, now);
  } else if (op == kOpAck) {
    if (pkt.size() < kBthSize + kAethSize + kIcrcSize) {
      ++counters_.rx_bad_packet;
      return;
    }
    on_ack(*q, pkt[kBthSize], unwrap(q->snd_una, wire_psn), now);
  } else if (op == kOpCnp) {
    on_cnp(*q, now);
  } else {
    ++counters_.rx_bad_packet;
  }
}

void RoceNic::on_data(Qp& q, std::uint8_t op, std::uint32_t psn, std::span<const std::uint8_t> pkt,
                      std::size_t hdr, const engine::RxMeta& meta, Time now) {
  const auto qi = static_cast<std::uint32_t>(&q - qps_.data());
  if (meta.ecn_ce) {
    ++q.c.rx_ecn;
    if (cfg_.cnp && (!q.cnp_sent || now - q.last_cnp >= cfg_.dcqcn_params.cnp_interval)) {
      q.cnp_sent = true;
      q.last_cnp = now;
      push_ctrl(Ctrl{qi, kOpCnp, 0, 0});
    }
  }
  const std::int32_t d = diff(psn, q.epsn);
  if (d > 0) {  // a gap: drop, one NAK per gap
    ++q.c.rx_out_of_order;
    if (!q.nak_sent) {
      q.nak_sent = true;
      push_ctrl(Ctrl{qi, kOpAck, kSyndromeNakPsn, q.epsn});
    }
    return;
  }
  if (d < 0) {  // duplicate: drop and re-acknowledge
    ++q.c.rx_duplicate;
    push_ctrl(Ctrl{qi, kOpAck, kSyndromeAck, q.epsn - 1});
    return;
  }
  const std::uint8_t* h = pkt.data();
  const std::size_t len = pkt.size() - hdr - kIcrcSize;
  if (has_reth(op)) {
    q.rx_va = (std::uint64_t{get32(h + kBthSize)} << 32) | get32(h + kBthSize + 4);
    q.rx_key = get32(h + kBthSize + 8);
    q.rx_off = 0;
  }
  if (q.rx_key != 0 && len > 0) {
    bool placed = false;
    if (q.rx_key <= regions_.size()) {
      const Region& r = regions_[q.rx_key - 1];
      const auto base = reinterpret_cast<std::uintptr_t>(r.base);
      const std::uint64_t at = q.rx_va + q.rx_off;
      if (at >= base && at - base + len <= r.len) {
        std::memcpy(r.base + (at - base), h + hdr, len);
        placed = true;
      }
    }
    if (!placed) ++q.c.rx_bad_key;
  }
  q.rx_off += len;
  q.c.bytes_received += len;
  ++q.c.rx_data;
  ++q.epsn;
  q.nak_sent = false;
  ++q.unacked;
  const bool last = is_last(op);
  if (last) {
    ++q.msn;
    if (has_imm(op)) {
      engine::Completion c;
      c.qpn = q.qpn;
      c.opcode = engine::WcOpcode::kRecvRdmaWithImm;
      c.is_recv = true;
      c.byte_len = static_cast<std::uint32_t>(q.rx_off);
      c.imm = get32(h + hdr - kImmSize);
      c.has_imm = true;
      completions_.push_back(c);
    }
  }
  if (last || q.unacked >= cfg_.ack_every || (h[8] & kAckReq) != 0) {
    q.unacked = 0;
    push_ctrl(Ctrl{qi, kOpAck, kSyndromeAck, q.epsn - 1});
  }
}

void RoceNic::locate(Qp& q) {
  q.cur = 0;
  while (q.cur < q.sq.size() && q.snd_nxt - q.sq[q.cur].first_psn >= q.sq[q.cur].npkts) ++q.cur;
}

void RoceNic::ack_through(Qp& q, std::uint32_t psn_excl, Time now) {
  if (diff(psn_excl, q.snd_una) <= 0) return;
  q.snd_una = psn_excl;
  q.retries = 0;
  std::size_t popped = 0;
  while (!q.sq.empty() && diff(q.sq.front().first_psn + q.sq.front().npkts, q.snd_una) <= 0) {
    const Msg& m = q.sq.front();
    q.c.bytes_acked += m.wr.length;
    if (m.wr.signaled) {
      engine::Completion c;
      c.wr_id = m.wr.wr_id;
      c.qpn = q.qpn;
      c.opcode = m.wr.with_imm ? engine::WcOpcode::kRdmaWriteImm : engine::WcOpcode::kRdmaWrite;
      c.byte_len = m.wr.length;
      completions_.push_back(c);
    }
    q.sq.pop_front();
    ++popped;
  }
  if (diff(q.snd_nxt, q.snd_una) < 0) {
    q.snd_nxt = q.snd_una;
    locate(q);
  } else {
    q.cur -= std::min(q.cur, popped);
  }
  q.rto_at = q.snd_una == q.snd_max ? kNever : now + cfg_.rto;
}

void RoceNic::go_back(Qp& q, std::uint32_t psn) {
  if (diff(psn, q.snd_una) < 0 || diff(psn, q.snd_nxt) > 0) return;
  q.snd_nxt = psn;
  locate(q);
}

void RoceNic::on_ack(Qp& q, std::uint8_t syndrome, std::uint32_t psn, Time now) {
  if (syndrome == kSyndromeAck) {
    ++q.c.rx_ack;
    if (diff(psn + 1, q.snd_max) > 0) return;  // acknowledges something never sent
    ack_through(q, psn + 1, now);
  } else if (syndrome == kSyndromeNakPsn) {
    ++q.c.rx_nak;
    if (diff(psn, q.snd_max) > 0) return;
    ack_through(q, psn, now);
    go_back(q, psn);
    if (q.snd_una != q.snd_max) q.rto_at = now + cfg_.rto;
  }
}

void RoceNic::fail_qp(Qp& q) {
  q.error = true;
  q.rto_at = q.inc_at = q.dec_at = kNever;
  bool first = true;
  for (const Msg& m : q.sq) {
    engine::Completion c;
    c.wr_id = m.wr.wr_id;
    c.qpn = q.qpn;
    c.status = first ? engine::WcStatus::kRetryExceeded : engine::WcStatus::kFlushed;
    c.opcode = m.wr.with_imm ? engine::WcOpcode::kRdmaWriteImm : engine::WcOpcode::kRdmaWrite;
    completions_.push_back(c);
    first = false;
  }
  q.sq.clear();
  q.cur = 0;
}

// --- DCQCN reaction point --------------------------------------------------------------------------

void RoceNic::on_cnp(Qp& q, Time now) {
  ++q.c.rx_cnp;
  if (!cfg_.dcqcn || q.error) return;
  const DcqcnParams& p = cfg_.dcqcn_params;
  advance_alpha(q.cc, q.alpha_epoch, q.cnp_in_period, now, p);
  if (!q.cc.active) {
    q.cc.active = true;
    q.cc.alpha = 1.0;
    q.alpha_epoch = now;
    q.cnp_in_period = false;
  } else {
    q.cnp_in_period = true;
  }
  if (!q.decreased || now >= q.last_dec + p.decrease_interval) {
    rate_decrease(q, now);
  } else if (q.dec_at == kNever) {
    q.dec_at = q.last_dec + p.decrease_interval;
  }
}

void RoceNic::rate_decrease(Qp& q, Time now) {
  const DcqcnParams& p = cfg_.dcqcn_params;
  advance_alpha(q.cc, q.alpha_epoch, q.cnp_in_period, now, p);
  q.cc.target_bps = q.cc.rate_bps;
  q.cc.rate_bps = std::max(p.min_rate_bps, q.cc.rate_bps * (1 - q.cc.alpha / 2));
  q.cc.timer_count = q.cc.byte_count = 0;
  q.bc_bytes = 0;
  ++q.cc.decreases;
  q.decreased = true;
  q.last_dec = now;
  q.dec_at = kNever;
  q.inc_at = now + p.increase_interval;
}

void RoceNic::rate_increase(Qp& q, bool from_timer, Time now) {
  const DcqcnParams& p = cfg_.dcqcn_params;
  const std::uint32_t t = q.cc.timer_count, b = q.cc.byte_count, f = p.fast_recovery_steps;
  DcqcnStage stage;
  if (p.byte_counter == 0) {
    stage = t < f ? DcqcnStage::kFastRecovery : t == f ? DcqcnStage::kAdditive : DcqcnStage::kHyper;
  } else {
    stage = std::max(t, b) < f   ? DcqcnStage::kFastRecovery
            : std::min(t, b) > f ? DcqcnStage::kHyper
                                 : DcqcnStage::kAdditive;
  }
  if (stage == DcqcnStage::kAdditive) q.cc.target_bps += p.rate_ai_bps;
  if (stage == DcqcnStage::kHyper) q.cc.target_bps += p.rate_hai_bps;
  q.cc.target_bps = std::min(q.cc.target_bps, cfg_.line_rate_bps);
  q.cc.rate_bps = std::min((q.cc.rate_bps + q.cc.target_bps) / 2, cfg_.line_rate_bps);
  q.cc.last_stage = stage;
  ++q.cc.increases;
  if (from_timer)
    ++q.cc.timer_count;
  else
    ++q.cc.byte_count;
  if (from_timer) q.inc_at = now + p.increase_interval;
  // Back at line rate (within 1 b/s): nothing left to recover until the next CNP.
  if (q.cc.rate_bps >= cfg_.line_rate_bps - 1 && q.cc.target_bps >= cfg_.line_rate_bps) {
    q.cc.rate_bps = cfg_.line_rate_bps;
    q.inc_at = kNever;
  }
}

// --- introspection ----------------------------------------------------------------------------------

std::uint16_t RoceNic::entropy(std::uint32_t qpn) const {
  const Qp* q = find(qpn);
  return q == nullptr ? 0 : q->entropy;
}

const RoceQpCounters& RoceNic::qp_counters(std::uint32_t qpn) const {
  static const RoceQpCounters kEmpty{};
  const Qp* q = find(qpn);
  return q == nullptr ? kEmpty : q->c;
}

DcqcnState RoceNic::dcqcn_state(std::uint32_t qpn, Time now) const {
  const Qp* q = find(qpn);
  if (q == nullptr) return {};
  DcqcnState s = q->cc;
  Time epoch = q->alpha_epoch;
  bool flag = q->cnp_in_period;
  advance_alpha(s, epoch, flag, now, cfg_.dcqcn_params);
  return s;
}

bool RoceNic::qp_error(std::uint32_t qpn) const {
  const Qp* q = find(qpn);
  return q != nullptr && q->error;
}

std::size_t RoceNic::outstanding(std::uint32_t qpn) const {
  const Qp* q = find(qpn);
  return q == nullptr ? 0 : q->sq.size();
}

}  // namespace mrc::sim
