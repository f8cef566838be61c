// CRC-32 and ICRC tests.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/rng.hpp"
#include "wire/packet.hpp"
#include "wire_test_util.hpp"

namespace mrc::wire {
namespace {

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Bit-at-a-time reference (textbook definition), to cross-check the table-driven implementation.
std::uint32_t crc32_bitwise(std::span<const std::uint8_t> d) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::uint8_t b : d) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

std::vector<std::uint8_t> hex(std::string_view s) {
  std::vector<std::uint8_t> out;
  auto nib = [](char ch) -> int {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
  };
  int hi = -1;
  for (char ch : s) {
    const int v = nib(ch);
    if (v < 0) continue;
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<std::uint8_t>(hi * 16 + v));
      hi = -1;
    }
  }
  return out;
}

TEST(Crc32, CheckValue) {
  EXPECT_EQ(crc32_update(0, bytes_of("123456789")), 0xCBF43926u);
  EXPECT_EQ(crc32_update(0, {}), 0u);
  EXPECT_EQ(crc32_update(0, bytes_of("The quick brown fox jumps over the lazy dog")), 0x414FA339u);
}

TEST(Crc32, ContinuationAndAgreementWithBitwise) {
  Rng r(42);
  std::vector<std::uint8_t> buf(300);
  for (auto& b : buf) b = static_cast<std::uint8_t>(r.next());
  for (std::size_t len = 0; len <= buf.size(); ++len) {
    const std::span<const std::uint8_t> d(buf.data(), len);
    const std::uint32_t whole = crc32_update(0, d);
    ASSERT_EQ(whole, crc32_bitwise(d)) << len;
    const std::size_t cut = len == 0 ? 0 : r.below(static_cast<std::uint32_t>(len + 1));
    ASSERT_EQ(crc32_update(crc32_update(0, d.first(cut)), d.subspan(cut)), whole) << len << " " << cut;
  }
}

// Long inputs take the carry-less-multiply path where the CPU has one: every length class around the
// 64-byte lane stride and 16-byte blocks, random alignment, starting CRC and split point, against
// both the bitwise definition and the table code.
TEST(Crc32, LongInputsAgreeWithBitwiseAndTables) {
  Rng r(7);
  std::vector<std::uint8_t> buf(9000 + 16);
  for (auto& b : buf) b = static_cast<std::uint8_t>(r.next());
  std::vector<std::size_t> lens;
  for (std::size_t len = 60; len <= 200; ++len) lens.push_back(len);
  for (std::size_t len : {1023u, 1024u, 1025u, 4096u, 4097u, 4111u, 4160u, 8191u, 9000u}) lens.push_back(len);
  for (int i = 0; i < 40; ++i) lens.push_back(64 + r.below(8900));
  for (std::size_t len : lens) {
    const std::size_t off = r.below(16);
    const std::span<const std::uint8_t> d(buf.data() + off, len);
    const std::uint32_t whole = crc32_update(0, d);
    ASSERT_EQ(whole, crc32_bitwise(d)) << len << " at +" << off;
    ASSERT_EQ(crc32_update_table(0, d), whole) << len;
    const auto seed = static_cast<std::uint32_t>(r.next());
    ASSERT_EQ(crc32_update(seed, d), crc32_update_table(seed, d)) << len << " from " << seed;
    const std::size_t cut = r.below(static_cast<std::uint32_t>(len + 1));
    ASSERT_EQ(crc32_update(crc32_update(0, d.first(cut)), d.subspan(cut)), whole) << len << " cut " << cut;
  }
}

// Every length up to 2 KiB (all remainders of the 128-, 64- and 16-byte strides, many times over),
// from a random start and alignment, against the bitwise definition (so the check holds on a CPU
// without carry-less multiply too) and, from a random starting CRC, against the table code.
TEST(Crc32, EveryLengthAgreesWithBitwiseAndTables) {
  Rng r(11);
  std::vector<std::uint8_t> buf(2048 + 64);
  for (auto& b : buf) b = static_cast<std::uint8_t>(r.next());
  for (std::size_t len = 0; len <= 2048; ++len) {
    const std::span<const std::uint8_t> d(buf.data() + r.below(64), len);
    ASSERT_EQ(crc32_update(0, d), crc32_bitwise(d)) << len;
    const auto seed = static_cast<std::uint32_t>(r.next());
    ASSERT_EQ(crc32_update(seed, d), crc32_update_table(seed, d)) << len;
  }
}

