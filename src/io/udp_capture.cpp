// UdpEndpoint's pcap tap (set_pcap): every sent and received datagram as a frame.
#include <time.h>

#include "io/udp_endpoint.hpp"

namespace mrc::io {

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
  f.ipv4_id = 0;  // as sent (DF, unconnected socket): the capture's ICRCs check
  (void)pcap_->write(f, h, pl, tr);
}

}  // namespace mrc::io
