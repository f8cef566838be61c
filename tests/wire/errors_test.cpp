// Decoder rejections (truncation, padding, version, opcode, enum values, ICRC) and encoder errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "wire/wire_test_util.hpp"

namespace mrc::wire {
namespace {

using test::encode_vec;
using test::reseal;

Error dec(std::span<const std::uint8_t> in, DecodeOptions opt = {.verify_icrc = true}) {
  Packet d;
  return decode(in, d, opt);
}

/// One valid packet per opcode (data packets with a 6-byte payload and a TSETH on some).
std::vector<std::vector<std::uint8_t>> one_of_each(std::vector<std::uint8_t>& payload_storage) {
  Rng r(7);
  std::vector<std::vector<std::uint8_t>> out;
  payload_storage.assign({9, 8, 7, 6, 5, 4});
  for (Opcode op : test::kAllOpcodes) {
    std::vector<std::uint8_t> scratch;
    Packet p = test::random_packet(r, op, scratch);
    if (is_data(op)) {
      p.payload = payload_storage;
      p.has_tseth = op == Opcode::kWriteMiddle || op == Opcode::kWriteOnlyImm;
    }
    out.push_back(encode_vec(p));
  }
  return out;
}

TEST(WireDecode, EveryTruncationIsRejected) {
  std::vector<std::uint8_t> payload;
  for (const auto& pkt : one_of_each(payload)) {
    const auto op = static_cast<Opcode>(pkt[0]);
    const std::size_t hs = header_size(op, (pkt[8] & 0x10) != 0);
    ASSERT_EQ(dec(pkt), Error::kOk);
    for (std::size_t len = 0; len < pkt.size(); ++len) {
      // Copy into an exactly-sized heap buffer so ASan catches any read past the end.
      const std::vector<std::uint8_t> cut(pkt.begin(), pkt.begin() + static_cast<std::ptrdiff_t>(len));
      const Error e = dec(cut);
      const Error e_noverify = dec(cut, {});
      if (len < hs + kIcrcSize) {
        EXPECT_EQ(e, Error::kTruncated) << "op " << int(pkt[0]) << " len " << len;
        EXPECT_EQ(e_noverify, Error::kTruncated) << "op " << int(pkt[0]) << " len " << len;
      } else {
        // A data packet has no length field: a cut inside the payload looks like a shorter packet
        // whose padding or ICRC is wrong. It must never be accepted with verify_icrc.
        ASSERT_TRUE(is_data(op));
        EXPECT_TRUE(e == Error::kBadPadding || e == Error::kBadIcrc) << to_string(e) << " len " << len;
      }
      const Error et = dec(cut, {.trimmed = true});
      EXPECT_EQ(et, len < hs ? Error::kTruncated : Error::kOk)
          << "trimmed op " << int(pkt[0]) << " len " << len;
    }
  }
}

TEST(WireDecode, UnknownOpcodes) {
  std::vector<std::uint8_t> pkt(64, 0);
  int rejected = 0;
  for (int v = 0; v < 256; ++v) {
    pkt[0] = static_cast<std::uint8_t>(v);
    if (is_known(pkt[0])) continue;
    EXPECT_EQ(dec(pkt), Error::kUnknownOpcode) << v;
    EXPECT_EQ(dec(pkt, {.trimmed = true}), Error::kUnknownOpcode) << v;
    ++rejected;
  }
  EXPECT_EQ(rejected, 256 - 12);
  // Shorter than a BTH: truncation is reported first, whatever the first byte.
  EXPECT_EQ(dec(std::span<const std::uint8_t>(pkt.data(), 11)), Error::kTruncated);
  EXPECT_EQ(dec(std::span<const std::uint8_t>()), Error::kTruncated);
}

TEST(WireDecode, BadTver) {
  std::vector<std::uint8_t> payload;
  for (auto pkt : one_of_each(payload)) {
    for (std::uint8_t v = 0; v < 16; ++v) {
      if (v == kTver) continue;
      pkt[1] = static_cast<std::uint8_t>((pkt[1] & 0xF0) | v);
      reseal(pkt, header_size(static_cast<Opcode>(pkt[0]), (pkt[8] & 0x10) != 0));
      EXPECT_EQ(dec(pkt), Error::kBadTver);
      EXPECT_EQ(dec(pkt, {.trimmed = true}), Error::kBadTver);
    }
  }
}

// Builds a packet of `op`, lets `mutate` change the encoded bytes, re-seals the ICRC and decodes.
template <class F>
Error mutated(const Packet& p, F mutate, DecodeOptions opt = {.verify_icrc = true}) {
  auto bytes = encode_vec(p);
  const std::size_t hs = header_size(p.bth.opcode, p.has_tseth && is_data(p.bth.opcode));
  mutate(bytes);
  reseal(bytes, hs);
  return dec(bytes, opt);
}

Packet of(Opcode op) {
  Packet p;
  p.bth.opcode = op;
  return p;
}

TEST(WireDecode, NackReasonMustBeKnown) {
  std::set<int> valid;
  for (NackReason r : test::kAllNackReasons) valid.insert(static_cast<int>(r));
  for (int v = 0; v < 256; ++v) {
    const Error e = mutated(of(Opcode::kNack), [v](auto& b) { b[12 + 2] = static_cast<std::uint8_t>(v); });
    EXPECT_EQ(e, valid.count(v) ? Error::kOk : Error::kBadField) << v;
  }
}

TEST(WireDecode, SackModeThreeIsReservedAndKeepsTheSack) {
  // F5: m = 3 is reserved. The SACK (and its cumulative ACK) stays valid; the EV hint is dropped.
  for (int m = 0; m < 4; ++m) {
    Packet p = of(Opcode::kSack);
    p.seth.cack_psn = 1234;
    auto bytes = encode_vec(p);
    bytes[13] = static_cast<std::uint8_t>(m << 5);
    reseal(bytes, header_size(Opcode::kSack, false));
    Packet d;
    ASSERT_EQ(decode(bytes, d, {.verify_icrc = true}), Error::kOk) << m;
    EXPECT_EQ(static_cast<int>(d.seth.m), m);
    EXPECT_EQ(d.seth.cack_psn, 1234u);
  }
  // The encoder never sends it.
  Packet p = of(Opcode::kSack);
  p.seth.m = SackMode::kReserved;
  std::vector<std::uint8_t> buf(64);
  Error err = Error::kOk;
  EXPECT_EQ(encode(p, buf, &err), 0u);
  EXPECT_EQ(err, Error::kBadField);
}

TEST(WireDecode, EndpointOpAboveOneIsInvalid) {
  for (Opcode op : {Opcode::kEndpointRequest, Opcode::kEndpointResponse}) {
    for (int v = 0; v < 4; ++v) {
      const Error e = mutated(of(op), [v](auto& b) { b[12 + 1] = static_cast<std::uint8_t>(v); });
      EXPECT_EQ(e, v > 1 ? Error::kBadField : Error::kOk) << int(op) << " " << v;
    }
  }
  // The offending byte's offset is reported.
  std::size_t at = 0;
  EXPECT_EQ(mutated(of(Opcode::kEndpointRequest), [](auto& b) { b[12 + 1] = 3; }, {.error_offset = &at}),
            Error::kBadField);
  EXPECT_EQ(at, 13u);
}

TEST(WireDecode, EethOpIsReadWhereOtherSourcesPutIt) {
  // F11: bits 1-0 (ERTH's place, what we send); bits 3-2 or 5-4 when only one of them is set.
  const auto op_of = [](std::uint8_t b1) {
    auto bytes = encode_vec(of(Opcode::kEndpointResponse));
    bytes[13] = b1;
    reseal(bytes, header_size(Opcode::kEndpointResponse, false));
    Packet d;
    EXPECT_EQ(decode(bytes, d), Error::kOk);
    return static_cast<int>(d.eeth.op);
  };
  EXPECT_EQ(op_of(0x01), 1);
  EXPECT_EQ(op_of(0x04), 1);
  EXPECT_EQ(op_of(0x10), 1);
  EXPECT_EQ(op_of(0x00), 0);
  EXPECT_EQ(op_of(0x14), 0);  // two readings: ambiguous, taken as the bits 1-0 value
  EXPECT_EQ(op_of(0x08), 0);  // 2 in bits 3-2 is no op: ignored
}

TEST(WireDecode, PrologueAndFtypeAreReportedNotChecked) {
  // The type/next_hdr prologue is reserved in MRC v1 (W7, F10): any value decodes.
  for (Opcode op :
       {Opcode::kSack, Opcode::kNack, Opcode::kProbe, Opcode::kEndpointRequest, Opcode::kEndpointResponse}) {
    EXPECT_EQ(mutated(of(op), [](auto& b) { b[12] = 0x10; }), Error::kOk) << int(op);
    EXPECT_EQ(mutated(of(op), [](auto& b) { b[12] = 0x01; }), Error::kOk) << int(op);
    EXPECT_EQ(mutated(of(op), [](auto& b) { b[13] |= 0x80; }), Error::kOk) << int(op);
  }
  // A timestamp word with another ftype still decodes (a data packet must not be dropped for it);
  // the ftype is reported. EETH bytes 30-31 are reserved (F1): no ftype there at all.
  Packet d = of(Opcode::kWriteMiddle);
  d.has_tseth = true;
  auto bytes = encode_vec(d);
  bytes[12 + 4 + 3] = 0x02;
  reseal(bytes, header_size(Opcode::kWriteMiddle, true));
  Packet out;
  ASSERT_EQ(decode(bytes, out, {.verify_icrc = true}), Error::kOk);
  EXPECT_EQ(out.tseth.ftype, 2);
  EXPECT_EQ(mutated(of(Opcode::kProbe), [](auto& b) { b[12 + 15] = 0x00; }), Error::kOk);
  EXPECT_EQ(mutated(of(Opcode::kEndpointRequest), [](auto& b) { b[12 + 15] = 0x0F; }), Error::kOk);
  EXPECT_EQ(mutated(of(Opcode::kEndpointResponse), [](auto& b) { b[12 + 31] = 0x00; }), Error::kOk);
  // What we send there: zeros.
  const auto eeth = encode_vec(of(Opcode::kEndpointResponse));
  EXPECT_EQ(eeth[12 + 30], 0);
  EXPECT_EQ(eeth[12 + 31], 0);
}

TEST(WireDecode, TsBitOnControlPacketIsIgnored) {
  for (Opcode op : test::kAllOpcodes) {
    if (is_data(op)) continue;
    auto bytes = encode_vec(of(op));
    bytes[8] |= 0x10;
    reseal(bytes, header_size(op, false));
    Packet d;
    ASSERT_EQ(decode(bytes, d, {.verify_icrc = true}), Error::kOk) << int(op);
    EXPECT_TRUE(d.bth.ts);
    EXPECT_FALSE(d.has_tseth);
  }
}

TEST(WireDecode, ReservedBitsAreIgnored) {
  // Reserved bits are sent as zero and ignored on receive (IBTA convention): the decoded fields
  // are the same as without them.
  Rng r(11);
  for (int iter = 0; iter < 32; ++iter) {
    const Opcode op = test::kAllOpcodes[static_cast<std::size_t>(iter) % test::kAllOpcodes.size()];
    std::vector<std::uint8_t> storage;
    Packet p = test::random_packet(r, op, storage);
    if (iter < 12) {  // make sure reserved bits next to clear flags are seen at least once
      p.eeth.svc_time_valid = p.peth.tsr = p.erth.tsr = p.tseth.tsr = p.seth.pr = p.seth.cc.restore_cwnd =
          false;
    }
    auto bytes = encode_vec(p);
    const std::size_t hs = header_size(op, p.has_tseth);
    std::uint8_t* h = bytes.data() + 12;
    bytes[8] |= 0x4F;  // BTH byte 8: reserved bit 6 and the low nibble
    if (!is_data(op) && op != Opcode::kAck) {
      h[0] = 0xFF;  // the reserved type/next_hdr prologue
      h[1] |= 0x80;
    }
    switch (op) {
      case Opcode::kSack:
        h[1] |= 0x1D;                        // SETH byte 1 reserved bits
        h[8] = h[9] = h[10] = h[11] = 0xFF;  // PDCID slots (svc_time only with ext)
        h[12] = 0xAA;                        // SETH byte 12
        h[16] |= 0x0F;                       // cc_flags (ext only)
        h[28 + 2] |= 0x80;                   // CC_STATE reserved bit above ooo_count
        break;
      case Opcode::kNack:
        h[1] |= 0x7F;
        h[8] = h[9] = h[10] = h[11] = h[12] = h[17] = 0xFF;
        h[16] |= 0x0F;
        break;
      case Opcode::kProbe:
        h[1] |= 0x7F;
        h[2] = h[6] = h[7] = h[8] = h[9] = h[10] = h[11] = 0xFF;
        h[14] |= 0x7F;
        h[15] |= 0xF0;
        break;
      case Opcode::kEndpointRequest:
        h[1] |= 0x7C;
        h[2] = 0xFF;
        h[8] = h[9] = h[10] = h[11] = 0xFF;  // reserved word (entropy only with ext)
        h[14] |= 0x7F;
        h[15] |= 0xF0;
        break;
      case Opcode::kEndpointResponse:
        h[1] |= 0x7C;
        for (int i = 2; i < 28; ++i) h[i] = 0xFF;  // all reserved without ext
        h[30] = 0xFF;
        h[31] |= 0xF0;
        h[32] = h[33] = h[34] = h[35] = 0xFF;
        break;
      default:
        if (p.has_tseth) {
          h[4 + 2] |= 0x7F;  // TSETH reserved bits
          h[4 + 3] |= 0xF0;
        }
        break;
    }
    bytes[4] = 0x5A;  // BTH resv8
    reseal(bytes, hs);
    Packet d;
    ASSERT_EQ(decode(bytes, d, {.verify_icrc = true}), Error::kOk) << int(op);
    EXPECT_TRUE(test::same_fields(d, test::expected_after_decode(p))) << int(op);
  }
  // BTH byte 4 is variant and masked out of the ICRC: changing it needs no re-seal.
  Packet p = of(Opcode::kSack);
  p.seth.cack_psn = 5;
  auto bytes = encode_vec(p);
  bytes[4] = 0x5A;
  Packet d;
  ASSERT_EQ(decode(bytes, d, {.verify_icrc = true}), Error::kOk);
  EXPECT_EQ(d.seth.cack_psn, 5u);
}

TEST(WireDecode, Padding) {
  const std::vector<std::uint8_t> payload5 = {1, 2, 3, 4, 5};
  Packet p = of(Opcode::kWriteOnly);
  p.payload = payload5;
  const auto good = encode_vec(p);  // 32 hdr + 5 + 3 pad + 4
  ASSERT_EQ(dec(good), Error::kOk);

  // Non-zero pad byte.
  for (std::size_t i = 37; i < 40; ++i) {
    auto b = good;
    b[i] = 1;
    reseal(b, 32);
    EXPECT_EQ(dec(b), Error::kBadPadding) << i;
    EXPECT_EQ(dec(b, {}), Error::kBadPadding) << i;
  }
  // PadCnt claims more bytes than the payload area.
  {
    Packet z = of(Opcode::kWriteOnly);
    auto b = encode_vec(z);  // no payload
    b[1] = static_cast<std::uint8_t>(b[1] | 0x30);
    reseal(b, 32);
    EXPECT_EQ(dec(b), Error::kBadPadding);
  }
  // Payload area not a multiple of 4 (PadCnt inconsistent with the length).
  for (int extra = 1; extra < 4; ++extra) {
    auto b = good;
    b.insert(b.end() - 4, static_cast<std::size_t>(extra), 0);
    reseal(b, 32);
    EXPECT_EQ(dec(b), Error::kBadPadding) << extra;
  }
  // PadCnt 3 -> 0: the pad bytes become payload. The area is still a multiple of 4, so this is a
  // valid (different) packet with an 8-byte payload; only the sender's ICRC could tell.
  {
    auto b = good;
    b[1] = static_cast<std::uint8_t>((b[1] & 0xCF) | 0x00);
    reseal(b, 32);
    Packet d;
    ASSERT_EQ(decode(b, d, {.verify_icrc = true}), Error::kOk);
    EXPECT_EQ(d.payload.size(), 8u);
  }
  // Control packets carry no payload: PadCnt must be 0 and no bytes may follow the headers.
  {
    auto b = encode_vec(of(Opcode::kNack));
    b[1] = static_cast<std::uint8_t>(b[1] | 0x10);
    reseal(b, 32);
    EXPECT_EQ(dec(b), Error::kBadPadding);
    auto c = encode_vec(of(Opcode::kNack));
    c.insert(c.end() - 4, 4, 0);
    reseal(c, 32);
    EXPECT_EQ(dec(c), Error::kPayloadTooLarge);
  }
}

TEST(WireDecode, IcrcDetectsEveryFlippedBit) {
  std::vector<std::uint8_t> payload;
  for (const auto& pkt : one_of_each(payload)) {
    const auto op = static_cast<Opcode>(pkt[0]);
    const std::size_t hs = header_size(op, (pkt[8] & 0x10) != 0);
    for (std::size_t bit = 0; bit < pkt.size() * 8; ++bit) {
      auto b = pkt;
      b[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      const Error e = dec(b);
      if (bit / 8 == 4) {
        EXPECT_EQ(e, Error::kOk);  // resv8: variant, masked
      } else if (bit / 8 >= hs) {
        // Payload, pad or ICRC bit: only the pad check may see it first.
        EXPECT_TRUE(e == Error::kBadIcrc || e == Error::kBadPadding) << bit << " " << to_string(e);
      } else {
        EXPECT_NE(e, Error::kOk) << "op " << int(pkt[0]) << " bit " << bit;
      }
    }
  }
  // Without verify_icrc a flipped payload bit is accepted; the stored ICRC is reported as found.
  Packet p = of(Opcode::kWriteOnly);
  const std::vector<std::uint8_t> pl = {1, 2, 3, 4};
  p.payload = pl;
  auto b = encode_vec(p);
  b[33] ^= 0x40;
  Packet d;
  EXPECT_EQ(decode(b, d, {}), Error::kOk);
  EXPECT_EQ(decode(b, d, {.verify_icrc = true}), Error::kBadIcrc);
  EXPECT_EQ(decode(b, d, {.verify_icrc = true, .trimmed = true}), Error::kOk);  // trimmed: no ICRC
}

TEST(WireDecode, OversizedPacket) {
  std::vector<std::uint8_t> big(kMaxPacketSize + 4, 0);
  Packet p = of(Opcode::kWriteOnly);
  std::vector<std::uint8_t> hdr(kMaxHeaderSize);
  ASSERT_EQ(encode_headers(p, 0, hdr), 32u);
  std::copy(hdr.begin(), hdr.begin() + 32, big.begin());
  EXPECT_EQ(dec(big, {}), Error::kPayloadTooLarge);
}

// ---- encoder errors -----------------------------------------------------------------------------

TEST(WireEncode, BufferTooSmall) {
  Rng r(3);
  for (Opcode op : test::kAllOpcodes) {
    std::vector<std::uint8_t> storage;
    const Packet p = test::random_packet(r, op, storage);
    const std::size_t total = encode_vec(p).size();
    for (std::size_t n = 0; n < total; ++n) {
      std::vector<std::uint8_t> out(n);
      Error err = Error::kOk;
      EXPECT_EQ(encode(p, out, &err), 0u);
      EXPECT_EQ(err, Error::kBufferTooSmall) << int(op) << " " << n;
      EXPECT_EQ(encode(p, out), 0u);  // err is optional
    }
    const std::size_t hs = header_size(op, p.has_tseth);
    for (std::size_t n = 0; n < hs; ++n) {
      std::vector<std::uint8_t> out(n);
      Error err = Error::kOk;
      EXPECT_EQ(encode_headers(p, static_cast<std::uint32_t>(p.payload.size()), out, &err), 0u);
      EXPECT_EQ(err, Error::kBufferTooSmall);
    }
    std::vector<std::uint8_t> exact(hs);
    EXPECT_EQ(encode_headers(p, static_cast<std::uint32_t>(p.payload.size()), exact), hs);
  }
}

TEST(WireEncode, HeadersIgnoreBufferContents) {
  // encode_headers writes every header byte (data stacks skip the reserved-byte clear): a buffer of
  // 0xFF gives the bytes a zeroed one does.
  Rng r(5);
  for (Opcode op : test::kAllOpcodes) {
    for (const bool ext : {false, true}) {
      std::vector<std::uint8_t> storage;
      const Packet p = test::random_packet(r, op, storage);
      const auto len = static_cast<std::uint32_t>(p.payload.size());
      std::vector<std::uint8_t> zero(kMaxHeaderSize, 0x00), ones(kMaxHeaderSize, 0xFF);
      const std::size_t n = encode_headers(p, len, zero, nullptr, {.ext = ext});
      ASSERT_EQ(encode_headers(p, len, ones, nullptr, {.ext = ext}), n);
      EXPECT_TRUE(std::equal(zero.begin(), zero.begin() + static_cast<std::ptrdiff_t>(n), ones.begin()))
          << int(op);
    }
  }
}

TEST(WireDecode, OutIsFreshSameResult) {
  // out_is_fresh skips the reset only: on a default Packet it decodes what a plain decode does.
  Rng r(6);
  for (Opcode op : test::kAllOpcodes) {
    std::vector<std::uint8_t> storage;
    const Packet p = test::random_packet(r, op, storage);
    const auto b = encode_vec(p);
    Packet a, f;
    ASSERT_EQ(decode(b, a, {.verify_icrc = true}), Error::kOk);
    ASSERT_EQ(decode(b, f, {.verify_icrc = true, .out_is_fresh = true}), Error::kOk);
    EXPECT_EQ(test::encode_vec(a), test::encode_vec(f)) << int(op);
    EXPECT_EQ(a.bth, f.bth);
    EXPECT_EQ(a.seth, f.seth);
    EXPECT_EQ(a.neth, f.neth);
    EXPECT_EQ(a.eeth, f.eeth);
  }
}

TEST(WireEncode, PayloadRules) {
  std::vector<std::uint8_t> out(kMaxPacketSize + 64);
  const std::vector<std::uint8_t> one = {1};
  Error err = Error::kOk;
  for (Opcode op : test::kAllOpcodes) {
    if (is_data(op)) continue;
    Packet p = of(op);
    p.payload = one;
    EXPECT_EQ(encode(p, out, &err), 0u);
    EXPECT_EQ(err, Error::kPayloadTooLarge);
    EXPECT_EQ(encode_headers(of(op), 1, out, &err), 0u);
    EXPECT_EQ(err, Error::kPayloadTooLarge);
  }
  // The whole packet must fit kMaxPacketSize: 32 + payload + pad + 4.
  Packet p = of(Opcode::kWriteOnly);
  const std::uint32_t max_payload = static_cast<std::uint32_t>(kMaxPacketSize - 32 - 4) & ~3u;
  EXPECT_EQ(encode_headers(p, max_payload, out, &err), 32u);
  EXPECT_EQ(encode_headers(p, max_payload + 1, out, &err), 0u);
  EXPECT_EQ(err, Error::kPayloadTooLarge);
  EXPECT_EQ(encode_headers(p, 0xFFFFFFFFu, out, &err), 0u);
  EXPECT_EQ(err, Error::kPayloadTooLarge);
  const std::vector<std::uint8_t> big(max_payload, 0x33);
  p.payload = big;
  const std::size_t n = encode(p, out, &err);
  EXPECT_EQ(err, Error::kOk);
  EXPECT_EQ(n, kMaxPacketSize - ((kMaxPacketSize - 36) % 4));
  Packet d;
  EXPECT_EQ(decode(std::span<const std::uint8_t>(out.data(), n), d, {.verify_icrc = true}), Error::kOk);
  EXPECT_EQ(d.payload.size(), max_payload);
}

TEST(WireEncode, RejectsValuesThatDoNotFit) {
  std::vector<std::uint8_t> out(256);
  auto check = [&](const Packet& p, Error want) {
    Error err = Error::kOk;
    EXPECT_EQ(encode(p, out, &err), 0u);
    EXPECT_EQ(err, want);
    err = Error::kOk;
    EXPECT_EQ(encode_headers(p, 0, out, &err), 0u);
    EXPECT_EQ(err, want);
  };
  Packet p = of(static_cast<Opcode>(0x11));
  check(p, Error::kUnknownOpcode);
  p = of(Opcode::kAck);
  p.bth.dest_qp = 0x1000000;
  check(p, Error::kBadField);
  p = of(Opcode::kAck);
  p.bth.tver = 16;
  check(p, Error::kBadField);
  p = of(Opcode::kSack);
  p.seth.m = static_cast<SackMode>(3);
  check(p, Error::kBadField);
  p = of(Opcode::kSack);
  p.seth.cc_type = 16;
  check(p, Error::kBadField);
  p = of(Opcode::kSack);
  p.seth.cc_flags = 16;
  check(p, Error::kBadField);
  p = of(Opcode::kSack);
  p.seth.cc.ooo_count = 0x8000;
  check(p, Error::kBadField);
  p = of(Opcode::kSack);
  p.seth.cc.rcv_cwnd_pen = 128;
  check(p, Error::kBadField);
  p = of(Opcode::kNack);
  p.neth.reason = static_cast<NackReason>(0x42);
  check(p, Error::kBadField);
  p = of(Opcode::kNack);
  p.neth.cc_flags = 0x10;
  check(p, Error::kBadField);
  p = of(Opcode::kEndpointRequest);
  p.erth.op = static_cast<EpOp>(2);
  check(p, Error::kBadField);
  p = of(Opcode::kEndpointResponse);
  p.eeth.op = static_cast<EpOp>(3);
  check(p, Error::kBadField);
}

TEST(WireEncode, ErrorNames) {
  std::set<std::string> names;
  for (int v = 0; v <= static_cast<int>(Error::kPayloadTooLarge); ++v) {
    const char* s = to_string(static_cast<Error>(v));
    ASSERT_NE(s, nullptr);
    names.insert(s);
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(Error::kPayloadTooLarge) + 1);
  EXPECT_STREQ(to_string(Error::kOk), "ok");
  EXPECT_STREQ(to_string(static_cast<Error>(200)), "unknown error");
}

}  // namespace
}  // namespace mrc::wire
