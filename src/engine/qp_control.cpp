// Responder half of a QP: checks, direct placement into registered memory, the PSN bitmap (PsnBitmap),
// SACK/NACK generation, and in-order WRITE_IMM completions.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/qp.hpp"

namespace mrc::engine {

void Qp::on_packet(const wire::Packet& p, const RxMeta& meta, Time now) {
  if (state_ == QpState::kReset || state_ == QpState::kInit || state_ == QpState::kError) {
    ++ctr_.rx_refused;
    return;
  }
  using wire::Opcode;
  switch (p.bth.opcode) {
    case Opcode::kSack:
      if (state_ == QpState::kRts) handle_sack(p, meta, now);
      break;
    case Opcode::kNack:
      if (state_ == QpState::kRts) handle_nack(p, now);
      break;
    case Opcode::kAck:
      if (state_ == QpState::kRts) handle_aeth(p, now);
      break;
    case Opcode::kProbe:
      rx_probe(p, meta, now);
      break;
    default:
      if (wire::is_data(p.bth.opcode))
        rx_data(p, meta, now);
      else
        ++ctr_.rx_refused;
      break;
  }
}

void Qp::deliver_wimms() {
  if (wimm_.empty()) return;  // no WRITE_IMM arrived yet
  while (!rq_.empty()) {
    WimmSlot& s = wimm_[wimm_head_];
    // A WRITE_IMM completes once it and every earlier PSN has been placed.
    if (!s.valid || !psn_lt(s.last_psn, rcvd_.epsn())) return;
    Completion c;
    c.wr_id = rq_.front();
    c.qpn = qpn_;
    c.is_recv = true;
    c.opcode = WcOpcode::kRecvRdmaWithImm;
    c.byte_len = s.byte_len;
    c.imm = s.imm;
    c.has_imm = true;
    ep_.push_completion(c);
    rq_.pop_front();
    s.valid = false;
    ++rq_next_deliver_;
    wimm_head_ = (wimm_head_ + 1) % static_cast<std::uint32_t>(wimm_.size());
  }
}

int Qp::post_recv(std::uint64_t wr_id) {
  if (state_ == QpState::kReset || state_ == QpState::kError) return EINVAL;
  if (rq_.full()) return ENOMEM;
  rq_.push_back(wr_id);
  if (!wimm_.empty()) deliver_wimms();
  return 0;
}

void Qp::queue_ctrl(const CtrlTx& c) {
  if (!ctrl_.allocated()) ctrl_.reserve(16);  // first control packet: a QP that only sends has none
  // Bursts (a window of trim NACKs) grow the ring; steady state never allocates.
  if (ctrl_.full() && ctrl_.capacity() < kCtrlMax) ctrl_.reserve(ctrl_.capacity() * 2);
  if (ctrl_.full()) {
    // Full: SACKs are cumulative, so drop the oldest SACK to make room (NACKs are kept).
    ++ctr_.ctrl_dropped;
    for (std::uint32_t i = 0; i < ctrl_.size(); ++i) {
      if (ctrl_[i].op == wire::Opcode::kSack && !ctrl_[i].pr) {
        ctrl_.erase(i);
        break;
      }
    }
    if (ctrl_.full()) return;
  }
  ctrl_.push_back(c);
  ep_.mark_tx_ready(this);
}

void Qp::queue_sack(const wire::Packet& p, const RxMeta& meta, Time now, bool pr, std::uint16_t probe_id,
                    bool dup) {
  CtrlTx c;
  c.op = wire::Opcode::kSack;
  c.psn = p.bth.psn;
  c.entropy = meta.ev;
  c.port = meta.port;
  c.m = meta.ecn_ce ? wire::SackMode::kSkipOnce : wire::SackMode::kNone;
  c.cc_flags = static_cast<std::uint8_t>((p.bth.rtx ? wire::cc_flags::kRtxEcho : 0) |
                                         (meta.ecn_ce ? wire::cc_flags::kEcnEcho : 0) |
                                         (dup ? wire::cc_flags::kDupEcho : 0) | wire::cc_flags::kSvcTime);
  c.pr = pr;
  c.probe_id = probe_id;
  c.tx_timestamp = p.has_tseth ? p.tseth.tx_timestamp : 0;
  c.arrived = now;
  unacked_bytes_ = 0;
  queue_ctrl(c);
}

void Qp::rx_probe(const wire::Packet& p, const RxMeta& meta, Time now) {
  ++ctr_.rx_probe;
  queue_sack(p, meta, now, true, p.peth.probe_id);
}

void Qp::rx_data(const wire::Packet& p, const RxMeta& meta, Time now) {
  const std::uint32_t psn = p.bth.psn;
  const std::int32_t d = psn_diff(psn, rcvd_.epsn());
  const auto window = static_cast<std::int32_t>(window_dest());
  auto nack = [&](wire::NackReason reason) {
    CtrlTx c;
    c.op = wire::Opcode::kNack;
    c.psn = psn;
    c.entropy = meta.ev;
    c.port = meta.port;
    c.reason = reason;
    c.arrived = now;
    queue_ctrl(c);
  };

  if (meta.trimmed || meta.trimmed_lasthop || p.trimmed) {
    ++ctr_.rx_trimmed;
    // A trimmed header asks for a fast retransmission, unless we already hold the packet.
    if (d >= 0 && d < window && !rcvd_.test(psn))
      nack(meta.trimmed_lasthop ? wire::NackReason::kTrimmedLastHop : wire::NackReason::kTrimmed);
    return;
  }
  if (d < 0 || (d < window && rcvd_.test(psn))) {
    // Duplicate: the requester has not seen our SACK yet; tell it again (no memory access).
    ++ctr_.rx_dup;
    if (d >= -4 * window)
      queue_sack(p, meta, now, false, 0, p.bth.rtx);
    else
      ++ctr_.rx_refused;
    return;
  }
  if (d >= window) {
    ++ctr_.rx_refused;
    nack(wire::NackReason::kPsnOorWindow);
    return;
  }
  const auto len = static_cast<std::uint32_t>(p.payload.size());
  const MemoryRegion* mr = nullptr;
  bool ok = len <= cfg_.pmtu && len <= p.reth.dma_len;
  if (ok && len > 0) {
    mr = ep_.memory().find_rkey(p.reth.rkey);
    ok = mr != nullptr && (mr->access & access::kRemoteWrite) && mr->contains(p.reth.va, len);
  }
  if (!ok) {
    ++ctr_.rx_refused;
    CtrlTx c;
    c.op = wire::Opcode::kAck;
    c.psn = psn;
    c.port = meta.port;
    c.entropy = meta.ev;
    c.syndrome = wire::aeth::kNakRemoteAccessError;
    c.arrived = now;
    queue_ctrl(c);
    return;
  }
  if (wire::has_imm(p.bth.opcode)) {
    const auto ahead = static_cast<std::uint16_t>(p.meth.rqmsn - rq_next_deliver_);
    // Slots are indexed from the next immediate to deliver, so the 16-bit RQMSN may wrap freely.
    // Allocated by the first WRITE_IMM: a QP that only sends never holds them.
    if (wimm_.empty()) wimm_.assign(cfg_.max_wimm_dest, WimmSlot{});
    WimmSlot& s = wimm_[(wimm_head_ + ahead) % wimm_.size()];
    if (ahead >= wimm_.size() || s.valid) {
      // More WRITE_IMMs outstanding than max_wimm_dest: a protocol violation (there is no RNR).
      ++ctr_.rx_refused;
      nack(wire::NackReason::kUnexpEvent);
      return;
    }
    s.valid = true;
    s.last_psn = psn;
    s.byte_len = p.reth.dma_len;
    s.imm = p.imm;
  }
  if (len > 0)
    std::memcpy(mr->addr + (p.reth.va - reinterpret_cast<std::uintptr_t>(mr->addr)), p.payload.data(), len);
  rcvd_.set(psn);
  ++ctr_.rx_data;
  ctr_.bytes_placed += len;
  rcv_bytes_ += len + kPktOverhead;
  unacked_bytes_ += len;
  if (!unrep_valid_) {
    unrep_valid_ = true;
    unrep_lo_ = unrep_hi_ = psn;
  } else {
    if (psn_lt(psn, unrep_lo_)) unrep_lo_ = psn;
    if (psn_lt(unrep_hi_, psn)) unrep_hi_ = psn;
  }
  rcvd_.advance();
  if (!wimm_.empty())
    deliver_wimms();  // the check here: a call that returns at once still costs ~19 instructions
  rx_planes_ |= 1u << meta.port;
  // An ack request that arrived ahead of a hole is answered again once the hole fills: the
  // requester is waiting for the cumulative ack, and no other trigger may come (last packet).
  bool fills_requested = false;
  if (ack_req_pending_ && psn_lt(ack_req_psn_, rcvd_.epsn())) {
    ack_req_pending_ = false;
    fills_requested = true;
  }
  if (p.bth.ack_req && !psn_lt(psn, rcvd_.epsn())) {
    if (!ack_req_pending_ || psn_lt(ack_req_psn_, psn)) ack_req_psn_ = psn;
    ack_req_pending_ = true;
  }
  // A packet arriving below a message's last packet, already answered, is late: the requester knows later
  // packets arrived and its reorder timer runs on this one, and no other trigger may come (the
  // message's last packet was answered), so it is reported at once (D43).
  const bool late = acked_req_valid_ && psn_lt(psn, acked_req_psn_);
  using wire::Opcode;
  const Opcode op = p.bth.opcode;
  const bool msg_last = op == Opcode::kWriteLast || op == Opcode::kWriteLastImm || op == Opcode::kWriteOnly ||
                        op == Opcode::kWriteOnlyImm;
  if (msg_last && p.bth.ack_req && (!acked_req_valid_ || psn_lt(acked_req_psn_, psn))) {
    acked_req_valid_ = true;
    acked_req_psn_ = psn;
  }
  if (meta.ecn_ce || p.bth.rtx || p.bth.ack_req || fills_requested || late ||
      unacked_bytes_ >= ep_.config().tun.sack_bytes_threshold)
    queue_sack(p, meta, now, false, 0);
}

bool Qp::build_ctrl(TxPacket& out, const CtrlTx& c, std::uint32_t ports, Time now) {
  // ACK traffic takes a GOOD EV (a reverse EV) of a plane data is arriving on: rotating over the
  // planes data came in on since the last SACK spreads coalesced SACKs across planes, and a plane
  // that delivers nothing gets no ACK traffic. Any usable plane is the fallback.
  std::uint8_t plane = c.port;
  const std::uint32_t recent = rx_planes_ & ports;
  if (c.op == wire::Opcode::kSack && recent != 0) {
    const std::uint32_t n = ep_.config().num_ports;
    for (std::uint32_t i = 1; i <= n; ++i) {
      const std::uint32_t cand = (ack_plane_ + i) % n;
      if ((recent >> cand) & 1u) {
        plane = static_cast<std::uint8_t>(cand);
        break;
      }
    }
    ack_plane_ = plane;
    rx_planes_ = 0;
  }
  std::uint16_t slot = EvManager::kNone;
  if ((ports >> plane) & 1u) slot = evm_.pick_on_port(plane);
  if (slot == EvManager::kNone || !((ports >> evm_.ev(slot).port) & 1u)) slot = evm_.pick(ports);
  if (slot == EvManager::kNone) return false;

  wire::Packet p;
  p.bth.opcode = c.op;
  p.bth.pkey = cfg_.pkey;
  p.bth.dest_qp = remote_.qpn;
  const std::uint32_t cack = psn_add(rcvd_.epsn(), -1);
  if (c.op == wire::Opcode::kSack) {
    p.bth.psn = cack;
    wire::Seth& s = p.seth;
    s.m = c.m;
    s.pr = c.pr;
    s.probe_id = c.probe_id;
    s.entropy = c.entropy;
    s.cack_psn = cack;
    const std::int32_t trig = psn_diff(c.psn, cack);
    s.ack_psn_offset = static_cast<std::int16_t>(trig >= -32768 && trig <= 32767 ? trig : 0);
    // A continuation names no trigger: -32768 lies below any requester window (at most 32,640).
    if (c.no_trigger) s.ack_psn_offset = -32768;
    s.cc_flags = c.cc_flags;
    const Duration svc = now > c.arrived ? now - c.arrived : 0;
    s.svc_time = static_cast<std::uint16_t>(std::min<Duration>(svc / wire::kSvcUnitNs, 0xFFFF));
    s.mpr = mpr_adv_ ? mpr_adv_ : cfg_.mpr_dest;
    // Bitmap: start at the lowest received PSN no SACK has reported yet, so every arrival is
    // reported at least once; if they do not fit in 64 bits, queue another SACK for the rest.
    // Start at the expected PSN whenever the new arrivals fit in 64 bits from there: arrivals near
    // a hole are then reported again by every SACK, so one lost SACK costs no information.
    std::uint32_t base = rcvd_.epsn();
    if (unrep_valid_ && psn_diff(unrep_hi_, rcvd_.epsn()) >= 64 && psn_lt(rcvd_.epsn(), unrep_lo_))
      base = unrep_lo_;
    s.sack_offset = static_cast<std::int16_t>(psn_diff(base, cack));
    s.sack_bitmap = rcvd_.window(base, window_dest());
    if (unrep_valid_ && psn_diff(unrep_hi_, base) >= 64) {
      unrep_lo_ = psn_add(base, 64);
      sack_more_ = true;  // poll_tx queues another SACK for the rest
    } else {
      unrep_valid_ = false;
    }
    s.cc.tx_timestamp = c.tx_timestamp;
    s.cc.rcvd_bytes = static_cast<std::uint32_t>(((rcv_bytes_ + 255) / 256) & 0xFFFFFF);
    ++ctr_.tx_sack;
  } else if (c.op == wire::Opcode::kNack) {
    p.bth.psn = c.psn;
    p.neth.reason = c.reason;
    p.neth.entropy = c.entropy;
    p.neth.nack_psn = c.psn;
    ++ctr_.tx_nack;
    ++ctr_.nack_sent_by_reason[static_cast<std::uint8_t>(c.reason) & 31];
  } else {
    p.bth.psn = c.psn;
    p.aeth.syndrome = c.syndrome;
    ++ctr_.tx_ack;
  }
  return finish_tx(out, p, slot, TrafficClass::kControl);
}

}  // namespace mrc::engine
