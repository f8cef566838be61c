// Requester: the send side of a QP. It segments posted WRs into PSNs within the MPR window, the
// WRITE_IMM limit and NSCC's window; tracks what it sent (SentPackets); reads SACKs, NACKs and AETH
// (acknowledgements, RTT samples, ECN and trim signals to the EVs and to NSCC); declares packets
// lost (RACK, the tail-loss probe, the RTO, a NACK, a failed plane) and resends them; probes
// ASSUMED_BAD EVs; sends second copies on failover (D56); holds a fatal NAK until it is confirmed
// (D39); and completes the send WQEs. It holds the QP's EV manager, NSCC and RTT estimate, which
// follow what the send side learns; the QP's replies only pick an EV from it. The QP owns it,
// dispatches SACK / NACK / AETH packets to it, encodes what it builds (Qp::finish_tx) and fails the
// whole QP when it asks (Qp::fail_all).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc/cc.hpp"
#include "common/psn.hpp"
#include "engine/endpoint.hpp"
#include "engine/ev_manager.hpp"
#include "engine/path_blame.hpp"
#include "engine/plane_losses.hpp"
#include "engine/rack.hpp"
#include "engine/ring.hpp"
#include "engine/rtt.hpp"
#include "engine/sent_packets.hpp"
#include "engine/windowed_max.hpp"
#include "wire/packet.hpp"

namespace mrc::engine {

class Requester {
 public:
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;  ///< no WR (fail_all)

  /// `cfg`, `remote` and `ctr` are those of `qp`, which initialises evs() and then calls
  /// update_timing(). Completions go to `ep` for QP `qpn`.
  Requester(Qp& qp, Endpoint& ep, std::uint32_t qpn, const QpConfig& cfg, const QpRemote& remote,
            QpCounters& ctr);
  Requester(const Requester&) = delete;
  Requester& operator=(const Requester&) = delete;

  /// At RTS: the first PSN is the remote's sq_psn.
  void start(Time now);
  /// The window follows cfg.mpr, the peer's mpr_dest and its advertised MPR: call after a change.
  void update_window();
  /// The EV manager's SKIP duration and probe interval follow the base RTT (unless tunables fix them).
  void update_timing();

  /// Queues a WR (the QP is in RTS). A bad lkey or range fails the QP (verbs semantics).
  int post_send(const SendWr& wr, Time now);
  void handle_sack(const wire::Packet& p, Time now);
  void handle_nack(const wire::Packet& p, Time now);
  void handle_aeth(const wire::Packet& p, Time now);
  /// The next packet of the send side, if any may go on `ports` now: an EV probe that is due, the
  /// oldest retransmission, a second copy (D56), new data. False if nothing may. Called through
  /// Qp::poll_tx, which applies the SKIP expiries due by `now` first.
  [[gnu::always_inline]] inline bool poll(TxPacket& out, std::uint32_t ports, Time now);
  /// May produce something in poll() now (cheap, conservative).
  inline bool wants_tx() const;
  /// Right after a poll() that sent, with nothing changed since: true if a poll() at `at` would
  /// find only a closed window (for the oldest lost packet, or with none for the next new packet;
  /// no second copy, probe or tail-loss probe due), which this then records as that poll would
  /// (window_blocked_).
  inline bool settle_blocked(Time at);
  /// What holds the next new packet, if anything (kGo: nothing; `len` is then its payload):
  /// poll() and settle_blocked() ask the same gates in the same order.
  enum class NewDataGate : std::uint8_t { kGo, kNothing, kWindow, kWimm };
  [[gnu::always_inline]] inline NewDataGate new_data_gate(std::uint32_t& len) const;
  /// The window holds lost `psn`'s retransmission back: past the MPR window's edge (a dynamic MPR
  /// shrink can leave lost packets there) or no room in the congestion window, unless a tail-loss
  /// probe just fired (D85). poll() and settle_blocked() ask this for the oldest lost packet.
  bool rtx_held(std::uint32_t psn) const {
    return static_cast<std::uint32_t>(psn_diff(psn, snd_una_)) >= window_psns() ||
           (!tlp_force_ && !cc_.can_send(sent_.rec(psn).len + kPktOverhead));
  }
  /// Lost packets waiting for their retransmission.
  std::uint32_t lost() const { return sent_.lost(); }
  /// Something lost, unsent or to be duplicated waits to go out.
  bool has_queued() const { return !dup_queue_.empty() || sent_.lost() > 0 || sq_unsent_ > 0; }
  /// Qp::idle_until() for the send side: with nothing lost, unsent or to be duplicated, poll()
  /// sends nothing before the first of an EV probe and the tail-loss probe (a SKIP's expiry changes
  /// no pick it makes then, and expire_skips() applies it whenever it runs).
  Time idle_until() const {
    if (has_queued()) return 0;
    return std::min(evm_.next_probe_time(), tail_probe_at_);
  }
  /// RTO, tail-loss probe, RACK's reorder timer, EV probes due, probe timeouts, a fatal NAK's
  /// deadline; kNever if none. Inline: the endpoint asks after every event that touched the QP.
  inline Time next_deadline() const;
  /// The lines next_deadline() reads (for a QP that only receives, nothing else does).
  void prefetch_deadline() const {
    __builtin_prefetch(&sent_);
    __builtin_prefetch(&live_probes_);
    evm_.prefetch_timers();
  }
  /// For Qp::prefetch_tx_records: the records poll() reads next outside the Requester (its state
  /// must be cached already, or this waits for it): the unsent WQE and the next PSN's record.
  void prefetch_records() const {
    if (sq_unsent_ > 0) {
      const char* w = reinterpret_cast<const char*>(&sq_.slot(sq_seg_));
      __builtin_prefetch(w);
      __builtin_prefetch(w + sizeof(SendWqe) - 1);
    }
    if (sent_.allocated()) __builtin_prefetch(&sent_.rec(snd_nxt_));
  }
  void on_timer(Time now);
  /// Packets in flight on `port` are lost: resend them elsewhere at once.
  void resend_in_flight_on(std::uint8_t port, Time now);
  /// The QP failed: the WR in slot `failing_wqe` completes with `first_status`, every other one is
  /// flushed; nothing in flight or probed is waited for any more.
  void fail_all(WcStatus first_status, std::uint32_t failing_wqe);

