// One MRC queue pair: requester (segmentation, PSN window, SACK/NACK processing, RACK-style loss
// detection, selective retransmission, RTO) and, in rx_, the Responder (checks, direct placement,
// PSN record, WRITE_IMM order, what to acknowledge), whose replies the QP queues and sends on its
// EVs. Owned and driven by an Endpoint.
#pragma once
#include <cstdint>
#include <vector>

#include "cc/cc.hpp"
#include "common/psn.hpp"
#include "common/rng.hpp"
#include "engine/endpoint.hpp"
#include "engine/ev_manager.hpp"
#include "engine/path_blame.hpp"
#include "engine/plane_losses.hpp"
#include "engine/rack.hpp"
#include "engine/responder.hpp"
#include "engine/ring.hpp"
#include "engine/rtt.hpp"
#include "engine/sent_packets.hpp"
#include "wire/packet.hpp"

namespace mrc::engine {

class Qp {
 public:
  Qp(Endpoint& ep, std::uint32_t qpn, const QpConfig& cfg);
  Qp(const Qp&) = delete;  // rx_ refers to this QP's cfg_ and ctr_
  Qp& operator=(const Qp&) = delete;

  std::uint32_t qpn() const { return qpn_; }
  QpState state() const { return state_; }
  /// The QP's configuration; `evs` is empty (the EVs are in evs(), the EV manager).
  const QpConfig& config() const { return cfg_; }
  const QpRemote& remote() const { return remote_; }
  const QpCounters& counters() const { return ctr_; }
  const EvManager& evs() const { return evm_; }
  std::uint32_t probes_in_flight() const { return live_probes_; }  ///< unanswered reliability probes
  EvManager& evs() { return evm_; }
  const cc::Controller& cc() const { return cc_; }
  /// Requester window in PSNs: min(mpr, the peer's mpr_dest, its advertised MPR) x 128.
  std::uint32_t window_psns() const { return window_psns_; }
  /// Responder window in PSNs: what we advertise (dynamic MPR) or mpr_dest.
  std::uint32_t window_dest() const { return rx_.window(); }
  std::uint32_t outstanding_psns() const { return static_cast<std::uint32_t>(psn_diff(snd_nxt_, snd_una_)); }
  Duration base_rtt() const { return rtt_.base(); }
  /// Bytes this QP holds: the object and every buffer it allocated (capacity, not use).
  std::size_t memory_bytes() const;

  // Lifecycle (validated by the Endpoint).
  int to_init();
  int to_rtr(const QpRemote& r, Time now);
  int to_rts(Time now);
  int to_rts(std::uint32_t sq_psn, Time now);
  void to_error(Time now);
  /// Takes the attributes of `cfg` that are read at or after the next transition: in INIT the
  /// responder's and requester's (pmtu, mpr*, wimm*, timeout, retry, trim NACK, pkey), in RTR the
  /// requester's (mpr, max_wimm, timeout, retry). EINVAL in any other state.
  int reconfigure(const QpConfig& cfg);

  int post_send(const SendWr& wr, Time now);
  int post_recv(std::uint64_t wr_id);

  void on_packet(const wire::Packet& p, const RxMeta& meta, Time now);
  bool poll_tx(TxPacket& out, Time now, std::uint32_t free_ports);
  /// May produce something in poll_tx() now (cheap, conservative).
  bool wants_tx() const;
  Time next_deadline() const;
  void on_timer(Time now);
  /// The plane `port` became (un)usable toward the peer (local port or peer's port status).
  void set_plane_usable(std::uint8_t port, bool usable, EvCause cause, Time now);
  /// Endpoint-level port ownership (local ports down) combined with peer port status.
  std::uint32_t peer_port_mask() const { return peer_ports_; }
  void set_peer_ports(std::uint32_t mask, Time now);
  /// Dynamic MPR: the window (128-PSN units, <= mpr_dest) this responder advertises in SACKs.
  int set_advertised_mpr(std::uint8_t units) { return rx_.set_advertised_mpr(units); }

