// STEV mode over IPv6 loopback: the EV travels in the flow label (IPV6_FLOWINFO_SEND) and is
// recovered from the IPV6_FLOWINFO control message. Every EV shares one UDP source port here
// (sport_range = 1), so only the flow label can tell them apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "common/rng.hpp"
#include "engine/ev_sets.hpp"
#include "io/pcap.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {
namespace {

struct Labels {
  std::set<std::uint32_t> flow_labels;
  std::set<std::uint16_t> sports;
  std::size_t packets = 0;
};

/// Reads an Ethernet/IPv6/UDP pcap and collects flow labels and source ports of port-4791 frames.
Labels read_pcap(const std::string& path, std::uint16_t dport) {
  Labels out;
  std::ifstream f(path, std::ios::binary);
  std::vector<std::uint8_t> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::size_t off = 24;
  while (off + 16 <= all.size()) {
    std::uint32_t incl = 0;
    std::memcpy(&incl, all.data() + off + 8, 4);
    const std::uint8_t* fr = all.data() + off + 16;
    off += 16 + incl;
    if (off > all.size() || incl < 14 + 40 + 8) break;
    if (fr[12] != 0x86 || fr[13] != 0xDD) continue;
    const std::uint8_t* ip = fr + 14;
    const std::uint8_t* udp = ip + 40;
    const auto dp = static_cast<std::uint16_t>(udp[2] << 8 | udp[3]);
    if (dp != dport) continue;
    out.flow_labels.insert((std::uint32_t{ip[1]} & 0xF) << 16 | std::uint32_t{ip[2]} << 8 | ip[3]);
    out.sports.insert(static_cast<std::uint16_t>(udp[0] << 8 | udp[1]));
    ++out.packets;
  }
  return out;
}

TEST(Stev, FlowLabelCarriesTheEvOverIpv6Loopback) {
  IpAddr lo;
  ASSERT_TRUE(IpAddr::parse("::1", lo));
  UdpConfig ca;
  ca.planes = {lo};
  ca.ev_mode = EvMode::kStev;
  ca.sport_range = 1;
  ca.port = 24791;
  UdpConfig cb = ca;
  cb.port = 24792;
  // Both endpoints share ::1, so their source ports must differ. With different ranges each end
  // reads the other's port as a named one (D37), so reflected EVs do not match the sender's values
  // here; this test checks only the flow labels on the wire and the data.
  cb.sport_base = 49153;
  std::string err;
  auto a = UdpEndpoint::create(ca, err);
  ASSERT_TRUE(a) << err;
  auto b = UdpEndpoint::create(cb, err);
  ASSERT_TRUE(b) << err;
  const std::string pcap_path = ::testing::TempDir() + "stev_test.pcap";
  PcapWriter pcap;
  ASSERT_TRUE(pcap.open(pcap_path)) << pcap.error();
  b->set_pcap(&pcap);
  const std::uint32_t pb = a->add_peer({lo}, cb.port);
  const std::uint32_t pa = b->add_peer({lo}, ca.port);
  ASSERT_NE(pb, 0u);
  ASSERT_NE(pa, 0u);
  std::vector<std::uint8_t> src(4 << 20), dst(4 << 20, 0);
  Rng r(5);
  for (auto& x : src) x = static_cast<std::uint8_t>(r.next());
  const auto* mra = a->engine().memory().register_region(src.data(), src.size(), engine::access::kAll);
  const auto* mrb = b->engine().memory().register_region(dst.data(), dst.size(), engine::access::kAll);
  engine::QpConfig qc;
  qc.evs = engine::make_ev_set(1, 8, 2, 0x1230);  // EV values 0x1230..0x1239
  qc.active_count = 8;
  qc.timeout = 14;
  qc.cc.algorithm = cc::Algorithm::kNone;
  const std::uint32_t qa = a->engine().create_qp(qc);
  const std::uint32_t qb = b->engine().create_qp(qc);
  const Time t = UdpEndpoint::now();
  ASSERT_EQ(a->engine().connect_qp(qa, engine::QpRemote{pb, qb, 100, 200, 8, 128, {}, true}, t), 0);
  ASSERT_EQ(b->engine().connect_qp(qb, engine::QpRemote{pa, qa, 200, 100, 8, 128, {}, true}, t), 0);
  engine::SendWr w;
  w.wr_id = 1;
  w.local_addr = reinterpret_cast<std::uintptr_t>(src.data());
  w.length = static_cast<std::uint32_t>(src.size());
  w.lkey = mra->lkey;
  w.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  w.rkey = mrb->rkey;
  ASSERT_EQ(a->post_send(qa, w), 0);
  engine::Completion c;
  bool done = false;
  for (int i = 0; i < 5'000'000 && !done; ++i) {
    a->progress(0);
    b->progress(0);
    done = a->poll_completion(c);
  }
  b->set_pcap(nullptr);
  ASSERT_TRUE(pcap.close());
  ASSERT_TRUE(done);
  EXPECT_EQ(c.status, engine::WcStatus::kSuccess);
  EXPECT_EQ(src, dst);
  // What b received: one source port, the flow labels are exactly the active EV values.
  const Labels l = read_pcap(pcap_path, cb.port);
  EXPECT_GE(l.packets, (4u << 20) / 4096);
  EXPECT_EQ(l.sports.size(), 1u);
  EXPECT_EQ(l.flow_labels.size(), 8u);
  for (const std::uint32_t fl : l.flow_labels) {
    EXPECT_GE(fl, 0x1230u);
    EXPECT_LE(fl, 0x1239u);
  }
  std::remove(pcap_path.c_str());
}

}  // namespace
}  // namespace mrc::io
