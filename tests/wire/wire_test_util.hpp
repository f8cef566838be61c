// Shared helpers for the wire tests: random valid packets and field-wise comparison.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/rng.hpp"
#include "wire/packet.hpp"

namespace mrc::wire::test {

inline constexpr std::array<Opcode, 12> kAllOpcodes = {
    Opcode::kWriteFirst,       Opcode::kWriteMiddle,  Opcode::kWriteLast, Opcode::kWriteLastImm,
    Opcode::kWriteOnly,        Opcode::kWriteOnlyImm, Opcode::kAck,       Opcode::kEndpointRequest,
    Opcode::kEndpointResponse, Opcode::kSack,         Opcode::kNack,      Opcode::kProbe,
};

inline constexpr std::array<NackReason, 7> kAllNackReasons = {
    NackReason::kTrimmed,    NackReason::kTrimmedLastHop, NackReason::kNoBitmap,   NackReason::kNoPktBuffer,
    NackReason::kNoResource, NackReason::kPsnOorWindow,   NackReason::kUnexpEvent,
};

inline std::uint32_t bits(Rng& r, unsigned n) {
  return static_cast<std::uint32_t>(r.next() & ((std::uint64_t{1} << n) - 1));
}
inline bool coin(Rng& r) {
  return (r.next() & 1) != 0;
}

/// A packet of opcode `op` with every field of its header stack drawn at random within its range.
/// Payload bytes (data opcodes only) are written to `storage`, which must outlive the packet.
inline Packet random_packet(Rng& r, Opcode op, std::vector<std::uint8_t>& storage,
                            std::size_t max_payload = 64) {
  Packet p;
  p.bth.opcode = op;
  p.bth.se = coin(r);
  p.bth.m = coin(r);
  p.bth.pkey = static_cast<std::uint16_t>(bits(r, 16));
  p.bth.dest_qp = bits(r, 24);
  p.bth.ack_req = coin(r);
  p.bth.rtx = coin(r);
  p.bth.psn = bits(r, 24);
  if (is_data(op)) {
    p.meth = {static_cast<std::uint16_t>(bits(r, 16)), static_cast<std::uint16_t>(bits(r, 16))};
    p.has_tseth = coin(r);
    if (p.has_tseth) p.tseth = {static_cast<std::uint16_t>(bits(r, 16)), coin(r)};
    p.reth = {r.next(), bits(r, 32), bits(r, 32)};
    if (has_imm(op)) p.imm = bits(r, 32);
    storage.resize(r.below(static_cast<std::uint32_t>(max_payload + 1)));
    for (auto& b : storage) b = static_cast<std::uint8_t>(bits(r, 8));
    p.payload = storage;
  }
  switch (op) {
    case Opcode::kAck:
      p.aeth = {static_cast<std::uint8_t>(bits(r, 8)), bits(r, 24)};
      break;
    case Opcode::kSack: {
      Seth& s = p.seth;
      s.m = static_cast<SackMode>(r.below(3));
      s.pr = coin(r);
      // ack_psn_offset and probe_id share bytes 2-3 (F2): a SACK carries the one its pr selects.
      if (s.pr)
        s.probe_id = static_cast<std::uint16_t>(bits(r, 16));
      else
        s.ack_psn_offset = static_cast<std::int16_t>(bits(r, 16));
      s.entropy = bits(r, 32);
      s.svc_time = static_cast<std::uint16_t>(bits(r, 16));
      s.cack_psn = bits(r, 24);
      s.cc_type = static_cast<std::uint8_t>(bits(r, 4));
      s.cc_flags = static_cast<std::uint8_t>(bits(r, 4));
      s.mpr = static_cast<std::uint8_t>(bits(r, 8));
      s.sack_offset = static_cast<std::int16_t>(bits(r, 16));
      s.sack_bitmap = r.next();
      s.cc.tx_timestamp = static_cast<std::uint16_t>(bits(r, 16));
      s.cc.ooo_count = static_cast<std::uint16_t>(bits(r, 15));
      s.cc.restore_cwnd = coin(r);
      s.cc.rcv_cwnd_pen = static_cast<std::uint8_t>(bits(r, 7));
      s.cc.rcvd_bytes = bits(r, 24);
      break;
    }
    case Opcode::kNack: {
      Neth& n = p.neth;
      n.reason = kAllNackReasons[r.below(kAllNackReasons.size())];
      n.vendor_info = static_cast<std::uint8_t>(bits(r, 8));
      n.entropy = bits(r, 32);
      n.nack_psn = bits(r, 24);
      n.cc_type = static_cast<std::uint8_t>(bits(r, 4));
      n.cc_flags = static_cast<std::uint8_t>(bits(r, 4));
      n.tx_timestamp = static_cast<std::uint16_t>(bits(r, 16));
      break;
    }
    case Opcode::kProbe:
      p.peth = {static_cast<std::uint8_t>(bits(r, 8)), static_cast<std::uint16_t>(bits(r, 16)),
                static_cast<std::uint16_t>(bits(r, 16)), coin(r)};
      break;
    case Opcode::kEndpointRequest:
      p.erth.op = static_cast<EpOp>(r.below(2));
      p.erth.vendor_info = static_cast<std::uint8_t>(bits(r, 8));
      p.erth.port_status_mask = bits(r, 32);
      p.erth.entropy = bits(r, 32);
      p.erth.tx_timestamp = static_cast<std::uint16_t>(bits(r, 16));
      p.erth.tsr = coin(r);
      break;
    case Opcode::kEndpointResponse:
      p.eeth.op = static_cast<EpOp>(r.below(2));
      p.eeth.vendor_info = static_cast<std::uint8_t>(bits(r, 8));
      p.eeth.entropy = bits(r, 32);
      p.eeth.svc_time_ns = bits(r, 32);
      p.eeth.tx_timestamp = static_cast<std::uint16_t>(bits(r, 16));
      p.eeth.svc_time_valid = coin(r);
      p.eeth.port_status_valid = coin(r);
      p.eeth.port_status_mask = bits(r, 32);
      break;
    default:
      break;
  }
  return p;
}

/// What the decoder must reproduce from an encoded `sent` packet: the fields the encoder fills in
/// (pad_cnt, ts) computed, and the headers that do not belong to the opcode at their defaults.
/// Without `ext` (on both sides) the project's extension fields come back 0.
inline Packet expected_after_decode(const Packet& sent, bool ext = false) {
  Packet e;
  const Opcode op = sent.bth.opcode;
  e.bth = sent.bth;
  e.bth.psn &= 0xFFFFFF;
  e.bth.pad_cnt = is_data(op) ? static_cast<std::uint8_t>((4 - (sent.payload.size() & 3)) & 3) : 0;
  e.bth.ts = is_data(op) && sent.has_tseth;
  e.has_tseth = e.bth.ts;
  if (is_data(op)) {
    e.meth = sent.meth;
    if (e.has_tseth) e.tseth = sent.tseth;
    e.reth = sent.reth;
    if (has_imm(op)) e.imm = sent.imm;
    e.payload = sent.payload;
  }
  if (op == Opcode::kAck) e.aeth = sent.aeth;
  if (op == Opcode::kSack) e.seth = sent.seth;
  if (op == Opcode::kNack) e.neth = sent.neth;
  if (op == Opcode::kProbe) e.peth = sent.peth;
  if (op == Opcode::kEndpointRequest) e.erth = sent.erth;
  if (op == Opcode::kEndpointResponse) e.eeth = sent.eeth;
  if (op == Opcode::kSack) {
    if (e.seth.pr)
      e.seth.ack_psn_offset = 0;
    else
      e.seth.probe_id = 0;
  }
  if (!ext) {
    e.seth.svc_time = 0;
    e.seth.cc_flags = 0;
    e.neth.cc_flags = 0;
    e.erth.entropy = 0;
    e.eeth = Eeth{};
    e.eeth.op = sent.eeth.op;
    e.eeth.tx_timestamp = sent.eeth.tx_timestamp;
    if (op != Opcode::kEndpointResponse) e.eeth = Eeth{};
  }
  return e;
}

/// Field-wise equality of two packets (payload by content; `icrc` and `trimmed` not compared).
inline ::testing::AssertionResult same_fields(const Packet& a, const Packet& b) {
  auto fail = [](const char* what) { return ::testing::AssertionFailure() << "field mismatch: " << what; };
  if (!(a.bth == b.bth)) return fail("bth");
  if (!(a.meth == b.meth)) return fail("meth");
  if (a.has_tseth != b.has_tseth) return fail("has_tseth");
  if (!(a.tseth == b.tseth)) return fail("tseth");
  if (!(a.reth == b.reth)) return fail("reth");
  if (a.imm != b.imm) return fail("imm");
  if (!(a.aeth == b.aeth)) return fail("aeth");
  if (!(a.seth == b.seth)) return fail("seth");
  if (!(a.neth == b.neth)) return fail("neth");
  if (!(a.peth == b.peth)) return fail("peth");
  if (!(a.erth == b.erth)) return fail("erth");
  if (!(a.eeth == b.eeth)) return fail("eeth");
  if (!std::ranges::equal(a.payload, b.payload)) return fail("payload");
  return ::testing::AssertionSuccess();
}

/// Encodes `p` into a fresh vector (test convenience).
inline std::vector<std::uint8_t> encode_vec(const Packet& p, bool ext = false) {
  std::vector<std::uint8_t> buf(kMaxHeaderSize + p.payload.size() + 8);
  Error err = Error::kBufferTooSmall;
  const std::size_t n = encode(p, buf, &err, {.ext = ext});
  EXPECT_EQ(err, Error::kOk) << to_string(err);
  buf.resize(n);
  return buf;
}

/// Recomputes the ICRC of a complete packet in place (after a test mutated a header byte).
/// The pad bytes are covered as they are (for a well-formed packet they are zero, which is what
/// icrc() assumes for its pad_cnt bytes).
inline void reseal(std::vector<std::uint8_t>& pkt, std::size_t hdr_len) {
  const std::size_t area = pkt.size() - hdr_len - kIcrcSize;
  const std::span<const std::uint8_t> all(pkt);
  const std::uint32_t c = icrc(all.first(hdr_len), all.subspan(hdr_len, area), 0);
  for (int i = 0; i < 4; ++i) pkt[pkt.size() - 4 + i] = static_cast<std::uint8_t>(c >> (8 * i));
}

}  // namespace mrc::wire::test
