// The sans-I/O MRC engine for one node: many QPs, one memory table, P ports (planes).
//
// Drivers (the in-memory test network, the UDP endpoint, the simulator) feed it received packets,
// the current time and API calls, and pull out packets to send, timer deadlines, completions and
// events. It never reads a clock, opens a socket, starts a thread or touches global state.
//
//   for each received datagram:  ep.receive(bytes, meta, now)
//   while (ep.poll_tx(pkt, now, free_ports)) send pkt on pkt.port with pkt.ev
//   if (now >= ep.next_deadline()) ep.on_timer(now)
//   drain ep.poll_completion() / ep.poll_event()
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "cc/cc.hpp"
#include "common/rng.hpp"
#include "engine/auth.hpp"
#include "engine/deadline_heap.hpp"
#include "engine/ev_manager.hpp"
#include "engine/memory.hpp"
#include "engine/types.hpp"
#include "wire/packet.hpp"

namespace mrc::engine {

class Qp;

/// Tunables the OCP spec leaves to the implementation (docs/decisions.md). Defaults are the
/// project's decisions; all live here so they can be corrected in one place.
struct Tunables {
  std::uint32_t sack_bytes_threshold = 16384;  ///< coalesce SACKs up to this many payload bytes
  std::uint32_t probe_success_threshold = 3;   ///< probes to resurrect an ASSUMED_BAD EV
  Duration skip_duration = 0;                  ///< SKIP lasts this long; 0 = one base RTT
  Duration probe_interval = 0;                 ///< ASSUMED_BAD probe cadence; 0 = 4 base RTTs
  std::uint32_t probes_in_flight = 8;          ///< unanswered EV probes per QP, at most (1..64)
  Duration reorder_window = 0;     ///< RACK reorder allowance; 0 = measured (RttEstimator, D43, D62)
  Duration tail_probe_delay = 0;   ///< tail-loss probe delay; 0 = measured (RttEstimator, D43)
  Duration base_rtt_hint = 10_us;  ///< until a sample arrives
  /// Losses found without a trim NACK (RACK, timeout) shrink the congestion window. Off by default:
  /// in a trimming network congestion shows up as trims and ECN, and untrimmed loss means a failed
  /// path, which the EV manager handles (docs/decisions.md D9).
  bool loss_is_congestion = false;
  /// Losses on one plane with nothing delivered on it since, before the whole plane is declared
  /// failed (all its EVs ASSUMED_BAD at once). 0 disables the inference.
  std::uint32_t plane_failure_losses = 3;
  /// A retransmission whose previous copy went on a plane now known failed (its port or the
  /// peer's is down, or no GOOD active EV is left on it) is sent twice, the second copy on another
  /// plane: the repair of a failed plane's in-flight window is what a failover waits for, and one
  /// random loss of it costs another loss-detection round (D56).
  bool failover_dup = true;
  /// Packets a QP sends on one EV before it picks another (1..64; EvManager::Params::burst). 1
  /// sprays per packet; the UDP endpoint raises it with GSO so a burst leaves as one send (D36).
  std::uint32_t ev_burst = 1;
  /// Events kept for poll_event(); past it the oldest are dropped and a kEventsDropped event
  /// says how many (an application that never drains them must not grow without bound).
  std::uint32_t max_events = 4096;
};

struct QpConfig {
  std::uint32_t pmtu = 4096;             ///< payload bytes per packet (256..4096 on the API)
  std::uint8_t mpr = 8;                  ///< requester window, 128-PSN units
  std::uint8_t mpr_dest = 8;             ///< responder window, 128-PSN units
  std::uint16_t max_wimm = 128;          ///< outstanding WRITE_IMMs we may send
  std::uint16_t max_wimm_dest = 128;     ///< outstanding WRITE_IMMs we accept
  std::uint8_t timeout = 8;              ///< RTO = 1.024 us * 2^timeout (max 24)
  std::uint8_t retry_linear = 7;         ///< fixed-interval retries (max 7)
  std::uint8_t retry_exp = 25;           ///< exponential retries (max 25 = forever)
  std::uint32_t sq_depth = 4096;         ///< send WRs outstanding
  std::uint32_t rq_depth = 4096;         ///< receive WRs posted
  bool trim_nack_dest_supported = true;  ///< peer generates trim NACKs
  std::uint16_t pkey = wire::kDefaultPkey;
  /// Active EVs (equal numbers per port) followed by the backup EVs; `active_count` splits them.
  std::vector<Ev> evs;
  std::uint32_t active_count = 0;  ///< 0 = all of evs
  std::uint32_t ev_min_active = 1;
  cc::Config cc;
  std::uint64_t seed = 1;  ///< per-QP RNG (EV choice); mixed with the QPN
};

/// Remote side of a connection, exchanged out of band (like the OCP benchmark over TCP).
struct QpRemote {
  std::uint32_t peer = 0;  ///< driver's address handle
  std::uint32_t qpn = 0;
  std::uint32_t sq_psn = 0;  ///< our first send PSN
  std::uint32_t rq_psn = 0;  ///< first PSN we expect from the peer
  std::uint8_t peer_mpr_dest = 8;
  std::uint16_t peer_max_wimm_dest = 128;
  QpAuth auth{};  ///< opt-in MAC in place of the ICRC (engine/auth.hpp); off costs nothing
  /// Both ends agreed to the project's wire extensions for this connection (D45: negotiated by the
  /// driver, e.g. in mrc perf's connection info). With EndpointConfig::wire_ext they are sent and read
  /// on this QP and on the endpoint packets (EV probes) of its peer (the latest connection to a peer
  /// decides those). Off, the default toward a peer nobody asked: spec packets only, and whatever a
  /// spec peer puts in reserved bytes is never read as ours.
  bool wire_ext = false;
};

enum class QpState : std::uint8_t { kReset, kInit, kRtr, kRts, kError };
const char* to_string(QpState s);

struct SendWr {
  std::uint64_t wr_id = 0;
  bool with_imm = false;
  std::uint32_t imm = 0;  ///< host order
  bool signaled = true;
  std::uint64_t local_addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
};

/// One packet to transmit: header bytes, a payload view into registered memory (zero-copy) and
/// a trailer (pad + ICRC). The driver concatenates header + payload + trailer.
struct TxPacket {
  std::uint8_t header[wire::kMaxHeaderSize];
  std::uint16_t header_len = 0;
  const std::uint8_t* payload = nullptr;
  std::uint32_t payload_len = 0;
  std::uint8_t trailer[3 + kMacSize];  ///< pad (0..3) + ICRC (4) or MAC tag (kMacSize)
  std::uint8_t trailer_len = 0;
  std::uint8_t port = 0;
  Ev ev;
  std::uint32_t peer = 0;
  std::uint32_t qpn = 0;  ///< local QP (0 for endpoint packets)
  TrafficClass tc = TrafficClass::kData;
  std::uint32_t psn = 0;  ///< for drivers' statistics
  /// Input: write the project's wire extensions (EndpointConfig::wire_ext and QpRemote::wire_ext); set
  /// by the QP or the endpoint that fills the packet.
  bool wire_ext = false;
  std::uint32_t wire_size() const { return header_len + payload_len + trailer_len; }
  std::uint8_t pad() const { return static_cast<std::uint8_t>((4 - (payload_len & 3)) & 3); }
  /// The bytes an ICRC covers after any IP/UDP prefix: headers, payload, pad.
  std::uint32_t icrc_rest_len() const { return header_len + payload_len + pad(); }
  /// XORs `x` into the ICRC (a driver folding its IP/UDP prefix in, wire::icrc_prefix_xor). A trailer
  /// that is an authentication tag (pad + kMacSize bytes) is left alone.
  void xor_icrc(std::uint32_t x) {
    const std::uint8_t pd = pad();
    if (trailer_len != pd + wire::kIcrcSize) return;
    for (std::size_t i = 0; i < wire::kIcrcSize; ++i)
      trailer[pd + i] ^= static_cast<std::uint8_t>(x >> (8 * i));
  }
};

struct EndpointConfig {
  std::uint32_t num_ports = 1;
  std::uint64_t seed = 1;
  bool icrc = true;  ///< compute and verify the ICRC
  /// Offer the project's wire extensions (cc_flags for D7b and ECN echo, SACK and EV-probe service
  /// times, the ERTH/EETH EV echo and the EETH port mask of D40) in bytes every public source leaves
  /// reserved (docs/wire-format.md W20, decisions.md D44, D45). They are used with a peer only where
  /// its connection also agreed (QpRemote::wire_ext). Off: exactly the bytes a spec peer sends.
  bool wire_ext = true;
  /// Keep events for poll_event(). Off, none is kept (poll_event() finds none): for a driver that
  /// reads none, like the simulator, which would only drain and drop them.
  bool events = true;
  /// Fetch QP state ahead of use: poll_tx() the next QP it will poll, prefetch_rx() the QP a driver
  /// says a packet is coming for. It pays when the QPs' state outgrows the caches (thousands of QPs,
  /// as in a simulated all-to-all) and costs a few percent when it does not; off, both do nothing.
  bool prefetch = false;
  Tunables tun;
};

/// Per-QP counters (also exported by the drivers).
struct QpCounters {
  std::uint64_t tx_data = 0, tx_rtx = 0, tx_sack = 0, tx_nack = 0, tx_probe = 0, tx_ack = 0;
  std::uint64_t rx_data = 0, rx_dup = 0, rx_sack = 0, rx_nack = 0, rx_trimmed = 0, rx_probe = 0;
  std::uint64_t rtx_nack = 0, rtx_loss = 0, rtx_timeout = 0, rtx_port = 0;  ///< retransmits by cause
  std::uint64_t rtx_spurious = 0;  ///< retransmissions that reached the responder as duplicates
  std::uint64_t tx_dup = 0;        ///< second copies of failover retransmissions (D56)
  std::uint64_t nack_sent_by_reason[32] = {};
  std::uint64_t rx_refused = 0;  ///< dropped: bad rkey/bounds/PSN/peer/pkey
  /// Fatal NAKs (D39): held for confirmation (the packet is resent), and dismissed (for a packet
  /// the responder acknowledged, or while another one is being confirmed).
  std::uint64_t rx_fatal_nak_held = 0, rx_fatal_nak_dismissed = 0;
  /// Control packets (SACK/NACK/NAK/probe answers) dropped because the 4,096-entry queue was full:
  /// the oldest plain SACK, or the new packet when none is left.
  std::uint64_t ctrl_dropped = 0;
  std::uint64_t ev_transitions = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t tx_encode_errors = 0;  ///< must stay 0: the codec refused an engine-built packet
  std::uint64_t bytes_acked = 0, bytes_placed = 0;
};

struct EndpointCounters {
  std::uint64_t rx_bad_packet = 0;  ///< failed to decode / bad ICRC
  std::uint64_t rx_unknown_qp = 0;
  std::uint64_t rx_wrong_peer = 0;
  std::uint64_t rx_bad_pkey = 0;
  std::uint64_t tx_encode_errors = 0;
  std::uint64_t rx_auth_failed = 0;  ///< dropped: missing or wrong MAC on an authenticated QP
  std::uint64_t events_dropped = 0;  ///< events discarded because nobody drained the queue
  std::uint64_t ep_tx_dropped = 0;   ///< endpoint packets (probe answers, port status) not queued: full
  /// Endpoint packets refused (D40): from an unknown source (kNoPeer); a port-status update that
  /// leaves out the plane it arrived on; a missing or wrong MAC from a peer with authenticated QPs.
  std::uint64_t rx_ep_refused = 0;
  std::uint64_t port_status_corrected = 0;  ///< a check's answer overrode a port-status update (D40)
};

class Endpoint {
 public:
  explicit Endpoint(const EndpointConfig& cfg);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const EndpointConfig& config() const { return cfg_; }
  MemoryTable& memory() { return memory_; }

