// MRC wire format: header structs and the codec API.
//
// Layouts follow docs/protocol.md §5 (an unverified reconstruction of OCP MRC 1.0 tables); every
// provisional choice is listed in docs/wire-format.md and docs/decisions.md. All multi-byte fields
// are big-endian on the wire. The codec never reads or writes outside the spans it is given.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace mrc::wire {

inline constexpr std::uint16_t kRoceUdpPort = 4791;
inline constexpr std::uint32_t kEpQpn = 0x2;  ///< reserved QPN of endpoint (node-scoped) requests
inline constexpr std::uint16_t kDefaultPkey = 0xFFFF;
inline constexpr std::uint8_t kTver = 0;  ///< BTH TVer used by MRC v1 (provisional)
inline constexpr std::size_t kIcrcSize = 4;
/// Largest header stack we ever encode (BTH+METH+TSETH+RETH+ImmDt = 40; SETH = 48; EETH = 48).
inline constexpr std::size_t kMaxHeaderSize = 64;
/// Largest MRC packet (BTH .. ICRC) the codec encodes or accepts: one UDP/IPv4 datagram payload.
inline constexpr std::size_t kMaxPacketSize = 65507;

enum class Opcode : std::uint8_t {
  kWriteFirst = 0xC6,
  kWriteMiddle = 0xC7,
  kWriteLast = 0xC8,
  kWriteLastImm = 0xC9,
  kWriteOnly = 0xCA,
  kWriteOnlyImm = 0xCB,
  kAck = 0xD1,               ///< Transport ACK (AETH), used for NAKs such as remote access error
  kEndpointRequest = 0xD8,   ///< ERTH: EV probe or port-status update (DestQP = kEpQpn)
  kEndpointResponse = 0xD9,  ///< EETH
  kSack = 0xDC,              ///< SETH (+ CC_STATE)
  kNack = 0xDD,              ///< NETH
  kProbe = 0xDE,             ///< PETH: reliability probe, consumes no PSN
};

bool is_data(Opcode op);   ///< 0xC6..0xCB
bool has_imm(Opcode op);   ///< 0xC9, 0xCB
bool is_last(Opcode op);   ///< LAST, LAST_IMM, ONLY, ONLY_IMM
bool is_first(Opcode op);  ///< FIRST, ONLY, ONLY_IMM
bool is_known(std::uint8_t op);

/// NACK reason codes (values shared with UET PDS).
enum class NackReason : std::uint8_t {
  kTrimmed = 0x01,
  kTrimmedLastHop = 0x02,
  kNoBitmap = 0x06,
  kNoPktBuffer = 0x07,
  kNoResource = 0x0A,
  kPsnOorWindow = 0x0B,
  kUnexpEvent = 0x19,  ///< fatal: the requester moves the QP to ERROR
};

/// SACK `m` field: what the responder asks the requester to do with the reflected EV.
enum class SackMode : std::uint8_t { kNone = 0, kSkipOnce = 1, kAlwaysSkip = 2 };

/// AETH syndromes we use (IBTA): ACK, and NAK codes.
namespace aeth {
inline constexpr std::uint8_t kAck = 0x00;
inline constexpr std::uint8_t kNakPsnSeqError = 0x60;
inline constexpr std::uint8_t kNakInvalidRequest = 0x61;
inline constexpr std::uint8_t kNakRemoteAccessError = 0x62;
inline constexpr std::uint8_t kNakRemoteOpError = 0x63;
}  // namespace aeth

/// Endpoint request operations (ERTH.op).
enum class EpOp : std::uint8_t { kPortStatusUpdate = 0, kEvProbe = 1 };

struct Bth {
  Opcode opcode{};
  bool se = false;
  bool m = false;
  std::uint8_t pad_cnt = 0;  ///< filled by encode() from the payload length
  std::uint8_t tver = kTver;
  std::uint16_t pkey = kDefaultPkey;
  std::uint32_t dest_qp = 0;  ///< 24 bits
  bool ack_req = false;       ///< A bit: the responder must SACK this packet at once
  bool rtx = false;           ///< this packet is a retransmission
  bool ts = false;            ///< a TSETH follows the METH (filled by encode() from Packet::has_tseth)
  std::uint32_t psn = 0;      ///< 24 bits; for endpoint requests PSN[15:0] = request id
  bool operator==(const Bth&) const = default;
};

