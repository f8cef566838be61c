// The QP's receive dispatch and its control packets: arrivals go to the requester (SACK, NACK,
// AETH) or the responder (data, probes); what the Responder asks for is queued here and built into
// SACK / NACK / NAK packets on the EV and plane the QP picks.
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
  req_.evs().expire_skips(now);  // SKIP expiries are applied before the EVs are looked at
  using wire::Opcode;
  switch (p.bth.opcode) {
    case Opcode::kSack:
      if (state_ == QpState::kRts) req_.handle_sack(p, now);
      break;
    case Opcode::kNack:
      if (state_ == QpState::kRts) req_.handle_nack(p, now);
      break;
    case Opcode::kAck:
      if (state_ == QpState::kRts) req_.handle_aeth(p, now);
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

int Qp::post_recv(std::uint64_t wr_id) {
  if (state_ == QpState::kReset || state_ == QpState::kError) return EINVAL;
  return rx_.post_recv(wr_id);
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
  rx_.sack_queued();
  queue_ctrl(c);
}

void Qp::rx_probe(const wire::Packet& p, const RxMeta& meta, Time now) {
  ++ctr_.rx_probe;
  queue_sack(p, meta, now, true, p.peth.probe_id);
}

void Qp::rx_data(const wire::Packet& p, const RxMeta& meta, Time now) {
  const Responder::Answer a = rx_.on_data(p, meta);
  if (a.reply == Responder::Reply::kNone) return;
  if (a.reply == Responder::Reply::kSack) {
    queue_sack(p, meta, now, false, 0, a.dup_echo);
    return;
  }
  CtrlTx c;
  c.psn = p.bth.psn;
  c.entropy = meta.ev;
  c.port = meta.port;
  c.arrived = now;
  if (a.reply == Responder::Reply::kNack) {
    c.op = wire::Opcode::kNack;
    c.reason = a.reason;
  } else {
    c.op = wire::Opcode::kAck;
    c.syndrome = wire::aeth::kNakRemoteAccessError;
  }
  queue_ctrl(c);
  // D86: a trim NACK also reports the arrivals coalescing holds back. The requester resends the
  // trimmed packet at once, but without the SACK it would not know which of the packets sent
  // before it arrived: when the coalescing threshold is not reached again (a window's last
  // packets), it waited for its tail probe or the RTO. The SACK answers no packet (no trigger,
  // no echo): the trimmed one did not arrive.
  if (a.reply == Responder::Reply::kNack && rx_.unacked_bytes() > 0 &&
      (a.reason == wire::NackReason::kTrimmed || a.reason == wire::NackReason::kTrimmedLastHop)) {
    rx_.sack_queued();
    queue_untriggered_sack(meta.port, meta.ev, now);
  }
}

void Qp::queue_untriggered_sack(std::uint8_t port, std::uint32_t entropy, Time now) {
  CtrlTx c;
  c.op = wire::Opcode::kSack;
  c.no_trigger = true;
  c.port = port;
  c.entropy = entropy;
  c.arrived = now;
  queue_ctrl(c);
}

bool Qp::build_ctrl(TxPacket& out, const CtrlTx& c, std::uint32_t ports, Time now) {
  // ACK traffic takes a GOOD EV (a reverse EV) of a plane data is arriving on: rotating over the
  // planes data came in on since the last SACK spreads coalesced SACKs across planes, and a plane
  // that delivers nothing gets no ACK traffic. Any usable plane is the fallback.
  std::uint8_t plane = c.port;
  const std::uint32_t recent = rx_.arrival_planes() & ports;
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
    rx_.clear_arrival_planes();
  }
  std::uint16_t slot = EvManager::kNone;
  if ((ports >> plane) & 1u) slot = req_.evs().pick_on_port(plane);
  if (slot == EvManager::kNone || !((ports >> req_.evs().ev(slot).port) & 1u)) slot = req_.evs().pick(ports);
  if (slot == EvManager::kNone) return false;

  wire::Packet p;
  p.bth.opcode = c.op;
  p.bth.pkey = cfg_.pkey;
  p.bth.dest_qp = dest_qpn_;
  if (c.op == wire::Opcode::kSack) {
    wire::Seth& s = p.seth;
    p.bth.psn = rx_.cack();
    s.m = c.m;
    s.pr = c.pr;
    s.probe_id = c.probe_id;
    s.entropy = c.entropy;
    sack_more_ = rx_.fill_sack(s);  // poll_ctrl queues another SACK for the rest when set
    const std::int32_t trig = psn_diff(c.psn, s.cack_psn);
    s.ack_psn_offset = static_cast<std::int16_t>(trig >= -32768 && trig <= 32767 ? trig : 0);
    // A continuation names no trigger: -32768 lies below any requester window (at most 32,640).
    if (c.no_trigger) s.ack_psn_offset = -32768;
    s.cc_flags = c.cc_flags;
    const Duration svc = now > c.arrived ? now - c.arrived : 0;
    s.svc_time = static_cast<std::uint16_t>(std::min<Duration>(svc / wire::kSvcUnitNs, 0xFFFF));
    s.cc.tx_timestamp = c.tx_timestamp;
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