  /// Window in PSNs: min(mpr, the peer's mpr_dest, its advertised MPR) x 128.
  std::uint32_t window_psns() const { return window_psns_; }
  std::uint32_t snd_una() const { return snd_una_; }
  std::uint32_t snd_nxt() const { return snd_nxt_; }
  std::uint32_t outstanding_psns() const { return static_cast<std::uint32_t>(psn_diff(snd_nxt_, snd_una_)); }
  std::uint32_t probes_in_flight() const { return live_probes_; }  ///< unanswered reliability probes
  EvManager& evs() { return evm_; }
  const EvManager& evs() const { return evm_; }
  const cc::Controller& cc() const { return cc_; }
  const RttEstimator& rtt() const { return rtt_; }
  /// Heap bytes held (capacity, not use).
  std::size_t heap_bytes() const {
    return evm_.heap_bytes() + sq_.memory_bytes() + sent_.memory_bytes() +
           probes_.capacity() * sizeof(Probe) + planes_.heap_bytes() + dup_queue_.memory_bytes() +
           dup_sent_.capacity() * 4;
  }

 private:
  struct SendWqe {
    SendWr wr;
    const std::uint8_t* local = nullptr;  ///< resolved local buffer
    std::uint32_t first_psn = 0;
    std::uint32_t npkts = 0;
    std::uint32_t sent_pkts = 0;  ///< packets given a PSN so far
    std::uint16_t msn = 0;
    std::uint16_t rqmsn = 0;
  };
  /// kTail: retransmitted as a tail-loss probe (D43; counted with rtx_loss).
  enum class LossCause : std::uint8_t { kNack, kLoss, kTimeout, kPort, kTail };
  struct Probe {  ///< an outstanding reliability probe
    std::uint16_t id = 0;
    std::uint16_t ev_slot = EvManager::kNone;
    Time sent = 0;
    bool tail = false;  ///< tail-loss probe (vs. ASSUMED_BAD EV probe)
    bool live = false;
  };