struct Meth {               ///< message extended transport header
  std::uint16_t rqmsn = 0;  ///< WRITE_IMM sequence number (which receive WR this immediate consumes)
  std::uint16_t msn = 0;    ///< message sequence number
  bool operator==(const Meth&) const = default;
};

struct Tseth {
  std::uint16_t tx_timestamp = 0;  ///< requester clock in kTsUnitNs units (wraps)
  bool tsr = false;
  bool operator==(const Tseth&) const = default;
};
inline constexpr std::uint32_t kTsUnitNs = 128;

struct Reth {
  std::uint64_t va = 0;  ///< address of THIS packet's first payload byte
  std::uint32_t rkey = 0;
  std::uint32_t dma_len = 0;  ///< length of the whole message (every packet carries it)
  bool operator==(const Reth&) const = default;
};

struct Aeth {
  std::uint8_t syndrome = aeth::kAck;
  std::uint32_t msn = 0;  ///< 24 bits
  bool operator==(const Aeth&) const = default;
};

struct CcState {
  std::uint16_t tx_timestamp = 0;  ///< reflected from the triggering packet's TSETH
  std::uint16_t ooo_count = 0;     ///< 15 bits
  bool restore_cwnd = false;       ///< r_c
  std::uint8_t rcv_cwnd_pen = 0;   ///< 7 bits, 0..127
  std::uint32_t rcvd_bytes = 0;    ///< 24 bits, cumulative, 256-byte units
  bool operator==(const CcState&) const = default;
};

/// cc_flags bits in SETH/NETH (project decision, see docs/wire-format.md).
namespace cc_flags {
inline constexpr std::uint8_t kRtxEcho = 0x1;  ///< triggering packet had BTH.rtx set
inline constexpr std::uint8_t kSvcTime = 0x2;  ///< svc_time field is valid
inline constexpr std::uint8_t kEcnEcho = 0x4;  ///< triggering packet was ECN-CE marked
inline constexpr std::uint8_t kDupEcho = 0x8;  ///< triggering packet was a retransmitted duplicate
}  // namespace cc_flags

struct Seth {  ///< reliability SACK, 28 bytes + 8-byte CC_STATE
  SackMode m = SackMode::kNone;
  bool pr = false;                  ///< answers a reliability probe
  std::int16_t ack_psn_offset = 0;  ///< triggering PSN - cack_psn
  std::uint32_t entropy = 0;        ///< EV of the triggering packet, reflected
  std::uint16_t svc_time = 0;       ///< responder service time in kSvcUnitNs units (in EMU's spdcid slot)
  std::uint16_t probe_id = 0;       ///< for pr=1: the probe id (in EMU's dpdcid slot)
  std::uint32_t cack_psn = 0;       ///< highest PSN such that all PSNs <= it were received (24 bits)
  std::uint8_t cc_type = 0;
  std::uint8_t cc_flags = 0;
  std::uint8_t mpr = 0;           ///< dynamic MPR advertisement, 128-PSN units (0 = none)
  std::int16_t sack_offset = 0;   ///< bitmap base = cack_psn + sack_offset
  std::uint64_t sack_bitmap = 0;  ///< bit i = PSN base+i received
  CcState cc;
  bool operator==(const Seth&) const = default;
};
inline constexpr std::uint32_t kSvcUnitNs = 32;

struct Neth {  ///< reliability NACK, 20 bytes
  NackReason reason = NackReason::kTrimmed;
  std::uint8_t vendor_info = 0;
  std::uint32_t entropy = 0;
  std::uint32_t nack_psn = 0;  ///< 24 bits
  std::uint8_t cc_type = 0;
  std::uint8_t cc_flags = 0;
  std::uint16_t tx_timestamp = 0;
  bool operator==(const Neth&) const = default;
};

struct Peth {  ///< reliability probe request, 16 bytes
  std::uint8_t vendor_info = 0;
  std::uint16_t probe_id = 0;
  std::uint16_t tx_timestamp = 0;
  bool tsr = false;
  bool operator==(const Peth&) const = default;
};

struct Erth {  ///< endpoint request, 16 bytes
  EpOp op = EpOp::kEvProbe;
  std::uint8_t vendor_info = 0;
  std::uint32_t port_status_mask = 0;  ///< bit i = port i+1 usable (1-based ports on the API)
  std::uint32_t entropy = 0;           ///< EV the request was sent on (in a reserved word)
  std::uint16_t tx_timestamp = 0;
  bool tsr = false;
  bool operator==(const Erth&) const = default;
};

