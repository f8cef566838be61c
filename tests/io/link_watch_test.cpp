// Plane link watching: the rtnetlink message parser on constructed messages and on the kernel's own
// answer, and what an endpoint does with a link report. Downing a real link needs root; the netns
// integration script tb_perf_plane_down.sh covers that end to end.
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "io/io_harness.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::iotest {
namespace {

/// Appends one link message (header + ifinfomsg + `extra` attribute bytes) to `buf`, padded to
/// NLMSG_ALIGNTO as the kernel does.
void add_link_msg(std::vector<std::uint8_t>& buf, std::uint16_t type, int ifindex, unsigned flags,
                  std::size_t extra = 0) {
  nlmsghdr h{};
  h.nlmsg_len = static_cast<std::uint32_t>(NLMSG_LENGTH(sizeof(ifinfomsg)) + extra);
  h.nlmsg_type = type;
  ifinfomsg ifi{};
  ifi.ifi_index = ifindex;
  ifi.ifi_flags = flags;
  const std::size_t at = buf.size();
  buf.resize(at + NLMSG_ALIGN(h.nlmsg_len), 0);
  std::memcpy(buf.data() + at, &h, sizeof h);
  std::memcpy(buf.data() + at + NLMSG_HDRLEN, &ifi, sizeof ifi);
}

constexpr unsigned kLowerUp = 0x10000;  // IFF_LOWER_UP: <linux/if.h> clashes with <net/if.h>
constexpr unsigned kUsable = IFF_UP | IFF_RUNNING | kLowerUp;

TEST(LinkWatch, ParsesUpAndDownFromFlags) {
  std::vector<std::uint8_t> buf;
  add_link_msg(buf, RTM_NEWLINK, 3, kUsable, 5);   // with (odd-sized) attributes after it
  add_link_msg(buf, RTM_NEWLINK, 4, IFF_UP);       // carrier lost: not running
  add_link_msg(buf, RTM_NEWLINK, 5, IFF_RUNNING);  // administratively down
  add_link_msg(buf, RTM_DELLINK, 6, kUsable);      // removed, whatever its last flags
  const auto s = io::parse_link_messages(buf);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].ifindex, 3);
  EXPECT_TRUE(s[0].up);
  EXPECT_EQ(s[1].ifindex, 4);
  EXPECT_FALSE(s[1].up);
  EXPECT_EQ(s[2].ifindex, 5);
  EXPECT_FALSE(s[2].up);
  EXPECT_EQ(s[3].ifindex, 6);
  EXPECT_FALSE(s[3].up);
}

TEST(LinkWatch, SkipsOtherMessagesAndStopsAtMalformedOnes) {
  std::vector<std::uint8_t> buf;
  add_link_msg(buf, RTM_NEWADDR, 7, kUsable);  // not a link message
  add_link_msg(buf, RTM_NEWLINK, 8, kUsable);
  auto s = io::parse_link_messages(buf);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].ifindex, 8);

  // A link message too short for its ifinfomsg is skipped; the next one is still read.
  std::vector<std::uint8_t> shortmsg(NLMSG_HDRLEN, 0);
  nlmsghdr h{};
  h.nlmsg_len = NLMSG_HDRLEN;
  h.nlmsg_type = RTM_NEWLINK;
  std::memcpy(shortmsg.data(), &h, sizeof h);
  add_link_msg(shortmsg, RTM_NEWLINK, 9, 0);
  s = io::parse_link_messages(shortmsg);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].ifindex, 9);

  // A length beyond the datagram, or below a header, ends the parse without reading past it.
  std::vector<std::uint8_t> cut;
  add_link_msg(cut, RTM_NEWLINK, 10, kUsable);
  add_link_msg(cut, RTM_NEWLINK, 11, kUsable);
  cut.resize(cut.size() - 1);
  s = io::parse_link_messages(cut);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].ifindex, 10);
  std::vector<std::uint8_t> zero(64, 0);
  EXPECT_TRUE(io::parse_link_messages(zero).empty());
  EXPECT_TRUE(io::parse_link_messages({}).empty());
  EXPECT_TRUE(io::parse_link_messages(std::vector<std::uint8_t>(7, 0xFF)).empty());
}

TEST(LinkWatch, ParsesTheKernelsAnswerForLoopback) {
  const int lo = static_cast<int>(::if_nametoindex("lo"));
  ASSERT_NE(lo, 0);
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(io::request_link_state(fd, lo));
  std::vector<std::uint8_t> buf(32768);
  const ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
  ::close(fd);
  ASSERT_GT(r, 0);
  buf.resize(static_cast<std::size_t>(r));
  const auto s = io::parse_link_messages(buf);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].ifindex, lo);
  EXPECT_TRUE(s[0].up);  // lo is operstate UNKNOWN, which is usable
}

TEST(LinkWatch, EndpointFollowsItsPlanesLinks) {
  IoPair p;
  ASSERT_TRUE(p.open(2, 1 << 16, 41));
  io::UdpEndpoint& a = *p.a;
  // 127.41.x.1 is not an address of lo, but lies in its 127.0.0.0/8.
  const int lo = static_cast<int>(::if_nametoindex("lo"));
  EXPECT_EQ(a.plane_ifindex(0), lo);
  EXPECT_EQ(a.plane_ifindex(1), lo);
  EXPECT_EQ(a.engine().port_mask(), 3u);  // lo is up at open
  EXPECT_EQ(a.plane_counters()[0].link_down_events, 0u);

  const Time t = io::UdpEndpoint::now();
  a.apply_link_state({lo + 1000, false}, t);  // another interface
  EXPECT_EQ(a.engine().port_mask(), 3u);
  a.apply_link_state({lo, false}, t);
  a.apply_link_state({lo, false}, t);  // a repeat is no event
  EXPECT_EQ(a.engine().port_mask(), 0u);
  for (std::uint32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a.plane_counters()[i].link_down_events, 1u) << i;
    EXPECT_EQ(a.plane_counters()[i].link_up_events, 0u) << i;
  }
  a.apply_link_state({lo, true}, t);
  EXPECT_EQ(a.engine().port_mask(), 3u);
  for (std::uint32_t i = 0; i < 2; ++i) EXPECT_EQ(a.plane_counters()[i].link_up_events, 1u) << i;

  // Progress reads the kernel's notifications, and lo does not change: the ports stay up and no
  // event is invented.
  for (int i = 0; i < 10; ++i) a.progress(0);
  EXPECT_EQ(a.engine().port_mask(), 3u);
  EXPECT_EQ(a.plane_counters()[0].link_down_events, 1u);
}

}  // namespace
}  // namespace mrc::iotest
