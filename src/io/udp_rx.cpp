// UdpEndpoint receive: recvmmsg per plane, the TOS / traffic class, flow label and GRO cmsgs, GRO
// batches cut back into datagrams, then capture, impairment and the engine.
#include <algorithm>
#include <cstddef>

#include "io/udp_common.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

using namespace detail;

void UdpEndpoint::deliver(std::span<const std::uint8_t> pkt, const engine::RxMeta& meta, Time now) {
  ep_->receive(pkt, meta, now);
}

std::size_t UdpEndpoint::receive_plane(std::uint32_t plane, Time now) {
  Plane& p = planes_[plane];
  PlaneCounters& pc = plane_ctr_[plane];
  for (std::size_t k = 0; k < p.rx_mm.size(); ++k) {
    msghdr& h = p.rx_mm[k].msg_hdr;
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_controllen = kCmsgSpace;
    h.msg_flags = 0;
  }
  const int n =
      ::recvmmsg(p.rx_fd, p.rx_mm.data(), static_cast<unsigned>(p.rx_mm.size()), MSG_DONTWAIT, nullptr);
  ++pc.rx_syscalls;
  if (n <= 0) return 0;
  for (int k = 0; k < n; ++k) {
    const msghdr& h = p.rx_mm[static_cast<std::size_t>(k)].msg_hdr;
    const std::uint32_t len = p.rx_mm[static_cast<std::size_t>(k)].msg_len;
    if (h.msg_flags & MSG_TRUNC) {
      ++pc.rx_truncated;
      continue;
    }
    pc.rx_bytes += len;
    int tos = 0;
    std::uint32_t flowinfo = 0;
    std::uint32_t gro_size = len;  // a GRO batch: back-to-back datagrams of this size (last shorter)
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
        std::uint8_t b = 0;
        std::memcpy(&b, CMSG_DATA(c), 1);
        tos = b;
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        std::memcpy(&tos, CMSG_DATA(c), sizeof tos);
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == kIpv6Flowinfo) {
        std::uint32_t be = 0;
        std::memcpy(&be, CMSG_DATA(c), sizeof be);
        flowinfo = ntohl(be);
      } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int g = 0;
        std::memcpy(&g, CMSG_DATA(c), sizeof g);
        if (g > 0) gro_size = static_cast<std::uint32_t>(g);
      }
    }
    const sockaddr_in6& src = p.rx_names[static_cast<std::size_t>(k)];
    engine::RxMeta meta;
    meta.port = static_cast<std::uint8_t>(plane);
    meta.peer = lookup_peer(plane, src);
    if (meta.peer == kUnknownPeer) ++pc.rx_unknown_source;
    // sin_port and sin6_port sit at the same offset.
    const std::uint16_t sport = ntohs(src.sin6_port);
    meta.ev = ev_of_wire(sport, flowinfo & kFlowLabelMask);
    meta.ecn_ce = (tos & 3) == 3;
    if (meta.ecn_ce) ++pc.rx_ecn_ce;
    const int dscp = tos >> 2;
    meta.trimmed = dscp == cfg_.dscp_trimmed;
    meta.trimmed_lasthop = dscp == cfg_.dscp_trimmed_lasthop;
    if (meta.trimmed || meta.trimmed_lasthop) ++pc.rx_trimmed;
    const auto* data = static_cast<const std::uint8_t*>(p.rx_iov[static_cast<std::size_t>(k)].iov_base);
    if (gro_size < len) pc.rx_gro_packets += (len + gro_size - 1) / gro_size;
    const std::uint8_t* from_addr = reinterpret_cast<const std::uint8_t*>(&src.sin6_addr);
    if (src.sin6_family == AF_INET)
      from_addr = reinterpret_cast<const std::uint8_t*>(&src) + offsetof(sockaddr_in, sin_addr);
    meta.icrc_any_ipv4_id = family_ == AF_INET;
    for (std::uint32_t off = 0; off < len; off += gro_size) {
      const std::span<const std::uint8_t> bytes(data + off, std::min(gro_size, len - off));
      ++pc.rx_packets;
      // A trimmed packet has no ICRC; an authenticated one's tag ignores the XOR.
      const bool has_icrc = rocev2_icrc_ && !meta.trimmed && !meta.trimmed_lasthop && bytes.size() >= 16;
      meta.icrc_xor = has_icrc ? icrc_xor(from_addr, p.addr.bytes.data(), sport, cfg_.port, bytes.size()) : 0;
      if (pcap_ != nullptr) {
        IpAddr from;
        from.family = src.sin6_family;
        std::memcpy(from.bytes.data(), from_addr, from.family == AF_INET ? 4 : 16);
        capture(from, sport, p.addr, cfg_.port, flowinfo & kFlowLabelMask, tos, bytes, {}, {});
      }
      if (impair_.enabled()) {
        impair_.on_packet(bytes, meta, now, [&](std::span<const std::uint8_t> b, const engine::RxMeta& m) {
          deliver(b, m, now);
        });
      } else {
        deliver(bytes, meta, now);
      }
    }
  }
  return static_cast<std::size_t>(n);
}

}  // namespace mrc::io