struct Eeth {  ///< endpoint response, 36 bytes
  EpOp op = EpOp::kEvProbe;
  std::uint8_t vendor_info = 0;
  std::uint32_t entropy = 0;       ///< echoed request EV
  std::uint32_t svc_time_ns = 0;   ///< time the request spent in the responder
  std::uint16_t tx_timestamp = 0;  ///< echoed
  bool svc_time_valid = false;
  std::uint32_t port_status_mask = 0;  ///< responder's own usable ports
  bool operator==(const Eeth&) const = default;
};

/// A decoded (or to-be-encoded) packet. Which extension headers are meaningful follows from the
/// opcode; TSETH additionally from `has_tseth`. `payload` points into the caller's buffer.
struct Packet {
  Bth bth;
  Meth meth;
  bool has_tseth = false;
  Tseth tseth;
  Reth reth;
  std::uint32_t imm = 0;
  Aeth aeth;
  Seth seth;
  Neth neth;
  Peth peth;
  Erth erth;
  Eeth eeth;
  std::span<const std::uint8_t> payload;  ///< data packets only; excludes pad and ICRC
  bool trimmed = false;                   ///< decoded as a trimmed header (no payload, no ICRC)
  std::uint32_t icrc = 0;                 ///< as found on the wire (decode)
};

enum class Error : std::uint8_t {
  kOk = 0,
  kTruncated,  ///< shorter than its header stack
  kUnknownOpcode,
  kBadTver,
  kBadPadding,  ///< pad count larger than the payload area or non-zero pad bytes
  kBadField,    ///< a reserved/enum field holds an invalid value
  kBadIcrc,
  kBufferTooSmall,  ///< encode: output span too small
  kPayloadTooLarge,
};
const char* to_string(Error e);

/// Size of the header stack (BTH .. last extension header) for this opcode.
std::size_t header_size(Opcode op, bool has_tseth);

/// Writes BTH and the extension headers of `p` into `out`; returns bytes written or 0 with `err`.
/// Sets bth.pad_cnt from payload_len. The payload, pad and ICRC are NOT written (scatter/gather).
std::size_t encode_headers(const Packet& p, std::uint32_t payload_len, std::span<std::uint8_t> out,
                           Error* err = nullptr);

/// Convenience for control packets and tests: headers + payload + pad + ICRC into one buffer.
std::size_t encode(const Packet& p, std::span<std::uint8_t> out, Error* err = nullptr);

struct DecodeOptions {
  bool verify_icrc = false;
  /// The network marked this packet as trimmed (DSCP): only the header stack is present;
  /// payload, pad and ICRC are absent and not checked.
  bool trimmed = false;
};

/// Parses `in` (BTH first, ICRC last). Never reads outside `in`; any byte string yields either a
/// packet or an error.
Error decode(std::span<const std::uint8_t> in, Packet& out, const DecodeOptions& opt = {});

/// RoCEv2 invariant CRC (CRC-32, IEEE polynomial, reflected) over the masked BTH, the rest of the
/// headers and the payload+pad, as computed without an IP/UDP pseudo header (the engine is
/// network-agnostic; the UDP endpoint folds its IP/UDP prefix in with `icrc_with_prefix`).
std::uint32_t icrc(std::span<const std::uint8_t> headers, std::span<const std::uint8_t> payload,
                   std::uint8_t pad_cnt);

/// Same, with an already-masked IP+UDP header (RoCEv2 order: 8 x 0xFF, IP, UDP, BTH, ...) folded in
/// before the BTH. The caller masks the variant IP/UDP fields (IPv4 TOS, TTL, checksum; IPv6 traffic
/// class, flow label, hop limit; UDP checksum) to all-ones. An empty prefix gives icrc().
std::uint32_t icrc_with_prefix(std::span<const std::uint8_t> masked_ip_udp,
                               std::span<const std::uint8_t> headers, std::span<const std::uint8_t> payload,
                               std::uint8_t pad_cnt);

/// Plain CRC-32 (IEEE, reflected, init/xorout 0xFFFFFFFF) continuation, exposed for tests.
std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::uint8_t> data);

/// The same with the portable table code only (what crc32_update uses on CPUs without carry-less
/// multiply and for short inputs), for tests and the benchmark baseline.
std::uint32_t crc32_update_table(std::uint32_t crc, std::span<const std::uint8_t> data);

}  // namespace mrc::wire
