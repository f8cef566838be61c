// PcapWriter: file layout, IPv4/UDP checksums and timestamps, verified by re-parsing the file with an
// independent (contiguous, byte-pair) checksum implementation.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/pcap.hpp"

namespace mrc::io {
namespace {

using Bytes = std::vector<std::uint8_t>;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mrc_pcap_" + std::to_string(getpid()) + "_" + name))
      .string();
}

Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

std::uint32_t host32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
std::uint16_t be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}

// Reference ones'-complement sum over a contiguous buffer (RFC 1071), folded, not complemented.
std::uint32_t ref_sum(const Bytes& b) {
  std::uint32_t s = 0;
  for (std::size_t i = 0; i < b.size(); i += 2) {
    s += static_cast<std::uint32_t>(b[i]) << 8;
    if (i + 1 < b.size()) s += b[i + 1];
  }
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return s;
}

struct Record {
  std::uint32_t sec = 0, frac = 0, incl = 0, orig = 0;
  Bytes frame;
};

struct Capture {
  std::uint32_t magic = 0, snaplen = 0, linktype = 0;
  std::uint16_t major = 0, minor = 0;
  std::vector<Record> records;
};

Capture parse(const Bytes& f) {
  Capture c;
  EXPECT_GE(f.size(), 24u);
  if (f.size() < 24) return c;
  c.magic = host32(&f[0]);
  std::memcpy(&c.major, &f[4], 2);
  std::memcpy(&c.minor, &f[6], 2);
  c.snaplen = host32(&f[16]);
  c.linktype = host32(&f[20]);
  std::size_t off = 24;
  while (off + 16 <= f.size()) {
    Record r;
    r.sec = host32(&f[off]);
    r.frac = host32(&f[off + 4]);
    r.incl = host32(&f[off + 8]);
    r.orig = host32(&f[off + 12]);
    off += 16;
    EXPECT_LE(off + r.incl, f.size()) << "record runs past the end of the file";
    if (off + r.incl > f.size()) break;
    r.frame.assign(f.begin() + static_cast<std::ptrdiff_t>(off),
                   f.begin() + static_cast<std::ptrdiff_t>(off + r.incl));
    off += r.incl;
    c.records.push_back(std::move(r));
  }
  EXPECT_EQ(off, f.size()) << "trailing bytes after the last record";
  return c;
}

