// One MRC queue pair, owned and driven by an Endpoint: its identity, configuration and state
// machine; its two sides, the Requester (req_: segmentation, SACK/NACK processing, loss detection,
// retransmission, RTO, probes; it holds the EV manager, NSCC and the RTT estimate) and the
// Responder (rx_: checks, direct placement, PSN record, WRITE_IMM order, what to acknowledge); the
// dispatch of arrivals to them; and the queue of control packets the Responder asks for, sent on
// the requester's EVs, with poll_tx choosing between those replies and the requester's packets.
#pragma once
#include <cstdint>
#include <vector>

#include "cc/cc.hpp"
#include "common/rng.hpp"
#include "engine/endpoint.hpp"
#include "engine/ev_manager.hpp"
#include "engine/requester.hpp"
#include "engine/responder.hpp"
#include "engine/ring.hpp"
#include "wire/packet.hpp"

namespace mrc::engine {

class Qp {
 public:
  Qp(Endpoint& ep, std::uint32_t qpn, const QpConfig& cfg);
  Qp(const Qp&) = delete;  // req_ and rx_ refer to this QP and its cfg_, remote_ and ctr_
  Qp& operator=(const Qp&) = delete;

  std::uint32_t qpn() const { return qpn_; }
  QpState state() const { return state_; }
  /// The QP's configuration; `evs` is empty (the EVs are in evs(), the EV manager).
  const QpConfig& config() const { return cfg_; }
  const QpRemote& remote() const { return remote_; }
  std::uint32_t peer() const { return peer_; }          ///< remote().peer
  std::uint32_t dest_qpn() const { return dest_qpn_; }  ///< remote().qpn
  bool peer_wire_ext() const { return wire_ext_; }      ///< remote().wire_ext
  bool auth_on() const { return auth_on_; }             ///< remote().auth.on
  const QpCounters& counters() const { return ctr_; }
  const EvManager& evs() const { return req_.evs(); }
  std::uint32_t probes_in_flight() const {
    return req_.probes_in_flight();
  }  ///< unanswered reliability probes
  EvManager& evs() { return req_.evs(); }
  const cc::Controller& cc() const { return req_.cc(); }
  /// Requester window in PSNs: min(mpr, the peer's mpr_dest, its advertised MPR) x 128.
  std::uint32_t window_psns() const { return req_.window_psns(); }
  /// Responder window in PSNs: what we advertise (dynamic MPR) or mpr_dest.
  std::uint32_t window_dest() const { return rx_.window(); }
  std::uint32_t outstanding_psns() const { return req_.outstanding_psns(); }
  Duration base_rtt() const { return req_.rtt().base(); }
  /// The two sides (tests drive them directly).
  Requester& requester() { return req_; }
  const Requester& requester() const { return req_; }
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
  /// Right after poll_tx() sent, with nothing changed since: true if a poll_tx() at `at` would send
  /// nothing and only close the window (Requester::settle_blocked), and then leave the QP off the
  /// ready list (!wants_tx()). Not with control queued or a run of it under way (ctrl_run_, which
  /// that poll would reset), so the poll it stands for changes nothing else.
  bool settle_blocked(Time at) {
    return state_ == QpState::kRts && ctrl_.empty() && ctrl_run_ == 0 && req_.settle_blocked(at);
  }
  /// May produce something in poll_tx() now (cheap, conservative).
  bool wants_tx() const {
    if (state_ == QpState::kReset || state_ == QpState::kInit) return false;
    if (!ctrl_.empty()) return true;
    return state_ == QpState::kRts && req_.wants_tx();
  }
  /// Right after a poll_tx() that sent: true if the QP has nothing more it may send (!wants_tx()),
  /// its run of control packets then over (the poll that would find nothing resets it).
  bool tx_done() {
    if (wants_tx()) return false;
    ctrl_run_ = 0;
    return true;
  }
  /// Until this time poll_tx() finds nothing to send and changes nothing that a later call would
  /// not change the same way (it may apply SKIP expiries, which keep their own times), unless the
  /// QP's state changes first (a packet, a post, a timer, a port: whatever the endpoint touches it
  /// for); 0 if it makes no such promise. It holds while nothing is queued and only an EV probe or
  /// a tail-loss probe, at their times, could give it something to send.
  Time idle_until() const { return state_ == QpState::kRts && ctrl_.empty() ? req_.idle_until() : 0; }
  Time next_deadline() const { return state_ == QpState::kRts ? req_.next_deadline() : kNever; }
  void on_timer(Time now);
  /// A packet for this QP is about to arrive (Endpoint::prefetch_rx): starts fetching the lines its
  /// handling reads, the requester's for feedback (ACK, SACK, NACK), the responder's for the rest.
  /// `macs`: some QP of the endpoint checks MACs (then the key's line too).
  void prefetch_rx(bool feedback, bool macs) const;
  /// The same for poll_tx() (Endpoint::poll_tx, for the QPs it will poll next): the QP's lines,
  /// then, once those are cached, the queue records they point to.
  void prefetch_tx_lines() const;
  void prefetch_tx_records() const;
  /// The plane `port` became (un)usable toward the peer (local port or peer's port status).
  void set_plane_usable(std::uint8_t port, bool usable, EvCause cause, Time now);
  /// Endpoint-level port ownership (local ports down) combined with peer port status.
  std::uint32_t peer_port_mask() const { return peer_ports_; }
  void set_peer_ports(std::uint32_t mask, Time now);
  /// Dynamic MPR: the window (128-PSN units, <= mpr_dest) this responder advertises in SACKs.
  int set_advertised_mpr(std::uint8_t units) { return rx_.set_advertised_mpr(units); }

