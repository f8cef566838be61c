// Engine-wide value types shared by the QP, the EV manager and the drivers (test network, UDP
// endpoint, simulator). Ports are 0-based plane indices inside the engine (the C API is 1-based).
#pragma once
#include <cstdint>

#include "common/time.hpp"

namespace mrc::engine {

/// Bytes CC counts per packet beyond its payload: what the requester charges a packet and what the
/// responder reports as received (SACK rcvd_bytes), so the two must be the same constant.
inline constexpr std::uint32_t kPktOverhead = 64;

inline constexpr std::uint32_t kMaxPorts = 32;

/// An entropy value: the raw 32-bit EV (as reflected in SACK/NACK) and the port (plane) it leaves on.
/// How the value becomes a UDP source port / flow label / SRv6 address is the driver's business.
struct Ev {
  std::uint32_t value = 0;
  std::uint8_t port = 0;
  friend bool operator==(const Ev&, const Ev&) = default;
};

enum class EvState : std::uint8_t { kGood, kSkip, kAssumedBad, kDenied };
const char* to_string(EvState s);

/// Why an EV changed state.
enum class EvCause : std::uint8_t {
  kEcnEcho,     ///< SACK m=SKIP_ONCE
  kTrimNack,    ///< NACK TRIMMED
  kAlwaysSkip,  ///< SACK m=ALWAYS_SKIP
  kLoss,        ///< untrimmed loss inferred from later deliveries
  kTimeout,     ///< retransmission timeout
  kSkipExpired,
  kProbeSuccess,  ///< resurrected after enough successful probes
  kController,    ///< deny / allow from the controller API
  kPortDown,
  kPortUp,
};
const char* to_string(EvCause c);

/// Traffic class of an outgoing packet (maps to DSCP at the driver).
enum class TrafficClass : std::uint8_t { kData, kDataRtx, kControl };

/// RxMeta::peer of a packet from a source address the driver does not know: no QP has it, and
/// endpoint requests from it are refused (nothing could be sent back to it).
inline constexpr std::uint32_t kNoPeer = 0xFFFFFFFFu;

/// What the network did to a received packet, as the driver learned it (DSCP / ECN bits).
struct RxMeta {
  std::uint8_t port = 0;   ///< local port it arrived on
  std::uint32_t peer = 0;  ///< driver's handle of the source address (security check)
  std::uint32_t ev = 0;    ///< EV value the packet carried (from sport / flow label / SRv6)
  bool ecn_ce = false;
  bool trimmed = false;          ///< DSCP_TRIMMED: header only
  bool trimmed_lasthop = false;  ///< DSCP_TRIMMED_LASTHOP
  /// The driver's RoCEv2 ICRC prefix, folded in (wire::DecodeOptions::icrc_xor); 0: none (W16).
  std::uint32_t icrc_xor = 0;
  bool icrc_any_ipv4_id = false;  ///< wire::DecodeOptions::icrc_any_ipv4_id
  /// The driver carries no payload bytes (a simulator's fabric): a data packet's payload is checked
  /// against the memory region and counted as placed, but nothing is written there; its ICRC, which
  /// covered the real payload, is not verified.
  bool no_payload = false;
};

enum class WcStatus : std::uint8_t {
  kSuccess,
  kRetryExceeded,         ///< IBV_WC_RETRY_EXC_ERR
  kRemoteAccessError,     ///< IBV_WC_REM_ACCESS_ERR
  kRemoteInvalidRequest,  ///< IBV_WC_REM_INV_REQ_ERR (WIMM limit, fatal NACK)
  kRemoteOpError,         ///< IBV_WC_REM_OP_ERR
  kLocalProtectionError,  ///< IBV_WC_LOC_PROT_ERR (bad lkey / bounds)
  kFlushed,               ///< IBV_WC_WR_FLUSH_ERR
};
const char* to_string(WcStatus s);

enum class WcOpcode : std::uint8_t { kRdmaWrite, kRdmaWriteImm, kRecvRdmaWithImm };

struct Completion {
  std::uint64_t wr_id = 0;
  std::uint32_t qpn = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kRdmaWrite;
  bool is_recv = false;
  std::uint32_t byte_len = 0;
  std::uint32_t imm = 0;  ///< host order
  bool has_imm = false;
};

enum class EventType : std::uint8_t {
  kEvState,          ///< an EV of a QP changed state
  kQpError,          ///< a QP moved to ERROR
  kPortStatus,       ///< a peer told us which of its ports are usable
  kEvProbeResponse,  ///< an endpoint EV probe was answered
  kEvProbeTimeout,
  /// The event queue was full (nobody drained it): `dropped` older events were discarded before
  /// the events that follow this one.
  kEventsDropped,
};

struct Event {
  EventType type = EventType::kEvState;
  std::uint32_t qpn = 0;
  Ev ev;
  EvState from = EvState::kGood, to = EvState::kGood;
  EvCause cause = EvCause::kLoss;
  Time time = 0;
  std::uint32_t peer = 0;
  std::uint32_t port_mask = 0;  ///< kPortStatus
  std::uint16_t req_id = 0;     ///< kEvProbe*
  std::uint64_t rtt_ns = 0;     ///< kEvProbeResponse
  bool adj_svc_time = false;
  std::uint64_t dropped = 0;  ///< kEventsDropped
};

}  // namespace mrc::engine
