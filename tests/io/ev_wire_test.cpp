// EV values on the wire (docs/decisions.md D37): a value with a non-zero high half leaves from
// exactly the UDP source port it names (and, in STEV mode, the flow label of its low half); a value
// below 2^16 spreads over the endpoint's source-port range. Observed by plain sockets on loopback,
// which see exactly what the kernel delivered.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <utility>

#include "engine/types.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {
namespace {

constexpr int kIpv6Flowinfo = 11;  // IPV6_FLOWINFO: receive the flow label as a cmsg

IpAddr ip(const char* s) {
  IpAddr a;
  EXPECT_TRUE(IpAddr::parse(s, a)) << s;
  return a;
}

/// A plain UDP socket standing in for the peer: it records (source port, flow label) of every
/// datagram. Bound to `addr`:`port`.
struct Sink {
  int fd = -1;
  Sink(const IpAddr& addr, std::uint16_t port) {
    fd = ::socket(addr.family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in6 sa{};
    socklen_t len = 0;
    if (addr.family == AF_INET) {
      auto* s4 = reinterpret_cast<sockaddr_in*>(&sa);
      s4->sin_family = AF_INET;
      s4->sin_port = htons(port);
      std::memcpy(&s4->sin_addr, addr.bytes.data(), 4);
      len = sizeof(sockaddr_in);
    } else {
      const int one = 1;
      EXPECT_EQ(::setsockopt(fd, IPPROTO_IPV6, kIpv6Flowinfo, &one, sizeof one), 0);
      sa.sin6_family = AF_INET6;
      sa.sin6_port = htons(port);
      std::memcpy(&sa.sin6_addr, addr.bytes.data(), 16);
      len = sizeof(sockaddr_in6);
    }
    EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&sa), len), 0) << std::strerror(errno);
  }
  ~Sink() { ::close(fd); }
  /// Reads what is queued into `seen` as (source port, flow label).
  void drain(std::set<std::pair<std::uint16_t, std::uint32_t>>& seen) const {
    std::uint8_t buf[9000];
    alignas(cmsghdr) std::uint8_t cbuf[128];
    for (;;) {
      sockaddr_in6 from{};
      iovec iov{buf, sizeof buf};
      msghdr h{};
      h.msg_name = &from;
      h.msg_namelen = sizeof from;
      h.msg_iov = &iov;
      h.msg_iovlen = 1;
      h.msg_control = cbuf;
      h.msg_controllen = sizeof cbuf;
      if (::recvmsg(fd, &h, 0) < 0) return;
      std::uint32_t label = 0;
      for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == kIpv6Flowinfo) {
          std::uint32_t be = 0;
          std::memcpy(&be, CMSG_DATA(c), sizeof be);
          label = ntohl(be) & 0xFFFFFu;
        }
      }
      seen.emplace(ntohs(from.sin6_port), label);  // sin_port and sin6_port share the offset
    }
  }
};