  TxRec& rec(std::uint32_t psn) { return sent_.rec(psn); }
  void mark_lost(std::uint32_t psn, LossCause cause, Time now);
  /// Acknowledges `psn`. `judged`: the PSN whose retransmission handle_sack judges itself (the
  /// SACK's trigger), snd_nxt_ for none.
  void mark_acked(std::uint32_t psn, std::uint32_t& newly, Time& newest_sent, std::uint32_t judged, Time now);
  /// D18: `plane` failed (PlaneLosses said so): retire its EVs and resend what is in flight on it.
  void fail_plane(std::uint8_t plane, Time now);
  void detect_losses(Time now);
  void complete_send_wqes();
  bool build_data(TxPacket& out, std::uint32_t psn, bool rtx, std::uint16_t slot, Time now);
  /// The data packet of record `r` (PSN `psn`) but for ack_req; true if it ends its message.
  [[gnu::always_inline]] inline bool fill_data(wire::Packet& p, const TxRec& r, std::uint32_t psn,
                                               bool rtx) const;
  /// D56: whether `plane` is known failed for this QP (its port or the peer's is down, or no GOOD
  /// active EV is left on it).
  bool plane_failed(std::uint8_t plane) const;
  void queue_dup(std::uint32_t psn);
  bool poll_dup(TxPacket& out, std::uint32_t ports);
  /// A duplicate arrival of this PSN is the expected one of a second copy (and forgets it).
  bool expected_dup(std::uint32_t psn);
  /// A fatal NAK (AETH error syndrome, NACK UNEXP_EVENT) for `psn` (D39): the first one only
  /// resends the packet; the QP fails once kFatalRefusals later transmissions of it were each
  /// answered by a fatal NAK and then given up by loss detection (on_fatal_loss), the packet still
  /// unacknowledged; the packet being acknowledged dismisses it all.
  void on_fatal_nak(std::uint32_t psn, WcStatus st, Time now);
  void on_fatal_loss(Time now);  ///< mark_lost gave up a transmission a fatal NAK answered
  void settle_fatal();           ///< after acknowledgements: the held PSN acknowledged ends it
  /// Resends `psn` if it is in flight (returns whether it was), with no path blame and no CC
  /// signal but releasing its bytes.
  bool resend_quietly(std::uint32_t psn, Time now);
  void check_fatal_nak(Time now);  ///< fails the QP when on_fatal_loss counted enough refusals
  void on_rto(Time now);
  inline Duration rto() const;
  /// RttEstimator's, unless a tunable fixes them.
  Duration reorder_window() const;
  /// How long a SACK's RTT counts towards the slowest path's (D63): two RTTs.
  Duration slowest_window() const;
  Duration tail_probe_delay() const;
  void update_pto() { pto_ = tail_probe_delay() << tlp_backoff_; }
  /// A packet was delivered `excess` after RACK's expectation (sent + RACK's RTT): reordering the
  /// reorder window must cover (D43).
  void note_reordering(Duration excess);
  /// A loss on `slot` confirmed by a SACK of its retransmission (D43, D57): the EV goes ASSUMED_BAD
  /// when PathBlame says it loses clearly more than the QP's other EVs.
  void on_confirmed_loss(std::uint16_t slot, EvCause cause, Time now);
  void on_rtt_sample(Duration rtt);
  void ack_cumulative(std::uint32_t new_una, std::uint32_t& newly, Time& newest_sent, std::uint32_t judged,
                      Time now);
  std::uint32_t wqe_of(std::uint32_t psn);
  bool send_probe(TxPacket& out, std::uint16_t slot, bool tail, Time now);
  void tx_ready();  ///< the QP may have something to send

  Qp& qp_;
  Endpoint& ep_;
  std::uint32_t qpn_;
  const QpConfig& cfg_;
  const QpRemote& remote_;
  QpCounters& ctr_;
  EvManager evm_;
  cc::Controller cc_;
  RttEstimator rtt_;  ///< base RTT, srtt, rttvar, reordering: RACK's and the probes' timing (D43)