// Checks Ethernet/IP/UDP of one frame and returns the UDP payload.
Bytes check_frame(const Record& r, const FrameInfo& fi) {
  const Bytes& fr = r.frame;
  EXPECT_EQ(r.incl, r.orig);
  EXPECT_EQ(Bytes(fr.begin(), fr.begin() + 6), Bytes(fi.dst_mac.begin(), fi.dst_mac.end()));
  EXPECT_EQ(Bytes(fr.begin() + 6, fr.begin() + 12), Bytes(fi.src_mac.begin(), fi.src_mac.end()));
  const std::uint16_t ethertype = be16(&fr[12]);
  std::size_t udp_off = 0;
  Bytes pseudo;
  if (!fi.src.v6) {
    EXPECT_EQ(ethertype, 0x0800);
    const Bytes ip(fr.begin() + 14, fr.begin() + 34);
    EXPECT_EQ(ip[0], 0x45);
    EXPECT_EQ(ip[1], fi.dscp << 2 | fi.ecn);
    EXPECT_EQ(be16(&ip[2]), fr.size() - 14);
    EXPECT_EQ(ip[8], fi.hop_limit);
    EXPECT_EQ(ip[9], 17);
    EXPECT_EQ(ref_sum(ip), 0xFFFFu) << "IPv4 header checksum does not verify";
    EXPECT_NE(be16(&ip[10]), 0);
    EXPECT_TRUE(std::equal(ip.begin() + 12, ip.begin() + 16, fi.src.bytes.begin()));
    EXPECT_TRUE(std::equal(ip.begin() + 16, ip.begin() + 20, fi.dst.bytes.begin()));
    pseudo.assign(ip.begin() + 12, ip.begin() + 20);
    pseudo.insert(pseudo.end(), {0, 17});
    udp_off = 34;
  } else {
    EXPECT_EQ(ethertype, 0x86DD);
    const std::uint8_t* ip = &fr[14];
    const std::uint32_t w0 = static_cast<std::uint32_t>(ip[0]) << 24 |
                             static_cast<std::uint32_t>(ip[1]) << 16 |
                             static_cast<std::uint32_t>(ip[2]) << 8 | ip[3];
    EXPECT_EQ(w0 >> 28, 6u);
    EXPECT_EQ((w0 >> 20) & 0xFF, static_cast<std::uint32_t>(fi.dscp << 2 | fi.ecn));
    EXPECT_EQ(w0 & 0xFFFFF, fi.flow_label);
    EXPECT_EQ(be16(ip + 4), fr.size() - 54);
    EXPECT_EQ(ip[6], 17);
    EXPECT_EQ(ip[7], fi.hop_limit);
    EXPECT_TRUE(std::equal(ip + 8, ip + 24, fi.src.bytes.begin()));
    EXPECT_TRUE(std::equal(ip + 24, ip + 40, fi.dst.bytes.begin()));
    pseudo.assign(ip + 8, ip + 40);
    pseudo.insert(pseudo.end(), {0, 17});
    udp_off = 54;
  }
  const std::uint8_t* udp = &fr[udp_off];
  EXPECT_EQ(be16(udp), fi.src_port);
  EXPECT_EQ(be16(udp + 2), fi.dst_port);
  EXPECT_EQ(be16(udp + 4), fr.size() - udp_off);
  EXPECT_NE(be16(udp + 6), 0) << "UDP checksum must be present";
  pseudo.push_back(udp[4]);
  pseudo.push_back(udp[5]);
  Bytes all = pseudo;
  all.insert(all.end(), fr.begin() + static_cast<std::ptrdiff_t>(udp_off), fr.end());
  EXPECT_EQ(ref_sum(all), 0xFFFFu) << "UDP checksum does not verify";
  return Bytes(fr.begin() + static_cast<std::ptrdiff_t>(udp_off + 8), fr.end());
}

FrameInfo v4_info() {
  FrameInfo f;
  f.src = IpAddress::v4(10, 255, 0, 1);
  f.dst = IpAddress::v4(10, 255, 0, 2);
  f.src_port = 50000;
  f.dscp = 26;
  f.ecn = 2;
  return f;
}

FrameInfo v6_info() {
  FrameInfo f;
  EXPECT_TRUE(IpAddress::parse("fd00::1", f.src));
  EXPECT_TRUE(IpAddress::parse("fd00::2:ff", f.dst));
  f.src_port = 50001;
  f.flow_label = 0xFEDCB;
  f.dscp = 63;
  f.ecn = 3;
  f.hop_limit = 5;
  return f;
}

TEST(InetChecksum, KnownIpv4HeaderVector) {
  // A classic textbook IPv4 header (192.168.0.1 -> 192.168.0.199) whose checksum is 0xB861.
  const std::uint8_t h[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                            0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  InetChecksum c;
  c.add(h);
  EXPECT_EQ(c.finish(), 0xB861);
}

TEST(InetChecksum, PiecesWithOddBoundariesEqualContiguous) {
  Bytes data(101);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 37 + 11);
  InetChecksum whole;
  whole.add(data);
  for (std::size_t a = 0; a <= 7; ++a) {
    for (std::size_t b = a; b <= 13; ++b) {
      InetChecksum parts;
      const std::span<const std::uint8_t> s(data);
      parts.add(s.first(a));
      parts.add(s.subspan(a, b - a));
      parts.add(s.subspan(b));
      EXPECT_EQ(parts.finish(), whole.finish()) << a << "," << b;
    }
  }
  EXPECT_EQ(static_cast<std::uint16_t>(~ref_sum(data) & 0xFFFF), whole.finish());
}

