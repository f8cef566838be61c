// Fabric faults (link down + reconvergence, degraded rate, gray loss) driven through run_matrix,
// and a golden run with exact FCTs.
#include <gtest/gtest.h>

#include <vector>

#include "fat_tree.hpp"
#include "sim/cm.hpp"
#include "sim/fabric.hpp"
#include "sim/run.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {
namespace {

using test::fat4;

ConnMatrix one_flow(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) {
  ConnMatrix m;
  m.nodes = 16;
  m.conns.push_back(ConnSpec{src, dst, 1, 0, bytes});
  return m;
}

/// The first ToR-aggregation link of host h's ToR.
std::uint32_t uplink_of(const Topology& t, std::uint32_t h) {
  const std::uint32_t tor = t.links[t.host_link(h, 0)].b;
  for (std::uint32_t i = 0; i < t.links.size(); ++i)
    if (t.links[i].tier == 1 && t.links[i].a == tor) return i;
  return ~0u;
}

RunConfig small_cfg(std::uint32_t evs) {
  RunConfig rc;
  rc.evs_per_plane = evs;
  rc.limit = 50_ms;
  return rc;
}

TEST(SimFaults, BaselineFlowHasNoFaultDrops) {
  const Topology t = fat4();
  const RunResult r = run_matrix(t, one_flow(0, 15, 1000000), small_cfg(16));
  ASSERT_EQ(r.finished, 1u);
  EXPECT_EQ(r.net.dropped(), 0u);
  EXPECT_EQ(r.tx_rtx, 0u);
}

TEST(SimFaults, LinkDownBlackholesUntilReconvergenceThenRoutesAround) {
  const Topology t = fat4();
  RunConfig rc = small_cfg(16);
  rc.fabric.reconverge_delay = 20_us;
  const std::uint32_t link = uplink_of(t, 0);
  ASSERT_NE(link, ~0u);
  rc.faults.push_back(LinkFault{10_us, link, LinkFaultKind::kDown, 0});
  const RunResult r = run_matrix(t, one_flow(0, 15, 2000000), rc);
  ASSERT_EQ(r.finished, 1u);
  EXPECT_TRUE(r.flows[0].ok);
  // Half the sprayed packets hashed onto the dead uplink until the switch reconverged.
  EXPECT_GT(r.net.drops_by(FabricDrop::kLinkDown), 0u);
  EXPECT_GT(r.tx_rtx, 0u);
  // Without reconvergence the losses go on for the whole flow: strictly more drops.
  RunConfig never = rc;
  never.fabric.reconverge_delay = 10000_ms;
  const RunResult n = run_matrix(t, one_flow(0, 15, 2000000), never);
  EXPECT_GT(n.net.drops_by(FabricDrop::kLinkDown), r.net.drops_by(FabricDrop::kLinkDown));
}

TEST(SimFaults, LinkUpAgainStopsDrops) {
  const Topology t = fat4();
  RunConfig rc = small_cfg(16);
  rc.fabric.reconverge_delay = 1000_ms;  // never reconverges within the run
  const std::uint32_t link = uplink_of(t, 0);
  rc.faults.push_back(LinkFault{10_us, link, LinkFaultKind::kDown, 0});
  RunConfig flap = rc;
  flap.faults.push_back(LinkFault{30_us, link, LinkFaultKind::kUp, 0});
  const RunResult down = run_matrix(t, one_flow(0, 15, 2000000), rc);
  const RunResult up = run_matrix(t, one_flow(0, 15, 2000000), flap);
  ASSERT_EQ(up.finished, 1u);
  EXPECT_GT(up.net.drops_by(FabricDrop::kLinkDown), 0u);
  EXPECT_LT(up.net.drops_by(FabricDrop::kLinkDown), down.net.drops_by(FabricDrop::kLinkDown));
}

TEST(SimFaults, DegradedLinkRateBoundsFct) {
  const Topology t = fat4();
  RunConfig rc = small_cfg(16);
  rc.faults.push_back(LinkFault{0, t.host_link(15, 0), LinkFaultKind::kRate, 10e9});
  const RunResult r = run_matrix(t, one_flow(0, 15, 1000000), rc);
  ASSERT_EQ(r.finished, 1u);
  // 1 MB through a 10 Gb/s last hop takes at least 800 us; at 100 Gb/s it takes ~100 us.
  EXPECT_GT(r.fct_max, 800.0);
  EXPECT_LT(r.fct_max, 2000.0);
}

TEST(SimFaults, GrayLossIsRecovered) {
  const Topology t = fat4();
  RunConfig rc = small_cfg(16);
  rc.faults.push_back(LinkFault{0, uplink_of(t, 0), LinkFaultKind::kLoss, 0.05});
  const RunResult r = run_matrix(t, one_flow(0, 15, 2000000), rc);
  ASSERT_EQ(r.finished, 1u);
  EXPECT_TRUE(r.flows[0].ok);
  EXPECT_GT(r.net.drops_by(FabricDrop::kGrayLoss), 0u);
  EXPECT_EQ(r.net.drops_by(FabricDrop::kLinkDown), 0u);
  EXPECT_GE(r.tx_rtx, r.net.drops_by(FabricDrop::kGrayLoss) / 2);
}

TEST(SimFaults, BadFaultsAreRejected) {
  const Topology t = fat4();
  Fabric net(t, FabricConfig{});
  EXPECT_THROW(net.schedule_fault(LinkFault{0, 100000, LinkFaultKind::kDown, 0}), std::invalid_argument);
  EXPECT_THROW(net.schedule_fault(LinkFault{0, 0, LinkFaultKind::kLoss, 1.5}), std::invalid_argument);
  EXPECT_THROW(net.schedule_fault(LinkFault{0, 0, LinkFaultKind::kRate, 0}), std::invalid_argument);
  EXPECT_TRUE(net.link_up(0));
  net.apply_fault(LinkFault{0, 0, LinkFaultKind::kDown, 0});
  EXPECT_FALSE(net.link_up(0));
}

// Golden: 128-host permutation (k=8 fat tree, htsim network), 256 KB per flow, 32 EVs. The exact
// FCTs pin the fabric + engine behaviour; any change in either shows up here (update deliberately).
TEST(SimGolden, Perm128) {
  FatTreeConfig fc;
  fc.k = 8;
  const Topology t = make_fat_tree(fc);
  const ConnMatrix m = make_permutation(128, 262144, 7);
  RunConfig rc;
  rc.evs_per_plane = 32;
  const RunResult r = run_matrix(t, m, rc);
  ASSERT_EQ(r.finished, 128u);
  EXPECT_DOUBLE_EQ(r.fct_min, 25.812);
  EXPECT_DOUBLE_EQ(r.fct_p50, 41.898);
  EXPECT_DOUBLE_EQ(r.fct_p99, 47.214);
  EXPECT_DOUBLE_EQ(r.fct_max, 47.967);
  EXPECT_EQ(r.net.events, 84983u);  // 104,989 with one event per dequeue (lazy_ports = false)
  EXPECT_EQ(r.tx_data, 128u * 64u);
  EXPECT_EQ(r.flows[0].finish, 46313u);
  EXPECT_EQ(r.flows[127].finish, 42875u);
  // The same run on 2 threads (2 partitions of the fat tree, D55): the same events and finishes.
  rc.threads = 2;
  const RunResult p = run_matrix(t, m, rc);
  EXPECT_EQ(p.net.events, r.net.events);
  EXPECT_EQ(p.net.hops, r.net.hops);
  EXPECT_EQ(p.net.ecn_marked, r.net.ecn_marked);
  EXPECT_EQ(p.tx_sack, r.tx_sack);
  for (std::size_t i = 0; i < r.flows.size(); ++i) {
    EXPECT_EQ(p.flows[i].finish, r.flows[i].finish) << i;
    EXPECT_EQ(p.flows[i].arrived, r.flows[i].arrived) << i;
  }
}

}  // namespace
}  // namespace mrc::sim
