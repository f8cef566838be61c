#include "io/udp_endpoint.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "common/rng.hpp"

namespace mrc::io {
namespace {

constexpr std::uint32_t kFlowLabelMask = 0xFFFFFu;
// From <linux/in6.h>, which clashes with glibc's <netinet/in.h>.
constexpr int kIpv6Flowinfo = 11;       // IPV6_FLOWINFO: receive the flow label as a cmsg
constexpr int kIpv6FlowinfoSend = 33;   // IPV6_FLOWINFO_SEND: take sin6_flowinfo of each sendmsg
constexpr int kIpv6AutoFlowlabel = 70;  // IPV6_AUTOFLOWLABEL
constexpr int kRxRoundsPerPlane = 4;    // recvmmsg batches per plane per round (fairness with TX)
constexpr std::uint32_t kTxRoundsPerCall = 4;
constexpr std::size_t kCmsgSpace = 128;
// UDP GSO limits: the kernel takes at most 64 segments per send (UDP_MAX_SEGMENTS in older
// kernels) and one datagram of at most 64 KiB before segmentation.
constexpr std::uint32_t kMaxGsoSegments = 64;
constexpr std::uint32_t kMaxGsoBytes = 65000;
constexpr std::size_t kGsoCmsgSpace = CMSG_SPACE(sizeof(std::uint16_t));
constexpr std::uint32_t kGroBuffer = 65536;       // a GRO batch is one datagram of up to 64 KiB
constexpr Duration kThreadIdleWait = 10'000'000;  // 10 ms; commands and packets wake us earlier
// A busy endpoint never sleeps in epoll, so it reads the link socket on this period instead: one
// syscall a millisecond, and at most a millisecond of sending into a dead plane.
constexpr Duration kLinkReadPeriod = 1'000'000;
constexpr Duration kLinkQueryPeriod = 1'000'000;    // per plane: send errors ask no more often
constexpr std::uint32_t kEventFdTag = 0xFFFFFFFFu;  // epoll data of the eventfd
constexpr std::uint32_t kNetlinkTag = 0xFFFFFFFEu;  // epoll data of the rtnetlink socket
constexpr std::size_t kNetlinkBuffer = 32768;       // one link message with all attributes is ~1.5 KiB

void set_int(int fd, int level, int opt, int v) {
  (void)::setsockopt(fd, level, opt, &v, sizeof v);
}

void set_buffer(int fd, int force_opt, int opt, int bytes) {
  if (bytes <= 0) return;
  if (::setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) != 0)
    (void)::setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

/// Fills `out` (big enough for either family) with addr:port.
socklen_t make_sockaddr(const IpAddr& a, std::uint16_t port, sockaddr_in6& out) {
  std::memset(&out, 0, sizeof out);
  if (a.family == AF_INET) {
    sockaddr_in s4{};
    s4.sin_family = AF_INET;
    s4.sin_port = htons(port);
    std::memcpy(&s4.sin_addr, a.bytes.data(), 4);
    std::memcpy(&out, &s4, sizeof s4);
    return sizeof s4;
  }
  out.sin6_family = AF_INET6;
  out.sin6_port = htons(port);
  std::memcpy(&out.sin6_addr, a.bytes.data(), 16);
  return sizeof out;
}

std::string errno_text(const char* what, const IpAddr& a, std::uint16_t port) {
  return std::string(what) + " " + a.str() + ":" + std::to_string(port) + ": " + std::strerror(errno);
}

constexpr std::size_t kIp6Udp = 48;  // IPv6 (40) + UDP (8) header built for SRv6 raw sends
constexpr std::uint8_t kHopLimit = 64;

}  // namespace

int interface_of(const IpAddr& a) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  const std::size_t n = a.family == AF_INET ? 4 : 16;
  const std::size_t off =
      a.family == AF_INET ? offsetof(sockaddr_in, sin_addr) : offsetof(sockaddr_in6, sin6_addr);
  int best = 0, best_bits = -1;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != a.family) continue;
    const auto* addr = reinterpret_cast<const std::uint8_t*>(i->ifa_addr) + off;
    int bits = 0;
    bool in = true;
    for (std::size_t k = 0; k < n && in; ++k) {
      const std::uint8_t mask =
          i->ifa_netmask != nullptr ? reinterpret_cast<const std::uint8_t*>(i->ifa_netmask)[off + k] : 0xFF;
      in = ((addr[k] ^ a.bytes[k]) & mask) == 0;
      bits += std::popcount(mask);
    }
    if (std::memcmp(addr, a.bytes.data(), n) == 0) bits = 1000;  // exact beats any prefix
    if (in && bits > best_bits) {
      const unsigned idx = ::if_nametoindex(i->ifa_name);
      if (idx != 0) {
        best = static_cast<int>(idx);
        best_bits = bits;
      }
    }
  }
  ::freeifaddrs(list);
  return best;
}