TEST(Crc32, UnalignedInput) {
  std::array<std::uint8_t, 64> buf{};
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::uint8_t>(i * 7 + 1);
  for (std::size_t off = 0; off < 8; ++off) {
    const std::span<const std::uint8_t> d(buf.data() + off, 40);
    EXPECT_EQ(crc32_update(0, d), crc32_bitwise(d)) << off;
  }
}

TEST(Icrc, DefinitionWithoutIpUdp) {
  // ICRC = CRC-32 over 8 x 0xFF, the header stack with BTH byte 4 forced to 0xFF, payload, pad zeros.
  std::vector<std::uint8_t> hdr(16);
  for (std::size_t i = 0; i < hdr.size(); ++i) hdr[i] = static_cast<std::uint8_t>(0x30 + i);
  const std::vector<std::uint8_t> payload = {1, 2, 3, 4, 5};
  // Reference input built byte by byte (vector::insert trips a GCC 12 -Warray-bounds false positive).
  std::vector<std::uint8_t> ref;
  for (int i = 0; i < 8; ++i) ref.push_back(0xFF);
  for (std::size_t i = 0; i < hdr.size(); ++i) ref.push_back(i == 4 ? 0xFF : hdr[i]);
  for (std::uint8_t b : payload) ref.push_back(b);
  for (int i = 0; i < 3; ++i) ref.push_back(0x00);
  EXPECT_EQ(icrc(hdr, payload, 3), crc32_bitwise(ref));
  EXPECT_EQ(icrc(hdr, payload, 3), icrc_with_prefix({}, hdr, payload, 3));

  // Byte 4 (resv8) is variant: any value gives the same ICRC; every other header byte counts.
  const std::uint32_t base = icrc(hdr, payload, 3);
  for (std::size_t i = 0; i < hdr.size(); ++i) {
    auto h2 = hdr;
    h2[i] ^= 0x5A;
    if (i == 4) {
      EXPECT_EQ(icrc(h2, payload, 3), base);
    } else {
      EXPECT_NE(icrc(h2, payload, 3), base) << i;
    }
  }
  EXPECT_NE(icrc(hdr, payload, 0), base);  // pad bytes are covered
}

TEST(Icrc, StoredLittleEndianGivesCrcResidue) {
  // Appending the ICRC least-significant byte first makes the CRC-32 of (covered bytes || ICRC)
  // the constant CRC-32 residue: a cheap cross-check of the byte order.
  const std::vector<std::uint8_t> hdr = {0xD1, 0, 0xFF, 0xFF, 0xFF, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 0};
  std::vector<std::uint8_t> covered;
  for (int i = 0; i < 8; ++i) covered.push_back(0xFF);
  for (std::uint8_t b : hdr) covered.push_back(b);
  const std::uint32_t c = icrc(hdr, {}, 0);  // hdr[4] is already 0xFF, so `covered` is the masked input
  for (int i = 0; i < 4; ++i) covered.push_back(static_cast<std::uint8_t>(c >> (8 * i)));
  EXPECT_EQ(crc32_update(0, covered), 0x2144DF1Cu);
}

TEST(Icrc, MatchesRealRoceV2Capture) {
  // A RoCEv2 CNP frame captured on a ConnectX-4 Lx (published as a test vector in Scapy's RoCE
  // tests): Ethernet | IPv4 | UDP | BTH (opcode 0x81) | 16 zero bytes | ICRC 82 fd 00 2a.
  const std::vector<std::uint8_t> frame =
      hex("e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2"
          "003c 718c 4000 4011 9161 0a00 1101 0a00"
          "1201 0000 12b7 0028 0000 8100 ffff 4000"
          "0118 0000 0000 0000 0000 0000 0000 0000"
          "0000 0000 0000 82fd 002a");
  ASSERT_EQ(frame.size(), 74u);
  std::vector<std::uint8_t> ipudp(frame.begin() + 14, frame.begin() + 42);
  ipudp[1] = 0xFF;                       // IPv4 TOS
  ipudp[8] = 0xFF;                       // TTL
  ipudp[10] = ipudp[11] = 0xFF;          // header checksum
  ipudp[20 + 6] = ipudp[20 + 7] = 0xFF;  // UDP checksum
  const std::span<const std::uint8_t> f(frame);
  const std::uint32_t c = icrc_with_prefix(ipudp, f.subspan(42, 12), f.subspan(54, 16), 0);
  EXPECT_EQ(c, 0x2A00FD82u);  // wire bytes 82 fd 00 2a read little-endian
}