 private:
  // ---- requester ----
  struct SendWqe {
    SendWr wr;
    const std::uint8_t* local = nullptr;  ///< resolved local buffer
    std::uint32_t first_psn = 0;
    std::uint32_t npkts = 0;
    std::uint32_t sent_pkts = 0;  ///< packets given a PSN so far
    std::uint16_t msn = 0;
    std::uint16_t rqmsn = 0;
  };
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;  ///< no WR (fail_all)
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
  void resend_in_flight_on(std::uint8_t port, Time now);
  void detect_losses(Time now);
  void complete_send_wqes(Time now);
  void fail_all(WcStatus first_status, std::uint32_t failing_wqe, Time now);
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
  void handle_sack(const wire::Packet& p, const RxMeta& meta, Time now);
  void handle_nack(const wire::Packet& p, Time now);
  void handle_aeth(const wire::Packet& p, Time now);
  /// A fatal NAK (AETH error syndrome, NACK UNEXP_EVENT) for `psn` (D39): the first one only
  /// resends the packet; a second one answering a later transmission of it fails the QP unless the
  /// packet is acknowledged within 4 round trips; the packet being acknowledged dismisses it.
  void on_fatal_nak(std::uint32_t psn, WcStatus st, Time now);
  void check_fatal_nak(Time now);  ///< fails the QP once a confirmed fatal NAK's deadline passes
  void on_rto(Time now);
  Duration rto() const;
  /// RttEstimator's, unless a tunable fixes them.
  Duration reorder_window() const;
  Duration tail_probe_delay() const;
  /// A packet was delivered `excess` after RACK's expectation (sent + RACK's RTT): reordering the
  /// reorder window must cover (D43).
  void note_reordering(Duration excess);
  /// A loss on `slot` confirmed by a SACK of its retransmission (D43, D57): the EV goes ASSUMED_BAD
  /// when PathBlame says it loses clearly more than the QP's other EVs.
  void on_confirmed_loss(std::uint16_t slot, EvCause cause, Time now);
  void update_timing();
  void on_rtt_sample(Duration rtt);
  void ack_cumulative(std::uint32_t new_una, std::uint32_t& newly, Time& newest_sent, std::uint32_t judged,
                      Time now);
  std::uint32_t wqe_of(std::uint32_t psn);
  std::uint32_t usable_ports(std::uint32_t free_ports) const;
  void emit_ev_event(const EvManager::Transition& t, Time now);
  static void ev_sink(void* ctx, const EvManager::Transition& t, Time now);
  bool send_probe(TxPacket& out, std::uint16_t slot, bool tail, Time now);
  // Parts of poll_tx, inlined into it: as calls they cost the send path ~30 instructions a packet.
  [[gnu::always_inline]] inline bool poll_ctrl(TxPacket& out, std::uint32_t ports, Time now);
  [[gnu::always_inline]] inline bool poll_requester(TxPacket& out, std::uint32_t ports, Time now);

  // ---- replies: the control packets the Responder and probes ask for ----
  struct CtrlTx {  ///< queued SACK / NACK / AETH-NAK to emit
    wire::Opcode op = wire::Opcode::kSack;
    std::uint32_t psn = 0;      ///< triggering PSN
    std::uint32_t entropy = 0;  ///< reflected EV value
    std::uint8_t port = 0;      ///< plane the trigger arrived on
    wire::NackReason reason = wire::NackReason::kTrimmed;
    std::uint8_t syndrome = 0;
    std::uint8_t cc_flags = 0;
    wire::SackMode m = wire::SackMode::kNone;
    bool pr = false;
    bool no_trigger = false;  ///< a continuation SACK (D3): answers no packet
    std::uint16_t probe_id = 0;
    std::uint16_t tx_timestamp = 0;
    Time arrived = 0;
  };
  void rx_data(const wire::Packet& p, const RxMeta& meta, Time now);
  void rx_probe(const wire::Packet& p, const RxMeta& meta, Time now);
  void queue_ctrl(const CtrlTx& c);
  void queue_sack(const wire::Packet& p, const RxMeta& meta, Time now, bool pr, std::uint16_t probe_id,
                  bool dup = false);
  bool build_ctrl(TxPacket& out, const CtrlTx& c, std::uint32_t free_ports, Time now);
  bool finish_tx(TxPacket& out, const wire::Packet& p, std::uint16_t slot, TrafficClass tc);