std::vector<LinkState> parse_link_messages(std::span<const std::uint8_t> bytes) {
  std::vector<LinkState> out;
  std::size_t off = 0;
  while (bytes.size() - off >= sizeof(nlmsghdr)) {
    nlmsghdr h;
    std::memcpy(&h, bytes.data() + off, sizeof h);
    if (h.nlmsg_len < sizeof h || h.nlmsg_len > bytes.size() - off) break;
    if ((h.nlmsg_type == RTM_NEWLINK || h.nlmsg_type == RTM_DELLINK) &&
        h.nlmsg_len >= NLMSG_LENGTH(sizeof(ifinfomsg))) {
      ifinfomsg ifi;
      std::memcpy(&ifi, bytes.data() + off + NLMSG_HDRLEN, sizeof ifi);
      // IFF_RUNNING is the kernel's netif_oper_up (operstate UP or UNKNOWN): it clears with the
      // carrier (IFF_LOWER_UP) and, unlike "operstate == UP", holds on lo and tun devices.
      const unsigned usable = IFF_UP | IFF_RUNNING;
      out.push_back(
          LinkState{ifi.ifi_index, h.nlmsg_type == RTM_NEWLINK && (ifi.ifi_flags & usable) == usable});
    }
    off += NLMSG_ALIGN(h.nlmsg_len);
    if (off > bytes.size()) break;
  }
  return out;
}

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

bool IpAddr::parse(std::string_view text, IpAddr& out) {
  const std::string s(text);
  IpAddr a;
  if (::inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET;
  } else if (::inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET6;
  } else {
    return false;
  }
  out = a;
  return true;
}

namespace {
constexpr std::uint8_t kV4MappedGid[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
}  // namespace

bool IpAddr::from_gid(const std::uint8_t gid[16], int family, IpAddr& out) {
  IpAddr a;
  a.family = family;
  if (family == AF_INET) {
    if (std::memcmp(gid, kV4MappedGid, sizeof kV4MappedGid) != 0) return false;
    std::memcpy(a.bytes.data(), gid + 12, 4);
  } else {
    std::memcpy(a.bytes.data(), gid, 16);
  }
  out = a;
  return true;
}

void IpAddr::to_gid(std::uint8_t gid[16]) const {
  if (family == AF_INET) {
    std::memcpy(gid, kV4MappedGid, sizeof kV4MappedGid);
    std::memcpy(gid + 12, bytes.data(), 4);
  } else {
    std::memcpy(gid, bytes.data(), 16);
  }
}

std::string IpAddr::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family, bytes.data(), buf, sizeof buf);
  return buf;
}

Time UdpEndpoint::now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Time>(ts.tv_sec) * 1'000'000'000ull + static_cast<Time>(ts.tv_nsec);
}

UdpEndpoint::UdpEndpoint(const UdpConfig& cfg)
    : cfg_(cfg),
      impair_(cfg.impair, cfg.max_packet),
      cmds_(cfg.queue_depth),
      completions_(cfg.queue_depth),
      events_(cfg.queue_depth) {}

