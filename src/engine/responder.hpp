// Responder: the receive side of a QP. It checks each data packet against the window and the
// memory key, places its payload straight into registered memory (packets land in any order: each
// carries its full remote address), records the PSN (PsnBitmap), completes WRITE_IMMs in RQMSN
// order once every earlier PSN has landed, and decides what the arrival asks the QP to send back
// (a SACK now or later, a NACK, an access NAK). It fills the SACK fields that describe what
// arrived. The QP owns it and does the sending: its control queue, the EV and plane of each reply.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/psn.hpp"
#include "engine/endpoint.hpp"
#include "engine/psn_bitmap.hpp"
#include "engine/ring.hpp"
#include "wire/packet.hpp"

namespace mrc::engine {

class Responder {
 public:
  /// What an arrival asks the QP to send.
  enum class Reply : std::uint8_t {
    kNone,       ///< nothing now (the SACK is coalesced, or the packet was dropped silently)
    kSack,       ///< a SACK answering this packet
    kNack,       ///< a NACK with `reason`
    kAccessNak,  ///< an AETH NAK: remote access error (bad rkey, range, length)
  };
  struct Answer {
    Reply reply = Reply::kNone;
    wire::NackReason reason = wire::NackReason::kTrimmed;
    bool dup_echo = false;  ///< the SACK answers a duplicate of a retransmission (kDupEcho)
  };

  /// `cfg` (pmtu, mpr_dest, max_wimm_dest, rq_depth) and `ctr` are the QP's; call refresh() when
  /// the QP takes a new configuration (INIT). Completions go to `ep` for QP `qpn`.
  Responder(Endpoint& ep, std::uint32_t qpn, const QpConfig& cfg, QpCounters& ctr);
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  /// At RTR: the first expected PSN.
  void start(std::uint32_t rq_psn) { rcvd_.init(cfg_.mpr_dest * kMprUnit, rq_psn); }
  /// Takes the QP configuration's pmtu and mpr_dest again (after a change in INIT).
  void refresh() {
    pmtu_ = cfg_.pmtu;
    window_ = (mpr_adv_ ? mpr_adv_ : cfg_.mpr_dest) * kMprUnit;
  }
  /// A data packet (opcode is_data) for this QP in RTR or RTS.
  Answer on_data(const wire::Packet& p, const RxMeta& meta);

  /// Takes a receive WR (only a WRITE_IMM consumes one); ENOMEM when rq_depth are posted.
  int post_recv(std::uint64_t wr_id);
  /// Completes every posted receive WR with kFlushed (the QP failed).
  void flush_recvs();

  /// A SACK was queued: coalescing starts again.
  void sack_queued() { unacked_bytes_ = 0; }
  /// Payload bytes placed since the last SACK was queued (what coalescing holds back).
  std::uint32_t unacked_bytes() const { return unacked_bytes_; }
  /// The cumulative ack: the PSN below the expected one.
  std::uint32_t cack() const { return psn_add(rcvd_.epsn(), -1); }
  std::uint32_t epsn() const { return rcvd_.epsn(); }
  /// Fills what a SACK reports of the arrivals — cumulative ack, bitmap, its offset, the advertised
  /// window, the received byte count — for the SACK the QP sends now. The bitmap starts at the
  /// lowest arrival no SACK reported yet when they do not fit in 64 PSNs from the expected one (D3);
  /// true when some still do not fit: the QP queues another SACK for them.
  bool fill_sack(wire::Seth& s);
  /// Planes data arrived on since clear_arrival_planes() (a bit per plane): where SACKs may go.
  std::uint32_t arrival_planes() const { return rx_planes_; }
  void clear_arrival_planes() { rx_planes_ = 0; }