TEST(PcapWriter, Ipv4AndIpv6FramesReparse) {
  const std::string path = temp_path("v4v6.pcap");
  Bytes odd(33), even(64);
  for (std::size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<std::uint8_t>(0xA0 + i);
  for (std::size_t i = 0; i < even.size(); ++i) even[i] = static_cast<std::uint8_t>(i);
  FrameInfo a = v4_info(), b = v6_info();
  a.time_ns = 1'700'000'000'123'456'789ull;
  b.time_ns = 5'000'000'001ull;
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(path)) << w.error();
    ASSERT_TRUE(w.write(a, odd)) << w.error();
    ASSERT_TRUE(w.write(b, even)) << w.error();
    EXPECT_EQ(w.packets_written(), 2u);
    ASSERT_TRUE(w.close()) << w.error();
  }
  const Capture c = parse(read_file(path));
  EXPECT_EQ(c.magic, PcapWriter::kMagicNano);
  EXPECT_EQ(c.major, 2);
  EXPECT_EQ(c.minor, 4);
  EXPECT_EQ(c.linktype, 1u);
  EXPECT_EQ(c.snaplen, PcapWriter::kSnapLen);
  ASSERT_EQ(c.records.size(), 2u);
  EXPECT_EQ(c.records[0].sec, 1'700'000'000u);
  EXPECT_EQ(c.records[0].frac, 123'456'789u);
  EXPECT_EQ(c.records[0].incl, 14u + 20 + 8 + 33);
  EXPECT_EQ(c.records[1].sec, 5u);
  EXPECT_EQ(c.records[1].frac, 1u);
  EXPECT_EQ(c.records[1].incl, 14u + 40 + 8 + 64);
  EXPECT_EQ(check_frame(c.records[0], a), odd);
  EXPECT_EQ(check_frame(c.records[1], b), even);
  std::filesystem::remove(path);
}

TEST(PcapWriter, MicrosecondTimestamps) {
  const std::string path = temp_path("usec.pcap");
  FrameInfo a = v4_info();
  a.time_ns = 12'345'678'999ull;
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(path, TimestampResolution::kMicro)) << w.error();
    ASSERT_TRUE(w.write(a, Bytes{1, 2, 3, 4})) << w.error();
  }  // the destructor closes and flushes
  const Capture c = parse(read_file(path));
  EXPECT_EQ(c.magic, PcapWriter::kMagicMicro);
  ASSERT_EQ(c.records.size(), 1u);
  EXPECT_EQ(c.records[0].sec, 12u);
  EXPECT_EQ(c.records[0].frac, 345'678u);
  std::filesystem::remove(path);
}

TEST(PcapWriter, ScatterGatherEqualsContiguous) {
  Bytes pkt(77);
  for (std::size_t i = 0; i < pkt.size(); ++i) pkt[i] = static_cast<std::uint8_t>(i * 13 + 1);
  const std::string p1 = temp_path("flat.pcap"), p2 = temp_path("sg.pcap");
  for (const FrameInfo& fi : {v4_info(), v6_info()}) {
    {
      PcapWriter w1, w2;
      ASSERT_TRUE(w1.open(p1));
      ASSERT_TRUE(w2.open(p2));
      ASSERT_TRUE(w1.write(fi, pkt));
      const std::span<const std::uint8_t> s(pkt);
      ASSERT_TRUE(w2.write(fi, s.first(33), s.subspan(33, 39), s.last(5)));  // odd split points
      ASSERT_TRUE(w1.close());
      ASSERT_TRUE(w2.close());
    }
    EXPECT_EQ(read_file(p1), read_file(p2));
    const Capture c = parse(read_file(p2));
    ASSERT_EQ(c.records.size(), 1u);
    EXPECT_EQ(check_frame(c.records[0], fi), pkt);
  }
  std::filesystem::remove(p1);
  std::filesystem::remove(p2);
}

TEST(PcapWriter, UdpChecksumZeroIsSentAsAllOnes) {
  // Find the 2-byte payload that makes the computed UDP checksum 0: it must be written as 0xFFFF.
  const std::string path = temp_path("zero.pcap");
  FrameInfo fi = v4_info();
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(path));
    ASSERT_TRUE(w.write(fi, Bytes{0, 0}));
  }
  Capture c = parse(read_file(path));
  ASSERT_EQ(c.records.size(), 1u);
  const std::uint16_t ck = be16(&c.records[0].frame[34 + 6]);
  // With the payload word equal to that checksum the sum becomes all-ones, i.e. a computed checksum of 0.
  const Bytes payload{static_cast<std::uint8_t>(ck >> 8), static_cast<std::uint8_t>(ck)};
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(path));
    ASSERT_TRUE(w.write(fi, payload));
  }
  c = parse(read_file(path));
  ASSERT_EQ(c.records.size(), 1u);
  EXPECT_EQ(be16(&c.records[0].frame[34 + 6]), 0xFFFF);
  EXPECT_EQ(check_frame(c.records[0], fi), payload);
  std::filesystem::remove(path);
}