  // --- QP lifecycle (returns 0 or an errno value) ---------------------------------------------
  /// Creates a QP in RESET state; returns its QPN (never 0..2), or 0 with errno-like `*err`.
  std::uint32_t create_qp(const QpConfig& cfg, int* err = nullptr);
  int destroy_qp(std::uint32_t qpn);
  /// The C API hands a QP's MRC attributes over per transition (INIT: EV/CC profiles, RTR: the
  /// responder's, RTS: the requester's). In RESET the QP is rebuilt from `cfg`; in INIT / RTR it
  /// takes only the attributes it has not consumed yet (Qp::reconfigure). 0 or EINVAL.
  int reconfigure_qp(std::uint32_t qpn, const QpConfig& cfg);
  /// RESET -> INIT -> RTR -> RTS in one step for drivers that exchanged QpRemote out of band.
  int connect_qp(std::uint32_t qpn, const QpRemote& remote, Time now);
  /// Individual transitions for the C API state machine.
  int modify_to_init(std::uint32_t qpn);
  int modify_to_rtr(std::uint32_t qpn, const QpRemote& remote, Time now);
  int modify_to_rts(std::uint32_t qpn, Time now);
  /// Same, with the first send PSN given now (the C API learns SQ_PSN at RTS, not at RTR).
  int modify_to_rts(std::uint32_t qpn, std::uint32_t sq_psn, Time now);
  int modify_to_error(std::uint32_t qpn, Time now);
  QpState qp_state(std::uint32_t qpn) const;
  Qp* qp(std::uint32_t qpn) {
    Qp* q = find_qp(qpn);
    if (q != nullptr) touch(qpn - kFirstQpn);  // the caller may change it
    return q;
  }
  const Qp* qp(std::uint32_t qpn) const { return find_qp(qpn); }

