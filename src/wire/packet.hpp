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

inline constexpr std::uint16_t kRoceUdpPort = 4791;  ///< IANA RoCEv2 port, the default everywhere (F8)
/// The port some readers of the OCP MRC 1.0 PDF report it prints (§7.5.5.2), most likely a typo for 4791.
/// Only decoders (the dissector, `mrc decode`) accept it by default; nothing sends to it unless told.
inline constexpr std::uint16_t kMrcSpecTypoPort = 4971;
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

// Inline: the engine asks these per packet.
/// 0xC6..0xCB
constexpr bool is_data(Opcode op) {
  const auto v = static_cast<std::uint8_t>(op);
  return v >= static_cast<std::uint8_t>(Opcode::kWriteFirst) &&
         v <= static_cast<std::uint8_t>(Opcode::kWriteOnlyImm);
}
/// ACK, SACK, NACK: the responder's answers, handled by the requester.
constexpr bool is_feedback(Opcode op) {
  return op == Opcode::kAck || op == Opcode::kSack || op == Opcode::kNack;
}
/// 0xC9, 0xCB
constexpr bool has_imm(Opcode op) {
  return op == Opcode::kWriteLastImm || op == Opcode::kWriteOnlyImm;
}
/// LAST, LAST_IMM, ONLY, ONLY_IMM
constexpr bool is_last(Opcode op) {
  return op == Opcode::kWriteLast || op == Opcode::kWriteLastImm || op == Opcode::kWriteOnly ||
         op == Opcode::kWriteOnlyImm;
}
/// FIRST, ONLY, ONLY_IMM
constexpr bool is_first(Opcode op) {
  return op == Opcode::kWriteFirst || op == Opcode::kWriteOnly || op == Opcode::kWriteOnlyImm;
}
constexpr bool is_known(std::uint8_t op) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kWriteFirst:
    case Opcode::kWriteMiddle:
    case Opcode::kWriteLast:
    case Opcode::kWriteLastImm:
    case Opcode::kWriteOnly:
    case Opcode::kWriteOnlyImm:
    case Opcode::kAck:
    case Opcode::kEndpointRequest:
    case Opcode::kEndpointResponse:
    case Opcode::kSack:
    case Opcode::kNack:
    case Opcode::kProbe:
      return true;
  }
  return false;
}

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
/// kReserved (3) is decoded (the SACK and its cumulative ACK stay valid, the EV hint is ignored) but
/// never encoded.
enum class SackMode : std::uint8_t { kNone = 0, kSkipOnce = 1, kAlwaysSkip = 2, kReserved = 3 };

/// AETH syndromes we use (IBTA): ACK, and NAK codes.
namespace aeth {
/// ACK with the IBTA "invalid credit count" 0x1F: MRC has no end-to-end credits (F9). Any syndrome
/// 0x00..0x1F is an ACK on receive (is_ack).
inline constexpr std::uint8_t kAck = 0x1F;
inline constexpr bool is_ack(std::uint8_t syndrome) {
  return (syndrome & 0xE0) == 0;
}
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
  std::uint16_t tx_timestamp = 0;  ///< requester clock: kTsUnitNs units if !tsr, else implementation-defined
  bool tsr = false;                ///< timestamp resolution: 0 = 128 ns, 1 = implementation-defined (F4)
  std::uint8_t ftype = 0x1;        ///< decode: as received (1 = this format); encode: always 1
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

/// cc_flags bits in SETH/NETH: the project's extension (W9). No public source defines a flag (UET
/// reserves them), so they are sent only with EncodeOptions::ext and read only with DecodeOptions::ext.
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
  std::uint16_t svc_time = 0;       ///< extension: service time, kSvcUnitNs units (spdcid slot, ext only)
  std::uint16_t probe_id = 0;       ///< for pr=1: the probe id, carried in the ack_psn_offset bytes (F2)
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
  std::uint8_t ftype = 0x1;  ///< as received
  bool operator==(const Peth&) const = default;
};

