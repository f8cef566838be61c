// SRv6 mode pieces that need no privileges: the uSID carrier rule, the UDP checksum over the final
// destination, and the configuration checks. Sending through the routers is tested in
// tests/integration/tb_srv6_perf.sh.
#include <gtest/gtest.h>

#include <vector>

#include "io/udp_endpoint.hpp"

namespace mrc::io {
namespace {

IpAddr v6(const char* s) {
  IpAddr a;
  EXPECT_TRUE(IpAddr::parse(s, a)) << s;
  return a;
}

std::string carrier(const char* final_addr, std::vector<std::uint16_t> usids, std::uint32_t block = 32) {
  IpAddr c;
  if (!srv6_carrier(v6(final_addr), usids, block, c)) return "refused";
  return c.str();
}

TEST(Srv6Carrier, InsertsThePathBetweenBlockAndFinalUsid) {
  // The testbed's plan (tools/testbed/README.md): spine uSIDs 2sss, leaves 1lll, hosts 3hhh.
  EXPECT_EQ(carrier("fcbb:bb01:3002::", {0x2001}), "fcbb:bb01:2001:3002::");
  EXPECT_EQ(carrier("fcbb:bb02:3002::", {0x2002}), "fcbb:bb02:2002:3002::");
  EXPECT_EQ(carrier("fcbb:bb01:3002::", {0x1001, 0x2002, 0x1002}), "fcbb:bb01:1001:2002:1002:3002::");
  // Final addresses with more than one uSID keep all of them, shifted as a whole.
  EXPECT_EQ(carrier("fcbb:bb01:3002:e000::", {0x2001}), "fcbb:bb01:2001:3002:e000::");
  // Other block lengths.
  EXPECT_EQ(carrier("fc00:3002::", {0x2001}, 16), "fc00:2001:3002::");
  EXPECT_EQ(carrier("fc00:0:0:3002::", {0x2001, 0x2002}, 48), "fc00::2001:2002:3002:0:0");
}

TEST(Srv6Carrier, RefusesWhatDoesNotFit) {
  // Five uSIDs fit behind a 32-bit block and one final uSID; six push the final uSID out.
  EXPECT_EQ(carrier("fcbb:bb01:3002::", {1, 2, 3, 4, 5}), "fcbb:bb01:1:2:3:4:5:3002");
  EXPECT_EQ(carrier("fcbb:bb01:3002::", {1, 2, 3, 4, 5, 6}), "refused");
  EXPECT_EQ(carrier("fcbb:bb01:3002::1", {0x2001}), "refused");     // low bits set: no room
  EXPECT_EQ(carrier("fcbb:bb01:3002::", {0x2001}, 24), "refused");  // not a multiple of 16
  IpAddr c, v4;
  ASSERT_TRUE(IpAddr::parse("10.1.2.1", v4));
  const std::uint16_t one[] = {0x2001};
  EXPECT_FALSE(srv6_carrier(v4, one, 32, c));
}

/// Byte-at-a-time RFC 768 checksum over a contiguous pseudo-header + datagram.
std::uint16_t reference_checksum(const IpAddr& src, const IpAddr& dst,
                                 const std::vector<std::uint8_t>& dgram) {
  std::vector<std::uint8_t> b(src.bytes.begin(), src.bytes.end());
  b.insert(b.end(), dst.bytes.begin(), dst.bytes.end());
  const auto n = static_cast<std::uint32_t>(dgram.size());
  for (int i = 3; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  b.insert(b.end(), {0, 0, 0, 17});
  b.insert(b.end(), dgram.begin(), dgram.end());
  std::uint32_t s = 0;
  for (std::size_t i = 0; i < b.size(); i += 2)
    s += (std::uint32_t{b[i]} << 8) | (i + 1 < b.size() ? b[i + 1] : 0);
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  const auto c = static_cast<std::uint16_t>(~s);
  return c == 0 ? 0xFFFF : c;
}

TEST(Udp6Checksum, MatchesTheReferenceForAnySplit) {
  const IpAddr src = v6("fcbb:bb01:3001::"), dst = v6("fcbb:bb01:3002::");
  std::vector<std::uint8_t> dgram(8 + 32 + 4097 + 7);
  for (std::size_t i = 0; i < dgram.size(); ++i) dgram[i] = static_cast<std::uint8_t>(i * 131 + 7);
  dgram[6] = dgram[7] = 0;  // checksum field
  const std::uint16_t want = reference_checksum(src, dst, dgram);
  const std::span<const std::uint8_t> d(dgram);
  for (const std::size_t a : {std::size_t{1}, std::size_t{8}, std::size_t{9}, std::size_t{40}})
    for (const std::size_t b : {std::size_t{41}, std::size_t{1000}, std::size_t{4137}, dgram.size()}) {
      const std::span<const std::uint8_t> pieces[] = {d.first(a), d.subspan(a, b - a), d.subspan(b)};
      ASSERT_EQ(udp6_checksum(src, dst, pieces), want) << a << " " << b;
    }
  // Put in place, the whole datagram sums to zero over the same pseudo-header, and only there.
  const std::uint16_t c = udp6_checksum(src, dst, std::span(&d, 1));
  dgram[6] = static_cast<std::uint8_t>(c >> 8);
  dgram[7] = static_cast<std::uint8_t>(c);
  EXPECT_EQ(reference_checksum(src, dst, dgram), 0xFFFF);  // ~0 -> sent as 0xFFFF
  EXPECT_NE(reference_checksum(src, v6("fcbb:bb01:2001:3002::"), dgram), 0xFFFF)
      << "a checksum over the final address must not verify against the carrier";
}

TEST(Udp6Checksum, ZeroIsSentAsAllOnes) {
  // A datagram whose sum is all ones would checksum to 0, which UDP/IPv6 forbids.
  const IpAddr zero = v6("::");
  std::vector<std::uint8_t> dgram = {0, 0, 0, 0, 0, 10, 0, 0, 0xFF, 0xFF};
  // pseudo-header: length 10 + proto 17; datagram: length field 10 -> fill the data to reach 0xFFFF
  const std::uint16_t rest = static_cast<std::uint16_t>(0xFFFF - 10 - 17 - 10);
  dgram[8] = static_cast<std::uint8_t>(rest >> 8);
  dgram[9] = static_cast<std::uint8_t>(rest);
  const std::span<const std::uint8_t> d(dgram);
  EXPECT_EQ(udp6_checksum(zero, zero, std::span(&d, 1)), 0xFFFF);
}

TEST(Srv6Config, BadSettingsAreRefusedWithAReason) {
  UdpConfig c;
  c.ev_mode = EvMode::kSrv6;
  c.planes = {v6("::1")};
  c.srv6.paths = {{0x2001}};
  std::string err;
  auto expect_refused = [&](const UdpConfig& cfg, const char* what) {
    err.clear();
    EXPECT_EQ(UdpEndpoint::create(cfg, err), nullptr);
    EXPECT_NE(err.find(what), std::string::npos) << err;
  };
  UdpConfig v4 = c;
  v4.planes = {};
  v4.planes.push_back(IpAddr{});
  ASSERT_TRUE(IpAddr::parse("127.0.0.1", v4.planes[0]));
  expect_refused(v4, "IPv6");
  UdpConfig none = c;
  none.srv6.paths.clear();
  expect_refused(none, "at least one uSID path");
  UdpConfig empty_path = c;
  empty_path.srv6.paths = {{}};
  expect_refused(empty_path, "1..5 uSIDs");
  UdpConfig too_long = c;
  too_long.srv6.paths = {{1, 2, 3, 4, 5, 6}};
  expect_refused(too_long, "1..5 uSIDs");
  UdpConfig block = c;
  block.srv6.block_bits = 40;
  expect_refused(block, "multiple of 16");
}

}  // namespace
}  // namespace mrc::io
