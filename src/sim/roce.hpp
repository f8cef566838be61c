// RoceNic: the RoCEv2 RC baseline NIC for MRC-vs-RoCE comparisons in the simulator.
//
// Same driver interface and value types as engine::Endpoint (post_send / poll_completion /
// receive / poll_tx / next_deadline / on_timer, TxPacket, RxMeta, SendWr, Completion, QpRemote), so a
// fabric can drive either through a closed switch over host kinds.
//
// Model (RDMA WRITE over a Reliable Connection):
//   * `num_ports` NIC ports (one per plane); a QP is bound to one port at creation. Every QP has one
//     path: a 16-bit entropy (the UDP source port) drawn once per QP from the NIC seed and put in
//     TxPacket::ev.value; the fabric's ECMP hashes it, so ECMP collisions happen exactly as with
//     real RoCE.
//   * PSN-ordered go-back-N. The responder accepts only the expected PSN; a packet beyond it is
//     dropped and answered with one NAK (PSN sequence error) per gap, a packet below it (duplicate)
//     is dropped and re-ACKed. The requester restarts from the NAKed PSN, or from the oldest
//     unacknowledged PSN when the retransmission timer expires.
//   * ACK per packet by default (htsim: one 64 B ACK per packet), or one per `ack_every` packets and
//     always on the last packet of a message.
//   * No congestion control: a QP sends whenever the port is free (line rate). With DCQCN: per-QP
//     rate pacing (next_deadline() says when the next packet may go) driven by a reaction point
//     with per-QP alpha; the responder is the notification point (CNPs for ECN-CE data, at most one
//     per QP per `cnp_interval`).
//
// Wire format (documented choice). The project codec (wire/packet.hpp) only knows MRC opcodes, so the
// baseline writes real IBA RoCEv2 transport headers (no private framing) into TxPacket::header:
//   BTH  (12 B): [0] opcode  [1] 0  [2..3] P_Key 0xFFFF  [4] 0  [5..7] dest QPN
//                [8] bit7 = AckReq  [9..11] PSN (24 bit, modulo 2^24)
//   RETH (16 B, WRITE_FIRST / WRITE_ONLY[_IMM]): VA (8), R_Key (4), DMA length (4), big endian
//   ImmDt (4 B, WRITE_LAST_IMM / WRITE_ONLY_IMM)
//   AETH (4 B, ACKNOWLEDGE): [0] syndrome (0x1F ACK, 0x60 NAK PSN sequence error) [1..3] MSN
//   CNP: BTH (opcode 0x81, dest QPN = the requester's QP) + 16 reserved zero bytes.
//   Opcodes are the IBA RC ones: 0x06 WRITE_FIRST, 0x07 MIDDLE, 0x08 LAST, 0x09 LAST_IMM,
//   0x0A ONLY, 0x0B ONLY_IMM, 0x11 ACKNOWLEDGE, 0x81 CNP.
//   Trailer: the 4-byte ICRC, zero (not computed). The payload length is what remains of the
//   datagram after header and trailer (as RoCE derives it from the IP length).
//   So a middle data packet is 12 + payload + 4 engine bytes, an ACK 16 + 4, a CNP 28 + 4; with the
//   fabric's 46 B of Ethernet/IP/UDP framing a 4086 B payload is 4148 B on the wire (htsim: 4150).
//
// Traffic class and lossless marking. Data is TrafficClass::kData (kDataRtx for retransmissions);
// ACK/NAK/CNP are kControl. RoCE packets must never be trimmed: the fabric should treat every packet
// from a RoceNic host as lossless (PFC) traffic — see RoceNic::kTrimmable / kLossless. If a trimmed
// packet reaches a RoceNic anyway it is counted and treated as lost (go-back-N recovers it).
//
// Payload. Memory regions are optional: add_region() returns a key usable as SendWr::lkey (source
// bytes) and SendWr::rkey (placement at the responder, remote_addr = region base address + offset).
// A key of 0 means "no memory": the sender sends zero bytes of the right length and the responder
// discards them (large simulations).
//
// Determinism: all randomness comes from the NIC seed; no global state; the per-packet path does not
// allocate once queues have warmed up.
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "common/rng.hpp"
#include "common/time.hpp"
#include "engine/endpoint.hpp"
#include "engine/types.hpp"