  // --- internal: used by the Requester ------------------------------------------------------------
  /// Encodes `p` into `out` to leave on EV `slot` (the header stack, payload view, trailer, port,
  /// EV, peer); false if the codec refused it (counted in tx_encode_errors).
  bool finish_tx(TxPacket& out, const wire::Packet& p, std::uint16_t slot, TrafficClass tc);
  /// The QP moves to ERROR: the send WR in slot `failing_wqe` completes with `first_status`
  /// (Requester::kNil: none), every other WR of both queues is flushed, a kQpError event is pushed
  /// (once).
  void fail_all(WcStatus first_status, std::uint32_t failing_wqe, Time now);

 private:
  std::uint32_t usable_ports(std::uint32_t free_ports) const {
    return free_ports & ep_.port_mask() & peer_ports_;
  }
  void emit_ev_event(const EvManager::Transition& t, Time now);
  static void ev_sink(void* ctx, const EvManager::Transition& t, Time now);
  // Part of poll_tx, inlined into it as Requester::poll is: every control packet goes through it.
  [[gnu::always_inline]] inline bool poll_ctrl(TxPacket& out, std::uint32_t ports, Time now);

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
    bool no_trigger = false;  ///< answers no packet (queue_untriggered_sack)
    std::uint16_t probe_id = 0;
    std::uint16_t tx_timestamp = 0;
    Time arrived = 0;
  };
  void rx_data(const wire::Packet& p, const RxMeta& meta, Time now);
  void rx_probe(const wire::Packet& p, const RxMeta& meta, Time now);
  void queue_ctrl(const CtrlTx& c);
  /// A SACK that answers no packet (no trigger, no echo, no probe): the rest of the arrivals after a
  /// full bitmap (D3), those a trim NACK finds unreported (D86).
  void queue_untriggered_sack(std::uint8_t port, std::uint32_t entropy, Time now);
  void queue_sack(const wire::Packet& p, const RxMeta& meta, Time now, bool pr, std::uint16_t probe_id,
                  bool dup = false);
  bool build_ctrl(TxPacket& out, const CtrlTx& c, std::uint32_t free_ports, Time now);

  // What every packet in or out reads of the QP's identity, in its first 24 bytes (the first 56 with
  // the configuration fields packets read, cfg_ up to evs: what the prefetches fetch): the state,
  // and copies of the remote fields (set with remote_ in to_rtr) that the receive checks, the header
  // and the transmit metadata need. remote_ (two other lines) is left to rarer reads: the MAC keys
  // of an authenticated QP, the WIMM limit.
  Endpoint& ep_;
  std::uint32_t qpn_;
  QpState state_ = QpState::kReset;
  bool wire_ext_ = false;       ///< remote_.wire_ext
  bool auth_on_ = false;        ///< remote_.auth.on
  std::uint32_t peer_ = 0;      ///< remote_.peer
  std::uint32_t dest_qpn_ = 0;  ///< remote_.qpn
  QpConfig cfg_;
  QpRemote remote_{};
  QpCounters ctr_;
  Rng rng_;  ///< seeds the EV manager
  std::uint32_t peer_ports_ = 0xFFFFFFFFu;

  Requester req_;  ///< the send side (after cfg_, remote_ and ctr_, which it reads)

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