  Ring<SendWqe> sq_;             ///< posted WRs; TxRec::wqe names a WR by its slot
  std::uint32_t sq_seg_ = 0;     ///< slot of the WR being given PSNs (the tail slot when none)
  std::uint32_t sq_unsent_ = 0;  ///< WRs not yet fully given PSNs
  std::uint16_t next_msn_ = 0;
  std::uint16_t next_rqmsn_ = 0;
  std::uint32_t wimm_outstanding_ = 0;
  SentPackets sent_;  ///< a record per PSN in [snd_una_, snd_nxt_), the in-flight list, the lost ones
  std::uint32_t snd_una_ = 0, snd_nxt_ = 0;
  // What next_deadline() reads besides sent_ and the EV manager, on the cache line of sent_'s
  // in-flight list: a QP that only receives is asked for its deadline after each packet, and the
  // fields apart cost it misses on lines nothing else reads.
  Time fatal_fail_at_ = kNever;  ///< a confirmed fatal NAK fails the QP at the next on_timer (D39)
  Time tail_probe_at_ = kNever;
  /// on_timer() last ran at this time: transmit-driven deadlines (probes) at or before it are
  /// already waiting for a free port in poll() and are not reported again.
  Time timer_seen_ = 0;
  std::uint32_t live_probes_ = 0;
  bool events_ = true;  ///< the endpoint keeps events (its config, read here on the deadline's line)
  Rack rack_;           ///< time-based loss detection and its reorder timer (D43)
  /// The last poll() found the congestion or MPR window closed; cleared by tx_ready(), which every
  /// event that can open it calls. A blocked QP leaves the endpoint's ready list (wants_tx).
  bool window_blocked_ = false;
  std::uint8_t tlp_backoff_ = 0;  ///< tail-loss probes since the last progress (PTO doubles with each)
  /// D85: a tail-loss probe fired; the next retransmission goes even if the congestion window is
  /// full (a probe the window holds back probes nothing).
  bool tlp_force_ = false;
  Duration pto_ = 0;  ///< tail_probe_delay() << tlp_backoff_, kept current by update_pto()
  /// The longest the responder held a SACK lately (its svc_time, over slowest_window()): the tail
  /// probe waits that out too (D87).
  WindowedMax sack_delay_;
  PathBlame blame_;  ///< when a confirmed loss blames its EV (D43, D57)
  Time last_progress_ = 0;
  std::uint32_t retries_ = 0;
  std::uint8_t peer_mpr_adv_ = 0;
  std::uint32_t window_psns_ = 0;  ///< window_psns(), kept current by update_window()
  static constexpr std::uint8_t kFatalRefusals = 2;
  bool fatal_pending_ = false;       ///< a fatal NAK for fatal_psn_ waits for confirmation (D39):
  bool fatal_answered_ = false;      ///< a fatal NAK answered its transmission number fatal_tx_,
  std::uint8_t fatal_refusals_ = 0;  ///< so many such transmissions were given up since,
  std::uint8_t fatal_tx_ = 0;
  std::uint32_t fatal_psn_ = 0;
  WcStatus fatal_status_ = WcStatus::kRemoteOpError;  ///< and the status the QP fails with
  static constexpr std::size_t kProbeSlots = 64;      ///< probe ids map to slots modulo this
  std::vector<Probe> probes_;                         ///< kProbeSlots entries from the first probe on
  std::uint16_t next_probe_id_ = 1;
  PlaneLosses planes_;  ///< runs of losses per plane: plane-failure inference (D18, D59)
  /// D56: PSNs whose second copy is still to be sent (at most kDupQueueMax), and the PSNs that got
  /// one lately (psn + 1, 0 = empty), whose expected duplicate arrival is no spurious retransmission.
  /// Both allocated at the first failover.
  Ring<std::uint32_t> dup_queue_;
  static constexpr std::uint32_t kDupQueueMax = 1024;
  static constexpr std::size_t kDupSentSlots = 64;
  std::vector<std::uint32_t> dup_sent_;
  std::uint32_t dup_sent_next_ = 0;
};

// On the send path of every packet, and checked by every transmit poll of a QP that only receives:
// inline in the QP's poll_tx (as a call it costs the send path ~30 instructions a packet).
inline bool Requester::poll(TxPacket& out, std::uint32_t ports, Time now) {
  // The SKIP expiries due by `now` are applied: Qp::poll_tx did, before its control packets' picks.
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
      tlp_force_ = true;
    }
  }
  // 2. Retransmissions, oldest gap first.
  std::uint32_t psn = 0;
  if (sent_.lost() > 0 && sent_.next_lost(snd_una_, snd_nxt_, psn)) {
    const TxRec& r = rec(psn);
    if (rtx_held(psn)) {
      window_blocked_ = true;
      return false;
    }
    const std::uint16_t slot = evm_.pick_proven(ports, r.sent);
    if (slot == EvManager::kNone) return false;
    // D56: the previous copy went on a plane now known failed: a second copy follows.
    const bool dup = ep_.config().tun.failover_dup && r.ev_slot != EvManager::kNone &&
                     plane_failed(evm_.ev(r.ev_slot).port) && blame_.lossy(ctr_.tx_data);
    if (!build_data(out, psn, true, slot, now)) return false;
    tlp_force_ = false;
    if (dup) queue_dup(psn);
    return true;
  }
  // 2b. Second copies of failover retransmissions (D56), before new data.
  if (!dup_queue_.empty() && poll_dup(out, ports)) return true;
  // 3. New data within the MPR window, the WIMM limit and the congestion window.
  std::uint32_t len = 0;
  switch (new_data_gate(len)) {
    case NewDataGate::kGo:
      break;
    case NewDataGate::kWindow:
      window_blocked_ = true;
      return false;
    case NewDataGate::kNothing:
    case NewDataGate::kWimm:
      return false;
  }
  SendWqe& w = sq_.slot(sq_seg_);
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
  r.len = static_cast<std::uint16_t>(len);
  if (++w.sent_pkts == w.npkts) {
    sq_seg_ = sq_.next_slot(sq_seg_);
    --sq_unsent_;
  }
  return build_data(out, psn, false, slot, now);
}