namespace mrc::sim {

/// DCQCN reaction-point and notification-point parameters.
///
/// Defaults = `mellanox()`: the Mellanox-style DCQCN parameter set used by the HPCC simulator
/// (alibaba-edu/High-Precision-Congestion-Control, simulation/run.py, `--cc dcqcn`, NIC rate scaled
/// to 100 Gb/s): alpha update every 1 us, rate decrease at most every 4 us, rate-increase timer
/// 300 us, g = 1/256, fast-recovery steps F = 1, R_AI = 5 Mb/s x 100/25 = 20 Mb/s,
/// R_HAI = 50 Mb/s x 100/25 = 200 Mb/s, minimum rate 1 Gb/s, no byte counter (HPCC's Mellanox model
/// has none). The notification point's 50 us CNP interval is the DCQCN paper's N = 50 us
/// (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015).
/// `paper()`: the DCQCN paper's values (alpha timer K = 55 us, rate-increase timer T = 55 us, byte
/// counter B = 10 MB, F = 5, g = 1/256, R_AI = 40 Mb/s) with the decrease interval equal to the CNP
/// interval (50 us) and R_HAI = 200 Mb/s as in HPCC's `dcqcn_paper` variant at 100 Gb/s.
struct DcqcnParams {
  Duration alpha_interval = 1_us;         ///< K: alpha EWMA period
  Duration decrease_interval = 4_us;      ///< at most one rate decrease per this
  Duration increase_interval = 300_us;    ///< T: rate-increase timer
  std::uint64_t byte_counter = 0;         ///< B: bytes per byte-counter increase event; 0 = off
  double g = 1.0 / 256;                   ///< alpha gain
  std::uint32_t fast_recovery_steps = 1;  ///< F
  double rate_ai_bps = 20e6;              ///< additive increase
  double rate_hai_bps = 200e6;            ///< hyper increase
  double min_rate_bps = 1e9;
  Duration cnp_interval = 50_us;  ///< NP: at most one CNP per QP per this
  static DcqcnParams mellanox() { return {}; }
  static DcqcnParams paper();
};

struct RoceConfig {
  double line_rate_bps = 100e9;      ///< port rate (pacing and DCQCN's ceiling)
  std::uint32_t wire_overhead = 46;  ///< framing the NIC does not build (for pacing only)
  std::uint32_t mtu = 4096;          ///< payload bytes per packet (4086 reproduces htsim's 4150 B)
  std::uint32_t ack_every = 1;       ///< ACK every N accepted packets (and every message end)
  Duration rto = 100_us;             ///< retransmission timeout (fixed, no backoff)
  std::uint32_t retry_limit = 7;     ///< consecutive timeouts without progress; 0 = forever
  bool dcqcn = false;                ///< reaction point: rate control on CNPs
  bool cnp = true;                   ///< notification point: send CNPs for ECN-CE data
  DcqcnParams dcqcn_params;
  std::uint64_t seed = 1;       ///< per-QP entropy draws
  std::uint32_t num_ports = 1;  ///< 1..32
};

enum class DcqcnStage : std::uint8_t { kNone, kFastRecovery, kAdditive, kHyper };
const char* to_string(DcqcnStage s);

/// A QP's DCQCN reaction-point state (for tests and statistics).
struct DcqcnState {
  bool active = false;    ///< a CNP has been received
  double rate_bps = 0;    ///< current rate Rc
  double target_bps = 0;  ///< target rate Rt
  double alpha = 0;
  std::uint32_t timer_count = 0, byte_count = 0;  ///< increase events since the last decrease
  DcqcnStage last_stage = DcqcnStage::kNone;      ///< stage of the last increase event
  std::uint64_t decreases = 0, increases = 0;
};

struct RoceQpCounters {
  std::uint64_t tx_data = 0, tx_rtx = 0, tx_ack = 0, tx_nak = 0, tx_cnp = 0;
  std::uint64_t rx_data = 0, rx_ack = 0, rx_nak = 0, rx_cnp = 0, rx_ecn = 0;
  std::uint64_t rx_out_of_order = 0;  ///< dropped: PSN beyond the expected one
  std::uint64_t rx_duplicate = 0;     ///< dropped: PSN below the expected one
  std::uint64_t rx_trimmed = 0;       ///< should stay 0 (RoCE is not trimmable)
  std::uint64_t rx_bad_key = 0;       ///< WRITE to an unknown key / out of bounds (not placed)
  std::uint64_t timeouts = 0;
  std::uint64_t bytes_acked = 0, bytes_received = 0;
};

struct RoceNicCounters {
  std::uint64_t rx_bad_packet = 0, rx_unknown_qp = 0, rx_wrong_peer = 0;
};

class RoceNic {
 public:
  /// RoCE packets must not be trimmed; the fabric carries them as lossless (PFC) traffic.
  static constexpr bool kTrimmable = false;
  static constexpr bool kLossless = true;
  static constexpr std::size_t kBthSize = 12, kRethSize = 16, kImmSize = 4, kAethSize = 4;
  static constexpr std::size_t kCnpSize = 28, kIcrcSize = 4;
  static constexpr std::uint8_t kOpWriteFirst = 0x06, kOpWriteMiddle = 0x07, kOpWriteLast = 0x08,
                                kOpWriteLastImm = 0x09, kOpWriteOnly = 0x0A, kOpWriteOnlyImm = 0x0B,
                                kOpAck = 0x11, kOpCnp = 0x81;
  static constexpr std::uint8_t kSyndromeAck = 0x1F, kSyndromeNakPsn = 0x60;