  Endpoint& ep_;
  std::uint32_t qpn_;
  QpConfig cfg_;
  QpRemote remote_{};
  QpState state_ = QpState::kReset;
  QpCounters ctr_;
  EvManager evm_;
  cc::Controller cc_;
  Rng rng_;
  RttEstimator rtt_;  ///< base RTT, srtt, rttvar, reordering: RACK's and the probes' timing (D43)
  std::uint32_t peer_ports_ = 0xFFFFFFFFu;

  // requester
  Ring<SendWqe> sq_;             ///< posted WRs; TxRec::wqe names a WR by its slot
  std::uint32_t sq_seg_ = 0;     ///< slot of the WR being given PSNs (the tail slot when none)
  std::uint32_t sq_unsent_ = 0;  ///< WRs not yet fully given PSNs
  std::uint16_t next_msn_ = 0;
  std::uint16_t next_rqmsn_ = 0;
  std::uint32_t wimm_outstanding_ = 0;
  SentPackets sent_;  ///< a record per PSN in [snd_una_, snd_nxt_), the in-flight list, the lost ones
  std::uint32_t snd_una_ = 0, snd_nxt_ = 0;
  Rack rack_;                     ///< time-based loss detection and its reorder timer (D43)
  std::uint8_t tlp_backoff_ = 0;  ///< tail-loss probes since the last progress (PTO doubles with each)
  Duration pto_ = 0;              ///< tail_probe_delay() << tlp_backoff_, kept current by update_pto()
  void update_pto() { pto_ = tail_probe_delay() << tlp_backoff_; }
  PathBlame blame_;  ///< when a confirmed loss blames its EV (D43, D57)
  Time last_progress_ = 0;
  std::uint32_t retries_ = 0;
  std::uint8_t peer_mpr_adv_ = 0;
  std::uint32_t window_psns_ = 0;  ///< window_psns(), kept current by update_window()
  void update_window();
  bool fatal_pending_ = false;  ///< a fatal NAK for fatal_psn_ waits for confirmation (D39) ...
  std::uint8_t fatal_tx_ = 0;   ///< ... by a NAK of a transmission after this many ...
  std::uint32_t fatal_psn_ = 0;
  Time fatal_fail_at_ = kNever;  ///< ... and no acknowledgement of it until then
  WcStatus fatal_status_ = WcStatus::kRemoteOpError;
  static constexpr std::size_t kProbeSlots = 64;  ///< probe ids map to slots modulo this
  std::vector<Probe> probes_;                     ///< kProbeSlots entries from the first probe on
  std::uint32_t live_probes_ = 0;
  std::uint16_t next_probe_id_ = 1;
  Time tail_probe_at_ = kNever;
  /// on_timer() last ran at this time: transmit-driven deadlines (probes) at or before it are
  /// already waiting for a free port in poll_tx and are not reported again.
  Time timer_seen_ = 0;
  PlaneLosses planes_;  ///< runs of losses per plane: plane-failure inference (D18, D59)
  /// D56: PSNs whose second copy is still to be sent (at most kDupQueueMax), and the PSNs that got
  /// one lately (psn + 1, 0 = empty), whose expected duplicate arrival is no spurious retransmission.
  /// Both allocated at the first failover.
  Ring<std::uint32_t> dup_queue_;
  static constexpr std::uint32_t kDupQueueMax = 1024;
  static constexpr std::size_t kDupSentSlots = 64;
  std::vector<std::uint32_t> dup_sent_;
  std::uint32_t dup_sent_next_ = 0;

  // replies
  Ring<CtrlTx> ctrl_;  ///< 16 entries at the first control packet, grown up to kCtrlMax
  static constexpr std::uint32_t kCtrlMax = 4096;
  static constexpr std::uint32_t kCtrlRun = 16;  ///< control packets in a row before the requester's turn
  std::uint32_t ctrl_run_ = 0;
  std::uint8_t ack_plane_ = 0;  ///< plane of the last SACK (rotation)
  bool sack_more_ = false;      ///< the SACK just built could not report every new arrival

  Responder rx_;  ///< the receive side (after cfg_ and ctr_, which it reads)
};

}  // namespace mrc::engine
