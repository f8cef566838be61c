#include "io/udp_endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
constexpr Duration kThreadIdleWait = 10'000'000;  // 10 ms; commands and packets wake us earlier

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

}  // namespace

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
  if (cfg_.sport_range == 0 || std::uint32_t{cfg_.sport_base} + cfg_.sport_range > 65536u) {
    err = "udp endpoint: sport_base + sport_range must stay within 1..65535";
    return false;
  }
  if (cfg_.tx_batch == 0 || cfg_.rx_batch == 0 || cfg_.max_packet < 64) {
    err = "udp endpoint: tx_batch, rx_batch must be > 0 and max_packet >= 64";
    return false;
  }
  engine::EndpointConfig ec = cfg_.engine;
  ec.num_ports = static_cast<std::uint32_t>(np);
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
  ev.data.u32 = 0xFFFFFFFFu;
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
    sockaddr_in6 sa{};
    const socklen_t len = make_sockaddr(p.addr, cfg_.port, sa);
    if (::bind(p.rx_fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0) {
      err = errno_text("udp endpoint: bind", p.addr, cfg_.port);
      return false;
    }
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, p.rx_fd, &ev);

    p.sock_of_sport.assign(cfg_.sport_range, -1);
    p.batch.resize(cfg_.tx_batch);
    p.tx_mm.resize(cfg_.tx_batch);
    p.done.resize(cfg_.tx_batch);
    const std::size_t rb = cfg_.rx_batch;
    p.rx_buf.resize(rb * cfg_.max_packet);
    p.rx_mm.resize(rb);
    p.rx_iov.resize(rb);
    p.rx_names.resize(rb);
    p.rx_cmsg.resize(rb * kCmsgSpace);
    for (std::size_t k = 0; k < rb; ++k) {
      p.rx_iov[k].iov_base = p.rx_buf.data() + k * cfg_.max_packet;
      p.rx_iov[k].iov_len = cfg_.max_packet;
      msghdr& h = p.rx_mm[k].msg_hdr;
      h.msg_name = &p.rx_names[k];
      h.msg_iov = &p.rx_iov[k];
      h.msg_iovlen = 1;
      h.msg_control = p.rx_cmsg.data() + k * kCmsgSpace;
    }
  }
  free_mask_ = np == 32 ? 0xFFFFFFFFu : ((1u << np) - 1u);
  return true;
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
  peers_.push_back(std::move(peer));
  return static_cast<std::uint32_t>(peers_.size());
}

std::uint32_t UdpEndpoint::lookup_peer(std::uint32_t plane, const sockaddr_in6& src) const {
  const std::uint8_t* a = nullptr;
  std::size_t n = 0;
  if (src.sin6_family == AF_INET && family_ == AF_INET) {
    a = reinterpret_cast<const std::uint8_t*>(&src) + offsetof(sockaddr_in, sin_addr);
    n = 4;
  } else if (src.sin6_family == AF_INET6 && family_ == AF_INET6) {
    a = reinterpret_cast<const std::uint8_t*>(&src.sin6_addr);
    n = 16;
  } else {
    return kUnknownPeer;
  }
  for (std::size_t i = 0; i < peers_.size(); ++i)
    if (std::memcmp(peers_[i].addrs[plane].bytes.data(), a, n) == 0) return static_cast<std::uint32_t>(i + 1);
  return kUnknownPeer;
}

// ------------------------------------------------------------------------------------------------
// Transmit

