// UdpEndpoint transmit: send sockets per (plane, source port), the per-plane batch of zero-copy
// iovecs, and one sendmmsg per socket per flush. GSO merging is udp_gso.cpp.
#include <netinet/ip.h>
#include <unistd.h>

#include <algorithm>

#include "io/udp_common.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

using namespace detail;

std::int32_t UdpEndpoint::send_socket(std::uint32_t plane, std::uint16_t sport) {
  Plane& p = planes_[plane];
  const std::size_t idx = sport;
  const std::int32_t have = p.sock_of_sport[idx];
  if (have != -1) return have;
  // First use of this EV's source port on this plane: one socket, kept for the endpoint's life.
  const bool raw = cfg_.ev_mode == EvMode::kSrv6;
  const int fd = raw ? ::socket(AF_INET6, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_RAW)
                     : ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0;
  if (ok && raw) {
    // IPPROTO_RAW implies IPV6_HDRINCL: addresses, traffic class and ports are in our header.
    set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, cfg_.socket_buffer);
  } else if (ok) {
    const int tos = (cfg_.dscp << 2) | (cfg_.ect ? 2 : 0);
    if (family_ == AF_INET6) {
      set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
      set_int(fd, IPPROTO_IPV6, IPV6_TCLASS, tos);
      if (cfg_.ev_mode == EvMode::kStev) {
        set_int(fd, IPPROTO_IPV6, kIpv6FlowinfoSend, 1);
        set_int(fd, IPPROTO_IPV6, kIpv6AutoFlowlabel, 0);  // label 0 must stay 0, not become a hash
      }
    } else {
      set_int(fd, IPPROTO_IP, IP_TOS, tos);
    }
    // DF, never fragment: a non-first fragment has no UDP ports, so ECMP would hash all of them onto
    // one path, and one lost fragment loses the packet. Too big a datagram fails with EMSGSIZE.
    if (family_ == AF_INET6)
      set_int(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
    else
      set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
    set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, cfg_.socket_buffer);
    set_int(fd, SOL_SOCKET, SO_RCVBUF, 4096);  // nothing is ever sent to a source port
    sockaddr_in6 sa{};
    const socklen_t len = make_sockaddr(p.addr, sport, sa);
    ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), len) == 0;
  }
  if (!ok) {
    if (fd >= 0) ::close(fd);
    p.sock_of_sport[idx] = -2;
    return -2;
  }
  p.socks.push_back(SendSock{fd, sport, 0});
  ++plane_ctr_[plane].send_sockets;
  p.sock_of_sport[idx] = static_cast<std::int32_t>(p.socks.size() - 1);
  return p.sock_of_sport[idx];
}

std::uint32_t UdpEndpoint::icrc_xor(const std::uint8_t* src, const std::uint8_t* dst, std::uint16_t sport,
                                    std::uint16_t dport, std::size_t mrc_len) const {
  std::uint8_t pre[wire::kMaskedIpv6UdpSize];
  if (family_ == AF_INET6) {
    wire::masked_ipv6_udp(pre, src, dst, sport, dport, mrc_len);
    return wire::icrc_prefix_xor(pre, mrc_len - wire::kIcrcSize);
  }
  // IPv4 ID 0: what Linux sends from an unconnected socket with DF (IP_PMTUDISC_DO); the receiver
  // accepts any ID, which it cannot see.
  wire::masked_ipv4_udp(pre, src, dst, sport, dport, mrc_len, 0);
  return wire::icrc_prefix_xor({pre, wire::kMaskedIpv4UdpSize}, mrc_len - wire::kIcrcSize);
}

