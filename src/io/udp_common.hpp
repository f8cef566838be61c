// What the parts of UdpEndpoint (udp_*.cpp, srv6.cpp, link_watch.cpp) share: kernel constants,
// limits and socket helpers. Internal to src/io.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/time.hpp"
#include "io/addr.hpp"

namespace mrc::io::detail {

inline constexpr std::uint32_t kFlowLabelMask = 0xFFFFFu;
// From <linux/in6.h>, which clashes with glibc's <netinet/in.h>.
inline constexpr int kIpv6Flowinfo = 11;       // IPV6_FLOWINFO: receive the flow label as a cmsg
inline constexpr int kIpv6FlowinfoSend = 33;   // IPV6_FLOWINFO_SEND: take sin6_flowinfo of each sendmsg
inline constexpr int kIpv6AutoFlowlabel = 70;  // IPV6_AUTOFLOWLABEL
inline constexpr int kRxRoundsPerPlane = 4;    // recvmmsg batches per plane per round (fairness with TX)
inline constexpr std::uint32_t kTxRoundsPerCall = 4;
inline constexpr std::size_t kCmsgSpace = 128;
// UDP GSO limits: the kernel takes at most 64 segments per send (UDP_MAX_SEGMENTS in older
// kernels) and one datagram of at most 64 KiB before segmentation.
inline constexpr std::uint32_t kMaxGsoSegments = 64;
inline constexpr std::uint32_t kMaxGsoBytes = 65000;
inline constexpr std::size_t kGsoCmsgSpace = CMSG_SPACE(sizeof(std::uint16_t));
inline constexpr std::uint32_t kGroBuffer = 65536;       // a GRO batch is one datagram of up to 64 KiB
inline constexpr Duration kThreadIdleWait = 10'000'000;  // 10 ms; commands and packets wake us earlier
// A busy endpoint never sleeps in epoll, so it reads the link socket on this period instead: one
// syscall a millisecond, and at most a millisecond of sending into a dead plane.
inline constexpr Duration kLinkReadPeriod = 1'000'000;
inline constexpr Duration kLinkQueryPeriod = 1'000'000;    // per plane: send errors ask no more often
inline constexpr std::uint32_t kEventFdTag = 0xFFFFFFFFu;  // epoll data of the eventfd
inline constexpr std::uint32_t kNetlinkTag = 0xFFFFFFFEu;  // epoll data of the rtnetlink socket
inline constexpr std::size_t kNetlinkBuffer = 32768;       // one link message with all attributes is ~1.5 KiB
inline constexpr std::size_t kIp6Udp = 48;  // IPv6 (40) + UDP (8) header built for SRv6 raw sends
inline constexpr std::uint8_t kHopLimit = 64;

inline void set_int(int fd, int level, int opt, int v) {
  (void)::setsockopt(fd, level, opt, &v, sizeof v);
}

inline void set_buffer(int fd, int force_opt, int opt, int bytes) {
  if (bytes <= 0) return;
  if (::setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) != 0)
    (void)::setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

/// Fills `out` (big enough for either family) with addr:port.
inline socklen_t make_sockaddr(const IpAddr& a, std::uint16_t port, sockaddr_in6& out) {
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

inline std::string errno_text(const char* what, const IpAddr& a, std::uint16_t port) {
  return std::string(what) + " " + a.str() + ":" + std::to_string(port) + ": " + std::strerror(errno);
}

}  // namespace mrc::io::detail
