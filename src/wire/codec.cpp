// MRC wire codec: header stacks per opcode, bounds-checked decode, scatter/gather encode.
//
// Byte layouts are documented in docs/wire-format.md (the tables there and the offsets below must
// stay in sync). Every read and write goes through a span whose size was checked first; the decoder
// never trusts a length or count taken from the packet without checking it against the buffer.
#include <algorithm>
#include <cstring>

#include "wire/packet.hpp"

namespace mrc::wire {
namespace {

// ---- header sizes (packet.hpp) ------------------------------------------------------------------
using namespace hdr;

static_assert(kBthSize + kMethSize + kTsethSize + kRethSize + kImmSize <= kMaxHeaderSize);
static_assert(kBthSize + kSethSize + kCcStateSize <= kMaxHeaderSize);
static_assert(kBthSize + kEethSize <= kMaxHeaderSize);

constexpr std::uint32_t kMask24 = 0xFFFFFFu;
constexpr std::uint16_t kFtypeTimestamp =
    0x1;  ///< ftype nibble of TSETH and the PETH/ERTH/EETH timestamp word

// BTH byte 1 / byte 8 bits. Byte 1 follows Keysight's MRC BTH (MigReq listed before SE) and
// MRC-Client (M = bit 7), not the IBTA order (F3, W1).
constexpr std::uint8_t kBthM = 0x80;
constexpr std::uint8_t kBthSe = 0x40;
constexpr unsigned kBthPadShift = 4;
constexpr std::uint8_t kBthTverMask = 0x0F;
constexpr std::uint8_t kBthAck = 0x80;
constexpr std::uint8_t kBthRtx = 0x20;
constexpr std::uint8_t kBthTs = 0x10;

// SETH byte 1.
constexpr unsigned kSethMShift = 5;
constexpr std::uint8_t kSethMMask = 0x3;
constexpr std::uint8_t kSethPr = 0x02;

// EETH byte 2 (extension bits, ext only).
constexpr std::uint8_t kEethSvcValid = 0x80;
constexpr std::uint8_t kEethMaskValid = 0x40;

// ---- big-endian helpers (the caller has checked the bounds) -------------------------------------
inline void put8(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v);
}
inline void put16(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
inline void put24(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 16);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v);
}
inline void put32(std::uint8_t* p, std::uint32_t v) {
  put16(p, v >> 16);
  put16(p + 2, v);
}
inline void put64(std::uint8_t* p, std::uint64_t v) {
  put32(p, static_cast<std::uint32_t>(v >> 32));
  put32(p + 4, static_cast<std::uint32_t>(v));
}
inline std::uint16_t get16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((static_cast<unsigned>(p[0]) << 8) | p[1]);
}
inline std::uint32_t get24(const std::uint8_t* p) {
  return (static_cast<std::uint32_t>(p[0]) << 16) | (static_cast<std::uint32_t>(p[1]) << 8) | p[2];
}
inline std::uint32_t get32(const std::uint8_t* p) {
  return (static_cast<std::uint32_t>(get16(p)) << 16) | get16(p + 2);
}
inline std::uint64_t get64(const std::uint8_t* p) {
  return (static_cast<std::uint64_t>(get32(p)) << 32) | get32(p + 4);
}
inline std::uint32_t get32le(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
inline void put32le(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v >> 16);
  p[3] = static_cast<std::uint8_t>(v >> 24);
}

inline std::uint8_t pad_for(std::size_t payload_len) {
  return static_cast<std::uint8_t>((4 - (payload_len & 3)) & 3);
}

bool valid_nack_reason(std::uint8_t r) {
  switch (static_cast<NackReason>(r)) {
    case NackReason::kTrimmed:
    case NackReason::kTrimmedLastHop:
    case NackReason::kNoBitmap:
    case NackReason::kNoPktBuffer:
    case NackReason::kNoResource:
    case NackReason::kPsnOorWindow:
    case NackReason::kUnexpEvent:
      return true;
  }
  return false;
}
bool valid_sack_mode(std::uint8_t m) {  // what we may send; kReserved is only received
  return m <= static_cast<std::uint8_t>(SackMode::kAlwaysSkip);
}
bool valid_ep_op(std::uint8_t op) {
  return op <= static_cast<std::uint8_t>(EpOp::kEvProbe);
}

