// The plane link watch of UdpEndpoint: an rtnetlink socket in the epoll set whose link reports set
// the engine's ports down and up (src/io/README.md, "Plane links").
#include "io/link_watch.hpp"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/epoll.h>

#include "io/udp_common.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

using namespace detail;

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

}  // namespace mrc::io