TEST(Icrc, MaskedPrefixOfTheConnectXCaptureAndAnyIpv4Id) {
  // The same frame: masked_ipv4_udp rebuilds its masked header from addresses, ports and length, and
  // with the frame's own ID (0x718c) gives its ICRC. With ID 0 (what a UDP-socket receiver must assume)
  // the difference is what an IPv4 ID explains; a corrupted packet's is not.
  const std::vector<std::uint8_t> f =
      hex("0a00 1101 0a00 1201"  // source, destination
          "8100 ffff 4000 0118 0000 0000"
          "0000 0000 0000 0000 0000 0000 0000 0000");
  const std::span<const std::uint8_t> bth = std::span(f).subspan(8, 12), pl = std::span(f).subspan(20, 16);
  const std::size_t mrc_len = 12 + 16 + 4;
  std::uint8_t pre[kMaskedIpv4UdpSize];
  masked_ipv4_udp(pre, &f[0], &f[4], 0, 4791, mrc_len, 0x718c);
  EXPECT_EQ(icrc_with_prefix(pre, bth, pl, 0), 0x2A00FD82u);
  EXPECT_EQ(icrc(bth, pl, 0) ^ icrc_prefix_xor(pre, 28), 0x2A00FD82u);

  masked_ipv4_udp(pre, &f[0], &f[4], 0, 4791, mrc_len, 0);
  const std::uint32_t id0 = icrc_with_prefix(pre, bth, pl, 0);
  EXPECT_NE(id0, 0x2A00FD82u);
  EXPECT_TRUE(icrc_explained_by_ipv4_id(id0 ^ 0x2A00FD82u, 28));
  EXPECT_FALSE(icrc_explained_by_ipv4_id(id0 ^ 0x2A00FD83u, 28));
  EXPECT_FALSE(icrc_explained_by_ipv4_id(id0 ^ 0x2A00FD82u, 32));  // wrong length: wrong position
  // Every ID is explained, at every length; a change elsewhere (here the destination port) is not.
  Rng rng(7);
  for (int t = 0; t < 200; ++t) {
    std::vector<std::uint8_t> body(12 + rng.below(2000) * 4);
    for (auto& b : body) b = static_cast<std::uint8_t>(rng.next());
    const std::span<const std::uint8_t> h = std::span(body).first(12), p = std::span(body).subspan(12);
    const auto id = static_cast<std::uint16_t>(1 + rng.below(65535));
    masked_ipv4_udp(pre, &f[0], &f[4], 49152, 4791, body.size() + 4, id);
    const std::uint32_t real = icrc_with_prefix(pre, h, p, 0);
    masked_ipv4_udp(pre, &f[0], &f[4], 49152, 4791, body.size() + 4, 0);
    const std::uint32_t assumed = icrc_with_prefix(pre, h, p, 0);
    EXPECT_TRUE(icrc_explained_by_ipv4_id(real ^ assumed, body.size())) << t;
    masked_ipv4_udp(pre, &f[0], &f[4], 49152, 4792, body.size() + 4, 0);
    EXPECT_FALSE(icrc_explained_by_ipv4_id(real ^ icrc_with_prefix(pre, h, p, 0), body.size())) << t;
  }
}

