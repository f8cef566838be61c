// SRv6 mode of UdpEndpoint (docs/decisions.md D28): path checks, per-peer carriers, and the IPv6 +
// UDP header of each raw send.
#include "io/srv6.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include "io/pcap.hpp"
#include "io/udp_common.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

using namespace detail;

bool srv6_carrier(const IpAddr& final_addr, std::span<const std::uint16_t> usids, std::uint32_t block_bits,
                  IpAddr& out) {
  const std::size_t block = block_bits / 8, shift = usids.size() * 2;
  if (final_addr.family != AF_INET6 || block_bits % 16 != 0 || block + shift > 16) return false;
  // The bytes the uSIDs push off the end must be zero (they are beyond the final uSIDs).
  for (std::size_t i = 16 - shift; i < 16; ++i)
    if (final_addr.bytes[i] != 0) return false;
  IpAddr c;
  c.family = AF_INET6;
  std::memcpy(c.bytes.data(), final_addr.bytes.data(), block);
  for (std::size_t k = 0; k < usids.size(); ++k) {
    c.bytes[block + 2 * k] = static_cast<std::uint8_t>(usids[k] >> 8);
    c.bytes[block + 2 * k + 1] = static_cast<std::uint8_t>(usids[k]);
  }
  std::memcpy(c.bytes.data() + block + shift, final_addr.bytes.data() + block, 16 - block - shift);
  out = c;
  return true;
}

std::uint16_t udp6_checksum(const IpAddr& src, const IpAddr& dst,
                            std::span<const std::span<const std::uint8_t>> pieces) {
  std::uint32_t len = 0;
  for (const auto& piece : pieces) len += static_cast<std::uint32_t>(piece.size());
  // Pseudo-header: source, destination, upper-layer length (32 bits), 3 zero bytes, next header 17.
  const std::uint8_t tail[8] = {static_cast<std::uint8_t>(len >> 24),
                                static_cast<std::uint8_t>(len >> 16),
                                static_cast<std::uint8_t>(len >> 8),
                                static_cast<std::uint8_t>(len),
                                0,
                                0,
                                0,
                                IPPROTO_UDP};
  InetChecksum ck;
  ck.add(src.bytes);
  ck.add(dst.bytes);
  ck.add(tail);
  for (const auto& piece : pieces) ck.add(piece);
  const std::uint16_t c = ck.finish();
  return c == 0 ? 0xFFFF : c;
}

bool UdpEndpoint::check_srv6(std::string& err) const {
  const Srv6Config& c = cfg_.srv6;
  if (family_ != AF_INET6) {
    err = "udp endpoint: SRv6 mode needs IPv6 plane addresses (the hosts' final uSID addresses)";
    return false;
  }
  if (c.block_bits == 0 || c.block_bits % 16 != 0 || c.block_bits > 96) {
    err = "udp endpoint: SRv6 locator block must be 16..96 bits, a multiple of 16";
    return false;
  }
  if (err = check_srv6_paths(c.paths); !err.empty()) return false;
  // Fail now, with the reason, rather than dropping every packet later.
  const int fd = ::socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
  if (fd < 0) {
    err = std::string("udp endpoint: SRv6 mode sends through raw IPv6 sockets (needs CAP_NET_RAW): ") +
          std::strerror(errno);
    return false;
  }
  ::close(fd);
  return true;
}

std::string UdpEndpoint::check_srv6_paths(const std::vector<std::vector<std::uint16_t>>& paths) const {
  if (paths.empty()) return "udp endpoint: SRv6 mode needs at least one uSID path";
  const std::uint32_t block = cfg_.srv6.block_bits;
  for (const auto& path : paths)
    if (path.empty() || block + 16 * path.size() > 112)
      return "udp endpoint: an SRv6 path needs 1.." + std::to_string((112 - block) / 16) +
             " uSIDs (block + path + the final uSID must fit in 128 bits)";
  return {};
}