  // --- verbs-like data path ---------------------------------------------------------------------
  int post_send(std::uint32_t qpn, const SendWr& wr, Time now);
  int post_recv(std::uint32_t qpn, std::uint64_t wr_id);
  bool poll_completion(Completion& out);
  bool poll_event(Event& out);

  // --- driver side --------------------------------------------------------------------------------
  void receive(std::span<const std::uint8_t> pkt, const RxMeta& meta, Time now);
  /// A packet for QP `qpn` (its BTH's destination QP) is about to be received, feedback (ACK, SACK,
  /// NACK) or not: starts fetching the QP's state, which a host of many QPs last touched long ago (a
  /// hint; any qpn is accepted).
  void prefetch_rx(std::uint32_t qpn, bool feedback) const;
  /// The BTH's destination QP read from a packet's bytes (at least 8), before decode().
  static std::uint32_t bth_dest_qp(std::span<const std::uint8_t> pkt) {
    return (std::uint32_t{pkt[5]} << 16) | (std::uint32_t{pkt[6]} << 8) | pkt[7];
  }
  /// Produces the next packet to send on one of the ports in `free_ports` (bit i = port i can take
  /// a packet now). Returns false when nothing may be sent now.
  bool poll_tx(TxPacket& out, Time now, std::uint32_t free_ports);
  /// Something may be sent by poll_tx() (a QP on the ready list, or an endpoint packet queued).
  bool tx_pending() const { return !tx_ready_.empty() || !ep_tx_.empty(); }
  /// For a driver whose port is busy until `at` after poll_tx() returned a packet, with nothing
  /// else done since: true if a poll_tx() at `at` would send nothing, either because nothing is
  /// pending (a QP leaves the ready list with the send that leaves it nothing to send, D79) or
  /// because it would only take the endpoint's one QP off the ready list (its window closed), which
  /// this does now. The driver may then skip that poll, provided that it polls when a port frees up
  /// whenever tx_pending() says so after any later input (a packet, a timer, a post, a port
  /// change). An incast's senders, one QP each and waiting for an ACK after every packet, and its
  /// receiver, many QPs each with one ACK to send now and then, are in this state most of the time.
  bool settle_tx(Time at) {
    if (!ep_tx_.empty()) return false;
    return tx_ready_.empty() || (qps_.size() == 1 && tx_ready_.size() == 1 && settle_one(at));
  }
  /// Earliest time on_timer() must run (kNever if none).
  Time next_deadline() const;
  void on_timer(Time now);
  /// Applies every QP's SKIP expiries due by `now`. With events off (EndpointConfig::events) they
  /// have no timer of their own and wait until the QP is next looked at: a driver that reads EV
  /// states or transition counters at the end of a run calls this first.
  void expire_skips(Time now);

