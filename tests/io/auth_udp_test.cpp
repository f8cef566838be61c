// Authenticated QPs over real UDP sockets on loopback: a transfer passes with every packet tagged,
// and a datagram spoofed from the peer's own address and port range, correct in every field but
// the MAC, is counted and never placed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "io/metrics.hpp"
#include "io_harness.hpp"
#include "wire/packet.hpp"

namespace mrc::iotest {
namespace {

constexpr std::size_t kMaxSpins = 20'000'000;  // progress rounds: a hang fails instead of blocking CI

/// A WRITE_ONLY of 0xEE bytes at the start of b's region with the first PSN b expects, from a's
/// plane-1 address; `tag_key` = the MAC key to tag it with (nullptr: the ICRC, as a plain sender).
std::size_t spoof(IoPair& p, const engine::MacKey* tag_key) {
  std::vector<std::uint8_t> buf = p.forged_write(1024);
  std::size_t n = buf.size();
  if (tag_key != nullptr) {
    n -= wire::kIcrcSize;
    const std::uint64_t tag = engine::siphash24(*tag_key, std::span(buf).first(n));
    for (std::size_t i = 0; i < engine::kMacSize; ++i) buf[n++] = static_cast<std::uint8_t>(tag >> (8 * i));
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in self{};
  self.sin_family = AF_INET;
  self.sin_port = htons(p.b->sport_of(5000));  // an EV's source port no endpoint socket uses
  ::inet_pton(AF_INET, "127.53.1.1", &self.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(4791);
  ::inet_pton(AF_INET, "127.53.1.2", &to.sin_addr);
  EXPECT_EQ(::sendto(fd, buf.data(), n, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(n));
  ::close(fd);
  const std::uint64_t before = p.b->plane_counters()[0].rx_packets;
  for (int i = 0; i < 1000 && p.b->plane_counters()[0].rx_packets == before; ++i) p.b->progress(1'000'000);
  return p.b->plane_counters()[0].rx_packets - before;
}

TEST(UdpAuth, SpoofedWriteFromThePeersAddressIsCountedNeverPlaced) {
  IoPair p;
  p.auth = true;
  ASSERT_TRUE(p.open(2, 1 << 16, 53));
  ASSERT_EQ(spoof(p, nullptr), 1u);    // an ICRC instead of a tag
  ASSERT_EQ(spoof(p, &p.key_ba), 1u);  // b's own key: a reflected packet
  const auto& ec = p.b->engine().counters();
  EXPECT_EQ(ec.rx_auth_failed, 2u);
  EXPECT_EQ(ec.rx_wrong_peer, 0u) << "the spoof must pass the address check, so only the MAC stops it";
  EXPECT_EQ(p.b->engine().qp(p.qb)->counters().bytes_placed, 0u);
  EXPECT_TRUE(std::all_of(p.dst.begin(), p.dst.end(), [](std::uint8_t x) { return x == 0; }));
  EXPECT_EQ(io::metrics_json(*p.b)["endpoint"]["rx_auth_failed"], 2u);
  // Control: tagged with a's key, the same datagram is placed.
  ASSERT_EQ(spoof(p, &p.key_ab), 1u);
  EXPECT_EQ(ec.rx_auth_failed, 2u);
  EXPECT_EQ(p.b->engine().qp(p.qb)->counters().bytes_placed, 1024u);
  EXPECT_EQ(p.dst[1023], 0xEE);
}

TEST(UdpAuth, TransferOverTwoPlanesPasses) {
  IoPair p;
  p.auth = true;
  constexpr std::size_t kBytes = 1 << 20;
  constexpr std::uint32_t kMsg = 64 << 10;
  ASSERT_TRUE(p.open(2, kBytes, 54));
  std::size_t posted = 0, ok = 0;
  for (std::size_t spin = 0; ok < kBytes / kMsg && spin < kMaxSpins; ++spin) {
    while (posted < kBytes / kMsg && p.a->post_send(p.qa, p.wr(posted, posted * kMsg, kMsg)) == 0) ++posted;
    p.a->progress(0);
    p.b->progress(0);
    engine::Completion c;
    while (p.a->poll_completion(c)) ok += c.status == engine::WcStatus::kSuccess ? 1 : 0;
  }
  ASSERT_EQ(ok, kBytes / kMsg);
  EXPECT_TRUE(std::equal(p.src.begin(), p.src.end(), p.dst.begin()));
  EXPECT_EQ(p.a->engine().counters().rx_auth_failed, 0u);
  EXPECT_EQ(p.b->engine().counters().rx_auth_failed, 0u);
  EXPECT_EQ(p.b->engine().counters().rx_bad_packet, 0u);
  for (const auto& pc : p.a->plane_counters()) EXPECT_GT(pc.tx_packets, 0u);
}

}  // namespace
}  // namespace mrc::iotest