std::int32_t UdpEndpoint::send_socket(std::uint32_t plane, std::uint16_t sport) {
  Plane& p = planes_[plane];
  const std::size_t idx = sport - cfg_.sport_base;
  const std::int32_t have = p.sock_of_sport[idx];
  if (have != -1) return have;
  // First use of this EV's source port on this plane: one socket, kept for the endpoint's life.
  const int fd = ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0;
  if (ok) {
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
  const std::int32_t sock = send_socket(plane, sport_of(pkt.ev.value));
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
  if (cfg_.ev_mode == EvMode::kStev) s.dst.sin6_flowinfo = htonl(pkt.ev.value & kFlowLabelMask);
  s.iov[0] = iovec{s.pkt.header, s.pkt.header_len};
  s.iov[1] = iovec{const_cast<std::uint8_t*>(s.pkt.payload), s.pkt.payload_len};
  s.iov[2] = iovec{s.pkt.trailer, s.pkt.trailer_len};
  if (pcap_ != nullptr)
    capture(p.addr, p.socks[static_cast<std::size_t>(sock)].sport, peer.addrs[plane], ntohs(s.dst.sin6_port),
            cfg_.ev_mode == EvMode::kStev ? (pkt.ev.value & kFlowLabelMask) : 0,
            (cfg_.dscp << 2) | (cfg_.ect ? 2 : 0), {s.pkt.header, s.pkt.header_len},
            {s.pkt.payload, s.pkt.payload_len}, {s.pkt.trailer, s.pkt.trailer_len});
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
    std::uint32_t k = 0;
    for (std::uint32_t j = i; j < p.count; ++j) {
      TxSlot& s = p.batch[j];
      if (p.done[j] || s.sock != sock) continue;
      p.done[j] = 1;
      msghdr& h = p.tx_mm[k].msg_hdr;
      h.msg_name = &s.dst;
      h.msg_namelen = s.dst_len;
      h.msg_iov = s.iov;
      h.msg_iovlen = s.pkt.trailer_len ? 3 : 2;
      h.msg_control = nullptr;
      h.msg_controllen = 0;
      h.msg_flags = 0;
      p.tx_mm[k].msg_len = 0;
      ++k;
    }
    SendSock& ss = p.socks[static_cast<std::size_t>(sock)];
    std::uint32_t sent = 0;
    while (sent < k) {
      const int r = ::sendmmsg(ss.fd, p.tx_mm.data() + sent, k - sent, 0);
      ++pc.tx_syscalls;
      if (r < 0) {
        if (errno == EINTR) continue;
        pc.tx_dropped += k - sent;  // the engine recovers it like a network loss
        break;
      }
      for (int m = 0; m < r; ++m) pc.tx_bytes += p.tx_mm[sent + static_cast<std::uint32_t>(m)].msg_len;
      sent += static_cast<std::uint32_t>(r);
    }
    pc.tx_packets += sent;
    ss.packets += sent;
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
    ++pc.rx_packets;
    pc.rx_bytes += len;
    int tos = 0;
    std::uint32_t flowinfo = 0;
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
      }
    }
    const sockaddr_in6& src = p.rx_names[static_cast<std::size_t>(k)];
    engine::RxMeta meta;
    meta.port = static_cast<std::uint8_t>(plane);
    meta.peer = lookup_peer(plane, src);
    if (meta.peer == kUnknownPeer) ++pc.rx_unknown_source;
    // sin_port and sin6_port sit at the same offset.
    const std::uint16_t sport = ntohs(src.sin6_port);
    if (cfg_.ev_mode == EvMode::kStev) {
      meta.ev = flowinfo & kFlowLabelMask;
    } else {
      meta.ev = sport >= cfg_.sport_base && sport - cfg_.sport_base < cfg_.sport_range
                    ? static_cast<std::uint32_t>(sport - cfg_.sport_base)
                    : sport;
    }
    meta.ecn_ce = (tos & 3) == 3;
    if (meta.ecn_ce) ++pc.rx_ecn_ce;
    const int dscp = tos >> 2;
    meta.trimmed = dscp == cfg_.dscp_trimmed;
    meta.trimmed_lasthop = dscp == cfg_.dscp_trimmed_lasthop;
    if (meta.trimmed || meta.trimmed_lasthop) ++pc.rx_trimmed;
    const std::span<const std::uint8_t> bytes(
        static_cast<const std::uint8_t*>(p.rx_iov[static_cast<std::size_t>(k)].iov_base), len);
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
  return static_cast<std::size_t>(n);
}

// ------------------------------------------------------------------------------------------------
// Progress