  // --- ports and endpoint operations --------------------------------------------------------------
  /// Local port up/down: a down port's EVs leave every QP at once and the peers are told.
  void set_port_up(std::uint8_t port, bool up, Time now);
  std::uint32_t port_mask() const { return port_up_mask_; }
  /// Sends an EV probe (ERTH op EV_PROBE) to `peer` on `ev`; the answer becomes an event.
  int send_ev_probe(std::uint32_t peer, const Ev& ev, std::uint16_t req_id, Duration timeout, Time now);
  /// Sends a port-status update to `peer` (ERTH op PORT_STATUS_UPDATE) with our usable ports.
  int send_port_status(std::uint32_t peer, Time now);

  const EndpointCounters& counters() const { return counters_; }
  std::vector<std::uint32_t> qpns() const;

  // --- internal: used by Qp -----------------------------------------------------------------------
  void push_completion(const Completion& c) { completions_.push_back(c); }
  void push_event(const Event& e);
  void mark_tx_ready(Qp* qp);
  /// The EV manager table (the EVs and their initial state) of `evs` with `active_count`, shared
  /// with the QPs created before from equal ones (D54): the last table made is kept, so the QPs of
  /// one profile hold one copy between them. Null if the endpoint's ports cannot carry them.
  std::shared_ptr<const EvManager::Table> shared_ev_table(std::span<const Ev> evs,
                                                          std::uint32_t active_count);