// The 32-bit "timestamp word" shared by TSETH, PETH and ERTH:
// tx_timestamp(16) | tsr(1) | reserved(11) | ftype(4) = 0x1. On receive the ftype is reported, not
// checked: a data packet must not be dropped (and resent forever) over a timestamp format.
inline void put_ts_word(std::uint8_t* p, std::uint16_t ts, bool tsr) {
  put16(p, ts);
  put16(p + 2, (tsr ? 0x8000u : 0u) | kFtypeTimestamp);
}
inline void get_ts_word(const std::uint8_t* p, std::uint16_t& ts, bool& tsr, std::uint8_t& ftype) {
  const std::uint16_t w = get16(p + 2);
  ts = get16(p);
  tsr = (w & 0x8000u) != 0;
  ftype = static_cast<std::uint8_t>(w & 0xFu);
}

// ---- encode-side validation: values that do not fit their wire field -----------------------------
// Wrapping sequence numbers and counters (PSNs, MSNs, rcvd_bytes) are encoded modulo 2^24 instead.
Error validate(const Packet& p) {
  const Opcode op = p.bth.opcode;
  if (!is_known(static_cast<std::uint8_t>(op))) return Error::kUnknownOpcode;
  if (p.bth.tver > kBthTverMask || p.bth.dest_qp > kMask24) return Error::kBadField;
  switch (op) {
    case Opcode::kSack: {
      const Seth& s = p.seth;
      if (!valid_sack_mode(static_cast<std::uint8_t>(s.m)) || s.cc_type > 0xF || s.cc_flags > 0xF ||
          s.cc.ooo_count > 0x7FFF || s.cc.rcv_cwnd_pen > 0x7F)
        return Error::kBadField;
      break;
    }
    case Opcode::kNack:
      if (!valid_nack_reason(static_cast<std::uint8_t>(p.neth.reason)) || p.neth.cc_type > 0xF ||
          p.neth.cc_flags > 0xF)
        return Error::kBadField;
      break;
    case Opcode::kEndpointRequest:
      if (!valid_ep_op(static_cast<std::uint8_t>(p.erth.op))) return Error::kBadField;
      break;
    case Opcode::kEndpointResponse:
      if (!valid_ep_op(static_cast<std::uint8_t>(p.eeth.op))) return Error::kBadField;
      break;
    default:
      break;
  }
  return Error::kOk;
}

