// UdpEndpoint's peers: their per-plane destinations, the source-address lookup of every received
// datagram, and the EV value a datagram's source port (and flow label) stands for (D37).
#include <cstddef>

#include "common/rng.hpp"
#include "io/udp_common.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

using namespace detail;

std::uint32_t UdpEndpoint::add_peer(const std::vector<IpAddr>& addrs, std::uint16_t port) {
  if (addrs.size() != planes_.size()) return 0;
  Peer peer;
  peer.addrs = addrs;
  peer.dst.resize(addrs.size());
  peer.dst_len.resize(addrs.size());
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    if (addrs[i].family != family_) return 0;
    peer.dst_len[i] = make_sockaddr(addrs[i], port != 0 ? port : cfg_.port, peer.dst[i]);
  }
  if (cfg_.ev_mode == EvMode::kSrv6 && !build_carriers(addrs, cfg_.srv6.paths, peer.carriers)) return 0;
  peers_.push_back(std::move(peer));
  const auto id = static_cast<std::uint32_t>(peers_.size());
  for (std::uint32_t i = 0; i < addrs.size(); ++i) peer_ids_.insert_or_assign(peer_key(i, addrs[i]), id);
  return id;
}

UdpEndpoint::PeerKey UdpEndpoint::peer_key(std::uint32_t plane, const IpAddr& a) {
  PeerKey k{plane, {}};
  std::memcpy(k.addr.data(), a.bytes.data(), a.family == AF_INET ? 4 : 16);
  return k;
}

std::size_t UdpEndpoint::PeerKeyHash::operator()(const PeerKey& k) const noexcept {
  std::uint64_t lo, hi;
  std::memcpy(&lo, k.addr.data(), 8);
  std::memcpy(&hi, k.addr.data() + 8, 8);
  return static_cast<std::size_t>(mix64(lo ^ mix64(hi ^ k.plane)));
}

std::uint32_t UdpEndpoint::ev_of_wire(std::uint16_t sport, std::uint32_t flow_label) const {
  const std::uint32_t off = std::uint32_t{sport} - cfg_.sport_base;  // wraps to huge below the base
  const bool spread_port = off < cfg_.sport_range;
  if (cfg_.ev_mode == EvMode::kStev) {
    const std::uint32_t label = flow_label_of(flow_label);
    if (spread_port && off == label % cfg_.sport_range) return label;
    return std::uint32_t{sport} << 16 | label;
  }
  return spread_port ? off : std::uint32_t{sport} << 16;
}

std::uint32_t UdpEndpoint::peer_at(std::uint32_t plane, const IpAddr& addr) const {
  if (addr.family != family_) return 0;
  const auto it = peer_ids_.find(peer_key(plane, addr));
  return it == peer_ids_.end() ? 0 : it->second;
}

std::uint32_t UdpEndpoint::lookup_peer(std::uint32_t plane, const sockaddr_in6& src) const {
  PeerKey k{plane, {}};
  if (src.sin6_family == AF_INET && family_ == AF_INET) {
    std::memcpy(k.addr.data(), reinterpret_cast<const std::uint8_t*>(&src) + offsetof(sockaddr_in, sin_addr),
                4);
  } else if (src.sin6_family == AF_INET6 && family_ == AF_INET6) {
    std::memcpy(k.addr.data(), &src.sin6_addr, 16);
  } else {
    return kUnknownPeer;
  }
  const auto it = peer_ids_.find(k);
  return it == peer_ids_.end() ? kUnknownPeer : it->second;
}

}  // namespace mrc::io
