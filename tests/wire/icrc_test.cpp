// CRC-32 and ICRC tests.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/rng.hpp"
#include "wire/packet.hpp"

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

}  // namespace
}  // namespace mrc::wire