  /// Responder window in PSNs: what we advertise (dynamic MPR) or mpr_dest.
  std::uint32_t window() const { return window_; }
  /// Dynamic MPR: the window (128-PSN units, 1..mpr_dest) advertised in SACKs; EINVAL otherwise.
  int set_advertised_mpr(std::uint8_t units);
  /// Heap bytes held (capacity, not use).
  std::size_t heap_bytes() const {
    return rcvd_.memory_bytes() + wimm_.capacity() * sizeof(WimmSlot) + rq_.memory_bytes();
  }

 private:
  struct WimmSlot {
    bool valid = false;
    std::uint32_t last_psn = 0;
    std::uint32_t byte_len = 0;
    std::uint32_t imm = 0;
  };
  void deliver_wimms();
  /// Makes room for the immediate `ahead` slots past the next to deliver: false when that is
  /// max_wimm_dest or more. The ring starts at kWimmFirst slots and doubles, up to max_wimm_dest.
  bool grow_wimms(std::uint32_t ahead);
  static constexpr std::uint32_t kWimmFirst = 8;

  Endpoint& ep_;
  std::uint32_t qpn_;
  const QpConfig& cfg_;
  QpCounters& ctr_;
  // What the per-packet path reads of the configuration, kept here (refresh()): one load each.
  std::uint32_t pmtu_ = 0;
  std::uint32_t window_ = 0;
  std::uint32_t sack_threshold_ = 0;  ///< Tunables::sack_bytes_threshold
  PsnBitmap rcvd_;                    ///< PSNs received: the expected PSN and the window's bitmap
  std::uint64_t rcv_bytes_ = 0;
  std::uint32_t unacked_bytes_ = 0;
  /// Ring (from the first WRITE_IMM, up to max_wimm_dest slots); wimm_head_ holds RQMSN rq_next_deliver_
  std::vector<WimmSlot> wimm_;
  std::uint32_t wimm_head_ = 0;
  std::uint16_t rq_next_deliver_ = 0;
  Ring<std::uint64_t> rq_;           ///< posted receive WR ids
  std::uint32_t rx_planes_ = 0;      ///< planes data arrived on since the last SACK
  std::uint8_t mpr_adv_ = 0;         ///< dynamic MPR we advertise (0 = static mpr_dest)
  bool ack_req_pending_ = false;     ///< an A-bit packet arrived above a hole ...
  std::uint32_t ack_req_psn_ = 0;    ///< ... this one: SACK when the expected PSN passes it
  bool acked_req_valid_ = false;     ///< a SACK answered a message's last packet ...
  std::uint32_t acked_req_psn_ = 0;  ///< ... at this PSN, the highest: later arrivals below it are late
  bool unrep_valid_ = false;         ///< received PSNs not yet covered by any SACK bitmap
  std::uint32_t unrep_lo_ = 0, unrep_hi_ = 0;
};

// On the receive path of every packet: inline in the QP's dispatch (as calls they cost ~40
// instructions a packet, bench/callgrind.sh).
inline Responder::Answer Responder::on_data(const wire::Packet& p, const RxMeta& meta) {
  const std::uint32_t psn = p.bth.psn;
  const std::int32_t d = psn_diff(psn, rcvd_.epsn());
  const auto win = static_cast<std::int32_t>(window());
  Answer a;
  auto nack = [&](wire::NackReason reason) {
    a.reply = Reply::kNack;
    a.reason = reason;
    return a;
  };

  if (meta.trimmed || meta.trimmed_lasthop || p.trimmed) {
    ++ctr_.rx_trimmed;
    // A trimmed header asks for a fast retransmission, unless we already hold the packet.
    if (d >= 0 && d < win && !rcvd_.test(psn))
      return nack(meta.trimmed_lasthop ? wire::NackReason::kTrimmedLastHop : wire::NackReason::kTrimmed);
    return a;
  }
  if (d < 0 || (d < win && rcvd_.test(psn))) {
    // Duplicate: the requester has not seen our SACK yet; tell it again (no memory access).
    ++ctr_.rx_dup;
    if (d < -4 * win) {
      ++ctr_.rx_refused;
      return a;
    }
    a.reply = Reply::kSack;
    a.dup_echo = p.bth.rtx;
    return a;
  }
  if (d >= win) {
    ++ctr_.rx_refused;
    return nack(wire::NackReason::kPsnOorWindow);
  }
  const auto len = static_cast<std::uint32_t>(p.payload.size());
  const MemoryRegion* mr = nullptr;
  bool ok = len <= pmtu_ && len <= p.reth.dma_len;
  if (ok && len > 0) {
    mr = ep_.memory().find_rkey(p.reth.rkey);
    ok = mr != nullptr && (mr->access & access::kRemoteWrite) && mr->contains(p.reth.va, len);
  }
  if (!ok) {
    ++ctr_.rx_refused;
    a.reply = Reply::kAccessNak;
    return a;
  }
  if (wire::has_imm(p.bth.opcode)) {
    const auto ahead = static_cast<std::uint16_t>(p.meth.rqmsn - rq_next_deliver_);
    // Slots are indexed from the next immediate to deliver, so the 16-bit RQMSN may wrap freely.
    // Allocated by the first WRITE_IMM (a QP that only sends never holds them) and grown while
    // immediates arrive further ahead, up to max_wimm_dest.
    if (ahead >= wimm_.size() && !grow_wimms(ahead)) {
      // More WRITE_IMMs outstanding than max_wimm_dest: a protocol violation (there is no RNR).
      ++ctr_.rx_refused;
      return nack(wire::NackReason::kUnexpEvent);
    }
    WimmSlot& s = wimm_[(wimm_head_ + ahead) % wimm_.size()];
    if (s.valid) {  // another WRITE_IMM already holds this RQMSN
      ++ctr_.rx_refused;
      return nack(wire::NackReason::kUnexpEvent);
    }
    s.valid = true;
    s.last_psn = psn;
    s.byte_len = p.reth.dma_len;
    s.imm = p.imm;
  }
  if (len > 0 && !meta.no_payload)
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
      unacked_bytes_ >= sack_threshold_)
    a.reply = Reply::kSack;
  return a;
}