  explicit RoceNic(const RoceConfig& cfg);
  ~RoceNic();
  RoceNic(const RoceNic&) = delete;
  RoceNic& operator=(const RoceNic&) = delete;

  const RoceConfig& config() const { return cfg_; }

  /// Registers host memory; returns its key (never 0). The memory must outlive the NIC.
  std::uint32_t add_region(std::uint8_t* base, std::size_t len);

  /// Creates a QP on `port` (its QPN, never 0; 0 if the port does not exist) with a fresh entropy;
  /// connect it before posting.
  std::uint32_t create_qp(std::uint32_t port = 0);
  /// Connects to the peer QP (remote.peer = driver's address of the peer host, remote.qpn,
  /// remote.sq_psn = our first send PSN, remote.rq_psn = first PSN we expect). 0 or an errno value.
  int connect_qp(std::uint32_t qpn, const engine::QpRemote& remote, Time now);
  /// RDMA WRITE (with_imm: WRITE_WITH_IMM; the responder completes it without a posted receive).
  int post_send(std::uint32_t qpn, const engine::SendWr& wr, Time now);
  bool poll_completion(engine::Completion& out);

  void receive(std::span<const std::uint8_t> pkt, const engine::RxMeta& meta, Time now);
  bool poll_tx(engine::TxPacket& out, Time now, std::uint32_t free_ports);
  Time next_deadline() const;
  bool tx_pending() const { return true; }
  bool settle_tx(Time /*at*/) { return false; }
  void on_timer(Time now);

  // --- introspection ---------------------------------------------------------------------------------
  std::uint16_t entropy(std::uint32_t qpn) const;
  const RoceQpCounters& qp_counters(std::uint32_t qpn) const;
  /// DCQCN state with alpha brought up to `now`.
  DcqcnState dcqcn_state(std::uint32_t qpn, Time now) const;
  bool qp_error(std::uint32_t qpn) const;
  /// Messages posted and not yet acknowledged.
  std::size_t outstanding(std::uint32_t qpn) const;
  const RoceNicCounters& counters() const { return counters_; }

 private:
  struct Msg {
    engine::SendWr wr;
    std::uint32_t first_psn = 0;  ///< unwrapped 32-bit PSN space
    std::uint32_t npkts = 0;
  };
  struct Qp;
  struct Ctrl {
    std::uint32_t qp = 0;  ///< index into qps_
    std::uint8_t opcode = 0, syndrome = 0;
    std::uint32_t psn = 0;
  };

  Qp* find(std::uint32_t qpn);
  const Qp* find(std::uint32_t qpn) const;
  bool build_data(Qp& q, engine::TxPacket& out, Time now);
  void build_ctrl(const Ctrl& c, engine::TxPacket& out);
  void push_ctrl(const Ctrl& c);
  void on_data(Qp& q, std::uint8_t op, std::uint32_t psn, std::span<const std::uint8_t> pkt, std::size_t hdr,
               const engine::RxMeta& meta, Time now);
  void on_ack(Qp& q, std::uint8_t syndrome, std::uint32_t psn, Time now);
  void on_cnp(Qp& q, Time now);
  void ack_through(Qp& q, std::uint32_t psn_excl, Time now);
  void go_back(Qp& q, std::uint32_t psn);
  void fail_qp(Qp& q);
  // DCQCN reaction point.
  void rate_decrease(Qp& q, Time now);
  void rate_increase(Qp& q, bool from_timer, Time now);
  void locate(Qp& q);
  std::uint64_t tx_time_ps(const Qp& q, std::uint32_t wire_bytes) const;

  RoceConfig cfg_;
  Rng rng_;
  std::vector<Qp> qps_;  // qpn = index + 1
  struct Region {
    std::uint8_t* base = nullptr;
    std::size_t len = 0;
  };
  std::vector<Region> regions_;  // key = index + 1
  struct CtrlRing {              // pending ACK/NAK/CNP of one port
    std::vector<Ctrl> buf = std::vector<Ctrl>(64);
    std::size_t head = 0, count = 0;
  };
  std::vector<CtrlRing> ctrl_;  // per port
  std::deque<engine::Completion> completions_;
  std::vector<std::uint8_t> zeros_;  // payload of memory-less WRITEs
  std::size_t rr_ = 0;               // round-robin cursor over QPs
  Time last_now_ = 0;                // latest time seen (receive / on_timer)
  RoceNicCounters counters_;
};

}  // namespace mrc::sim
