// The fabric with RoCEv2 NICs as hosts: PFC (lossless, bounded ingress accounting), tail drop
// instead of trimming for RoCE, and link faults seen at the port level (degraded rate, a killed
// link's queue, reconvergence, flaps, switch reboots, one-direction gray loss).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "fat_tree.hpp"
#include "sim/fabric.hpp"
#include "sim/roce.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {
namespace {

using test::fat4;

/// A fabric whose hosts are all RoCE NICs; write() posts one RDMA WRITE on a fresh QP pair.
struct RoceRig {
  Fabric net;
  std::vector<std::unique_ptr<RoceNic>> nics;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> qps;  // (host, qpn) of each write's sender
  std::uint32_t done = 0, failed = 0;
  Time last_done = 0;

  RoceRig(const Topology& t, const FabricConfig& fc) : net(t, fc) {
    for (std::uint32_t h = 0; h < t.hosts; ++h) {
      RoceConfig rc;
      rc.mtu = 4086;
      rc.num_ports = t.planes;
      rc.seed = 100 + h;
      nics.push_back(std::make_unique<RoceNic>(rc));
      net.attach(h, *nics.back());
    }
    net.set_activity_hook([this](std::uint32_t h) {
      engine::Completion c;
      while (nics[h]->poll_completion(c)) {
        if (c.is_recv) continue;
        ++done;
        last_done = net.now();
        if (c.status != engine::WcStatus::kSuccess) ++failed;
      }
    });
  }
  void write(std::uint32_t s, std::uint32_t d, std::uint32_t bytes) {
    const std::uint32_t a = nics[s]->create_qp(), b = nics[d]->create_qp();
    engine::QpRemote ra, rb;
    ra.peer = d;
    ra.qpn = b;
    rb.peer = s;
    rb.qpn = a;
    ra.sq_psn = rb.rq_psn = 10;
    ra.rq_psn = rb.sq_psn = 20;
    ASSERT_EQ(nics[s]->connect_qp(a, ra, 0), 0);
    ASSERT_EQ(nics[d]->connect_qp(b, rb, 0), 0);
    engine::SendWr wr;
    wr.length = bytes;
    ASSERT_EQ(nics[s]->post_send(a, wr, net.now()), 0);
    qps.emplace_back(s, a);
    net.kick(s);
  }
  std::uint64_t rtx() const {
    std::uint64_t n = 0;
    for (auto [h, q] : qps) n += nics[h]->qp_counters(q).tx_rtx;
    return n;
  }
};

FabricConfig pfc_cfg() {
  FabricConfig fc;
  fc.queue.pfc = true;
  fc.queue.data_bytes = 20000;  // ignored with PFC: lossless queues have no byte limit
  return fc;
}

TEST(FabricRoce, PfcIncastIsLosslessAndBoundsIngressAccounting) {
  const Topology t = fat4();
  RoceRig rig(t, pfc_cfg());
  for (std::uint32_t s = 1; s <= 7; ++s) rig.write(s, 0, 1000000);
  rig.net.run_until(5_ms);
  EXPECT_EQ(rig.done, 7u);
  EXPECT_EQ(rig.failed, 0u);
  EXPECT_EQ(rig.net.stats().dropped(), 0u);
  EXPECT_EQ(rig.net.stats().trimmed, 0u);
  EXPECT_EQ(rig.rtx(), 0u);
  EXPECT_GT(rig.net.stats().pfc_pauses, 0u);
  // Ingress accounting never exceeds XOFF by more than what is in flight while PAUSE travels:
  // two link latencies at line rate plus the packets being serialised at both ends.
  const std::uint64_t headroom = 2 * 1000 * 100 / 8 + 2 * 4200;
  bool host_paused = false;
  for (std::uint32_t p = 0; p < rig.net.num_ports(); ++p) {
    EXPECT_LE(rig.net.port_counters(p).peak_ingress_bytes, pfc_cfg().queue.pfc_xoff + headroom) << p;
    if (rig.net.port_from(p) < t.hosts && rig.net.port_counters(p).pauses > 0) host_paused = true;
  }
  EXPECT_TRUE(host_paused);  // hosts 1..3 share the target's ToR: their NIC links get paused
  // 7 MB into one 100 Gb/s port (560 us at line rate): no loss, little idle.
  EXPECT_LT(rig.last_done, 650_us);
}

TEST(FabricRoce, WithoutPfcRoceIsTailDroppedNeverTrimmed) {
  const Topology t = fat4();
  FabricConfig fc;
  fc.queue.data_bytes = 30000;
  fc.queue.trimming = true;
  RoceRig rig(t, fc);
  for (std::uint32_t s = 1; s <= 7; ++s) rig.write(s, 0, 500000);
  rig.net.run_until(50_ms);
  EXPECT_EQ(rig.done, 7u);
  EXPECT_EQ(rig.failed, 0u);
  EXPECT_EQ(rig.net.stats().trimmed, 0u);
  EXPECT_GT(rig.net.stats().drops_by(FabricDrop::kDataTail), 0u);
  EXPECT_GT(rig.rtx(), 0u);  // go-back-N recovered the drops
  EXPECT_EQ(rig.net.stats().pfc_pauses, 0u);
}

TEST(FabricRoce, QpPortSelectsThePlane) {
  ClosConfig cc;
  cc.radix = 4;
  cc.planes = 2;
  const Topology t = make_clos2(cc);
  Fabric net(t, FabricConfig{});
  RoceConfig rc;
  rc.num_ports = 2;
  RoceNic a(rc), b(rc);
  net.attach(0, a);
  net.attach(7, b);
  EXPECT_EQ(a.create_qp(2), 0u);  // no port 2
  const std::uint32_t qa = a.create_qp(1), qb = b.create_qp(1);
  engine::QpRemote ra, rb;
  ra.peer = 7;
  ra.qpn = qb;
  rb.peer = 0;
  rb.qpn = qa;
  ASSERT_EQ(a.connect_qp(qa, ra, 0), 0);
  ASSERT_EQ(b.connect_qp(qb, rb, 0), 0);
  engine::SendWr wr;
  wr.length = 100000;
  ASSERT_EQ(a.post_send(qa, wr, 0), 0);
  net.kick(0);
  net.run_until(1_ms);
  EXPECT_EQ(a.outstanding(qa), 0u);
  EXPECT_EQ(net.port_counters(2 * t.host_link(0, 0)).tx_packets, 0u);
  EXPECT_GE(net.port_counters(2 * t.host_link(0, 1)).tx_packets, 25u);
}

TEST(FabricFaults, DegradedLinkCarriesAtMostItsRate) {
  const Topology t = fat4();
  RoceRig rig(t, FabricConfig{});
  const std::uint32_t link = t.host_link(15, 0);
  rig.net.schedule_fault(LinkFault{0, link, LinkFaultKind::kRate, 10e9, LinkDir::kBoth});
  rig.write(0, 15, 2000000);
  rig.net.run_until(400_us);
  const std::uint64_t bytes = rig.net.port_counters(2 * link + 1).tx_bytes;  // leaf -> host 15
  const double at_rate = 10e9 / 8 * 400e-6;
  EXPECT_LE(static_cast<double>(bytes), at_rate + 4200);
  EXPECT_GE(static_cast<double>(bytes), 0.9 * at_rate);  // and it is kept busy
}

TEST(FabricFaults, KilledLinkDropsItsQueueAndRoutingAvoidsItAfterReconvergence) {
  const Topology t = fat4();
  FabricConfig fc;
  fc.reconverge_delay = 20_us;
  RoceRig rig(t, fc);
  // Host 0's ToR has two uplinks; find EVs hashed onto each and slow the first so a queue builds.
  const std::uint32_t tor = t.links[t.host_link(0, 0)].b;
  std::uint32_t up = ~0u;
  for (std::uint32_t i = 0; i < t.links.size() && up == ~0u; ++i)
    if (t.links[i].tier == 1 && t.links[i].a == tor) up = i;
  ASSERT_NE(up, ~0u);
  auto uses = [&](std::uint32_t ev) {
    const auto path = rig.net.trace(0, 15, 0, ev);
    return std::find(path.begin(), path.end(), 2 * up) != path.end();
  };
  rig.net.apply_fault(LinkFault{0, up, LinkFaultKind::kRate, 5e9, LinkDir::kBoth});
  for (std::uint32_t s = 0; s < 2; ++s) rig.write(s, 8 + s, 1000000);
  rig.net.run_until(30_us);
  const std::uint64_t queued = rig.net.queued_bytes(2 * up);
  ASSERT_GT(queued + rig.net.queued_bytes(2 * up + 1), 0u) << "no queue on the slow uplink: pick other flows";
  rig.net.schedule_fault(LinkFault{40_us, up, LinkFaultKind::kDown, 0, LinkDir::kBoth});
  rig.net.run_until(40_us);
  EXPECT_EQ(rig.net.queued_bytes(2 * up), 0u);
  EXPECT_EQ(rig.net.queued_bytes(2 * up + 1), 0u);
  EXPECT_GT(rig.net.stats().drops_by(FabricDrop::kLinkDown), 0u);
  std::uint32_t hashed = 0;
  for (std::uint32_t ev = 0; ev < 64; ++ev) hashed += uses(ev) ? 1 : 0;
  EXPECT_GT(hashed, 0u);  // not reconverged yet: still hashed onto the dead link
  rig.net.run_until(59_us);
  EXPECT_EQ(rig.net.stats().reconvergences, 0u);
  rig.net.run_until(61_us);
  EXPECT_EQ(rig.net.stats().reconvergences, 1u);
  for (std::uint32_t ev = 0; ev < 64; ++ev) EXPECT_FALSE(uses(ev)) << ev;
  rig.net.run_until(20_ms);
  EXPECT_EQ(rig.done, 2u);
  EXPECT_EQ(rig.failed, 0u);
}

TEST(FabricFaults, FlapScheduleTogglesTheLink) {
  const Topology t = fat4();
  Fabric net(t, FabricConfig{});
  const auto flaps = link_flaps(5, 10_us, 3_us, 7_us, 3);
  ASSERT_EQ(flaps.size(), 6u);
  for (const LinkFault& f : flaps) net.schedule_fault(f);
  const struct {
    Time at;
    bool up;
  } expect[] = {{9_us, true},  {11_us, false}, {14_us, true}, {21_us, false},
                {24_us, true}, {31_us, false}, {34_us, true}};
  for (const auto& e : expect) {
    net.run_until(e.at);
    EXPECT_EQ(net.link_up(5), e.up) << e.at;
  }
}

TEST(FabricFaults, SwitchRebootTakesAllItsLinksDownThenBack) {
  const Topology t = fat4();
  FabricConfig fc;
  fc.reconverge_delay = 5_us;
  Fabric net(t, fc);
  std::uint32_t core = 0;
  while (t.nodes[core].tier != 3) ++core;
  EXPECT_THROW(switch_reboot(t, 0, 0, 1_us), std::invalid_argument);  // a host
  const auto v = switch_reboot(t, core, 10_us, 100_us);
  ASSERT_EQ(v.size(), 2u * 4u);  // a k=4 core has 4 links
  for (const LinkFault& f : v) net.schedule_fault(f);
  auto through_core = [&] {
    std::uint32_t n = 0;
    for (std::uint32_t ev = 0; ev < 64; ++ev)
      for (std::uint32_t p : net.trace(0, 15, 0, ev)) n += net.port_to(p) == core ? 1 : 0;
    return n;
  };
  EXPECT_GT(through_core(), 0u);
  net.run_until(20_us);
  for (const LinkFault& f : v) EXPECT_FALSE(net.link_up(f.link));
  EXPECT_EQ(through_core(), 0u);  // reconverged around it
  net.run_until(120_us);
  for (const LinkFault& f : v) EXPECT_TRUE(net.link_up(f.link));
  EXPECT_GT(through_core(), 0u);  // used again after the next reconvergence
}

TEST(FabricFaults, OneDirectionGrayLoss) {
  const Topology t = fat4();
  RoceRig rig(t, FabricConfig{});
  const std::uint32_t link = t.host_link(0, 0);
  rig.net.apply_fault(LinkFault{0, link, LinkFaultKind::kLoss, 0.2, LinkDir::kAtoB});
  rig.write(0, 15, 500000);
  rig.net.run_until(100_ms);
  const double sent = static_cast<double>(rig.net.port_counters(2 * link).tx_packets);
  const double lost = static_cast<double>(rig.net.stats().drops_by(FabricDrop::kGrayLoss));
  EXPECT_NEAR(lost / sent, 0.2, 0.05);
  EXPECT_GT(rig.net.port_counters(2 * link + 1).tx_packets, 0u);
  EXPECT_EQ(rig.net.port_counters(2 * link + 1).drops, 0u);  // the ACK direction is clean
  EXPECT_EQ(rig.done, 1u);
}

}  // namespace
}  // namespace mrc::sim