inline bool Responder::fill_sack(wire::Seth& s) {
  const std::uint32_t cack = this->cack();
  s.cack_psn = cack;
  s.mpr = static_cast<std::uint8_t>(window_ / kMprUnit);  // the advertised MPR, or mpr_dest
  // Bitmap: start at the expected PSN whenever the new arrivals fit in 64 bits from there: arrivals
  // near a hole are then reported again by every SACK, so one lost SACK costs no information. Far
  // above a hole, end the bitmap at the newest arrival (D62): the arrivals of the last SACKs are
  // reported again, so a lost SACK does not make their packets look lost to the requester's RACK
  // (a spurious retransmission each, and a reorder window widened for nothing). If the new
  // arrivals do not fit in 64 bits, start at the lowest one and queue another SACK for the rest.
  std::uint32_t base = rcvd_.epsn();
  if (unrep_valid_ && psn_diff(unrep_hi_, rcvd_.epsn()) >= 64 && psn_lt(rcvd_.epsn(), unrep_lo_))
    base = psn_diff(unrep_hi_, unrep_lo_) < 64 ? psn_add(unrep_hi_, -63) : unrep_lo_;
  s.sack_offset = static_cast<std::int16_t>(psn_diff(base, cack));
  s.sack_bitmap = rcvd_.window(base, window());
  bool more = false;
  if (unrep_valid_ && psn_diff(unrep_hi_, base) >= 64) {
    unrep_lo_ = psn_add(base, 64);
    more = true;
  } else {
    unrep_valid_ = false;
  }
  s.cc.rcvd_bytes = static_cast<std::uint32_t>(((rcv_bytes_ + 255) / 256) & 0xFFFFFF);
  return more;
}

}  // namespace mrc::engine