std::size_t UdpEndpoint::run_once(Duration timeout, bool threaded) {
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
  work += transmit(t);
  if (threaded) export_completions();
  if (work != 0 || timeout == 0) return work;

  Duration wait = timeout;
  const Time dl = std::min(ep_->next_deadline(), impair_.next_release());
  if (dl != kNever) wait = dl <= t ? 0 : std::min<Duration>(wait, dl - t);
  if (threaded) {
    sleeping_.store(true, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (cmds_.ready() || have_pending_cmd_ || exec_pending_.load() || stop_.load()) wait = 0;
  }
  if (wait > 0) {
    timespec ts{static_cast<time_t>(wait / 1'000'000'000ull), static_cast<long>(wait % 1'000'000'000ull)};
    epoll_event evs[8];
    const int n = ::epoll_pwait2(epfd_, evs, 8, &ts, nullptr);
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u32 == 0xFFFFFFFFu) {
        std::uint64_t v = 0;
        (void)!::read(evfd_, &v, sizeof v);
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

void UdpEndpoint::drain_commands(Time now_ns) {
  auto apply = [&](const Cmd& c) {
    const int rc =
        c.type == CmdType::kSend ? ep_->post_send(c.qpn, c.wr, now_ns) : ep_->post_recv(c.qpn, c.wr.wr_id);
    if (rc == ENOMEM) return false;  // queue full: retry later, keeping the order
    if (rc != 0) {
      ++cmd_refused_;
      engine::Completion cp;
      cp.wr_id = c.wr.wr_id;
      cp.qpn = c.qpn;
      cp.status = engine::WcStatus::kLocalProtectionError;
      cp.is_recv = c.type == CmdType::kRecv;
      cp.opcode = cp.is_recv
                      ? engine::WcOpcode::kRecvRdmaWithImm
                      : (c.wr.with_imm ? engine::WcOpcode::kRdmaWriteImm : engine::WcOpcode::kRdmaWrite);
      ep_->push_completion(cp);
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
}

void UdpEndpoint::wake() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    const std::uint64_t one = 1;
    (void)!::write(evfd_, &one, sizeof one);
  }
}

int UdpEndpoint::post_send(std::uint32_t qpn, const engine::SendWr& wr) {
  if (!threaded_.load(std::memory_order_relaxed)) return ep_->post_send(qpn, wr, now());
  Cmd c;
  c.type = CmdType::kSend;
  c.qpn = qpn;
  c.wr = wr;
  if (!cmds_.push(c)) return EAGAIN;
  wake();
  return 0;
}

int UdpEndpoint::post_recv(std::uint32_t qpn, std::uint64_t wr_id) {
  if (!threaded_.load(std::memory_order_relaxed)) return ep_->post_recv(qpn, wr_id);
  Cmd c;
  c.type = CmdType::kRecv;
  c.qpn = qpn;
  c.wr.wr_id = wr_id;
  if (!cmds_.push(c)) return EAGAIN;
  wake();
  return 0;
}

bool UdpEndpoint::poll_completion(engine::Completion& out) {
  if (completions_.pop(out)) return true;
  return !threaded_.load(std::memory_order_relaxed) && ep_->poll_completion(out);
}

bool UdpEndpoint::poll_event(engine::Event& out) {
  if (events_.pop(out)) return true;
  return !threaded_.load(std::memory_order_relaxed) && ep_->poll_event(out);
}

void UdpEndpoint::execute(const std::function<void(engine::Endpoint&)>& fn) {
  if (!threaded_.load()) {
    fn(*ep_);
    return;
  }
  std::unique_lock<std::mutex> lk(exec_mu_);
  exec_cv_.wait(lk, [&] { return exec_fn_ == nullptr; });
  exec_fn_ = &fn;
  exec_done_ = false;
  exec_pending_.store(true, std::memory_order_release);
  const std::uint64_t one = 1;
  (void)!::write(evfd_, &one, sizeof one);
  exec_cv_.wait(lk, [&] { return exec_done_; });
  exec_fn_ = nullptr;
  exec_cv_.notify_all();
}

bool UdpEndpoint::start() {
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
  threaded_.store(false);
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
