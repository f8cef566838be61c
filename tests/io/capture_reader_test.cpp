// The capture reader (io/capture_reader.hpp) against the project's own pcap writer (io/pcap.hpp):
// what one writes, the other reads back, field by field; and the ways an input ends badly.
#include "io/capture_reader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "io/pcap.hpp"

namespace mrc::io {
namespace {

struct Read {
  std::vector<std::size_t> numbers;
  std::vector<capture::Bytes> packets;
  std::vector<capture::Udp> layers;
  std::string error;
};

Read read(const std::string& bytes, std::vector<std::uint32_t> ports = {4791, 4971}) {
  std::istringstream in(bytes);
  Read r;
  r.error = capture::read_input(in, ports, [&](std::size_t n, auto mrc, const capture::Udp* u) {
    r.numbers.push_back(n);
    r.packets.emplace_back(mrc.begin(), mrc.end());
    r.layers.push_back(u != nullptr ? *u : capture::Udp{});
  });
  return r;
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(CaptureReader, ReadsBackWhatThePcapWriterWrote) {
  const std::string path = ::testing::TempDir() + "capture_reader_" + std::to_string(getpid()) + ".pcap";
  PcapWriter w;
  ASSERT_TRUE(w.open(path)) << w.error();
  const FrameInfo v4{.src = IpAddress::v4(10, 0, 0, 1),
                     .src_port = 49152,
                     .dst = IpAddress::v4(10, 0, 0, 2),
                     .dscp = 26,
                     .ecn = 3,
                     .hop_limit = 63,
                     .ipv4_id = 0x1234};
  FrameInfo v6 = v4;
  ASSERT_TRUE(IpAddress::parse("fd00::1", v6.src));
  ASSERT_TRUE(IpAddress::parse("fd00:0:0:1::2", v6.dst));
  v6.dst_port = 4971;
  v6.flow_label = 0xABCDE;
  FrameInfo other = v4;
  other.dst_port = 53;  // not MRC: skipped, but counted as a frame
  const capture::Bytes a{0xD1, 0x00, 0xFF, 0xFF, 1, 2, 3, 4}, b(300, 0x5A), c{9, 9, 9};
  ASSERT_TRUE(w.write(v4, a));
  ASSERT_TRUE(w.write(other, c));
  ASSERT_TRUE(w.write(v6, b));
  ASSERT_TRUE(w.close());
  const std::string bytes = file_bytes(path);
  std::remove(path.c_str());
  const Read r = read(bytes);
  EXPECT_EQ(r.error, "");
  ASSERT_EQ(r.packets.size(), 2u);
  EXPECT_EQ(r.numbers, (std::vector<std::size_t>{1, 3}));
  EXPECT_EQ(r.packets[0], a);
  EXPECT_EQ(r.packets[1], b);
  const capture::Udp& u4 = r.layers[0];
  EXPECT_EQ(u4.ip_version, 4);
  EXPECT_EQ(capture::ip_text(u4.src.data(), false), "10.0.0.1");
  EXPECT_EQ(capture::ip_text(u4.dst.data(), false), "10.0.0.2");
  EXPECT_EQ(u4.dscp, 26);
  EXPECT_EQ(u4.ecn, 3);
  EXPECT_EQ(u4.ttl, 63);
  EXPECT_EQ(u4.ip_id, 0x1234);
  EXPECT_EQ(u4.src_port, 49152);
  EXPECT_EQ(u4.dst_port, 4791);
  EXPECT_EQ(u4.udp_length, 8 + a.size());
  EXPECT_EQ(u4.mrc_off, 14u + 20 + 8);
  ASSERT_EQ(u4.masked_ip_udp().size(), 28u);
  EXPECT_EQ(u4.masked_ip_udp()[1], 0xFF);  // TOS
  EXPECT_EQ(u4.masked_ip_udp()[8], 0xFF);  // TTL
  const capture::Udp& u6 = r.layers[1];
  EXPECT_EQ(u6.ip_version, 6);
  EXPECT_EQ(capture::ip_text(u6.src.data(), true), "fd00:0:0:0:0:0:0:1");
  EXPECT_EQ(capture::ip_text(u6.dst.data(), true), "fd00:0:0:1:0:0:0:2");
  EXPECT_EQ(u6.flow_label, 0xABCDEu);
  EXPECT_EQ(u6.dscp, 26);
  EXPECT_EQ(u6.ecn, 3);
  EXPECT_EQ(u6.ttl, 63);
  EXPECT_EQ(u6.dst_port, 4971);
  EXPECT_EQ(u6.masked_ip_udp().size(), 48u);
  // Only port 4971: the first frame is not MRC traffic either.
  const Read only = read(bytes, {4971});
  ASSERT_EQ(only.packets.size(), 1u);
  EXPECT_EQ(only.numbers[0], 3u);
  EXPECT_EQ(only.packets[0], b);
}

TEST(CaptureReader, HexTextOnePacketALine) {
  const Read r = read("# comment\nD100ffff 01:02\n\n0xAB-CD  # trailing\n");
  EXPECT_EQ(r.error, "");
  ASSERT_EQ(r.packets.size(), 2u);
  EXPECT_EQ(r.packets[0], (capture::Bytes{0xD1, 0x00, 0xFF, 0xFF, 0x01, 0x02}));
  EXPECT_EQ(r.packets[1], (capture::Bytes{0xAB, 0xCD}));
  EXPECT_EQ(r.numbers, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(read("D1\nzz\nD2\n").error, "line 2: not a hex digit: 'z' at character 1");
  EXPECT_EQ(read("# nothing\n").error, "no packets in the input");
  EXPECT_EQ(read("").error, "no packets in the input");
  EXPECT_EQ(read(std::string(capture::kMaxLine + 1, '0')).error.rfind("line 1: longer than 1048576 bytes", 0),
            0u);
}

std::string pcap_header(std::uint32_t link) {
  std::string h(24, '\0');
  const std::uint32_t magic = 0xA1B2C3D4;
  std::memcpy(h.data(), &magic, 4);
  std::memcpy(h.data() + 20, &link, 4);
  return h;
}

std::string record_header(std::uint32_t incl) {
  std::string r(16, '\0');
  std::memcpy(r.data() + 8, &incl, 4);
  std::memcpy(r.data() + 12, &incl, 4);
  return r;
}

TEST(CaptureReader, APcapEndsBadlyWithItsFrameAndFileByte) {
  EXPECT_EQ(read(pcap_header(1).substr(0, 10)).error, "truncated pcap global header (10 bytes)");
  EXPECT_EQ(read(pcap_header(147)).error,
            "pcap link type 147 is not supported (Ethernet, Linux cooked, raw IP, loopback)");
  EXPECT_EQ(read(pcap_header(101)).error, "");  // no records: not an error
  EXPECT_EQ(read(pcap_header(101) + record_header(4) + "abcd" + "12345").error,
            "frame 2: truncated pcap record header at file byte 44");
  EXPECT_EQ(read(pcap_header(101) + record_header(100) + "abcd").error,
            "frame 1: record of 100 bytes runs past the end of the file (file byte 24)");
  EXPECT_EQ(read(pcap_header(101) + record_header(262145)).error,
            "frame 1: record of 262145 bytes at file byte 24, more than a pcap record holds (262144)");
}

}  // namespace
}  // namespace mrc::io