struct Erth {  ///< endpoint request, 16 bytes
  EpOp op = EpOp::kEvProbe;
  std::uint8_t vendor_info = 0;
  std::uint32_t port_status_mask = 0;  ///< bit i = port i+1 usable (1-based ports on the API)
  std::uint32_t entropy = 0;           ///< extension: EV the request was sent on (reserved word, ext only)
  std::uint16_t tx_timestamp = 0;
  bool tsr = false;
  std::uint8_t ftype = 0x1;  ///< as received
  bool operator==(const Erth&) const = default;
};

/// Endpoint response, 36 bytes. Every public source has only op and tx_timestamp; the rest is the
/// project's extension, in reserved bytes, sent only with EncodeOptions::ext (W14).
struct Eeth {
  EpOp op = EpOp::kEvProbe;
  std::uint8_t vendor_info = 0;        ///< extension (byte 3 is reserved in EETH, unlike ERTH)
  std::uint32_t entropy = 0;           ///< extension: echoed request EV
  std::uint32_t svc_time_ns = 0;       ///< extension: time the request spent in the responder
  std::uint16_t tx_timestamp = 0;      ///< echoed
  bool svc_time_valid = false;         ///< extension
  bool port_status_valid = false;      ///< extension: port_status_mask is the responder's
  std::uint32_t port_status_mask = 0;  ///< extension: responder's own usable ports
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

/// Sizes of the headers (docs/wire-format.md).
namespace hdr {
inline constexpr std::size_t kBthSize = 12;
inline constexpr std::size_t kMethSize = 4;
inline constexpr std::size_t kTsethSize = 4;
inline constexpr std::size_t kRethSize = 16;
inline constexpr std::size_t kImmSize = 4;
inline constexpr std::size_t kAethSize = 4;
inline constexpr std::size_t kSethSize = 28;
inline constexpr std::size_t kCcStateSize = 8;
inline constexpr std::size_t kNethSize = 20;
inline constexpr std::size_t kPethSize = 16;
inline constexpr std::size_t kErthSize = 16;
inline constexpr std::size_t kEethSize = 36;
}  // namespace hdr

/// Size of the header stack (BTH .. last extension header) for this opcode. Inline: on every
/// packet's encode and decode.
constexpr std::size_t header_size(Opcode op, bool has_tseth) {
  switch (op) {
    case Opcode::kWriteFirst:
    case Opcode::kWriteMiddle:
    case Opcode::kWriteLast:
    case Opcode::kWriteOnly:
      return hdr::kBthSize + hdr::kMethSize + (has_tseth ? hdr::kTsethSize : 0) + hdr::kRethSize;
    case Opcode::kWriteLastImm:
    case Opcode::kWriteOnlyImm:
      return hdr::kBthSize + hdr::kMethSize + (has_tseth ? hdr::kTsethSize : 0) + hdr::kRethSize +
             hdr::kImmSize;
    case Opcode::kAck:
      return hdr::kBthSize + hdr::kAethSize;
    case Opcode::kSack:
      return hdr::kBthSize + hdr::kSethSize + hdr::kCcStateSize;
    case Opcode::kNack:
      return hdr::kBthSize + hdr::kNethSize;
    case Opcode::kProbe:
      return hdr::kBthSize + hdr::kPethSize;
    case Opcode::kEndpointRequest:
      return hdr::kBthSize + hdr::kErthSize;
    case Opcode::kEndpointResponse:
      return hdr::kBthSize + hdr::kEethSize;
  }
  return 0;
}

struct EncodeOptions {
  /// Write the project's extension fields (cc_flags, SACK svc_time, ERTH entropy, EETH entropy,
  /// service time and port mask) into bytes every public source leaves reserved. Off: those bytes
  /// are 0, as a peer following the spec sends them (docs/wire-format.md §7, W9/W12-W14).
  bool ext = false;
};

/// Writes BTH and the extension headers of `p` into `out`; returns bytes written or 0 with `err`.
/// Sets bth.pad_cnt from payload_len. The payload, pad and ICRC are NOT written (scatter/gather).
std::size_t encode_headers(const Packet& p, std::uint32_t payload_len, std::span<std::uint8_t> out,
                           Error* err = nullptr, const EncodeOptions& opt = {});

/// Convenience for control packets and tests: headers + payload + pad + ICRC into one buffer.
std::size_t encode(const Packet& p, std::span<std::uint8_t> out, Error* err = nullptr,
                   const EncodeOptions& opt = {});

struct DecodeOptions {
  bool verify_icrc = false;
  /// Read the project's extension fields (EncodeOptions::ext). Off: reserved bytes are ignored and
  /// those fields stay 0 / false.
  bool ext = false;
  /// If set, receives the byte offset (from the BTH) of what made decode() fail: the offending field,
  /// or the length of the input when it is too short. Untouched on success.
  std::size_t* error_offset = nullptr;
  /// The network marked this packet as trimmed (DSCP): only the header stack is present;
  /// payload, pad and ICRC are absent and not checked.
  bool trimmed = false;
  /// verify_icrc: the packet's ICRC covers an IP/UDP prefix (RoCEv2), which the caller has folded into
  /// this value: the ICRC expected is icrc() ^ icrc_xor (icrc_prefix_xor). 0: no prefix (W16).
  std::uint32_t icrc_xor = 0;
  /// verify_icrc with an IPv4 prefix built with ID 0: also accept the ICRC of any other IPv4 ID, which a
  /// UDP socket cannot see (icrc_explained_by_ipv4_id; docs/wire-format.md W22).
  bool icrc_any_ipv4_id = false;
  /// The caller passes a default-constructed Packet: decode() skips resetting it.
  bool out_is_fresh = false;
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

/// Sizes of RoCEv2's masked IP + UDP headers (the ICRC prefix).
inline constexpr std::size_t kMaskedIpv4UdpSize = 20 + 8;
inline constexpr std::size_t kMaskedIpv6UdpSize = 40 + 8;

/// Writes into `out` (kMaskedIpv4UdpSize bytes) the IPv4 + UDP headers of a datagram carrying `mrc_len`
/// bytes (BTH .. ICRC) as RoCEv2's ICRC sees them: no options, DF, identification `ipv4_id`, TOS, TTL and
/// both checksums all-ones. Addresses in network order.
void masked_ipv4_udp(std::uint8_t* out, const std::uint8_t src[4], const std::uint8_t dst[4],
                     std::uint16_t sport, std::uint16_t dport, std::size_t mrc_len,
                     std::uint16_t ipv4_id = 0);

/// The same for IPv6 (kMaskedIpv6UdpSize bytes): traffic class, flow label, hop limit and the UDP
/// checksum all-ones; no extension headers.
void masked_ipv6_udp(std::uint8_t* out, const std::uint8_t src[16], const std::uint8_t dst[16],
                     std::uint16_t sport, std::uint16_t dport, std::size_t mrc_len);

/// What turns icrc() of a packet whose headers + payload + pad are `rest_len` bytes into
/// icrc_with_prefix(masked_ip_udp, ...) of the same packet: XOR it in. Costs the prefix's CRC and two
/// 32-bit carry-less multiplications, whatever the packet's length, so a driver moves the engine's ICRC
/// onto its IP/UDP headers (and back, on receive) without reading the payload again.
std::uint32_t icrc_prefix_xor(std::span<const std::uint8_t> masked_ip_udp, std::size_t rest_len);

/// True if `diff` (the ICRC found XOR the one expected with IPv4 ID 0) is exactly what another IPv4
/// identification makes of it, for a packet whose headers + payload + pad are `rest_len` bytes: the ID
/// is invariant in RoCEv2's ICRC, yet a receiver on a UDP socket cannot read it. Leaves 16 of the 32
/// check bits (the other 16 are the ID).
bool icrc_explained_by_ipv4_id(std::uint32_t diff, std::size_t rest_len);

/// Plain CRC-32 (IEEE, reflected, init/xorout 0xFFFFFFFF) continuation, exposed for tests.
std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::uint8_t> data);

/// The same with the portable table code only (what crc32_update uses on CPUs without carry-less
/// multiply and for short inputs), for tests and the benchmark baseline.
std::uint32_t crc32_update_table(std::uint32_t crc, std::span<const std::uint8_t> data);

}  // namespace mrc::wire
