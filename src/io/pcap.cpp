#include "io/pcap.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

namespace mrc::io {

namespace {

constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
constexpr std::uint16_t kEtherTypeIpv6 = 0x86DD;
constexpr std::uint8_t kIpProtoUdp = 17;

void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}
// The pcap global and record headers are written in host byte order (readers detect it by the magic).
void put32_host(std::uint8_t* p, std::uint32_t v) {
  std::memcpy(p, &v, sizeof v);
}
void put16_host(std::uint8_t* p, std::uint16_t v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// IpAddress

IpAddress IpAddress::v4(std::uint32_t host_order) {
  IpAddress a;
  put32(a.bytes.data(), host_order);
  return a;
}

IpAddress IpAddress::v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  IpAddress r;
  r.bytes[0] = a;
  r.bytes[1] = b;
  r.bytes[2] = c;
  r.bytes[3] = d;
  return r;
}

IpAddress IpAddress::v6_bytes(const std::array<std::uint8_t, 16>& b) {
  IpAddress r;
  r.v6 = true;
  r.bytes = b;
  return r;
}

bool IpAddress::parse(std::string_view text, IpAddress& out) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (text.empty() || text.size() >= sizeof buf) return false;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpAddress r;
  if (inet_pton(AF_INET, buf, r.bytes.data()) == 1) {
    out = r;
    return true;
  }
  r.v6 = true;
  if (inet_pton(AF_INET6, buf, r.bytes.data()) == 1) {
    out = r;
    return true;
  }
  return false;
}

bool IpAddress::from_sockaddr(const sockaddr* sa, IpAddress& addr, std::uint16_t& port) {
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, sa, sizeof in);
    addr = IpAddress{};
    std::memcpy(addr.bytes.data(), &in.sin_addr, 4);
    port = ntohs(in.sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, sa, sizeof in6);
    addr = IpAddress{};
    addr.v6 = true;
    std::memcpy(addr.bytes.data(), &in6.sin6_addr, 16);
    port = ntohs(in6.sin6_port);
    return true;
  }
  return false;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  if (inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf) == nullptr) return "?";
  return buf;
}

// ---------------------------------------------------------------------------------------------------------
// InetChecksum

namespace {

std::uint64_t fold16(std::uint64_t s) {
  while ((s >> 16) != 0) s = (s & 0xFFFF) + (s >> 16);
  return s;
}

std::uint64_t swap16(std::uint64_t s) {
  return ((s & 0xFF) << 8) | (s >> 8);
}

/// Ones' complement sum of `p` read as big-endian 16-bit words (an odd last byte padded with
/// zero), folded to 16 bits. The bulk adds native 32-bit words: the sum is byte-order independent
/// up to a final swap (RFC 1071 §2).
std::uint64_t sum_be16(const std::uint8_t* p, std::size_t n) {
  std::uint64_t s = 0;
  for (; n >= 4; n -= 4, p += 4) {
    std::uint32_t w;
    std::memcpy(&w, p, 4);
    s += w;
  }
  s = fold16(s);
  if constexpr (std::endian::native == std::endian::little) s = swap16(s);
  if (n >= 2) {
    s += (std::uint64_t{p[0]} << 8) | p[1];
    p += 2;
    n -= 2;
  }
  if (n == 1) s += std::uint64_t{p[0]} << 8;
  return fold16(s);
}

}  // namespace

void InetChecksum::add(std::span<const std::uint8_t> data) {
  const std::uint64_t s = sum_be16(data.data(), data.size());
  sum += odd ? swap16(s) : s;  // a piece starting mid-word adds its sum byte-swapped
  odd ^= (data.size() & 1) != 0;
}

std::uint16_t InetChecksum::finish() const {
  return static_cast<std::uint16_t>(~fold16(sum) & 0xFFFF);
}

// ---------------------------------------------------------------------------------------------------------
// PcapWriter

PcapWriter::~PcapWriter() {
  close();
}

bool PcapWriter::fail(std::string msg) {
  error_ = std::move(msg);
  return false;
}

bool PcapWriter::open(const std::string& path, TimestampResolution res) {
  if (file_ != nullptr) return fail("pcap: writer is already open");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return fail("pcap: cannot open '" + path + "' for writing: " + std::strerror(errno));
  std::uint8_t gh[24];
  put32_host(gh + 0, res == TimestampResolution::kNano ? kMagicNano : kMagicMicro);
  put16_host(gh + 4, 2);  // version 2.4
  put16_host(gh + 6, 4);
  put32_host(gh + 8, 0);   // thiszone
  put32_host(gh + 12, 0);  // sigfigs
  put32_host(gh + 16, kSnapLen);
  put32_host(gh + 20, kLinktypeEthernet);
  if (std::fwrite(gh, 1, sizeof gh, f) != sizeof gh) {
    std::fclose(f);
    return fail("pcap: cannot write the header of '" + path + "'");
  }
  file_ = f;
  res_ = res;
  packets_ = 0;
  error_.clear();
  return true;
}

bool PcapWriter::write(const FrameInfo& f, std::span<const std::uint8_t> mrc) {
  return write(f, mrc, {}, {});
}