// ---- header writers (out has room for header_size()) ---------------------------------------------
std::size_t write_stack(const Packet& p, std::uint8_t pad_cnt, std::uint8_t* o, bool ext) {
  const Opcode op = p.bth.opcode;
  const bool data = is_data(op);
  const bool ts = data && p.has_tseth;
  const Bth& b = p.bth;

  // A data header stack is written whole but for BTH byte 4; control headers have reserved bytes.
  if (data)
    o[4] = 0;
  else
    std::memset(o, 0, header_size(op, ts));
  put8(o + 0, static_cast<std::uint8_t>(op));
  put8(o + 1, (b.se ? kBthSe : 0u) | (b.m ? kBthM : 0u) | (static_cast<unsigned>(pad_cnt) << kBthPadShift) |
                  (b.tver & kBthTverMask));
  put16(o + 2, b.pkey);
  // o[4]: reserved (RoCEv2 resv8), always sent as 0.
  put24(o + 5, b.dest_qp);
  put8(o + 8, (b.ack_req ? kBthAck : 0u) | (b.rtx ? kBthRtx : 0u) | (ts ? kBthTs : 0u));
  put24(o + 9, b.psn & kMask24);
  std::uint8_t* h = o + kBthSize;

  if (data) {
    put16(h, p.meth.rqmsn);
    put16(h + 2, p.meth.msn);
    h += kMethSize;
    if (ts) {
      put_ts_word(h, p.tseth.tx_timestamp, p.tseth.tsr);
      h += kTsethSize;
    }
    put64(h, p.reth.va);
    put32(h + 8, p.reth.rkey);
    put32(h + 12, p.reth.dma_len);
    h += kRethSize;
    if (has_imm(op)) {
      put32(h, p.imm);
      h += kImmSize;
    }
    return static_cast<std::size_t>(h - o);
  }

  switch (op) {
    case Opcode::kAck:
      put8(h, p.aeth.syndrome);
      put24(h + 1, p.aeth.msn & kMask24);
      h += kAethSize;
      break;
    case Opcode::kSack: {
      const Seth& s = p.seth;
      // h[0], h[1] bit 7: the 9-bit type/next_hdr prologue, 0.
      put8(h + 1, (static_cast<unsigned>(s.m) << kSethMShift) | (s.pr ? kSethPr : 0u));
      // A probe's SACK carries the probe id where other SACKs carry ack_psn_offset (UET's
      // ack_psn_offset/probe_opaque union; F2).
      put16(h + 2, s.pr ? s.probe_id : static_cast<std::uint16_t>(s.ack_psn_offset));
      put32(h + 4, s.entropy);
      // h[8..11]: Source / Destination PDCID (Keysight), unused by MRC: 0; svc_time with ext.
      if (ext) put16(h + 8, s.svc_time);
      put24(h + 13, s.cack_psn & kMask24);
      put8(h + 16, (static_cast<unsigned>(s.cc_type) << 4) | (ext ? s.cc_flags : 0u));
      put8(h + 17, s.mpr);
      put16(h + 18, static_cast<std::uint16_t>(s.sack_offset));
      put64(h + 20, s.sack_bitmap);
      std::uint8_t* c = h + kSethSize;
      put16(c, s.cc.tx_timestamp);
      put16(c + 2, s.cc.ooo_count);
      put8(c + 4, (s.cc.restore_cwnd ? 0x80u : 0u) | s.cc.rcv_cwnd_pen);
      put24(c + 5, s.cc.rcvd_bytes & kMask24);
      h += kSethSize + kCcStateSize;
      break;
    }
    case Opcode::kNack: {
      const Neth& n = p.neth;
      put8(h + 2, static_cast<std::uint8_t>(n.reason));
      put8(h + 3, n.vendor_info);
      put32(h + 4, n.entropy);
      put24(h + 13, n.nack_psn & kMask24);
      put8(h + 16, (static_cast<unsigned>(n.cc_type) << 4) | (ext ? n.cc_flags : 0u));
      put16(h + 18, n.tx_timestamp);
      h += kNethSize;
      break;
    }
    case Opcode::kProbe: {
      const Peth& r = p.peth;
      put8(h + 3, r.vendor_info);
      put16(h + 4, r.probe_id);
      put_ts_word(h + 12, r.tx_timestamp, r.tsr);
      h += kPethSize;
      break;
    }
    case Opcode::kEndpointRequest: {
      const Erth& r = p.erth;
      put8(h + 1, static_cast<std::uint8_t>(r.op));
      put8(h + 3, r.vendor_info);
      put32(h + 4, r.port_status_mask);
      if (ext) put32(h + 8, r.entropy);  // reserved word in every source
      put_ts_word(h + 12, r.tx_timestamp, r.tsr);
      h += kErthSize;
      break;
    }
    case Opcode::kEndpointResponse: {
      const Eeth& r = p.eeth;
      put8(h + 1, static_cast<std::uint8_t>(r.op));  // op in bits 1-0, as in ERTH (F11)
      if (ext) {
        put8(h + 2, (r.svc_time_valid ? kEethSvcValid : 0u) | (r.port_status_valid ? kEethMaskValid : 0u));
        put8(h + 3, r.vendor_info);
        put32(h + 4, r.entropy);
        put32(h + 8, r.svc_time_ns);
        put32(h + 12, r.port_status_mask);
      }
      // Only the 16-bit timestamp: bytes 30-31 are reserved (Keysight, MRC-Client; F1).
      put16(h + 28, r.tx_timestamp);
      h += kEethSize;
      break;
    }
    default:
      break;  // unreachable: validate() rejected unknown opcodes
  }
  return static_cast<std::size_t>(h - o);
}