 private:
  /// Takes the QP at position `pos` of the ready list off it (the last entry takes its place).
  void leave_ready_at(std::size_t pos) {
    slot_[tx_ready_[pos]].ready = 0;
    tx_ready_[pos] = tx_ready_.back();
    tx_ready_.pop_back();
  }
  struct EpTx;  // queued endpoint control packets
  bool valid_qp_config(const QpConfig& cfg) const;
  /// Authenticated QPs: checks the MAC of a packet addressed to one and strips the tag (false:
  /// drop it). Runs before decoding, so nothing of a forged packet reaches a QP.
  bool authenticate(std::span<const std::uint8_t>& pkt, const RxMeta& meta, wire::DecodeOptions& opt);
  void handle_endpoint_packet(const wire::Packet& p, const RxMeta& meta, Time now);
  /// Endpoint packets with a peer that has authenticated QPs are tagged with the keys of one of
  /// them (D40): ours to send with, and up to kMaxEpKeyTries of the peer's to check with.
  static constexpr std::size_t kMaxEpKeyTries = 4;
  const MacKey* ep_tx_key(std::uint32_t peer) const;
  std::size_t ep_key_candidates(std::uint32_t peer, const Qp* (&out)[kMaxEpKeyTries]) const;
  /// Whether packets to and from `peer`'s endpoint (dest QP kEpQpn) carry the wire extensions (D45).
  bool peer_wire_ext(std::uint32_t peer) const;
  bool has_qp_with(std::uint32_t peer) const;
  bool queue_ep_tx(std::unique_ptr<EpTx> t);  ///< false (and counted) when the queue is full
  void apply_peer_ports(std::uint32_t peer, std::uint32_t mask, Time now);
  /// The port mask `peer` last announced (D40), or null if it never did.
  std::uint32_t* known_peer_ports(std::uint32_t peer);
  void verify_peer_ports(std::uint32_t peer, std::uint8_t port, Time now);
  bool poll_ep_tx(TxPacket& out, Time now, std::uint32_t free_ports);
  void prefetch_next_tx(Time now) const;  ///< EndpointConfig::prefetch, after a packet is polled