inline Requester::NewDataGate Requester::new_data_gate(std::uint32_t& len) const {
  if (sq_unsent_ == 0) return NewDataGate::kNothing;
  if (static_cast<std::uint32_t>(psn_diff(snd_nxt_, snd_una_)) >= window_psns()) return NewDataGate::kWindow;
  const SendWqe& w = sq_.slot(sq_seg_);
  if (w.sent_pkts == 0 && w.wr.with_imm &&
      wimm_outstanding_ >= std::min<std::uint32_t>(cfg_.max_wimm, remote_.peer_max_wimm_dest))
    return NewDataGate::kWimm;  // poll() returns without closing the window
  const std::uint32_t offset = w.sent_pkts * cfg_.pmtu;
  len = std::min(cfg_.pmtu, w.wr.length - std::min(w.wr.length, offset));
  return cc_.can_send(len + kPktOverhead) ? NewDataGate::kGo : NewDataGate::kWindow;
}

// poll()'s steps before new data, then its gates for new data, for a poll at `at`.
inline bool Requester::settle_blocked(Time at) {
  if (evm_.next_probe_time() != kNever || tail_probe_at_ <= at || !dup_queue_.empty()) return false;
  // A lost packet the window holds back (an incast's sender after a trim NACK, its window at one
  // packet): poll() closes the window on it as it would on new data, and so does this.
  std::uint32_t psn = 0;
  if (sent_.lost() > 0 && sent_.next_lost(snd_una_, snd_nxt_, psn)) {
    if (!rtx_held(psn)) return false;
    window_blocked_ = true;
    return true;
  }
  std::uint32_t len = 0;
  if (new_data_gate(len) != NewDataGate::kWindow) return false;
  window_blocked_ = true;
  return true;
}

inline bool Requester::wants_tx() const {
  if (!dup_queue_.empty() || evm_.next_probe_time() != kNever) return true;
  // Blocked by the congestion or MPR window: the SACK, NACK or loss that opens it calls tx_ready().
  // A tail probe or RTO due later wakes the QP through its timer.
  if (window_blocked_) return false;
  return sent_.lost() > 0 || sq_unsent_ > 0 || tail_probe_at_ != kNever;
}

inline Duration Requester::rto() const {
  if (cfg_.timeout == 0) return kNever;  // IB convention: 0 = wait forever
  const Duration base = 1024ULL << std::min<std::uint32_t>(cfg_.timeout, 24);
  if (retries_ < cfg_.retry_linear) return base;
  const std::uint32_t k = std::min<std::uint32_t>(retries_ - cfg_.retry_linear + 1, 10);
  return base << k;
}

inline Time Requester::next_deadline() const {
  Time t = kNever;
  if (!sent_.none_in_flight()) {
    const Duration r = rto();
    if (r != kNever) t = std::min(t, sent_.rec(sent_.oldest()).sent + r);
    if (tail_probe_at_ > timer_seen_) t = std::min(t, tail_probe_at_);
    t = std::min(t, rack_.timer());
  }
  // A SKIP's expiry needs a wake-up only if someone watches the EV events (their times) or if it
  // may let something queued go out on a port that has no GOOD EV now; else expire_skips() applies
  // it, with its own time, before the EVs are next looked at.
  if (events_ || (evm_.skip_may_block() && has_queued())) t = std::min(t, evm_.next_skip_expiry());
  if (evm_.next_probe_time() > timer_seen_) t = std::min(t, evm_.next_probe_time());
  t = std::min(t, fatal_fail_at_);
  if (live_probes_ > 0) {
    const Duration probe_timeout = rtt_.probe_wait();
    for (const Probe& p : probes_)
      if (p.live) t = std::min(t, p.sent + probe_timeout);
  }
  return t;
}

}  // namespace mrc::engine