std::unique_ptr<UdpEndpoint> UdpEndpoint::create(const UdpConfig& cfg, std::string& err) {
  std::unique_ptr<UdpEndpoint> ep(new UdpEndpoint(cfg));
  if (!ep->open(err)) return nullptr;
  return ep;
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

bool UdpEndpoint::open(std::string& err) {
  const std::size_t np = cfg_.planes.size();
  if (np == 0 || np > engine::kMaxPorts) {
    err = "udp endpoint: need 1.." + std::to_string(engine::kMaxPorts) + " plane addresses";
    return false;
  }
  family_ = cfg_.planes[0].family;
  for (const IpAddr& a : cfg_.planes) {
    if (a.family != family_) {
      err = "udp endpoint: all plane addresses must be the same family";
      return false;
    }
  }
  if (cfg_.ev_mode == EvMode::kStev && family_ != AF_INET6) {
    err = "udp endpoint: STEV (flow-label) mode needs IPv6 plane addresses";
    return false;
  }
  if (cfg_.ev_mode == EvMode::kSrv6 && !check_srv6(err)) return false;
  if (cfg_.sport_range == 0 || std::uint32_t{cfg_.sport_base} + cfg_.sport_range > 65536u) {
    err = "udp endpoint: sport_base + sport_range must stay within 1..65535";
    return false;
  }
  if (cfg_.tx_batch == 0 || cfg_.rx_batch == 0 || cfg_.max_packet < 64) {
    err = "udp endpoint: tx_batch, rx_batch must be > 0 and max_packet >= 64";
    return false;
  }
  if (cfg_.gso_burst == 1 || cfg_.gso_burst > kMaxGsoSegments) {
    err = "udp endpoint: gso_burst must be 0 (off) or 2..64";
    return false;
  }
  if (cfg_.gso_burst != 0 && cfg_.ev_mode == EvMode::kSrv6) {
    err = "udp endpoint: GSO is not available in SRv6 mode (raw sockets)";
    return false;
  }
  engine::EndpointConfig ec = cfg_.engine;
  ec.num_ports = static_cast<std::uint32_t>(np);
  if (cfg_.gso_burst != 0) ec.tun.ev_burst = cfg_.gso_burst;
  ep_ = std::make_unique<engine::Endpoint>(ec);
  plane_ctr_.assign(np, PlaneCounters{});

  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  evfd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd_ < 0 || evfd_ < 0) {
    err = std::string("udp endpoint: epoll/eventfd: ") + std::strerror(errno);
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kEventFdTag;
  ::epoll_ctl(epfd_, EPOLL_CTL_ADD, evfd_, &ev);

  planes_.resize(np);
  for (std::size_t i = 0; i < np; ++i) {
    Plane& p = planes_[i];
    p.addr = cfg_.planes[i];
    p.rx_fd = ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p.rx_fd < 0) {
      err = errno_text("udp endpoint: socket for", p.addr, cfg_.port);
      return false;
    }
    if (family_ == AF_INET6) {
      set_int(p.rx_fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
      set_int(p.rx_fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
      if (cfg_.ev_mode == EvMode::kStev) set_int(p.rx_fd, IPPROTO_IPV6, kIpv6Flowinfo, 1);
    } else {
      set_int(p.rx_fd, IPPROTO_IP, IP_RECVTOS, 1);
    }
    set_buffer(p.rx_fd, SO_RCVBUFFORCE, SO_RCVBUF, cfg_.socket_buffer);
    if (cfg_.gso_burst != 0) set_int(p.rx_fd, SOL_UDP, UDP_GRO, 1);
    sockaddr_in6 sa{};
    const socklen_t len = make_sockaddr(p.addr, cfg_.port, sa);
    if (::bind(p.rx_fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0) {
      err = errno_text("udp endpoint: bind", p.addr, cfg_.port);
      return false;
    }
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, p.rx_fd, &ev);

    p.sock_of_sport.assign(65536, -1);  // spread and named (D37) source ports
    p.batch.resize(cfg_.tx_batch);
    p.tx_mm.resize(cfg_.tx_batch);
    p.done.resize(cfg_.tx_batch);
    p.tx_segments.resize(cfg_.tx_batch);
    if (cfg_.gso_burst != 0) {
      p.gso_iov.resize(std::size_t{cfg_.tx_batch} * 3);
      p.gso_cmsg.resize(cfg_.tx_batch * kGsoCmsgSpace);
    }
    const std::size_t rb = cfg_.rx_batch;
    const std::uint32_t rx_size = cfg_.gso_burst != 0 ? kGroBuffer : cfg_.max_packet;
    p.rx_buf.resize(rb * rx_size);
    p.rx_mm.resize(rb);
    p.rx_iov.resize(rb);
    p.rx_names.resize(rb);
    p.rx_cmsg.resize(rb * kCmsgSpace);
    for (std::size_t k = 0; k < rb; ++k) {
      p.rx_iov[k].iov_base = p.rx_buf.data() + k * rx_size;
      p.rx_iov[k].iov_len = rx_size;
      msghdr& h = p.rx_mm[k].msg_hdr;
      h.msg_name = &p.rx_names[k];
      h.msg_iov = &p.rx_iov[k];
      h.msg_iovlen = 1;
      h.msg_control = p.rx_cmsg.data() + k * kCmsgSpace;
    }
  }
  free_mask_ = np == 32 ? 0xFFFFFFFFu : ((1u << np) - 1u);
  return open_link_watch(err);
}

bool UdpEndpoint::open_link_watch(std::string& err) {
  nlfd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (nlfd_ < 0 || ::bind(nlfd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    err = std::string("udp endpoint: rtnetlink socket (plane link watch): ") + std::strerror(errno);
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kNetlinkTag;
  ::epoll_ctl(epfd_, EPOLL_CTL_ADD, nlfd_, &ev);
  nl_buf_.resize(kNetlinkBuffer);
  // The state at open comes through the same path as later changes: a plane whose link is
  // already down starts with its engine port down.
  for (Plane& p : planes_) {
    p.ifindex = interface_of(p.addr);
    if (p.ifindex != 0) request_link(p.ifindex);
  }
  read_links(now());
  return true;
}

bool request_link_state(int fd, int ifindex) {
  struct {
    nlmsghdr h;
    ifinfomsg ifi;
  } req{};
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = RTM_GETLINK;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = ifindex;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  return ::sendto(fd, &req, sizeof req, 0, reinterpret_cast<const sockaddr*>(&kernel), sizeof kernel) ==
         static_cast<ssize_t>(sizeof req);
}

void UdpEndpoint::request_link(int ifindex) {
  // The kernel answers inside this call: the RTM_NEWLINK is queued on nlfd_ when it returns.
  (void)request_link_state(nlfd_, ifindex);
}

void UdpEndpoint::read_links(Time now_ns) {
  for (;;) {
    const ssize_t r = ::recv(nlfd_, nl_buf_.data(), nl_buf_.size(), MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != ENOBUFS) return;
      // The socket overflowed and notifications were lost: ask for every plane's link again.
      for (const Plane& p : planes_)
        if (p.ifindex != 0) request_link(p.ifindex);
      continue;
    }
    for (const LinkState& s : parse_link_messages({nl_buf_.data(), static_cast<std::size_t>(r)}))
      apply_link_state(s, now_ns);
  }
}

void UdpEndpoint::apply_link_state(const LinkState& s, Time now_ns) {
  for (std::uint32_t i = 0; i < planes_.size(); ++i) {
    Plane& p = planes_[i];
    if (p.ifindex == 0 || p.ifindex != s.ifindex || p.link_up == s.up) continue;
    p.link_up = s.up;
    ++(s.up ? plane_ctr_[i].link_up_events : plane_ctr_[i].link_down_events);
    ep_->set_port_up(static_cast<std::uint8_t>(i), s.up, now_ns);
  }
}

void UdpEndpoint::query_suspect_links(Time now_ns) {
  links_suspect_ = false;
  bool asked = false;
  for (Plane& p : planes_) {
    if (!p.link_suspect) continue;
    if (now_ns < p.next_link_query) {
      links_suspect_ = true;  // ask once the period is over
      continue;
    }
    p.link_suspect = false;
    p.next_link_query = now_ns + kLinkQueryPeriod;
    if (p.ifindex == 0) continue;
    request_link(p.ifindex);
    asked = true;
  }
  if (asked) read_links(now_ns);
}

UdpEndpoint::~UdpEndpoint() {
  stop();
  for (Plane& p : planes_) {
    if (p.rx_fd >= 0) ::close(p.rx_fd);
    for (SendSock& s : p.socks)
      if (s.fd >= 0) ::close(s.fd);
  }
  if (epfd_ >= 0) ::close(epfd_);
  if (evfd_ >= 0) ::close(evfd_);
  if (nlfd_ >= 0) ::close(nlfd_);
}

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

// ------------------------------------------------------------------------------------------------
// Transmit

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

std::uint32_t UdpEndpoint::gather(Plane& p, std::uint32_t first, std::int32_t sock) {
  std::uint32_t k = 0, iov_used = 0;
  const TxSlot* head = nullptr;  // first packet of the open message
  std::uint32_t seg = 0, bytes = 0;
  bool closed = true;  // the open message takes no more segments
  for (std::uint32_t j = first; j < p.count; ++j) {
    TxSlot& s = p.batch[j];
    if (p.done[j] || s.sock != sock) continue;
    p.done[j] = 1;
    const std::uint32_t size = s.pkt.wire_size();
    // Join the open message when the kernel cuts it back into the same datagrams: one destination
    // (with its flow label), every segment but the last exactly the first one's size.
    if (!closed && size <= seg && p.tx_segments[k - 1] < cfg_.gso_burst && bytes + size <= kMaxGsoBytes &&
        s.dst_len == head->dst_len && std::memcmp(&s.dst, &head->dst, s.dst_len) == 0) {
      msghdr& h = p.tx_mm[k - 1].msg_hdr;
      if (p.tx_segments[k - 1] == 1) {  // becomes a GSO message: its iovecs move to gso_iov
        std::copy_n(h.msg_iov, h.msg_iovlen, p.gso_iov.data() + iov_used);
        h.msg_iov = p.gso_iov.data() + iov_used;
        iov_used += static_cast<std::uint32_t>(h.msg_iovlen);
        auto* c = reinterpret_cast<cmsghdr*>(p.gso_cmsg.data() + (k - 1) * kGsoCmsgSpace);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
        const auto seg16 = static_cast<std::uint16_t>(seg);
        std::memcpy(CMSG_DATA(c), &seg16, sizeof seg16);
        h.msg_control = c;
        h.msg_controllen = kGsoCmsgSpace;
      }
      std::copy_n(s.iov + s.iov_first, s.iov_count, p.gso_iov.data() + iov_used);
      iov_used += s.iov_count;
      h.msg_iovlen += s.iov_count;
      ++p.tx_segments[k - 1];
      bytes += size;
      closed = size < seg;
      continue;
    }
    msghdr& h = p.tx_mm[k].msg_hdr;
    h.msg_name = &s.dst;
    h.msg_namelen = s.dst_len;
    h.msg_iov = s.iov + s.iov_first;
    h.msg_iovlen = s.iov_count;
    h.msg_control = nullptr;
    h.msg_controllen = 0;
    h.msg_flags = 0;
    p.tx_mm[k].msg_len = 0;
    p.tx_segments[k] = 1;
    ++k;
    head = &s;
    seg = bytes = size;
    closed = cfg_.gso_burst == 0;
  }
  return k;
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

void UdpEndpoint::capture(const IpAddr& src, std::uint16_t sport, const IpAddr& dst, std::uint16_t dport,
                          std::uint32_t flow, int tos, std::span<const std::uint8_t> h,
                          std::span<const std::uint8_t> pl, std::span<const std::uint8_t> tr) {
  FrameInfo f;
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  f.time_ns =
      static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
  const auto conv = [](const IpAddr& a) {
    IpAddress r;
    r.v6 = a.family == AF_INET6;
    r.bytes = a.bytes;
    return r;
  };
  f.src = conv(src);
  f.dst = conv(dst);
  f.src_port = sport;
  f.dst_port = dport;
  f.flow_label = src.family == AF_INET6 ? flow : 0;
  f.dscp = static_cast<std::uint8_t>((tos >> 2) & 0x3F);
  f.ecn = static_cast<std::uint8_t>(tos & 3);
  (void)pcap_->write(f, h, pl, tr);
}

// ------------------------------------------------------------------------------------------------
// Receive

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
    for (std::uint32_t off = 0; off < len; off += gro_size) {
      const std::span<const std::uint8_t> bytes(data + off, std::min(gro_size, len - off));
      ++pc.rx_packets;
      if (pcap_ != nullptr) {
        IpAddr from;
        from.family = src.sin6_family;
        if (from.family == AF_INET)
          std::memcpy(from.bytes.data(),
                      reinterpret_cast<const std::uint8_t*>(&src) + offsetof(sockaddr_in, sin_addr), 4);
        else
          std::memcpy(from.bytes.data(), &src.sin6_addr, 16);
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

// ------------------------------------------------------------------------------------------------
// Progress

std::size_t UdpEndpoint::run_once(Duration timeout, bool threaded) {
  std::unique_lock<std::mutex> direct(direct_mu_, std::defer_lock);
  if (!threaded) {
    direct.lock();                   // released before sleeping
    if (threaded_.load()) return 0;  // start() ran since progress() looked
  }
  std::size_t work = 0;
  Time t = now();
  if (threaded) {
    if (exec_pending_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lk(exec_mu_);
      if (exec_fn_ != nullptr && !exec_done_) {
        (*exec_fn_)(*ep_);
        exec_done_ = true;
        exec_pending_.store(false, std::memory_order_release);
      }
      exec_cv_.notify_all();
    }
    drain_commands(t);
  }
  for (std::uint32_t i = 0; i < planes_.size(); ++i) {
    for (int r = 0; r < kRxRoundsPerPlane; ++r) {
      const std::size_t n = receive_plane(i, t);
      work += n;
      if (n < cfg_.rx_batch) break;
    }
  }
  if (impair_.held() != 0) {
    impair_.release(t, [&](std::span<const std::uint8_t> b, const engine::RxMeta& m) { deliver(b, m, t); });
  }
  t = now();
  if (t >= ep_->next_deadline()) ep_->on_timer(t);
  // Before transmit, so a plane found down this round gets no more packets.
  if (links_suspect_) query_suspect_links(t);
  if (t >= next_link_read_) {
    read_links(t);
    next_link_read_ = t + kLinkReadPeriod;
  }
  work += transmit(t);
  if (threaded) export_completions();
  if (work != 0 || timeout == 0) return work;

  Duration wait = timeout;
  const Time dl = std::min(ep_->next_deadline(), impair_.next_release());
  if (dl != kNever) wait = dl <= t ? 0 : std::min<Duration>(wait, dl - t);
  if (!threaded) direct.unlock();
  if (threaded) {
    sleeping_.store(true, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (cmds_.ready() || have_pending_cmd_ || exec_pending_.load() || stop_.load()) wait = 0;
  }
  if (wait > 0) {
    timespec ts{static_cast<time_t>(wait / 1'000'000'000ull), static_cast<long>(wait % 1'000'000'000ull)};
    epoll_event evs[8];
    const int n = ::epoll_pwait2(epfd_, evs, 8, &ts, nullptr);
    if (!threaded) direct.lock();  // a link change reaches the engine
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u32 == kEventFdTag) {
        std::uint64_t v = 0;
        (void)!::read(evfd_, &v, sizeof v);
      } else if (evs[i].data.u32 == kNetlinkTag) {
        read_links(now());
      }
    }
  }
  if (threaded) sleeping_.store(false, std::memory_order_relaxed);
  return 0;
}

std::size_t UdpEndpoint::progress(Duration timeout) {
  if (threaded_.load(std::memory_order_relaxed)) return 0;
  return run_once(timeout, false);
}

void UdpEndpoint::complete_cmd(const Cmd& c, engine::WcStatus status) {
  engine::Completion cp;
  cp.wr_id = c.wr.wr_id;
  cp.qpn = c.qpn;
  cp.status = status;
  cp.is_recv = c.type == CmdType::kRecv;
  cp.opcode = cp.is_recv ? engine::WcOpcode::kRecvRdmaWithImm
                         : (c.wr.with_imm ? engine::WcOpcode::kRdmaWriteImm : engine::WcOpcode::kRdmaWrite);
  ep_->push_completion(cp);
}

int UdpEndpoint::apply_cmd(const Cmd& c, Time now_ns) {
  const int rc =
      c.type == CmdType::kSend ? ep_->post_send(c.qpn, c.wr, now_ns) : ep_->post_recv(c.qpn, c.wr.wr_id);
  if (rc == 0 || rc == ENOMEM || ep_->qp_state(c.qpn) != engine::QpState::kError) return rc;
  // Verbs: a WR posted to a QP in ERROR is accepted and completes flushed (IBV_WC_WR_FLUSH_ERR),
  // after the flushes of the WRs it held when it failed (the engine queued those first).
  complete_cmd(c, engine::WcStatus::kFlushed);
  return 0;
}

void UdpEndpoint::drain_commands(Time now_ns) {
  auto apply = [&](const Cmd& c) {
    const int rc = apply_cmd(c, now_ns);
    if (rc == ENOMEM) return false;  // queue full: retry later, keeping the order
    if (rc != 0) {
      ++cmd_refused_;
      complete_cmd(c, engine::WcStatus::kLocalProtectionError);
    }
    return true;
  };
  if (have_pending_cmd_) {
    if (!apply(pending_cmd_)) return;
    have_pending_cmd_ = false;
  }
  while (cmds_.pop(pending_cmd_)) {
    if (!apply(pending_cmd_)) {
      have_pending_cmd_ = true;
      return;
    }
  }
}

void UdpEndpoint::export_completions() {
  engine::Completion c;
  while (!completions_.full() && ep_->poll_completion(c)) completions_.push(c);
  engine::Event e;
  while (!events_.full() && ep_->poll_event(e)) events_.push(e);
  if (export_hook_) export_hook_();
}

void UdpEndpoint::wake() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    const std::uint64_t one = 1;
    (void)!::write(evfd_, &one, sizeof one);
  }
}

int UdpEndpoint::post_send(std::uint32_t qpn, const engine::SendWr& wr) {
  Cmd c;
  c.type = CmdType::kSend;
  c.qpn = qpn;
  c.wr = wr;
  if (!threaded_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lk(direct_mu_);
    if (!threaded_.load(std::memory_order_relaxed))
      return apply_cmd(c, now());  // start() flips it under the lock
  }
  if (!cmds_.push(c)) return EAGAIN;
  wake();
  return 0;
}

int UdpEndpoint::post_recv(std::uint32_t qpn, std::uint64_t wr_id) {
  Cmd c;
  c.type = CmdType::kRecv;
  c.qpn = qpn;
  c.wr.wr_id = wr_id;
  if (!threaded_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lk(direct_mu_);
    if (!threaded_.load(std::memory_order_relaxed))
      return apply_cmd(c, now());  // start() flips it under the lock
  }
  if (!cmds_.push(c)) return EAGAIN;
  wake();
  return 0;
}

bool UdpEndpoint::poll_completion(engine::Completion& out) {
  if (completions_.pop(out)) return true;
  if (threaded_.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lk(direct_mu_);
  return !threaded_.load(std::memory_order_relaxed) && ep_->poll_completion(out);
}

bool UdpEndpoint::poll_event(engine::Event& out) {
  if (events_.pop(out)) return true;
  if (threaded_.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lk(direct_mu_);
  return !threaded_.load(std::memory_order_relaxed) && ep_->poll_event(out);
}

void UdpEndpoint::execute(const std::function<void(engine::Endpoint&)>& fn) {
  {
    // Checked under the lock: start() flips the mode under it too.
    std::lock_guard<std::mutex> lk(direct_mu_);
    if (!threaded_.load()) {
      fn(*ep_);
      return;
    }
  }
  std::unique_lock<std::mutex> lk(exec_mu_);
  exec_cv_.wait(lk, [&] { return exec_fn_ == nullptr; });
  exec_fn_ = &fn;
  exec_done_ = false;
  exec_pending_.store(true, std::memory_order_release);
  if (!threaded_.load()) {
    // stop() finished between our check and the post: nobody serves the request but us.
    std::lock_guard<std::mutex> d(direct_mu_);
    fn(*ep_);
    exec_done_ = true;
    exec_pending_.store(false, std::memory_order_release);
  }
  const std::uint64_t one = 1;
  (void)!::write(evfd_, &one, sizeof one);
  exec_cv_.wait(lk, [&] { return exec_done_; });
  exec_fn_ = nullptr;
  exec_cv_.notify_all();
}

bool UdpEndpoint::start() {
  std::lock_guard<std::mutex> lk(direct_mu_);
  if (threaded_.load()) return false;
  stop_.store(false);
  threaded_.store(true);
  thread_ = std::thread([this] { thread_main(); });
  return true;
}

void UdpEndpoint::stop() {
  if (!threaded_.load()) return;
  stop_.store(true);
  const std::uint64_t one = 1;
  (void)!::write(evfd_, &one, sizeof one);
  thread_.join();
  {
    std::lock_guard<std::mutex> d(direct_mu_);
    threaded_.store(false);
  }
  // A request posted to the thread after its last round is served here.
  std::lock_guard<std::mutex> lk(exec_mu_);
  if (exec_fn_ != nullptr && !exec_done_) {
    std::lock_guard<std::mutex> d(direct_mu_);
    (*exec_fn_)(*ep_);
    exec_done_ = true;
    exec_pending_.store(false, std::memory_order_release);
    exec_cv_.notify_all();
  }
}

void UdpEndpoint::thread_main() {
  while (!stop_.load(std::memory_order_relaxed)) run_once(kThreadIdleWait, true);
  drain_commands(now());
  export_completions();
}

std::vector<EvTxCounter> UdpEndpoint::ev_tx_counters() const {
  std::vector<EvTxCounter> out;
  for (std::size_t i = 0; i < planes_.size(); ++i)
    for (const SendSock& s : planes_[i].socks)
      out.push_back(EvTxCounter{static_cast<std::uint8_t>(i), s.sport, s.packets});
  return out;
}

}  // namespace mrc::io