  // QP timers: every QP's next_deadline() cached in a DeadlineHeap (by QP index), so
  // next_deadline() and on_timer() cost O(log QPs) instead of a scan of every QP. A QP's deadline
  // is re-read (touch) whenever the endpoint hands the QP to code that may change it: qp(),
  // poll_tx, on_timer, port-status changes. That also ends the QP's idle promise (QpSlot::idle_until).
  void touch(std::uint32_t i) const {
    QpSlot& s = slot_[i];
    s.idle_until = 0;
    if (s.dirty) return;
    s.dirty = 1;
    dirty_.push_back(i);
  }
  void refresh_deadlines() const;
  bool settle_one(Time at);                         ///< settle_tx() past its cheap checks
  static constexpr std::uint32_t kFirstQpn = 0x10;  // 0..2 are reserved (QPN 2 = endpoint requests)
  /// The QP numbered `qpn` or nullptr, not touched (qp() touches it for callers that may change it).
  Qp* find_qp(std::uint32_t qpn) const {
    if (qpn < kFirstQpn || qpn - kFirstQpn >= qps_.size()) return nullptr;
    return qps_[qpn - kFirstQpn].get();
  }

  EndpointConfig cfg_;
  MemoryTable memory_;
  std::shared_ptr<const EvManager::Table> last_ev_table_;  ///< shared_ev_table()'s last
  std::vector<std::unique_ptr<Qp>> qps_;                   ///< index = qpn - kFirstQpn
  mutable DeadlineHeap due_;                               ///< per QP index: its cached next_deadline()
  mutable std::vector<std::uint32_t> dirty_;               ///< QP indices whose deadline may have changed
  std::vector<std::uint32_t> fired_;                       ///< on_timer scratch
  std::vector<std::uint32_t> tx_ready_;  ///< indices of QPs that may have something to send (round robin)
  /// The endpoint's own per-QP flags in one entry, so a visit to a QP reads one line of them.
  struct QpSlot {
    /// Qp::idle_until() after a poll_tx that found nothing; until then, or until the QP is touched,
    /// poll_tx passes over it (0: no promise).
    Time idle_until = 0;
    std::uint8_t dirty = 0;  ///< listed in dirty_
    std::uint8_t ready = 0;  ///< listed in tx_ready_
  };
  mutable std::vector<QpSlot> slot_;  ///< per QP index
  std::size_t tx_rr_ = 0;
  std::deque<Completion> completions_;
  std::deque<Event> events_;
  std::uint64_t events_lost_ = 0;  ///< dropped since the last kEventsDropped was polled
  std::uint32_t port_up_mask_;
  std::vector<std::unique_ptr<EpTx>> ep_tx_;
  struct PendingProbe {
    std::uint32_t peer;
    std::uint16_t req_id;
    Ev ev;
    Time sent;
    Time deadline;
  };
  std::vector<PendingProbe> probes_;
  struct VerifyProbe {  ///< a port-status check (D40) waiting for its answer
    std::uint32_t peer;
    std::uint32_t psn;
    Time deadline;
  };
  std::vector<VerifyProbe> verify_;
  Rng rng_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> peer_ports_;  ///< last port mask per peer
  EndpointCounters counters_;
  bool any_auth_ = false;  ///< some QP was connected with QpAuth::on (receive() checks MACs)
  std::vector<std::pair<std::uint32_t, bool>>
      peer_ext_;  ///< QpRemote::wire_ext of the latest connection per peer
};

}  // namespace mrc::engine
