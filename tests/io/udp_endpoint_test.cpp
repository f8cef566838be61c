#include "io/udp_endpoint.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "io/io_harness.hpp"
#include "wire/packet.hpp"

namespace mrc::iotest {
namespace {

constexpr std::size_t kBytes = 64u << 20;
constexpr std::uint32_t kMsg = 1u << 20;
constexpr std::uint32_t kPlanes = 4;
constexpr std::size_t kMaxSpins = 20'000'000;  // progress rounds: a hang fails instead of blocking CI

/// Posts all messages (as the send queue allows) and drives both endpoints until every send
/// completed. Returns the number of successful send completions.
std::size_t move_all_app_driven(IoPair& p, std::size_t bytes, std::uint32_t msg) {
  const std::size_t n = bytes / msg;
  std::size_t posted = 0, done = 0, ok = 0;
  for (std::size_t spin = 0; done < n && spin < kMaxSpins; ++spin) {
    while (posted < n && posted - done < 32) {
      if (p.a->post_send(p.qa, p.wr(posted, posted * msg, msg)) != 0) break;
      ++posted;
    }
    p.a->progress(0);
    p.b->progress(0);
    engine::Completion c;
    while (p.a->poll_completion(c)) {
      ++done;
      if (c.status == engine::WcStatus::kSuccess) ++ok;
    }
  }
  return ok;
}

void expect_every_plane_used(const io::UdpEndpoint& ep) {
  const auto& pc = ep.plane_counters();
  ASSERT_EQ(pc.size(), kPlanes);
  for (std::size_t i = 0; i < pc.size(); ++i) {
    EXPECT_GT(pc[i].tx_packets, 1000u) << "plane " << i;
    EXPECT_GT(pc[i].send_sockets, 1u) << "plane " << i;
  }
}

TEST(UdpEndpoint, MovesBufferOverFourPlanesAppDriven) {
  IoPair p;
  ASSERT_TRUE(p.open(kPlanes, kBytes, 41));
  EXPECT_EQ(move_all_app_driven(p, kBytes, kMsg), kBytes / kMsg);
  EXPECT_TRUE(std::equal(p.src.begin(), p.src.end(), p.dst.begin()));
  expect_every_plane_used(*p.a);
  // ACKs flow back on every plane too.
  for (const auto& c : p.b->plane_counters()) EXPECT_GT(c.tx_packets, 0u);
  for (const auto& c : p.b->plane_counters()) EXPECT_EQ(c.rx_unknown_source, 0u);
  const auto& qc = p.b->engine().qp(p.qb)->counters();
  EXPECT_GE(qc.bytes_placed, kBytes);
}

TEST(UdpEndpoint, MovesBufferWithProgressThreads) {
  IoPair p;
  ASSERT_TRUE(p.open(kPlanes, kBytes, 42));
  ASSERT_TRUE(p.a->start());
  ASSERT_TRUE(p.b->start());
  // WRITE_IMM for every 8th message: the responder sees receive completions with the immediates.
  const std::size_t n = kBytes / kMsg;
  std::size_t imm_count = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (i % 8 == 7) ++imm_count;
  for (std::size_t i = 0; i < imm_count; ++i) ASSERT_EQ(p.b->post_recv(p.qb, 1000 + i), 0);
  std::size_t posted = 0, done = 0, ok = 0, recvs = 0;
  for (std::size_t spin = 0; (done < n || recvs < imm_count) && spin < kMaxSpins; ++spin) {
    while (posted < n && posted - done < 32) {
      const bool imm = posted % 8 == 7;
      if (p.a->post_send(p.qa, p.wr(posted, posted * kMsg, kMsg, imm)) != 0) break;
      ++posted;
    }
    engine::Completion c;
    while (p.a->poll_completion(c)) {
      ++done;
      if (c.status == engine::WcStatus::kSuccess) ++ok;
    }
    while (p.b->poll_completion(c)) {
      EXPECT_TRUE(c.is_recv);
      EXPECT_TRUE(c.has_imm);
      EXPECT_EQ(c.imm % 8, 7u);
      ++recvs;
    }
    if (done < n) ::usleep(50);
  }
  p.a->stop();
  p.b->stop();
  EXPECT_EQ(ok, n);
  EXPECT_EQ(recvs, imm_count);
  EXPECT_TRUE(std::equal(p.src.begin(), p.src.end(), p.dst.begin()));
  expect_every_plane_used(*p.a);
}

TEST(UdpEndpoint, CompletesByteExactUnderImpairment) {
  io::ImpairConfig imp;
  std::string err;
  ASSERT_TRUE(io::parse_impair("drop=5%,reorder=5%,reorder_delay=200us,dup=3%,trim=3%,seed=7", imp, err))
      << err;
  io::ImpairConfig imp_a = imp;  // the ACK direction is impaired as well
  imp_a.seed = 8;
  IoPair p;
  ASSERT_TRUE(p.open(kPlanes, kBytes, 46, imp, imp_a));
  EXPECT_EQ(move_all_app_driven(p, kBytes, kMsg), kBytes / kMsg);
  EXPECT_TRUE(std::equal(p.src.begin(), p.src.end(), p.dst.begin()));
  expect_every_plane_used(*p.a);
  const io::ImpairStats& st = p.b->impair_stats();
  EXPECT_GT(st.dropped, st.seen / 40);  // about 5% of what arrived
  EXPECT_GT(st.duplicated, 0u);
  EXPECT_GT(st.reordered, 0u);
  EXPECT_GT(st.trimmed, 0u);
  const auto& rsp = p.b->engine().qp(p.qb)->counters();
  const auto& req = p.a->engine().qp(p.qa)->counters();
  EXPECT_GT(rsp.rx_trimmed, 0u);  // the engine saw trimmed headers...
  EXPECT_GT(rsp.tx_nack, 0u);     // ...and answered with NACKs
  EXPECT_GT(rsp.rx_dup, 0u);      // duplicates were recognised
  EXPECT_GT(req.tx_rtx, 0u);      // losses were repaired
  EXPECT_GT(req.rtx_nack, 0u);
}

// GSO (D36): a QP sends 8 packets per EV, they leave as one send and arrive as GRO batches that
// the endpoint cuts back into datagrams; spraying still reaches every plane and many EVs.
TEST(UdpEndpoint, GsoSendsEvBurstsAsOneSendAndGroBatchesAreSplitByteExact) {
  IoPair p;
  p.gso = 8;
  ASSERT_TRUE(p.open(kPlanes, kBytes, 49));
  EXPECT_EQ(move_all_app_driven(p, kBytes, kMsg), kBytes / kMsg);
  EXPECT_TRUE(std::equal(p.src.begin(), p.src.end(), p.dst.begin()));
  expect_every_plane_used(*p.a);
  std::uint64_t tx = 0, gso = 0, gro = 0, rx = 0;
  for (const auto& c : p.a->plane_counters()) {
    tx += c.tx_packets;
    gso += c.tx_gso_messages;
  }
  for (const auto& c : p.b->plane_counters()) {
    rx += c.rx_packets;
    gro += c.rx_gro_packets;
  }
  EXPECT_GT(gso, tx / 16) << "sends of several datagrams";
  EXPECT_GT(gro, rx / 4) << "datagrams that came in GRO batches";
  // Every datagram of a batch is one MRC packet the engine accepted (no length or ICRC errors).
  const auto& qc = p.b->engine().qp(p.qb)->counters();
  EXPECT_GE(qc.bytes_placed, kBytes);
  EXPECT_EQ(p.b->engine().counters().rx_bad_packet, 0u);
}

// Impairment applies per datagram after the GRO split: drops and trims inside a batch are repaired.
TEST(UdpEndpoint, GsoCompletesByteExactUnderImpairment) {
  io::ImpairConfig imp;
  std::string err;
  ASSERT_TRUE(io::parse_impair("drop=3%,trim=3%,dup=2%,seed=9", imp, err)) << err;
  IoPair p;
  p.gso = 8;
  ASSERT_TRUE(p.open(kPlanes, kBytes, 50, imp));
  EXPECT_EQ(move_all_app_driven(p, kBytes, kMsg), kBytes / kMsg);
  EXPECT_TRUE(std::equal(p.src.begin(), p.src.end(), p.dst.begin()));
  EXPECT_GT(p.b->impair_stats().dropped, 0u);
  EXPECT_GT(p.b->engine().qp(p.qb)->counters().rx_trimmed, 0u);
  EXPECT_GT(p.a->engine().qp(p.qa)->counters().rtx_nack, 0u);
}

TEST(UdpEndpoint, ThreadedExecuteAndRefusedCommand) {
  IoPair p;
  ASSERT_TRUE(p.open(2, 1 << 16, 43));
  ASSERT_TRUE(p.a->start());
  // A work request with a bad lkey is refused by the engine on the progress thread and completes
  // with an error instead of disappearing.
  engine::SendWr w = p.wr(7, 0, 4096);
  w.lkey ^= 0x5A5A;
  ASSERT_EQ(p.a->post_send(p.qa, w), 0);
  engine::Completion c;
  bool got = false;
  for (int i = 0; i < 200000 && !got; ++i) {
    got = p.a->poll_completion(c);
    if (!got) ::usleep(10);
  }
  ASSERT_TRUE(got);
  EXPECT_EQ(c.wr_id, 7u);
  EXPECT_NE(c.status, engine::WcStatus::kSuccess);
  engine::QpState st = engine::QpState::kReset;
  p.a->execute([&](engine::Endpoint& ep) { st = ep.qp_state(p.qa); });
  p.a->stop();
  EXPECT_NE(st, engine::QpState::kReset);
}

TEST(UdpEndpoint, WorkRequestsWaitForTheProgressContext) {
  // One model in both modes: a post is queued; the engine sees it at the next round or control
  // call, which also exports what it produced.
  IoPair p;
  ASSERT_TRUE(p.open(2, 1 << 16, 55));
  engine::SendWr w = p.wr(9, 0, 4096);
  w.lkey ^= 0x5A5A;  // the engine refuses it: a completion tells when it got there
  ASSERT_EQ(p.a->post_send(p.qa, w), 0);
  engine::Completion c;
  EXPECT_FALSE(p.a->poll_completion(c)) << "handed to the engine without a round";
  bool refused_inside = false;
  p.a->execute([&](engine::Endpoint& ep) {
    engine::Completion inner;
    refused_inside = ep.poll_completion(inner) && inner.wr_id == 9;  // taken before fn ran
    if (refused_inside) ep.push_completion(inner);
  });
  EXPECT_TRUE(refused_inside);
  ASSERT_TRUE(p.a->poll_completion(c)) << "exported at the end of execute()";
  EXPECT_EQ(c.wr_id, 9u);
  EXPECT_EQ(c.status, engine::WcStatus::kLocalProtectionError);
}

TEST(UdpEndpoint, ControlCallsRunWhileTheApplicationDrivesProgress) {
  // A controller thread's execute() calls interleave with an application thread that never stops
  // calling progress(): neither starves the other, and the transfer stays byte-exact.
  IoPair p;
  ASSERT_TRUE(p.open(kPlanes, 16u << 20, 56));
  std::atomic<bool> done{false};
  std::atomic<int> calls{0};
  std::thread ctl([&] {
    while (!done.load()) {
      engine::QpState st = engine::QpState::kReset;
      p.a->execute([&](engine::Endpoint& ep) { st = ep.qp_state(p.qa); });
      if (st == engine::QpState::kRts) ++calls;
    }
  });
  const std::size_t ok = move_all_app_driven(p, 16u << 20, kMsg);
  const int served = calls.load();  // during the transfer, between the application's rounds
  done = true;
  ctl.join();
  EXPECT_EQ(ok, (16u << 20) / kMsg);
  EXPECT_TRUE(std::equal(p.src.begin(), p.src.begin() + (16u << 20), p.dst.begin()));
  EXPECT_GT(served, 0);
  std::printf("control calls served during the transfer: %d\n", served);
}

TEST(UdpEndpoint, UnknownSourceIsDroppedAndNeverWritesMemory) {
  IoPair p;
  ASSERT_TRUE(p.open(kPlanes, 1 << 16, 44));
  // A well-formed WRITE to b's QP with the right rkey and the expected PSN, from an address that
  // is not a's address on plane 0 (127.44.1.9 instead of .1).
  std::vector<std::uint8_t> buf = p.forged_write(1024);
  const std::size_t len = buf.size();
  ASSERT_GT(len, 0u);
  IoPair::fold_rocev2(buf, "127.44.1.9", 50000, "127.44.1.2", 4791);

  const int fd = IoPair::bound_udp4("127.44.1.9", 50000);
  ASSERT_GE(fd, 0);
  const sockaddr_in to = IoPair::udp4("127.44.1.2", 4791);
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(::sendto(fd, buf.data(), len, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(len));
  ::close(fd);
  for (int i = 0; i < 1000 && p.b->plane_counters()[0].rx_packets < 5; ++i) p.b->progress(1'000'000);
  EXPECT_EQ(p.b->plane_counters()[0].rx_packets, 5u);
  EXPECT_EQ(p.b->plane_counters()[0].rx_unknown_source, 5u);
  EXPECT_EQ(p.b->engine().counters().rx_wrong_peer, 5u);
  EXPECT_EQ(p.b->engine().qp(p.qb)->counters().bytes_placed, 0u);
  EXPECT_TRUE(std::all_of(p.dst.begin(), p.dst.end(), [](std::uint8_t x) { return x == 0; }));
}

TEST(UdpEndpoint, ReceiveChecksTheRoceV2IcrcOverTheIpUdpHeaders) {
  // W22: the ICRC covers the masked IPv4 + UDP headers. The same WRITE from a's plane-0 address with
  // the engine's ICRC alone (W16), or folded for another source port, is dropped as a bad packet;
  // folded for the datagram it rides in, it is placed.
  IoPair p;
  ASSERT_TRUE(p.open(kPlanes, 1 << 16, 46));
  const std::vector<std::uint8_t> w16 = p.forged_write(1024);
  ASSERT_FALSE(w16.empty());
  const int fd = IoPair::bound_udp4("127.46.1.1", 50001);
  ASSERT_GE(fd, 0);
  const sockaddr_in to = IoPair::udp4("127.46.1.2", 4791);
  auto other_port = w16;
  IoPair::fold_rocev2(other_port, "127.46.1.1", 50002, "127.46.1.2", 4791);
  auto good = w16;
  IoPair::fold_rocev2(good, "127.46.1.1", 50001, "127.46.1.2", 4791);
  const auto send = [&](const std::vector<std::uint8_t>& b) {
    ASSERT_EQ(::sendto(fd, b.data(), b.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(b.size()));
  };
  const auto wait_rx = [&](std::uint64_t n) {
    for (int i = 0; i < 1000 && p.b->plane_counters()[0].rx_packets < n; ++i) p.b->progress(1'000'000);
  };
  send(w16);
  send(other_port);
  wait_rx(2);
  EXPECT_EQ(p.b->engine().counters().rx_bad_packet, 2u);
  EXPECT_EQ(p.b->engine().qp(p.qb)->counters().bytes_placed, 0u);
  send(good);
  wait_rx(3);
  for (int i = 0; i < 100 && p.b->engine().qp(p.qb)->counters().bytes_placed == 0; ++i)
    p.b->progress(1'000'000);
  EXPECT_EQ(p.b->engine().counters().rx_bad_packet, 2u);
  EXPECT_EQ(p.b->engine().qp(p.qb)->counters().bytes_placed, 1024u);
  ::close(fd);
}

TEST(UdpEndpoint, DscpAndEcnFromTheIpHeaderReachTheEngine) {
  IoPair p;
  ASSERT_TRUE(p.open(kPlanes, 1 << 16, 47));
  // A trimmed WRITE header (DSCP "trimmed" + ECN CE) from a's plane-2 address, as a trimming
  // switch would deliver it.
  const std::vector<std::uint8_t> buf = p.forged_write(2048);
  ASSERT_FALSE(buf.empty());
  const std::size_t hl = wire::header_size(wire::Opcode::kWriteOnly, false);

  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  const int tos = (p.b->config().dscp_trimmed << 2) | 3;
  ASSERT_EQ(::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos), 0);
  sockaddr_in self{};
  self.sin_family = AF_INET;
  self.sin_port = htons(p.b->sport_of(3));
  ::inet_pton(AF_INET, "127.47.2.1", &self.sin_addr);  // a's address on plane 1
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(4791);
  ::inet_pton(AF_INET, "127.47.2.2", &to.sin_addr);
  ASSERT_EQ(::sendto(fd, buf.data(), hl, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(hl));
  ::close(fd);
  for (int i = 0; i < 1000 && p.b->plane_counters()[1].rx_packets < 1; ++i) p.b->progress(1'000'000);
  const auto& pc = p.b->plane_counters()[1];
  EXPECT_EQ(pc.rx_packets, 1u);
  EXPECT_EQ(pc.rx_unknown_source, 0u);
  EXPECT_EQ(pc.rx_trimmed, 1u);
  EXPECT_EQ(pc.rx_ecn_ce, 1u);
  EXPECT_EQ(p.b->engine().counters().rx_bad_packet, 0u);
  const auto& qc = p.b->engine().qp(p.qb)->counters();
  EXPECT_EQ(qc.rx_trimmed, 1u);  // decoded as a trimmed header from the right peer
  EXPECT_EQ(qc.bytes_placed, 0u);
  p.b->progress(0);
  EXPECT_EQ(p.b->engine().qp(p.qb)->counters().tx_nack, 1u);  // asks for a fast retransmission
}

TEST(UdpEndpoint, RejectsBadConfig) {
  std::string err;
  io::UdpConfig c;
  EXPECT_EQ(io::UdpEndpoint::create(c, err), nullptr);
  EXPECT_NE(err.find("plane"), std::string::npos);
  c.planes = plane_addrs("127.45.", 2, 1);
  c.ev_mode = io::EvMode::kStev;
  EXPECT_EQ(io::UdpEndpoint::create(c, err), nullptr);
  EXPECT_NE(err.find("IPv6"), std::string::npos);
  c.ev_mode = io::EvMode::kUdp;
  auto ep = io::UdpEndpoint::create(c, err);
  ASSERT_NE(ep, nullptr) << err;
  // Second endpoint on the same addresses: the receive port is taken.
  EXPECT_EQ(io::UdpEndpoint::create(c, err), nullptr);
  EXPECT_NE(err.find("bind"), std::string::npos);
  // GSO bursts are 2..64 packets.
  io::UdpConfig g = c;
  g.planes = plane_addrs("127.45.", 2, 3);
  g.gso_burst = 1;
  EXPECT_EQ(io::UdpEndpoint::create(g, err), nullptr);
  EXPECT_NE(err.find("gso_burst"), std::string::npos);
  g.gso_burst = 65;
  EXPECT_EQ(io::UdpEndpoint::create(g, err), nullptr);
  // Peer with the wrong number of plane addresses.
  EXPECT_EQ(ep->add_peer(plane_addrs("127.45.", 3, 2)), 0u);
}

TEST(UdpEndpoint, IpAddrParse) {
  io::IpAddr a;
  EXPECT_TRUE(io::IpAddr::parse("127.0.0.1", a));
  EXPECT_EQ(a.family, AF_INET);
  EXPECT_EQ(a.str(), "127.0.0.1");
  EXPECT_TRUE(io::IpAddr::parse("::1", a));
  EXPECT_EQ(a.family, AF_INET6);
  EXPECT_FALSE(io::IpAddr::parse("300.1.1.1", a));
  EXPECT_FALSE(io::IpAddr::parse("nonsense", a));
}

}  // namespace
}  // namespace mrc::iotest