/// Sends 64 KiB from a QP whose EVs are `values` (all on plane 0) toward `peer` and returns the
/// (source port, flow label) pairs the sink saw once it has seen `expect.size()` distinct ones (or
/// the send has been retried long enough that more cannot come).
std::set<std::pair<std::uint16_t, std::uint32_t>> send_on(UdpEndpoint& ep, std::uint32_t peer,
                                                          const std::vector<std::uint32_t>& values,
                                                          const Sink& sink, std::size_t expect) {
  std::vector<std::uint8_t> src(64 << 10, 0x5A);
  const auto* mr = ep.engine().memory().register_region(src.data(), src.size(), engine::access::kAll);
  engine::QpConfig qc;
  for (const std::uint32_t v : values) qc.evs.push_back(engine::Ev{v, 0});
  qc.active_count = static_cast<std::uint32_t>(values.size());
  qc.timeout = 10;
  qc.cc.algorithm = cc::Algorithm::kNone;
  const std::uint32_t qpn = ep.engine().create_qp(qc);
  EXPECT_NE(qpn, 0u);
  EXPECT_EQ(
      ep.engine().connect_qp(qpn, engine::QpRemote{peer, 0x100, 0, 0, 8, 128, {}, true}, UdpEndpoint::now()),
      0);
  engine::SendWr w;
  w.wr_id = 1;
  w.local_addr = reinterpret_cast<std::uintptr_t>(src.data());
  w.length = static_cast<std::uint32_t>(src.size());
  w.lkey = mr->lkey;
  w.remote_addr = 0x10000;
  w.rkey = 1;
  EXPECT_EQ(ep.post_send(qpn, w), 0);
  std::set<std::pair<std::uint16_t, std::uint32_t>> seen;
  // Nobody acknowledges: the QP sends its 16 packets, then retransmits on its timer; either way
  // every EV gets packets. The bound only ends a broken run.
  for (int i = 0; i < 200'000 && seen.size() < expect; ++i) {
    ep.progress(100'000);
    sink.drain(seen);
  }
  ep.progress(0);
  sink.drain(seen);
  return seen;
}

TEST(EvWire, UdpModeNamedSourcePortsLeaveLiterallyAutoValuesSpread) {
  UdpConfig c;
  c.planes = {ip("127.91.1.1")};
  std::string err;
  auto ep = UdpEndpoint::create(c, err);
  ASSERT_TRUE(ep) << err;
  Sink sink(ip("127.91.1.2"), c.port);
  const std::uint32_t peer = ep->add_peer({ip("127.91.1.2")});
  ASSERT_NE(peer, 0u);
  // Three UDP-format EVs (source port in the high half, as a profile's EV expands) and one AUTO
  // value. Before D37 all three named ports landed on sport_base + (v % 16384) = sport_base.
  const std::vector<std::uint32_t> values = {7001u << 16, 7002u << 16, 60000u << 16, 5};
  const auto seen = send_on(*ep, peer, values, sink, values.size());
  const std::set<std::pair<std::uint16_t, std::uint32_t>> want = {
      {7001, 0}, {7002, 0}, {60000, 0}, {static_cast<std::uint16_t>(c.sport_base + 5), 0}};
  EXPECT_EQ(seen, want);
}

TEST(EvWire, StevModeNamedPortAndFlowLabelLeaveLiterally) {
  UdpConfig c;
  c.planes = {ip("::1")};
  c.ev_mode = EvMode::kStev;
  c.port = 24911;
  c.sport_base = 50000;
  c.sport_range = 1000;
  std::string err;
  auto ep = UdpEndpoint::create(c, err);
  ASSERT_TRUE(ep) << err;
  Sink sink(ip("::1"), 24912);
  const std::uint32_t peer = ep->add_peer({ip("::1")}, 24912);
  ASSERT_NE(peer, 0u);
  const std::vector<std::uint32_t> values = {7011u << 16 | 0x0ABC, 7012u << 16 | 0x0001, 3};
  const auto seen = send_on(*ep, peer, values, sink, values.size());
  const std::set<std::pair<std::uint16_t, std::uint32_t>> want = {{7011, 0x0ABC}, {7012, 0x0001}, {50003, 3}};
  EXPECT_EQ(seen, want);
}

TEST(EvWire, TheReceiverRecoversTheValueTheSenderUsed) {
  // What a responder reflects must be the sender's value, or SACK feedback misses its EV.
  UdpConfig c;
  c.planes = {ip("127.91.2.1")};
  c.sport_base = 49152;
  c.sport_range = 16384;
  std::string err;
  auto udp = UdpEndpoint::create(c, err);
  ASSERT_TRUE(udp) << err;
  for (const std::uint32_t v : {0u, 5u, 16383u, 7001u << 16, 40000u << 16, 1u << 16}) {
    EXPECT_EQ(udp->ev_of_wire(udp->sport_of(v), 0), v) << std::hex << v;
    EXPECT_EQ(udp->canonical_ev(v), v) << std::hex << v;
  }
  // A named port inside the spread range is the same wire as a spread value: one value for it.
  EXPECT_EQ(udp->sport_of(50000u << 16), 50000);
  EXPECT_EQ(udp->canonical_ev(50000u << 16), 50000u - 49152u);
  EXPECT_EQ(udp->sport_of(udp->canonical_ev(50000u << 16)), 50000);
  // UDP mode carries no flow label: an STEV-format value loses its low half.
  EXPECT_EQ(udp->canonical_ev(7001u << 16 | 0x22), 7001u << 16);
  // Port 0 cannot be sent: such a value is spread by its low half.
  EXPECT_EQ(udp->sport_of(0x22), 49152 + 0x22);

  c.planes = {ip("::1")};
  c.ev_mode = EvMode::kStev;
  c.port = 24913;
  c.sport_base = 50000;
  c.sport_range = 1000;
  auto stev = UdpEndpoint::create(c, err);
  ASSERT_TRUE(stev) << err;
  for (const std::uint32_t v : {0u, 3u, 999u, 1000u, 0xFFFFu, 7011u << 16 | 0x0ABC, 50001u << 16 | 0x0002}) {
    const std::uint32_t back = stev->ev_of_wire(stev->sport_of(v), UdpEndpoint::flow_label_of(v));
    EXPECT_EQ(back, v) << std::hex << v;
    EXPECT_EQ(stev->canonical_ev(v), v) << std::hex << v;
  }
  // (50003, label 3) is exactly what spread value 3 puts on the wire.
  EXPECT_EQ(stev->canonical_ev(50003u << 16 | 3), 3u);
}

}  // namespace
}  // namespace mrc::io
