// Randomized round trips for every opcode, scatter/gather equivalence and trimmed decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "wire/wire_test_util.hpp"

namespace mrc::wire {
namespace {

using test::expected_after_decode;
using test::random_packet;
using test::same_fields;

constexpr int kCasesPerOpcode = 2000;

class WireRoundTrip : public ::testing::TestWithParam<Opcode> {};

TEST_P(WireRoundTrip, RandomFields) {
  const Opcode op = GetParam();
  Rng r(0x5EED0000u + static_cast<std::uint8_t>(op));
  std::vector<std::uint8_t> payload;
  std::vector<std::uint8_t> buf(kMaxHeaderSize + 4096 + 8);
  std::size_t tseth_seen = 0;
  for (int i = 0; i < kCasesPerOpcode; ++i) {
    // Mostly small payloads; every 50th case a large one.
    const Packet p = random_packet(r, op, payload, i % 50 == 0 ? 4096 : 64);
    // Every other case with the project's wire extensions on both sides.
    const bool ext = (i % 2) == 1;
    Error err = Error::kBufferTooSmall;
    const std::size_t n = encode(p, buf, &err, {.ext = ext});
    ASSERT_EQ(err, Error::kOk) << i;
    const std::size_t hs = header_size(op, p.has_tseth);
    ASSERT_EQ(n, hs + p.payload.size() + (is_data(op) ? (4 - p.payload.size() % 4) % 4 : 0) + kIcrcSize);
    ASSERT_EQ(n % 4, 0u);

    Packet d;
    ASSERT_EQ(decode(std::span<const std::uint8_t>(buf.data(), n), d, {.verify_icrc = true, .ext = ext}),
              Error::kOk)
        << i;
    ASSERT_TRUE(same_fields(d, expected_after_decode(p, ext))) << "case " << i;
    EXPECT_FALSE(d.trimmed);
    if (!p.payload.empty()) {
      EXPECT_EQ(d.payload.data(), buf.data() + hs);  // zero-copy view into the input
    }
    tseth_seen += d.has_tseth ? 1 : 0;

    // Scatter/gather path: headers + caller-built trailer (pad + ICRC) give the same bytes.
    std::vector<std::uint8_t> hdr(kMaxHeaderSize);
    const std::size_t hn =
        encode_headers(p, static_cast<std::uint32_t>(p.payload.size()), hdr, &err, {.ext = ext});
    ASSERT_EQ(err, Error::kOk);
    ASSERT_EQ(hn, hs);
    ASSERT_TRUE(std::equal(hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(hn), buf.begin()));
    const std::uint8_t pad = static_cast<std::uint8_t>((hdr[1] >> 4) & 3);
    const std::uint32_t c = icrc(std::span<const std::uint8_t>(hdr.data(), hn), p.payload, pad);
    ASSERT_EQ(c, d.icrc);

    // Trimmed: only the header stack arrives (plus garbage the decoder must ignore).
    std::vector<std::uint8_t> trimmed(hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(hn));
    trimmed.insert(trimmed.end(), static_cast<std::size_t>(i % 7), 0xA5);
    Packet t;
    ASSERT_EQ(decode(trimmed, t, {.verify_icrc = true, .ext = ext, .trimmed = true}), Error::kOk);
    EXPECT_TRUE(t.trimmed);
    EXPECT_TRUE(t.payload.empty());
    EXPECT_EQ(t.icrc, 0u);
    Packet want = expected_after_decode(p, ext);
    want.payload = {};
    ASSERT_TRUE(same_fields(t, want)) << "trimmed case " << i;
  }
  if (is_data(op)) {
    EXPECT_GT(tseth_seen, 0u);
    EXPECT_LT(tseth_seen, static_cast<std::size_t>(kCasesPerOpcode));
  }
}

INSTANTIATE_TEST_SUITE_P(AllOpcodes, WireRoundTrip, ::testing::ValuesIn(test::kAllOpcodes),
                         [](const ::testing::TestParamInfo<Opcode>& param_info) {
                           char name[8];
                           std::snprintf(name, sizeof name, "op%02X",
                                         static_cast<unsigned>(param_info.param));
                           return std::string(name);
                         });

TEST(WireRoundTrip, ExtremeValues) {
  for (Opcode op : test::kAllOpcodes) {
    Packet p;
    p.bth.opcode = op;
    p.bth.se = p.bth.m = p.bth.ack_req = p.bth.rtx = true;
    p.bth.pkey = 0xFFFF;
    p.bth.dest_qp = 0xFFFFFF;
    p.bth.psn = 0xFFFFFF;
    p.has_tseth = true;
    p.meth = {0xFFFF, 0xFFFF};
    p.tseth = {0xFFFF, true};
    p.reth = {~0ull, ~0u, ~0u};
    p.imm = ~0u;
    p.aeth = {0xFF, 0xFFFFFF};
    p.seth = {SackMode::kAlwaysSkip,
              true,
              INT16_MIN,
              ~0u,
              0xFFFF,
              0xFFFF,
              0xFFFFFF,
              0xF,
              0xF,
              0xFF,
              INT16_MAX,
              ~0ull,
              {0xFFFF, 0x7FFF, true, 0x7F, 0xFFFFFF}};
    p.neth = {NackReason::kUnexpEvent, 0xFF, ~0u, 0xFFFFFF, 0xF, 0xF, 0xFFFF};
    p.peth = {0xFF, 0xFFFF, 0xFFFF, true};
    p.erth = {EpOp::kEvProbe, 0xFF, ~0u, ~0u, 0xFFFF, true};
    p.eeth = {EpOp::kEvProbe, 0xFF, ~0u, ~0u, 0xFFFF, true, true, ~0u};
    const std::vector<std::uint8_t> payload(7, 0xFF);
    if (is_data(op)) p.payload = payload;
    const auto bytes = test::encode_vec(p, true);
    Packet d;
    ASSERT_EQ(decode(bytes, d, {.verify_icrc = true, .ext = true}), Error::kOk);
    EXPECT_TRUE(same_fields(d, expected_after_decode(p, true))) << static_cast<int>(op);
  }
}

TEST(WireRoundTrip, WrappingCountersAreEncodedModulo2To24) {
  Packet p;
  p.bth.opcode = Opcode::kSack;
  p.bth.psn = 0x01ABCDEF;
  p.seth.cack_psn = 0xFF000001;
  p.seth.cc.rcvd_bytes = 0x12345678;
  Packet d;
  ASSERT_EQ(decode(test::encode_vec(p), d, {.verify_icrc = true}), Error::kOk);
  EXPECT_EQ(d.bth.psn, 0xABCDEFu);
  EXPECT_EQ(d.seth.cack_psn, 0x000001u);
  EXPECT_EQ(d.seth.cc.rcvd_bytes, 0x345678u);

  p = Packet{};
  p.bth.opcode = Opcode::kNack;
  p.neth.nack_psn = 0x1000005;
  ASSERT_EQ(decode(test::encode_vec(p), d), Error::kOk);
  EXPECT_EQ(d.neth.nack_psn, 5u);

  p = Packet{};
  p.bth.opcode = Opcode::kAck;
  p.aeth.msn = 0xAB000010;
  ASSERT_EQ(decode(test::encode_vec(p), d), Error::kOk);
  EXPECT_EQ(d.aeth.msn, 0x10u);
}

TEST(WireRoundTrip, ZeroLengthWrite) {
  Packet p;
  p.bth.opcode = Opcode::kWriteOnly;
  p.reth.dma_len = 0;
  const auto bytes = test::encode_vec(p);
  EXPECT_EQ(bytes.size(), 32u + kIcrcSize);
  Packet d;
  ASSERT_EQ(decode(bytes, d, {.verify_icrc = true}), Error::kOk);
  EXPECT_TRUE(d.payload.empty());
  EXPECT_EQ(d.bth.pad_cnt, 0);
}

TEST(WireRoundTrip, EncodeAcceptsPayloadStagedInsideOutput) {
  // The payload may live in the output buffer itself (memmove semantics), even at offset 0.
  std::vector<std::uint8_t> buf(128);
  for (std::size_t i = 0; i < 10; ++i) buf[i] = static_cast<std::uint8_t>(i + 1);
  const std::vector<std::uint8_t> copy(buf.begin(), buf.begin() + 10);
  Packet p;
  p.bth.opcode = Opcode::kWriteFirst;
  p.payload = std::span<const std::uint8_t>(buf.data(), 10);
  const std::size_t n = encode(p, buf);
  ASSERT_EQ(n, 32u + 10 + 2 + 4);
  Packet d;
  ASSERT_EQ(decode(std::span<const std::uint8_t>(buf.data(), n), d, {.verify_icrc = true}), Error::kOk);
  EXPECT_TRUE(std::ranges::equal(d.payload, copy));
}

TEST(WireRoundTrip, DecodeResetsOutput) {
  Packet p;
  p.bth.opcode = Opcode::kSack;
  p.seth.entropy = 77;
  Packet d;
  ASSERT_EQ(decode(test::encode_vec(p), d), Error::kOk);
  EXPECT_EQ(d.seth.entropy, 77u);
  Packet a;
  a.bth.opcode = Opcode::kAck;
  ASSERT_EQ(decode(test::encode_vec(a), d), Error::kOk);
  EXPECT_EQ(d.seth.entropy, 0u);  // headers of other opcodes are left at their defaults
}

}  // namespace
}  // namespace mrc::wire