// EETH op: bits 1-0 (as ERTH), or, when those are 0, the one non-zero valid value in bits 3-2 or 5-4
// (positions other readings use; F11). 0xFF = an op value of 2 or 3 in bits 1-0.
inline std::uint8_t eeth_op(std::uint8_t b1) {
  const auto at = [b1](unsigned shift) { return static_cast<std::uint8_t>((b1 >> shift) & 0x3u); };
  if (at(0) != 0) return valid_ep_op(at(0)) ? at(0) : 0xFF;
  const std::uint8_t a = at(2), b = at(4);
  if (a != 0 && b == 0 && valid_ep_op(a)) return a;
  if (b != 0 && a == 0 && valid_ep_op(b)) return b;
  return 0;
}

// Parses the extension headers of a known opcode; `h` has header_size()-kBthSize bytes. The 9-bit
// type/next_hdr prologue of SETH/NETH/PETH/ERTH/EETH is reserved in MRC v1 and not looked at (W7).
// On a bad field, *bad = its offset from `h`.
Error read_ext(const std::uint8_t* h, Packet& p, bool ext, std::size_t* bad) {
  const Opcode op = p.bth.opcode;
  if (is_data(op)) {
    p.meth.rqmsn = get16(h);
    p.meth.msn = get16(h + 2);
    h += kMethSize;
    if (p.has_tseth) {
      get_ts_word(h, p.tseth.tx_timestamp, p.tseth.tsr, p.tseth.ftype);
      h += kTsethSize;
    }
    p.reth.va = get64(h);
    p.reth.rkey = get32(h + 8);
    p.reth.dma_len = get32(h + 12);
    h += kRethSize;
    if (has_imm(op)) p.imm = get32(h);
    return Error::kOk;
  }
  switch (op) {
    case Opcode::kAck:
      p.aeth.syndrome = h[0];
      p.aeth.msn = get24(h + 1);
      return Error::kOk;
    case Opcode::kSack: {
      Seth& s = p.seth;
      // m = 3 is reserved: kept as kReserved (no EV action); the SACK itself is valid (F5).
      s.m = static_cast<SackMode>((h[1] >> kSethMShift) & kSethMMask);
      s.pr = (h[1] & kSethPr) != 0;
      if (s.pr)
        s.probe_id = get16(h + 2);
      else
        s.ack_psn_offset = static_cast<std::int16_t>(get16(h + 2));
      s.entropy = get32(h + 4);
      s.cack_psn = get24(h + 13);
      s.cc_type = static_cast<std::uint8_t>(h[16] >> 4);
      if (ext) {
        s.svc_time = get16(h + 8);
        s.cc_flags = static_cast<std::uint8_t>(h[16] & 0xF);
      }
      s.mpr = h[17];
      s.sack_offset = static_cast<std::int16_t>(get16(h + 18));
      s.sack_bitmap = get64(h + 20);
      const std::uint8_t* c = h + kSethSize;
      s.cc.tx_timestamp = get16(c);
      s.cc.ooo_count = static_cast<std::uint16_t>(get16(c + 2) & 0x7FFF);
      s.cc.restore_cwnd = (c[4] & 0x80u) != 0;
      s.cc.rcv_cwnd_pen = static_cast<std::uint8_t>(c[4] & 0x7F);
      s.cc.rcvd_bytes = get24(c + 5);
      return Error::kOk;
    }
    case Opcode::kNack: {
      if (!valid_nack_reason(h[2])) {
        *bad = 2;
        return Error::kBadField;
      }
      Neth& n = p.neth;
      n.reason = static_cast<NackReason>(h[2]);
      n.vendor_info = h[3];
      n.entropy = get32(h + 4);
      n.nack_psn = get24(h + 13);
      n.cc_type = static_cast<std::uint8_t>(h[16] >> 4);
      if (ext) n.cc_flags = static_cast<std::uint8_t>(h[16] & 0xF);
      n.tx_timestamp = get16(h + 18);
      return Error::kOk;
    }
    case Opcode::kProbe: {
      Peth& r = p.peth;
      get_ts_word(h + 12, r.tx_timestamp, r.tsr, r.ftype);
      r.vendor_info = h[3];
      r.probe_id = get16(h + 4);
      return Error::kOk;
    }
    case Opcode::kEndpointRequest: {
      Erth& r = p.erth;
      const std::uint8_t epop = static_cast<std::uint8_t>(h[1] & 0x3);
      if (!valid_ep_op(epop)) {
        *bad = 1;
        return Error::kBadField;
      }
      get_ts_word(h + 12, r.tx_timestamp, r.tsr, r.ftype);
      r.op = static_cast<EpOp>(epop);
      r.vendor_info = h[3];
      r.port_status_mask = get32(h + 4);
      if (ext) r.entropy = get32(h + 8);
      return Error::kOk;
    }
    case Opcode::kEndpointResponse: {
      Eeth& r = p.eeth;
      const std::uint8_t epop = eeth_op(h[1]);
      if (epop == 0xFF) {
        *bad = 1;
        return Error::kBadField;
      }
      r.op = static_cast<EpOp>(epop);
      r.tx_timestamp = get16(h + 28);  // bytes 30-31 reserved (F1)
      if (ext) {
        r.svc_time_valid = (h[2] & kEethSvcValid) != 0;
        r.port_status_valid = (h[2] & kEethMaskValid) != 0;
        r.vendor_info = h[3];
        r.entropy = get32(h + 4);
        r.svc_time_ns = get32(h + 8);
        r.port_status_mask = get32(h + 12);
      }
      return Error::kOk;
    }
    default:
      return Error::kUnknownOpcode;
  }
}

