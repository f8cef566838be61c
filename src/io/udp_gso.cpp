// UDP segmentation offload (docs/decisions.md D36): a socket's run of same-size datagrams to one
// destination leaves as one message with a UDP_SEGMENT cmsg.
#include <algorithm>

#include "io/udp_common.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

using namespace detail;

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

}  // namespace mrc::io