TEST(Icrc, PrefixXorMovesTheIcrcOntoIpUdp) {
  // icrc() ^ icrc_prefix_xor(prefix, n) == icrc_with_prefix(prefix, ...) for IPv4 and IPv6 prefixes,
  // short and long packets (both halves of the shift table), with and without pad.
  Rng rng(11);
  std::uint8_t a4[4] = {10, 0, 0, 1}, b4[4] = {10, 0, 0, 2};
  std::uint8_t a6[16], b6[16];
  for (int i = 0; i < 16; ++i)
    a6[i] = static_cast<std::uint8_t>(rng.next()), b6[i] = static_cast<std::uint8_t>(i);
  for (std::size_t len : {12u, 13u, 40u, 255u, 256u, 257u, 1500u, 4096u, 4147u, 9000u, 65000u}) {
    std::vector<std::uint8_t> body(len);
    for (auto& b : body) b = static_cast<std::uint8_t>(rng.next());
    const auto h = std::span<const std::uint8_t>(body).first(12);
    const auto p = std::span<const std::uint8_t>(body).subspan(12);
    const std::uint8_t pad = static_cast<std::uint8_t>(len % 4);
    const std::size_t rest = len + pad, mrc_len = rest + kIcrcSize;
    std::uint8_t pre4[kMaskedIpv4UdpSize], pre6[kMaskedIpv6UdpSize];
    masked_ipv4_udp(pre4, a4, b4, static_cast<std::uint16_t>(rng.next()), 4791, mrc_len);
    masked_ipv6_udp(pre6, a6, b6, static_cast<std::uint16_t>(rng.next()), 4971, mrc_len);
    EXPECT_EQ(icrc(h, p, pad) ^ icrc_prefix_xor(pre4, rest), icrc_with_prefix(pre4, h, p, pad)) << len;
    EXPECT_EQ(icrc(h, p, pad) ^ icrc_prefix_xor(pre6, rest), icrc_with_prefix(pre6, h, p, pad)) << len;
    EXPECT_NE(icrc_prefix_xor(pre4, rest), 0u);
  }
  // The IPv6 masking: traffic class, flow label, hop limit and UDP checksum all-ones; lengths counted.
  std::uint8_t pre6[kMaskedIpv6UdpSize];
  masked_ipv6_udp(pre6, a6, b6, 0x1234, 4791, 100);
  EXPECT_EQ(pre6[0], 0x6F);
  EXPECT_EQ(pre6[3], 0xFF);
  EXPECT_EQ(pre6[4] * 256 + pre6[5], 108);
  EXPECT_EQ(pre6[6], 17);
  EXPECT_EQ(pre6[7], 0xFF);
  EXPECT_EQ(pre6[44] * 256 + pre6[45], 108);
  EXPECT_EQ(pre6[46] & pre6[47], 0xFF);
}

TEST(Icrc, DecodeChecksTheRoceV2IcrcWithItsXor) {
  std::uint8_t a4[4] = {192, 168, 1, 1}, b4[4] = {192, 168, 1, 2};
  Packet pk;
  pk.bth.opcode = Opcode::kAck;
  pk.bth.dest_qp = 77;
  pk.bth.psn = 9;
  std::vector<std::uint8_t> bytes = test::encode_vec(pk);  // W16 ICRC
  std::uint8_t pre[kMaskedIpv4UdpSize];
  masked_ipv4_udp(pre, a4, b4, 50000, 4791, bytes.size(), 0);
  const std::uint32_t x = icrc_prefix_xor(pre, bytes.size() - kIcrcSize);
  Packet out;
  DecodeOptions opt;
  opt.verify_icrc = true;
  ASSERT_EQ(decode(bytes, out, opt), Error::kOk);  // W16 as sent
  opt.icrc_xor = x;
  EXPECT_EQ(decode(bytes, out, opt), Error::kBadIcrc);  // a receiver expecting RoCEv2's
  for (std::size_t i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] ^= static_cast<std::uint8_t>(x >> (8 * i));
  EXPECT_EQ(decode(bytes, out, opt), Error::kOk);
  // Sent with IPv4 ID 0x1234: refused unless the receiver accepts any ID.
  masked_ipv4_udp(pre, a4, b4, 50000, 4791, bytes.size(), 0x1234);
  const std::uint32_t y = icrc_prefix_xor(pre, bytes.size() - kIcrcSize) ^ x;
  for (std::size_t i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] ^= static_cast<std::uint8_t>(y >> (8 * i));
  EXPECT_EQ(decode(bytes, out, opt), Error::kBadIcrc);
  opt.icrc_any_ipv4_id = true;
  EXPECT_EQ(decode(bytes, out, opt), Error::kOk);
  bytes[bytes.size() - 1] ^= 1;
  EXPECT_EQ(decode(bytes, out, opt), Error::kBadIcrc);
}

}  // namespace
}  // namespace mrc::wire