inline std::size_t fail(Error* err, Error e) {
  if (err) *err = e;
  return 0;
}

}  // namespace

// ---- opcode classification ----------------------------------------------------------------------
const char* to_string(Error e) {
  switch (e) {
    case Error::kOk:
      return "ok";
    case Error::kTruncated:
      return "truncated";
    case Error::kUnknownOpcode:
      return "unknown opcode";
    case Error::kBadTver:
      return "bad transport version";
    case Error::kBadPadding:
      return "bad padding";
    case Error::kBadField:
      return "bad field";
    case Error::kBadIcrc:
      return "bad ICRC";
    case Error::kBufferTooSmall:
      return "buffer too small";
    case Error::kPayloadTooLarge:
      return "payload too large";
  }
  return "unknown error";
}

// ---- encode -------------------------------------------------------------------------------------
std::size_t encode_headers(const Packet& p, std::uint32_t payload_len, std::span<std::uint8_t> out,
                           Error* err, const EncodeOptions& opt) {
  if (const Error e = validate(p); e != Error::kOk) return fail(err, e);
  const Opcode op = p.bth.opcode;
  const bool data = is_data(op);
  const std::size_t hs = header_size(op, data && p.has_tseth);
  if (!data && payload_len != 0) return fail(err, Error::kPayloadTooLarge);
  const std::uint8_t pad = data ? pad_for(payload_len) : 0;
  if (static_cast<std::uint64_t>(hs) + payload_len + pad + kIcrcSize > kMaxPacketSize)
    return fail(err, Error::kPayloadTooLarge);
  if (out.size() < hs) return fail(err, Error::kBufferTooSmall);
  const std::size_t n = write_stack(p, pad, out.data(), opt.ext);
  if (err) *err = Error::kOk;
  return n;
}

std::size_t encode(const Packet& p, std::span<std::uint8_t> out, Error* err, const EncodeOptions& opt) {
  if (const Error e = validate(p); e != Error::kOk) return fail(err, e);
  const Opcode op = p.bth.opcode;
  const bool data = is_data(op);
  const std::size_t hs = header_size(op, data && p.has_tseth);
  const std::size_t plen = p.payload.size();
  if (!data && plen != 0) return fail(err, Error::kPayloadTooLarge);
  if (plen > kMaxPacketSize) return fail(err, Error::kPayloadTooLarge);
  const std::uint8_t pad = data ? pad_for(plen) : 0;
  const std::size_t total = hs + plen + pad + kIcrcSize;
  if (total > kMaxPacketSize) return fail(err, Error::kPayloadTooLarge);
  if (out.size() < total) return fail(err, Error::kBufferTooSmall);

  std::uint8_t* o = out.data();
  // Payload first, with memmove: the caller may have staged it inside `out` (even at offset 0).
  if (plen != 0) std::memmove(o + hs, p.payload.data(), plen);
  write_stack(p, pad, o, opt.ext);
  std::memset(o + hs + plen, 0, pad);
  const std::uint32_t crc =
      icrc(std::span<const std::uint8_t>(o, hs), std::span<const std::uint8_t>(o + hs, plen), pad);
  put32le(o + hs + plen + pad, crc);
  if (err) *err = Error::kOk;
  return total;
}

