// Requester: segmentation, PSN window, SACK/NACK processing, loss detection (RACK-style, with
// reliability probes as evidence), selective retransmission, the RTO and the send completions of the
// send side (requester.hpp).
#include "engine/requester.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>

#include "engine/qp.hpp"

namespace mrc::engine {

namespace {
constexpr std::uint32_t kMaxMessage = 1u << 31;
}

Requester::Requester(Qp& qp, Endpoint& ep, std::uint32_t qpn, const QpConfig& cfg, const QpRemote& remote,
                     QpCounters& ctr)
    : qp_(qp),
      ep_(ep),
      qpn_(qpn),
      cfg_(cfg),
      remote_(remote),
      ctr_(ctr),
      cc_(cfg.cc),
      rtt_(cfg.cc.algorithm == cc::Algorithm::kNscc ? cfg.cc.nscc.base_rtt_ns
                                                    : ep.config().tun.base_rtt_hint) {
  update_pto();
  planes_.init(ep.config().num_ports);
  events_ = ep.config().events;
}

void Requester::start(Time now) {
  // The send queue and the PSN ring are allocated by the first post_send: a QP that only
  // receives (half of all QPs in a permutation) never needs them.
  snd_una_ = snd_nxt_ = remote_.sq_psn;
  sent_.start(snd_una_);
  last_progress_ = now;
}

void Requester::update_window() {
  std::uint32_t units = std::min<std::uint32_t>(cfg_.mpr, remote_.peer_mpr_dest);
  if (peer_mpr_adv_ != 0) units = std::min<std::uint32_t>(units, peer_mpr_adv_);
  window_psns_ = units * kMprUnit;
}

void Requester::update_timing() {
  const Tunables& t = ep_.config().tun;
  evm_.set_timing(t.skip_duration ? t.skip_duration : rtt_.base(),
                  t.probe_interval ? t.probe_interval : 4 * rtt_.base());
}

void Requester::on_rtt_sample(Duration rtt) {
  if (rtt_.on_sample(rtt)) update_timing();
  update_pto();
}

Duration Requester::reorder_window() const {
  const Duration w = ep_.config().tun.reorder_window;
  return w ? w : rtt_.reorder_window();
}

Duration Requester::slowest_window() const {
  return 2 * std::max(rtt_.srtt(), rtt_.base());
}

Duration Requester::tail_probe_delay() const {
  const Duration d = ep_.config().tun.tail_probe_delay;
  // D87: RTT samples leave out how long the responder held the SACK (svc), but the SACK for the
  // newest packet is held too: the probe waits out the longest hold lately, as QUIC's PTO adds the
  // peer's max_ack_delay (RFC 9002 6.2.1) and TLP the delayed-ACK timer (RFC 8985 7.2).
  return d ? d : rtt_.tail_probe_delay(reorder_window()) + sack_delay_.get();
}

void Requester::tx_ready() {
  window_blocked_ = false;
  ep_.mark_tx_ready(&qp_);
}

void Requester::resend_in_flight_on(std::uint8_t port, Time now) {
  // Packets in flight on a plane that failed are gone: resend them elsewhere right away instead
  // of waiting a reorder window for each.
  std::uint32_t psn = sent_.oldest();
  while (psn != SentPackets::kNone) {
    const TxRec& r = rec(psn);
    const std::uint32_t next = sent_.next(psn);
    if (r.ev_slot != EvManager::kNone && evm_.ev(r.ev_slot).port == port)
      mark_lost(psn, LossCause::kPort, now);
    psn = next;
  }
}

void Requester::on_timer(Time now) {
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
}

int Requester::post_send(const SendWr& wr, Time now) {
  if (wr.length > kMaxMessage) return EINVAL;
  if (!sq_.allocated()) {
    // The ring starts at 16 records and doubles while packets in flight need it, up to the
    // window's slots (SentPackets): a QP pays for the packets it has in flight, not for its
    // messages' length (the 4,032 senders of a 1 MB all-to-all of 64 hosts keep 16-32 in flight).
    const std::uint32_t full = std::bit_ceil(std::max<std::uint32_t>(cfg_.mpr * kMprUnit, 64));
    sent_.init(16, full);
    sq_.reserve(cfg_.sq_depth);
  }
  if (sq_.full()) return ENOMEM;
  SendWqe w;
  w.wr = wr;
  w.npkts = wr.length == 0 ? 1 : (wr.length + cfg_.pmtu - 1) / cfg_.pmtu;
  w.msn = next_msn_++;
  w.rqmsn = wr.with_imm ? next_rqmsn_++ : next_rqmsn_;
  const std::uint32_t idx = sq_.push_back(w);
  ++sq_unsent_;
  if (wr.length > 0) {
    const MemoryRegion* mr = ep_.memory().find_lkey(wr.lkey);
    if (mr == nullptr || !mr->contains(wr.local_addr, wr.length)) {
      // Verbs semantics: the WR completes in error and the QP moves to ERROR.
      qp_.fail_all(WcStatus::kLocalProtectionError, idx, now);
      return 0;
    }
    sq_.slot(idx).local = mr->addr + (wr.local_addr - reinterpret_cast<std::uintptr_t>(mr->addr));
  }
  tx_ready();
  return 0;
}

bool Requester::fill_data(wire::Packet& p, const TxRec& r, std::uint32_t psn, bool rtx) const {
  const SendWqe& w = sq_.slot(r.wqe);
  // The WR's packets have consecutive PSNs from its first.
  const std::uint32_t index = (psn - w.first_psn) & kPsnMask;
  const std::uint32_t offset = index * cfg_.pmtu;
  const bool first = index == 0;
  const bool last = index + 1 == w.npkts;
  using wire::Opcode;
  if (first && last)
    p.bth.opcode = w.wr.with_imm ? Opcode::kWriteOnlyImm : Opcode::kWriteOnly;
  else if (first)
    p.bth.opcode = Opcode::kWriteFirst;
  else if (last)
    p.bth.opcode = w.wr.with_imm ? Opcode::kWriteLastImm : Opcode::kWriteLast;
  else
    p.bth.opcode = Opcode::kWriteMiddle;
  p.bth.pkey = cfg_.pkey;
  p.bth.dest_qp = qp_.dest_qpn();
  p.bth.psn = psn;
  p.bth.rtx = rtx;
  p.meth.msn = w.msn;
  p.meth.rqmsn = w.rqmsn;
  p.reth.va = w.wr.remote_addr + offset;
  p.reth.rkey = w.wr.rkey;
  p.reth.dma_len = w.wr.length;
  p.imm = w.wr.imm;
  p.payload = std::span<const std::uint8_t>(w.local == nullptr ? nullptr : w.local + offset, r.len);
  return last;
}

bool Requester::build_data(TxPacket& out, std::uint32_t psn, bool rtx, std::uint16_t slot, Time now) {
  TxRec& r = rec(psn);
  wire::Packet p;
  const bool last = fill_data(p, r, psn, rtx);
  const std::uint32_t in_flight_after = static_cast<std::uint32_t>(psn_diff(snd_nxt_, snd_una_));
  const bool nothing_more = sent_.lost() <= (rtx ? 1u : 0u) && sq_unsent_ == 0;
  // Ask for an immediate SACK at message ends, on retransmissions, on the last packet we have to
  // send, and when this packet closes the MPR or congestion window (judged after charging it: a
  // window of a few packets that never asks would wait for the 16 KiB coalescing threshold).
  cc_.on_send(r.len + kPktOverhead);
  p.bth.ack_req = last || rtx || nothing_more || cc_.ack_request() ||
                  !cc_.can_send(cfg_.pmtu + kPktOverhead) || in_flight_after + 1 >= window_psns();

  if (rtx) {
    sent_.lost_done();
    ++ctr_.tx_rtx;
    switch (static_cast<LossCause>(r.lost_cause)) {
      case LossCause::kNack:
        ++ctr_.rtx_nack;
        break;
      case LossCause::kLoss:
      case LossCause::kTail:
        ++ctr_.rtx_loss;
        break;
      case LossCause::kTimeout:
        ++ctr_.rtx_timeout;
        break;
      case LossCause::kPort:
        ++ctr_.rtx_port;
        break;
    }
  } else {
    ++ctr_.tx_data;
  }
  const bool only_latest = r.tx_count == 0 || (rtx && (r.flags & kOnlyLatest) &&
                                               static_cast<LossCause>(r.lost_cause) == LossCause::kNack);
  r.flags = static_cast<std::uint8_t>((r.flags & ~(kLost | kOnlyLatest)) | kInFlight | kValid |
                                      (only_latest ? kOnlyLatest : 0));
  if (r.tx_count == 0)
    r.since_first = 0;
  else
    r.since_first =
        static_cast<std::uint32_t>(std::min<Duration>(r.since_first + (now - r.sent), 0xFFFFFFFFu));
  r.sent = now;
  r.ev_slot = slot;
  if (r.tx_count < 255) ++r.tx_count;
  if (sent_.none_in_flight()) last_progress_ = now;
  sent_.push(psn);
  // Tail-loss probe (D43): due one PTO after the newest transmission, doubled per probe since the
  // last progress. Anything sent before a delivered packet is RACK's job, so only the newest matters.
  tail_probe_at_ = now + pto_;
  return qp_.finish_tx(out, p, slot, rtx ? TrafficClass::kDataRtx : TrafficClass::kData);
}

bool Requester::plane_failed(std::uint8_t plane) const {
  return ((ep_.port_mask() & qp_.peer_port_mask()) >> plane & 1u) == 0 || evm_.active_good(plane) == 0;
}

void Requester::queue_dup(std::uint32_t psn) {
  if (dup_queue_.full()) {
    if (dup_queue_.capacity() >= kDupQueueMax) return;  // a huge window on a failed plane: one copy each
    dup_queue_.reserve(std::max<std::uint32_t>(64, dup_queue_.capacity() * 2));
  }
  dup_queue_.push_back(psn);
}

bool Requester::poll_dup(TxPacket& out, std::uint32_t ports) {
  while (!dup_queue_.empty()) {
    const std::uint32_t psn = dup_queue_.front();
    // Still unacknowledged, and its retransmission in flight (not lost again, which resends it).
    const TxRec& r = rec(psn);
    if (psn_lt(psn, snd_una_) || !psn_lt(psn, snd_nxt_) || (r.flags & (kSacked | kLost)) ||
        !(r.flags & kInFlight) || r.ev_slot == EvManager::kNone) {
      dup_queue_.pop_front();
      continue;
    }
    // On another plane than the retransmission, so one plane's loss cannot take both; it waits
    // while those planes are busy (`ports` holds the free ones) and is dropped if none is usable.
    const std::uint32_t other = ~(1u << evm_.ev(r.ev_slot).port);
    if ((ep_.port_mask() & qp_.peer_port_mask() & other) == 0) {
      dup_queue_.pop_front();
      continue;
    }
    if ((ports & other) == 0 || !cc_.can_send(r.len + kPktOverhead)) return false;
    const std::uint16_t slot = evm_.pick_proven(ports & other, r.sent);
    if (slot == EvManager::kNone) return false;
    dup_queue_.pop_front();
    if (dup_sent_.empty()) dup_sent_.assign(kDupSentSlots, 0);
    dup_sent_[dup_sent_next_] = psn + 1;
    dup_sent_next_ = (dup_sent_next_ + 1) % kDupSentSlots;
    // The record keeps describing the retransmission, and CC is not charged: the one
    // acknowledgement of the PSN releases one copy.
    wire::Packet p;
    fill_data(p, r, psn, true);
    p.bth.ack_req = true;
    ++ctr_.tx_dup;
    return qp_.finish_tx(out, p, slot, TrafficClass::kDataRtx);
  }
  return false;
}

bool Requester::expected_dup(std::uint32_t psn) {
  for (std::uint32_t& d : dup_sent_)
    if (d == psn + 1) {
      d = 0;
      return true;
    }
  return false;
}

void Requester::mark_lost(std::uint32_t psn, LossCause cause, Time now) {
  TxRec& r = rec(psn);
  if (!(r.flags & kInFlight) || (r.flags & kSacked)) return;
  sent_.mark_lost(psn);
  r.lost_cause = static_cast<std::uint8_t>(cause);
  // A transmission a fatal NAK answered, given up by loss detection: one refusal (D39).
  if (fatal_answered_ && psn == fatal_psn_ && cause != LossCause::kNack && cause != LossCause::kPort)
    on_fatal_loss(now);
  const std::uint32_t bytes = r.len + kPktOverhead;
  switch (cause) {
    case LossCause::kNack:
      break;  // the NACK handler informs CC and the EV manager
    case LossCause::kLoss:
    case LossCause::kTail:
    case LossCause::kTimeout:
      if (ep_.config().tun.loss_is_congestion)
        cc_.on_inferred_loss(bytes, now);
      else
        cc_.on_forget(bytes);
      if (r.ev_slot != EvManager::kNone) {
        r.suspect_slot = r.ev_slot;
        r.suspect_cause =
            static_cast<std::uint8_t>(cause == LossCause::kTimeout ? EvCause::kTimeout : EvCause::kLoss);
        const std::uint8_t plane = evm_.ev(r.ev_slot).port;
        // A tail-loss probe is a guess, not evidence against the plane (D18). The run's oldest loss
        // must be older than RACK's RTT plus max(reorder window, half a base RTT) (D62): a queue
        // seldom delays a packet that much beyond RACK's expectation.
        if (cause != LossCause::kTail &&
            planes_.on_lost(plane, r.sent, now, rack_.rtt() + std::max(reorder_window(), rtt_.base() / 2),
                            ep_.config().tun.plane_failure_losses, [&] { return blame_.rate(ctr_.tx_data); }))
          fail_plane(plane, now);
      }
      break;
    case LossCause::kPort:
      cc_.on_forget(bytes);
      break;
  }
  tx_ready();
}

void Requester::mark_acked(std::uint32_t psn, std::uint32_t& newly, Time& newest_sent, std::uint32_t judged,
                           Time now) {
  TxRec& r = rec(psn);
  if (!(r.flags & kValid) || (r.flags & kSacked)) return;
  r.flags |= kSacked;
  if (r.flags & kInFlight) {
    sent_.remove(psn);
    r.flags &= static_cast<std::uint8_t>(~kInFlight);
    newly += r.len + kPktOverhead;
  }
  if (r.flags & kLost) {
    r.flags &= static_cast<std::uint8_t>(~kLost);
    sent_.lost_done();
    // Declared lost by RACK but delivered after all: reordering the window did not cover.
    if (r.tx_count == 1 && static_cast<LossCause>(r.lost_cause) == LossCause::kLoss)
      note_reordering(reorder_window());  // widen by a quarter
  }
  // A retransmission acknowledged: the original was lost (D7b). The SACK that names it as its
  // trigger (`judged`) also says which copy arrived, and handle_sack judges it; acknowledged by
  // another SACK it is confirmed here (D57): a spurious retransmission confirms a loss wrongly,
  // rarely, and PathBlame's statistics keep such stray losses from blaming a path.
  if (r.suspect_slot != EvManager::kNone) {
    if (r.tx_count >= 2 && psn != judged)
      on_confirmed_loss(r.suspect_slot, static_cast<EvCause>(r.suspect_cause), now);
    r.suspect_slot = EvManager::kNone;
  }
  // Only first transmissions say unambiguously when the delivered copy was sent.
  if (r.tx_count == 1) {
    newest_sent = std::max(newest_sent, r.sent);
    if (r.ev_slot != EvManager::kNone) {
      if (evm_.on_delivered(r.ev_slot, r.sent))  // D57: it survived its last confirmed loss
        blame_.on_survived(evm_.loss_history(r.ev_slot));
      planes_.on_delivered(evm_.ev(r.ev_slot).port, r.sent);
    }
  }
  ctr_.bytes_acked += r.len;
}

void Requester::ack_cumulative(std::uint32_t new_una, std::uint32_t& newly, Time& newest_sent,
                               std::uint32_t judged, Time now) {
  while (psn_lt(snd_una_, new_una)) {
    mark_acked(snd_una_, newly, newest_sent, judged, now);
    rec(snd_una_).flags = 0;  // retire the slot
    snd_una_ = psn_add(snd_una_, 1);
  }
}

void Requester::fail_plane(std::uint8_t plane, Time now) {
  // Several losses on the plane and nothing sent on it since has arrived, while other planes
  // deliver: the plane has failed. Retire all its EVs now instead of losing a packet on each.
  for (std::uint16_t s = 0; s < evm_.size(); ++s)
    if (evm_.ev(s).port == plane && evm_.is_active(s)) evm_.on_failure(s, EvCause::kLoss, now);
  // Backups promoted meanwhile are on the same plane: retire them too.
  while (evm_.active_good(plane) > 0) {
    bool changed = false;
    for (std::uint16_t s = 0; s < evm_.size(); ++s)
      if (evm_.ev(s).port == plane && evm_.is_active(s) && evm_.state(s) == EvState::kGood) {
        evm_.on_failure(s, EvCause::kLoss, now);
        changed |= evm_.state(s) != EvState::kGood;  // the ev_min_active floor may keep it GOOD
      }
    if (!changed) break;
  }
  resend_in_flight_on(plane, now);
}

void Requester::detect_losses(Time now) {
  // D63: on queued paths a packet whose plane has delivered a later one (so it is not a dead
  // plane's) is held to the slowest recent path's RTT as well; a dead plane's packets keep RACK's
  // shorter wait, which the failover needs. A fixed window (a tunable) is the whole rule.
  const Duration window = reorder_window();
  const Duration slow = ep_.config().tun.reorder_window ? 0 : rtt_.slow_wait(rack_.slowest_rtt(), window);
  rack_.detect(
      sent_, window, slow, now, [&](std::uint32_t psn) { mark_lost(psn, LossCause::kLoss, now); },
      [&](const TxRec& r) {
        return r.ev_slot != EvManager::kNone && planes_.delivered_sent(evm_.ev(r.ev_slot).port) > r.sent;
      });
}

void Requester::note_reordering(Duration excess) {
  rtt_.on_reordering(excess);
  update_pto();
}

void Requester::on_confirmed_loss(std::uint16_t slot, EvCause cause, Time now) {
  if (blame_.on_confirmed_loss(evm_.loss_history(slot), ctr_.tx_data, evm_.active_usable()))
    evm_.on_failure(slot, cause, now);
}

std::uint32_t Requester::wqe_of(std::uint32_t psn) {
  if (psn_lt(psn, snd_una_) || !psn_lt(psn, snd_nxt_)) return sq_.head_slot();
  return rec(psn).wqe;
}

void Requester::complete_send_wqes() {
  while (!sq_.empty()) {
    const SendWqe& w = sq_.front();
    if (w.sent_pkts != w.npkts) break;
    const std::uint32_t last_psn = psn_add(w.first_psn, w.npkts - 1);
    if (!psn_lt(last_psn, snd_una_)) break;
    if (w.wr.with_imm) --wimm_outstanding_;
    if (w.wr.signaled) {
      Completion c;
      c.wr_id = w.wr.wr_id;
      c.qpn = qpn_;
      c.opcode = w.wr.with_imm ? WcOpcode::kRdmaWriteImm : WcOpcode::kRdmaWrite;
      c.byte_len = w.wr.length;
      ep_.push_completion(c);
    }
    sq_.pop_front();
  }
}

void Requester::fail_all(WcStatus first_status, std::uint32_t failing_wqe) {
  // Send queue: the failing WR carries the error, everything after it is flushed (always reported).
  while (!sq_.empty()) {
    const SendWqe& w = sq_.front();
    Completion c;
    c.wr_id = w.wr.wr_id;
    c.qpn = qpn_;
    c.opcode = w.wr.with_imm ? WcOpcode::kRdmaWriteImm : WcOpcode::kRdmaWrite;
    c.status = sq_.head_slot() == failing_wqe ? first_status : WcStatus::kFlushed;
    ep_.push_completion(c);
    sq_.pop_front();
  }
  sq_seg_ = sq_.tail_slot();
  sq_unsent_ = 0;
  wimm_outstanding_ = 0;
  sent_.clear_in_flight();
  tail_probe_at_ = kNever;
  for (Probe& p : probes_) p.live = false;
  live_probes_ = 0;
}

void Requester::handle_sack(const wire::Packet& p, Time now) {
  ++ctr_.rx_sack;
  const wire::Seth& s = p.seth;
  const std::uint32_t new_una = psn_add(s.cack_psn, 1);
  // A SACK may not acknowledge PSNs we never sent.
  if (psn_lt(snd_nxt_, new_una) ||
      psn_diff(new_una, snd_una_) < -static_cast<std::int32_t>(sent_.max_slots())) {
    ++ctr_.rx_refused;
    return;
  }
  const std::uint32_t old_una = snd_una_;
  const std::uint32_t trigger = psn_add(s.cack_psn, s.ack_psn_offset);
  const bool trigger_known =
      !s.pr && !psn_lt(trigger, old_una) && psn_lt(trigger, snd_nxt_) && (rec(trigger).flags & kValid);
  // Read what the trigger tells before acknowledging retires its slot.
  TxRec trig{};
  if (trigger_known) trig = rec(trigger);

  std::uint32_t newly = 0;
  Time newest_sent = 0;
  // snd_nxt_: no PSN this SACK acknowledges.
  const std::uint32_t judged = trigger_known ? trigger : snd_nxt_;
  if (psn_lt(snd_una_, new_una)) ack_cumulative(new_una, newly, newest_sent, judged, now);
  const std::uint32_t base = psn_add(s.cack_psn, s.sack_offset);
  for (std::uint64_t bits = s.sack_bitmap; bits != 0; bits &= bits - 1) {
    const std::uint32_t psn = psn_add(base, std::countr_zero(bits));
    if (psn_lt(psn, snd_una_)) continue;
    if (!psn_lt(psn, snd_nxt_)) break;
    mark_acked(psn, newly, newest_sent, judged, now);
  }

  // The trigger must be a packet this SACK acknowledges (cumulatively or in its bitmap): a SACK
  // that names another PSN (a continuation SACK, a stale or forged one) says nothing about when any
  // packet arrived, and its RTT sample would be bogus (a PSN sent after the SACK was built).
  const std::int32_t trig_bit = psn_diff(trigger, base);
  const bool trigger_acked =
      trigger_known &&
      (psn_lt(trigger, new_una) || (trig_bit >= 0 && trig_bit < 64 && ((s.sack_bitmap >> trig_bit) & 1u)));
  const bool ecn = s.m == wire::SackMode::kSkipOnce || (s.cc_flags & wire::cc_flags::kEcnEcho);
  cc::AckSample sample;
  sample.newly_acked_bytes = newly;
  sample.ecn_echo = ecn;
  sample.rcv_cwnd_pen = s.cc.rcv_cwnd_pen;
  sample.restore_cwnd = s.cc.restore_cwnd;
  if (trigger_acked) {
    const bool rtx_echo = s.cc_flags & wire::cc_flags::kRtxEcho;
    const bool dup_echo = s.cc_flags & wire::cc_flags::kDupEcho;
    const Duration svc =
        (s.cc_flags & wire::cc_flags::kSvcTime) ? Duration{s.svc_time} * wire::kSvcUnitNs : 0;
    // D81: every earlier copy was answered by a trim NACK, so the latest is the one that arrived
    // (unless a peer that echoes says it was not a retransmission: then nothing is clear).
    const bool echoes = ep_.config().wire_ext && qp_.peer_wire_ext();
    const bool only_latest = trig.tx_count >= 2 && (trig.flags & kOnlyLatest) && (rtx_echo || !echoes);
    const bool unambiguous =
        only_latest || (trig.tx_count == 1 && !rtx_echo) || (trig.tx_count == 2 && rtx_echo);
    if (s.cc_flags & wire::cc_flags::kSvcTime) {
      const Duration held = sack_delay_.get();
      sack_delay_.update(now, svc, slowest_window());
      if (sack_delay_.get() != held) update_pto();  // every other input of the PTO keeps it current
    }
    if (unambiguous && now > trig.sent + svc) {
      const Duration rtt = now - trig.sent - svc;
      sample.rtt_valid = true;
      sample.rtt_ns = rtt;
      on_rtt_sample(rtt);
      // RACK: this copy's send time is known delivered. A first transmission delivered after one
      // sent later had been reported shows how far the paths reorder beyond that one's RTT.
      if (trig.tx_count == 1) note_reordering(rack_.excess(trig.sent, rtt));
      rack_.on_delivered(trig.sent, rtt);
    } else if (rtt_.srtt() == 0 && trig.tx_count >= 2 && !rtx_echo && ep_.config().wire_ext &&
               qp_.peer_wire_ext() && trig.since_first != 0xFFFFFFFFu &&
               now > trig.sent - trig.since_first + svc) {
      // D63: the peer says the first copy arrived (Karn's ambiguity resolved by the echo). Without
      // this sample a QP whose every packet is resent before its SACK (a tail probe in a deep incast
      // queue) never learns its RTT, and its probe keeps firing too early.
      on_rtt_sample(now - (trig.sent - trig.since_first) - svc);
    }
    if (rtx_echo && dup_echo && trig.tx_count >= 2) {
      // Counted below.
    } else if (trig.suspect_slot != EvManager::kNone && trig.tx_count >= 2 && (rtx_echo || s.cc_flags == 0)) {
      // This SACK answers a retransmission and no duplicate: the original was lost (D7b); its
      // path is blamed only if it loses more than the others (D43). A peer that sends no cc_flags
      // (no wire extension) cannot say which copy arrived: the loss counts, and the statistics
      // of D43 keep lost SACKs, which hit every EV alike, from blaming any one.
      on_confirmed_loss(trig.suspect_slot, static_cast<EvCause>(trig.suspect_cause), now);
    }
    std::uint16_t slot = trig.ev_slot;
    if (slot == EvManager::kNone || evm_.ev(slot).value != s.entropy) slot = EvManager::kNone;
    if (slot != EvManager::kNone) {
      if (s.m == wire::SackMode::kAlwaysSkip)
        evm_.on_failure(slot, EvCause::kAlwaysSkip, now);
      else if (ecn)
        evm_.on_skip_signal(slot, EvCause::kEcnEcho, now);
    }
  }
  if (!s.pr && (s.cc_flags & wire::cc_flags::kRtxEcho) && (s.cc_flags & wire::cc_flags::kDupEcho) &&
      !expected_dup(trigger)) {
    // A retransmission that arrived as a duplicate: the original had arrived (spurious). It widens
    // the reorder window (D43), like a DSACK in RFC 8985. Its PSN is usually acknowledged already,
    // so the trigger's record cannot say more.
    ++ctr_.rtx_spurious;
    note_reordering(reorder_window());
  }
  if (s.pr) {
    if (probes_.empty()) return;  // we never sent a probe
    Probe& pr = probes_[s.probe_id % probes_.size()];
    if (pr.live && pr.id == s.probe_id) {
      pr.live = false;
      --live_probes_;
      // Everything sent before the probe should have been reported by now (D83: by the data's RTT).
      rack_.on_probe_answered(pr.sent, now - pr.sent);
      if (!pr.tail && pr.ev_slot != EvManager::kNone) evm_.on_probe_success(pr.ev_slot, now);
    }
  }
  if (s.mpr != 0 && s.mpr != peer_mpr_adv_) {
    peer_mpr_adv_ = s.mpr;
    update_window();
  }
  if (newest_sent != 0) rack_.on_ack(newest_sent, now, slowest_window());
  if (newly > 0) {
    retries_ = 0;
    last_progress_ = now;
    if (tlp_backoff_ != 0) {
      tlp_backoff_ = 0;
      update_pto();
    }
  }
  cc_.on_ack(sample, now);
  settle_fatal();
  detect_losses(now);
  complete_send_wqes();
  if (sent_.none_in_flight()) tail_probe_at_ = kNever;
  tx_ready();
}

void Requester::handle_nack(const wire::Packet& p, Time now) {
  ++ctr_.rx_nack;
  const wire::Neth& n = p.neth;
  const std::uint32_t psn = n.nack_psn;
  if (psn_lt(psn, snd_una_) || !psn_lt(psn, snd_nxt_)) return;  // stale
  TxRec& r = rec(psn);
  switch (n.reason) {
    case wire::NackReason::kTrimmed:
    case wire::NackReason::kTrimmedLastHop: {
      if (!(r.flags & kInFlight)) return;
      const bool lasthop = n.reason == wire::NackReason::kTrimmedLastHop;
      // A trim means congestion on that path, not failure: skip it for a while (not for last-hop
      // trims, which say nothing about the path).
      if (!lasthop && r.ev_slot != EvManager::kNone) evm_.on_skip_signal(r.ev_slot, EvCause::kTrimNack, now);
      const bool rtt_valid = r.tx_count == 1 && now > r.sent;
      const Duration rtt = rtt_valid ? now - r.sent : 0;
      const std::uint32_t bytes = r.len + kPktOverhead;
      mark_lost(psn, LossCause::kNack, now);
      cc_.on_nack(bytes, lasthop ? cc::NackKind::kTrimmedLastHop : cc::NackKind::kTrimmed, rtt_valid, rtt,
                  now);
      break;
    }
    case wire::NackReason::kUnexpEvent:
      on_fatal_nak(psn, WcStatus::kRemoteInvalidRequest, now);
      return;
    default:
      // Responder out of window or resources: resend later, no path or CC penalty.
      if (!resend_quietly(psn, now)) return;
      break;
  }
  tx_ready();
}

void Requester::handle_aeth(const wire::Packet& p, Time now) {
  const std::uint32_t psn = p.bth.psn;
  if (p.aeth.syndrome == wire::aeth::kAck) {
    // Transport ACK (compatibility): cumulative acknowledgement up to and including psn.
    const std::uint32_t new_una = psn_add(psn, 1);
    if (!psn_lt(snd_una_, new_una) || psn_lt(snd_nxt_, new_una)) return;
    std::uint32_t newly = 0;
    Time newest = 0;
    ack_cumulative(new_una, newly, newest, snd_nxt_, now);
    settle_fatal();
    if (newest != 0) rack_.on_ack(newest, now, slowest_window());
    cc::AckSample s;
    s.newly_acked_bytes = newly;
    cc_.on_ack(s, now);
    complete_send_wqes();
    tx_ready();
    return;
  }
  WcStatus st = WcStatus::kRemoteOpError;
  if (p.aeth.syndrome == wire::aeth::kNakRemoteAccessError)
    st = WcStatus::kRemoteAccessError;
  else if (p.aeth.syndrome == wire::aeth::kNakInvalidRequest)
    st = WcStatus::kRemoteInvalidRequest;
  on_fatal_nak(psn, st, now);
}

void Requester::on_fatal_nak(std::uint32_t psn, WcStatus st, Time now) {
  if (psn_lt(psn, snd_una_) || !psn_lt(psn, snd_nxt_)) return;
  TxRec& r = rec(psn);
  // A NAK for a packet the responder has acknowledged did not come from the responder's view of
  // our packet: a forged write with this PSN reached it first, or the NAK itself is forged (D39).
  if (r.flags & kSacked) {
    ++ctr_.rx_fatal_nak_dismissed;
    return;
  }
  if (fatal_pending_ && psn == fatal_psn_ && r.tx_count > fatal_tx_) {
    // A NAK answering a later transmission. It counts only once loss detection (RACK, the tail
    // probe, the RTO) gives that transmission up too (mark_lost): silence alone, a responder
    // busy with a flood say, is no evidence, and its SACK of the real packet dismisses it all.
    if (!(r.flags & kInFlight)) return;  // that transmission was given up already: wait for the next
    fatal_tx_ = r.tx_count;
    fatal_answered_ = true;
    fatal_status_ = st;
    // Without a later packet to expose it (RACK) the tail probe could take long: a round trip and
    // a reorder window, then check_fatal_nak gives the transmission up itself.
    fatal_fail_at_ = std::min(fatal_fail_at_, now + std::max(rtt_.srtt(), rtt_.base()) + reorder_window());
    return;
  }
  if (fatal_pending_) {  // a copy of the held NAK, or another PSN while one is being confirmed
    ++ctr_.rx_fatal_nak_dismissed;
    return;
  }
  // First fatal NAK for this PSN: resend the packet (it asks for an ACK) and wait for the answer.
  ++ctr_.rx_fatal_nak_held;
  fatal_pending_ = true;
  fatal_answered_ = false;
  fatal_refusals_ = 0;
  fatal_psn_ = psn;
  fatal_tx_ = r.tx_count;
  fatal_status_ = st;
  resend_quietly(psn, now);
  tx_ready();
}

bool Requester::resend_quietly(std::uint32_t psn, Time now) {
  const TxRec& r = rec(psn);
  if (!(r.flags & kInFlight)) return false;
  const std::uint32_t bytes = r.len + kPktOverhead;
  mark_lost(psn, LossCause::kNack, now);
  cc_.on_forget(bytes);
  return true;
}

void Requester::settle_fatal() {
  if (fatal_pending_ && (psn_lt(fatal_psn_, snd_una_) || (rec(fatal_psn_).flags & kSacked)))
    fatal_pending_ = fatal_answered_ = false;  // the responder has it: the NAKs were not its view of it
}

void Requester::on_fatal_loss(Time now) {
  fatal_answered_ = false;
  if (++fatal_refusals_ >= kFatalRefusals) fatal_fail_at_ = now;  // failed from on_timer, not mid-loop
}

void Requester::check_fatal_nak(Time now) {
  fatal_fail_at_ = kNever;
  if (!fatal_pending_) return;  // acknowledged since (settle_fatal)
  if (fatal_refusals_ < kFatalRefusals) {
    if (!fatal_answered_) return;
    // The answered transmission is not acknowledged a round trip and a reorder window later and
    // loss detection has not given it up: give it up here, and resend it unless that was the last
    // refusal. Not a path's fault: no blame, no CC signal beyond releasing its bytes.
    fatal_answered_ = false;
    if (++fatal_refusals_ < kFatalRefusals) {
      resend_quietly(fatal_psn_, now);
      return;
    }
  }
  // Unlike IB RC, a NAK says nothing about earlier PSNs (delivery is out of order): WRs before the
  // failing one that are not yet acknowledged are flushed, not reported as done.
  qp_.fail_all(fatal_status_, wqe_of(fatal_psn_), now);
}

void Requester::on_rto(Time now) {
  ++ctr_.timeouts;
  const Duration r = rto();
  ++retries_;
  const bool forever = cfg_.retry_exp >= 25;
  if (!forever && retries_ > static_cast<std::uint32_t>(cfg_.retry_linear) + cfg_.retry_exp) {
    qp_.fail_all(WcStatus::kRetryExceeded, wqe_of(snd_una_), now);
    return;
  }
  while (!sent_.none_in_flight() && rec(sent_.oldest()).sent + r <= now)
    mark_lost(sent_.oldest(), LossCause::kTimeout, now);
}

bool Requester::send_probe(TxPacket& out, std::uint16_t slot, bool tail, Time now) {
  const std::uint16_t id = next_probe_id_++;
  if (next_probe_id_ == 0) next_probe_id_ = 1;
  if (probes_.empty()) probes_.assign(kProbeSlots, Probe{});
  Probe& pr = probes_[id % probes_.size()];
  if (!pr.live) ++live_probes_;  // else the oldest outstanding probe in that slot is forgotten
  pr = Probe{id, slot, now, tail, true};
  if (!tail) evm_.probe_sent(slot, now);
  wire::Packet p;
  p.bth.opcode = wire::Opcode::kProbe;
  p.bth.pkey = cfg_.pkey;
  p.bth.dest_qp = qp_.dest_qpn();
  p.bth.psn = snd_nxt_;  // consumes no PSN
  p.bth.ack_req = true;
  p.peth.probe_id = id;
  p.peth.tx_timestamp = static_cast<std::uint16_t>(now / wire::kTsUnitNs);
  ++ctr_.tx_probe;
  return qp_.finish_tx(out, p, slot, TrafficClass::kControl);
}

}  // namespace mrc::engine