TEST(PcapWriter, ErrorsAreReported) {
  PcapWriter w;
  EXPECT_FALSE(w.write(v4_info(), Bytes{1}));
  EXPECT_NE(w.error().find("not open"), std::string::npos);

  EXPECT_FALSE(w.open("/nonexistent-dir-mrc/x.pcap"));
  EXPECT_NE(w.error().find("/nonexistent-dir-mrc/x.pcap"), std::string::npos) << w.error();
  EXPECT_FALSE(w.is_open());

  const std::string path = temp_path("err.pcap");
  ASSERT_TRUE(w.open(path));
  EXPECT_FALSE(w.open(path));
  EXPECT_NE(w.error().find("already open"), std::string::npos);

  FrameInfo mixed = v4_info();
  mixed.dst = v6_info().dst;
  EXPECT_FALSE(w.write(mixed, Bytes{1}));
  EXPECT_NE(w.error().find("families"), std::string::npos);
  FrameInfo f = v4_info();
  f.dscp = 64;
  EXPECT_FALSE(w.write(f, Bytes{1}));
  f = v4_info();
  f.ecn = 4;
  EXPECT_FALSE(w.write(f, Bytes{1}));
  f = v6_info();
  f.flow_label = 0x100000;
  EXPECT_FALSE(w.write(f, Bytes{1}));
  const Bytes huge(PcapWriter::kMaxUdpPayload + 1);
  EXPECT_FALSE(w.write(v4_info(), huge));
  EXPECT_NE(w.error().find("65507"), std::string::npos);
  const Bytes max(PcapWriter::kMaxUdpPayload);
  EXPECT_TRUE(w.write(v4_info(), max)) << w.error();
  EXPECT_EQ(w.packets_written(), 1u);
  ASSERT_TRUE(w.close());
  const Capture c = parse(read_file(path));
  ASSERT_EQ(c.records.size(), 1u);  // failed writes left nothing behind
  EXPECT_EQ(check_frame(c.records[0], v4_info()).size(), PcapWriter::kMaxUdpPayload);
  std::filesystem::remove(path);
}

TEST(IpAddress, ParseFormatAndSockaddr) {
  IpAddress a;
  ASSERT_TRUE(IpAddress::parse("192.0.2.7", a));
  EXPECT_FALSE(a.v6);
  EXPECT_EQ(a, IpAddress::v4(0xC0000207));
  EXPECT_EQ(a.to_string(), "192.0.2.7");
  ASSERT_TRUE(IpAddress::parse("2001:db8::1", a));
  EXPECT_TRUE(a.v6);
  EXPECT_EQ(a.bytes[0], 0x20);
  EXPECT_EQ(a.bytes[15], 0x01);
  EXPECT_EQ(a.to_string(), "2001:db8::1");
  EXPECT_FALSE(IpAddress::parse("not-an-ip", a));
  EXPECT_FALSE(IpAddress::parse("", a));

  sockaddr_in6 s6{};
  s6.sin6_family = AF_INET6;
  s6.sin6_port = htons(4791);
  s6.sin6_addr.s6_addr[15] = 9;
  IpAddress b;
  std::uint16_t port = 0;
  ASSERT_TRUE(IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&s6), b, port));
  EXPECT_TRUE(b.v6);
  EXPECT_EQ(port, 4791);
  EXPECT_EQ(b.to_string(), "::9");
  sockaddr_in s4{};
  s4.sin_family = AF_INET;
  s4.sin_port = htons(1234);
  s4.sin_addr.s_addr = htonl(0x0A000001);
  ASSERT_TRUE(IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&s4), b, port));
  EXPECT_EQ(b, IpAddress::v4(10, 0, 0, 1));
  EXPECT_EQ(port, 1234);
  EXPECT_FALSE(IpAddress::from_sockaddr(nullptr, b, port));
}

}  // namespace
}  // namespace mrc::io