bool PcapWriter::write(const FrameInfo& f, std::span<const std::uint8_t> header,
                       std::span<const std::uint8_t> payload, std::span<const std::uint8_t> trailer) {
  if (file_ == nullptr) return fail("pcap: write on a writer that is not open");
  if (f.src.v6 != f.dst.v6) return fail("pcap: source and destination address families differ");
  if (f.dscp > 63) return fail("pcap: DSCP > 63");
  if (f.ecn > 3) return fail("pcap: ECN > 3");
  if (f.flow_label > 0xFFFFF) return fail("pcap: flow label wider than 20 bits");
  const std::size_t udp_payload = header.size() + payload.size() + trailer.size();
  if (udp_payload > kMaxUdpPayload) return fail("pcap: UDP payload larger than 65507 bytes");

  const bool v6 = f.src.v6;
  const std::size_t ip_len = v6 ? kIpv6Header : kIpv4Header;
  const std::size_t frame_len = kEthHeader + ip_len + kUdpHeader + udp_payload;
  const auto udp_len = static_cast<std::uint16_t>(kUdpHeader + udp_payload);
  const auto tos = static_cast<std::uint8_t>(f.dscp << 2 | f.ecn);

  std::uint8_t* rec = prefix_.data();
  const auto sec = static_cast<std::uint32_t>(f.time_ns / 1'000'000'000u);
  const std::uint64_t frac_ns = f.time_ns % 1'000'000'000u;
  put32_host(rec + 0, sec);
  put32_host(rec + 4,
             static_cast<std::uint32_t>(res_ == TimestampResolution::kNano ? frac_ns : frac_ns / 1000));
  put32_host(rec + 8, static_cast<std::uint32_t>(frame_len));
  put32_host(rec + 12, static_cast<std::uint32_t>(frame_len));

  std::uint8_t* eth = rec + 16;
  std::memcpy(eth, f.dst_mac.data(), 6);
  std::memcpy(eth + 6, f.src_mac.data(), 6);
  put16(eth + 12, v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);

  std::uint8_t* ip = eth + kEthHeader;
  std::uint8_t* udp = ip + ip_len;
  InetChecksum ck;  // UDP checksum: pseudo header + UDP header + data
  if (v6) {
    put32(ip, 6u << 28 | static_cast<std::uint32_t>(tos) << 20 | f.flow_label);
    put16(ip + 4, udp_len);  // payload length
    ip[6] = kIpProtoUdp;
    ip[7] = f.hop_limit;
    std::memcpy(ip + 8, f.src.bytes.data(), 16);
    std::memcpy(ip + 24, f.dst.bytes.data(), 16);
    ck.add({ip + 8, 32});  // source + destination
    std::uint8_t pseudo[8] = {};
    put32(pseudo, udp_len);
    pseudo[7] = kIpProtoUdp;
    ck.add(pseudo);
  } else {
    ip[0] = 0x45;
    ip[1] = tos;
    put16(ip + 2, static_cast<std::uint16_t>(kIpv4Header + udp_len));
    put16(ip + 4, f.ipv4_id >= 0 ? static_cast<std::uint16_t>(f.ipv4_id) : ip_id_++);
    put16(ip + 6, 0x4000);  // DF, fragment offset 0
    ip[8] = f.hop_limit;
    ip[9] = kIpProtoUdp;
    put16(ip + 10, 0);
    std::memcpy(ip + 12, f.src.bytes.data(), 4);
    std::memcpy(ip + 16, f.dst.bytes.data(), 4);
    InetChecksum ipck;
    ipck.add({ip, kIpv4Header});
    put16(ip + 10, ipck.finish());
    ck.add({ip + 12, 8});
    std::uint8_t pseudo[4] = {0, kIpProtoUdp, 0, 0};
    put16(pseudo + 2, udp_len);
    ck.add(pseudo);
  }
  put16(udp, f.src_port);
  put16(udp + 2, f.dst_port);
  put16(udp + 4, udp_len);
  put16(udp + 6, 0);
  ck.add({udp, kUdpHeader});
  ck.add(header);
  ck.add(payload);
  ck.add(trailer);
  std::uint16_t sum = ck.finish();
  if (sum == 0) sum = 0xFFFF;  // 0 means "no checksum" (RFC 768) and is forbidden for IPv6
  put16(udp + 6, sum);

  const std::size_t prefix_len = 16 + kEthHeader + ip_len + kUdpHeader;
  bool ok = std::fwrite(prefix_.data(), 1, prefix_len, file_) == prefix_len;
  for (auto piece : {header, payload, trailer}) {
    if (ok && !piece.empty()) ok = std::fwrite(piece.data(), 1, piece.size(), file_) == piece.size();
  }
  if (!ok) return fail(std::string("pcap: write failed: ") + std::strerror(errno));
  ++packets_;
  return true;
}

bool PcapWriter::flush() {
  if (file_ == nullptr) return true;
  if (std::fflush(file_) != 0) return fail(std::string("pcap: flush failed: ") + std::strerror(errno));
  return true;
}

bool PcapWriter::close() {
  if (file_ == nullptr) return true;
  const bool err = std::ferror(file_) != 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (err || !closed) return fail("pcap: error while closing the capture");
  return true;
}

}  // namespace mrc::io