void UdpEndpoint::enqueue(const engine::TxPacket& pkt) {
  const std::uint32_t plane = pkt.port;
  if (plane >= planes_.size()) return;
  PlaneCounters& pc = plane_ctr_[plane];
  if (pkt.peer == 0 || pkt.peer > peers_.size()) {
    ++pc.tx_no_route;
    return;
  }
  const std::uint16_t sport = sport_of(pkt.ev.value);
  const std::int32_t sock = send_socket(plane, sport);
  if (sock < 0) {
    ++pc.tx_dropped;
    return;
  }
  Plane& p = planes_[plane];
  TxSlot& s = p.batch[p.count];
  s.pkt = pkt;
  s.sock = sock;
  const Peer& peer = peers_[pkt.peer - 1];
  // Over the peer's final address in SRv6 mode too: the one the packet arrives with.
  if (rocev2_icrc_)
    s.pkt.xor_icrc(icrc_xor(p.addr.bytes.data(), peer.addrs[plane].bytes.data(), sport,
                            ntohs(peer.dst[plane].sin6_port), s.pkt.wire_size()));
  s.dst = peer.dst[plane];
  s.dst_len = peer.dst_len[plane];
  if (cfg_.ev_mode == EvMode::kStev) s.dst.sin6_flowinfo = htonl(flow_label_of(pkt.ev.value));
  s.iov[1] = iovec{s.pkt.header, s.pkt.header_len};
  s.iov[2] = iovec{const_cast<std::uint8_t*>(s.pkt.payload), s.pkt.payload_len};
  s.iov[3] = iovec{s.pkt.trailer, s.pkt.trailer_len};
  s.iov_first = 1;
  s.iov_count = s.pkt.trailer_len ? 3 : 2;
  if (cfg_.ev_mode == EvMode::kSrv6) build_srv6(s, plane, peer, sport);
  if (pcap_ != nullptr) {
    IpAddr to = peer.addrs[plane];
    if (cfg_.ev_mode == EvMode::kSrv6)
      std::memcpy(to.bytes.data(), &s.dst.sin6_addr, 16);  // the capture shows the carrier
    capture(p.addr, sport, to, ntohs(peer.dst[plane].sin6_port),
            cfg_.ev_mode == EvMode::kStev ? flow_label_of(pkt.ev.value) : 0,
            (cfg_.dscp << 2) | (cfg_.ect ? 2 : 0), {s.pkt.header, s.pkt.header_len},
            {s.pkt.payload, s.pkt.payload_len}, {s.pkt.trailer, s.pkt.trailer_len});
  }
  if (++p.count == cfg_.tx_batch) free_mask_ &= ~(1u << plane);
}

void UdpEndpoint::flush(std::uint32_t plane) {
  Plane& p = planes_[plane];
  PlaneCounters& pc = plane_ctr_[plane];
  if (p.count == 0) return;
  ++pc.tx_batches;
  std::fill(p.done.begin(), p.done.begin() + p.count, std::uint8_t{0});
  for (std::uint32_t i = 0; i < p.count; ++i) {
    if (p.done[i]) continue;
    // One sendmmsg per socket: gather this socket's packets of the batch, in order.
    const std::int32_t sock = p.batch[i].sock;
    const std::uint32_t k = gather(p, i, sock);
    SendSock& ss = p.socks[static_cast<std::size_t>(sock)];
    std::uint32_t sent = 0, packets = 0;
    while (sent < k) {
      const int r = ::sendmmsg(ss.fd, p.tx_mm.data() + sent, k - sent, 0);
      ++pc.tx_syscalls;
      if (r < 0) {
        if (errno == EINTR) continue;
        for (std::uint32_t m = sent; m < k; ++m) pc.tx_dropped += p.tx_segments[m];  // recovered like a loss
        if (errno == ENETUNREACH || errno == ENETDOWN) {
          p.link_suspect = true;  // maybe our link went down: ask (not a verdict; a route can be missing)
          links_suspect_ = true;
        }
        break;
      }
      for (std::uint32_t m = sent; m < sent + static_cast<std::uint32_t>(r); ++m) {
        pc.tx_bytes += p.tx_mm[m].msg_len;
        packets += p.tx_segments[m];
        pc.tx_gso_messages += p.tx_segments[m] > 1;
      }
      sent += static_cast<std::uint32_t>(r);
    }
    pc.tx_packets += packets;
    ss.packets += packets;
  }
  p.count = 0;
  free_mask_ |= 1u << plane;
}

std::size_t UdpEndpoint::transmit(Time now) {
  std::size_t n = 0;
  const std::size_t budget = std::size_t{cfg_.tx_batch} * planes_.size() * kTxRoundsPerCall;
  while (n < budget) {
    if (free_mask_ == 0) {
      for (std::uint32_t i = 0; i < planes_.size(); ++i) flush(i);
    }
    if (!ep_->poll_tx(staging_, now, free_mask_)) break;
    enqueue(staging_);
    ++n;
  }
  for (std::uint32_t i = 0; i < planes_.size(); ++i) flush(i);
  return n;
}

}  // namespace mrc::io