// ---- decode -------------------------------------------------------------------------------------
Error decode(std::span<const std::uint8_t> in, Packet& out, const DecodeOptions& opt) {
  if (!opt.out_is_fresh) out = Packet{};
  const std::size_t len = in.size();
  const auto fail_at = [&opt](Error e, std::size_t offset) {
    if (opt.error_offset != nullptr) *opt.error_offset = offset;
    return e;
  };
  if (len < kBthSize) return fail_at(Error::kTruncated, len);
  const std::uint8_t* b = in.data();

  if (!is_known(b[0])) return fail_at(Error::kUnknownOpcode, 0);
  if ((b[1] & kBthTverMask) != kTver) return fail_at(Error::kBadTver, 1);

  Bth& bth = out.bth;
  bth.opcode = static_cast<Opcode>(b[0]);
  bth.se = (b[1] & kBthSe) != 0;
  bth.m = (b[1] & kBthM) != 0;
  bth.pad_cnt = static_cast<std::uint8_t>((b[1] >> kBthPadShift) & 0x3);
  bth.tver = static_cast<std::uint8_t>(b[1] & kBthTverMask);
  bth.pkey = get16(b + 2);
  // b[4] is the variant resv8 byte: ignored (it is masked out of the ICRC as well).
  bth.dest_qp = get24(b + 5);
  bth.ack_req = (b[8] & kBthAck) != 0;
  bth.rtx = (b[8] & kBthRtx) != 0;
  bth.ts = (b[8] & kBthTs) != 0;
  bth.psn = get24(b + 9);

  const Opcode op = bth.opcode;
  const bool data = is_data(op);
  // No source puts a TSETH after a control header: TS on a control packet is reported, not obeyed.
  out.has_tseth = bth.ts && data;

  const std::size_t hs = header_size(op, out.has_tseth);
  if (len < hs) return fail_at(Error::kTruncated, len);
  std::size_t bad = 0;
  if (const Error e = read_ext(b + kBthSize, out, opt.ext, &bad); e != Error::kOk)
    return fail_at(e, kBthSize + bad);

  if (opt.trimmed) {
    // Only the header stack survived; PadCnt describes the original payload and is not checked.
    out.trimmed = true;
    return Error::kOk;
  }

  if (len < hs + kIcrcSize) return fail_at(Error::kTruncated, len);
  if (len > kMaxPacketSize) return fail_at(Error::kPayloadTooLarge, kMaxPacketSize);
  const std::size_t area = len - hs - kIcrcSize;  // payload + pad
  const std::uint8_t pad = bth.pad_cnt;
  if (!data) {
    if (area != 0) return fail_at(Error::kPayloadTooLarge, hs);
    if (pad != 0) return fail_at(Error::kBadPadding, 1);
  } else {
    if ((area & 3) != 0 || pad > area) return fail_at(Error::kBadPadding, hs);
    const std::uint8_t* pb = b + hs + (area - pad);
    for (std::size_t i = 0; i < pad; ++i)
      if (pb[i] != 0) return fail_at(Error::kBadPadding, hs + (area - pad) + i);
  }
  const std::size_t plen = area - pad;
  out.payload = in.subspan(hs, plen);
  out.icrc = get32le(b + hs + area);
  if (opt.verify_icrc) {
    const std::uint32_t diff = icrc(in.first(hs), out.payload, pad) ^ opt.icrc_xor ^ out.icrc;
    if (diff != 0 && !(opt.icrc_any_ipv4_id && icrc_explained_by_ipv4_id(diff, hs + area)))
      return fail_at(Error::kBadIcrc, hs + area);
  }
  return Error::kOk;
}

}  // namespace mrc::wire
