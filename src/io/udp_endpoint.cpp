// UdpEndpoint: the configuration checks, the sockets and epoll set it opens, and what it closes.
// Its other jobs have files of their own (src/io/README.md).
#include "io/udp_endpoint.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "io/udp_common.hpp"

namespace mrc::io {

using namespace detail;

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
  rocev2_icrc_ = cfg_.rocev2_icrc && cfg_.engine.icrc;
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

std::vector<EvTxCounter> UdpEndpoint::ev_tx_counters() const {
  std::vector<EvTxCounter> out;
  for (std::size_t i = 0; i < planes_.size(); ++i)
    for (const SendSock& s : planes_[i].socks)
      out.push_back(EvTxCounter{static_cast<std::uint8_t>(i), s.sport, s.packets});
  return out;
}

}  // namespace mrc::io