bool UdpEndpoint::build_carriers(const std::vector<IpAddr>& addrs,
                                 const std::vector<std::vector<std::uint16_t>>& paths,
                                 std::vector<sockaddr_in6>& out) const {
  // Every (plane, path) carrier is built once here: per packet it is a table lookup.
  out.clear();
  for (const IpAddr& a : addrs) {
    for (const auto& path : paths) {
      IpAddr c;
      if (!srv6_carrier(a, path, cfg_.srv6.block_bits, c)) return false;
      out.emplace_back();
      make_sockaddr(c, 0, out.back());
    }
  }
  return true;
}

bool UdpEndpoint::set_srv6_paths(std::vector<std::vector<std::uint16_t>> paths, std::string& err) {
  if (cfg_.ev_mode != EvMode::kSrv6) {
    err = "udp endpoint: not in SRv6 mode";
    return false;
  }
  if (err = check_srv6_paths(paths); !err.empty()) return false;
  std::vector<std::vector<sockaddr_in6>> carriers(peers_.size());
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    if (!build_carriers(peers_[i].addrs, paths, carriers[i])) {
      err = "udp endpoint: peer " + peers_[i].addrs.front().str() + " has no room for an SRv6 path's uSIDs";
      return false;
    }
  }
  for (std::size_t i = 0; i < peers_.size(); ++i) peers_[i].carriers = std::move(carriers[i]);
  cfg_.srv6.paths = std::move(paths);
  return true;
}

bool UdpEndpoint::srv6_destination(std::uint32_t peer, std::uint32_t plane, std::uint32_t v,
                                   IpAddr& out) const {
  if (cfg_.ev_mode != EvMode::kSrv6 || peer == 0 || peer > peers_.size() || plane >= planes_.size())
    return false;
  const std::size_t npaths = cfg_.srv6.paths.size();
  const sockaddr_in6& c = peers_[peer - 1].carriers[plane * npaths + v % npaths];
  out.family = AF_INET6;
  std::memcpy(out.bytes.data(), &c.sin6_addr, 16);
  return true;
}

void UdpEndpoint::build_srv6(TxSlot& s, std::uint32_t plane, const Peer& peer, std::uint16_t sport) {
  const std::size_t npaths = cfg_.srv6.paths.size();
  s.dst = peer.carriers[plane * npaths + s.pkt.ev.value % npaths];
  s.dst_len = sizeof(sockaddr_in6);
  const std::uint32_t udp_len = 8 + s.pkt.wire_size();
  const std::uint32_t tclass = (std::uint32_t{cfg_.dscp} << 2) | (cfg_.ect ? 2u : 0u);
  std::uint8_t* h = s.ip6udp;
  const std::uint32_t word0 = htonl((6u << 28) | (tclass << 20));  // version, traffic class, label 0
  std::memcpy(h, &word0, 4);
  const std::uint16_t len_be = htons(static_cast<std::uint16_t>(udp_len));
  std::memcpy(h + 4, &len_be, 2);  // IPv6 payload length = the UDP datagram
  h[6] = IPPROTO_UDP;
  h[7] = kHopLimit;
  std::memcpy(h + 8, planes_[plane].addr.bytes.data(), 16);
  std::memcpy(h + 24, &s.dst.sin6_addr, 16);
  std::uint8_t* u = h + 40;
  const std::uint16_t sport_be = htons(sport);
  std::memcpy(u, &sport_be, 2);
  std::memcpy(u + 2, &peer.dst[plane].sin6_port, 2);
  std::memcpy(u + 4, &len_be, 2);
  u[6] = u[7] = 0;
  // Over the FINAL destination: the address the routers leave in the header on arrival.
  const std::span<const std::uint8_t> pieces[] = {{u, 8},
                                                  {s.pkt.header, s.pkt.header_len},
                                                  {s.pkt.payload, s.pkt.payload_len},
                                                  {s.pkt.trailer, s.pkt.trailer_len}};
  const std::uint16_t csum = htons(udp6_checksum(planes_[plane].addr, peer.addrs[plane], pieces));
  std::memcpy(u + 6, &csum, 2);
  s.iov[0] = iovec{s.ip6udp, kIp6Udp};
  s.iov_first = 0;
  ++s.iov_count;
}

}  // namespace mrc::io
