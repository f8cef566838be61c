// Workloads through run_matrix: ring all-reduce step dependencies, all-to-all, incast with a victim
// sharing a sender's NIC, several QPs per peer, RoCE and MRC hosts, host-link failure.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "fat_tree.hpp"
#include "sim/cm.hpp"
#include "sim/run.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {
namespace {

using test::fat4;

RunConfig mrc_cfg() {
  RunConfig rc;
  rc.evs_per_plane = 16;
  rc.limit = 50_ms;
  return rc;
}

RunConfig roce_cfg() {
  RunConfig rc = mrc_cfg();
  rc.transport = Transport::kRoce;
  rc.fabric.queue.pfc = true;
  return rc;
}

TEST(Workload, RingAllReduceShape) {
  const ConnMatrix m = make_ring_allreduce(4, 40000);
  ASSERT_EQ(m.conns.size(), 2u * 3u * 4u);
  for (std::uint32_t s = 0; s < 6; ++s) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      const ConnSpec& c = m.conns[s * 4 + i];
      EXPECT_EQ(c.src, i);
      EXPECT_EQ(c.dst, (i + 1) % 4);
      EXPECT_EQ(c.bytes, 10000u);
      if (s == 0) {
        EXPECT_EQ(c.after, ConnSpec::kNoDep);
      } else {
        EXPECT_EQ(c.after, (s - 1) * 4 + (i + 3) % 4);  // what node i received at the step before
      }
    }
  }
  EXPECT_THROW(make_ring_allreduce(1, 100), std::invalid_argument);
}

/// Every step starts only once the data it forwards has arrived, and no earlier than that.
void check_steps(const RunResult& r) {
  ASSERT_EQ(r.finished, r.flows.size());
  for (const FlowResult& f : r.flows) {
    ASSERT_NE(f.arrived, kNever);
    EXPECT_TRUE(f.ok);
    if (f.conn.after == ConnSpec::kNoDep) {
      EXPECT_EQ(f.posted, 0u);
      continue;
    }
    const FlowResult& dep = r.flows[f.conn.after];
    EXPECT_EQ(f.posted, dep.arrived);
    EXPECT_GT(f.arrived, dep.arrived);
  }
}

TEST(Workload, RingAllReduceStepsWaitForTheirData) {
  const ConnMatrix m = make_ring_allreduce(8, 8 * 64 * 1024);
  const RunResult mrc = run_matrix(fat4(), m, mrc_cfg());
  check_steps(mrc);
  const RunResult roce = run_matrix(fat4(), m, roce_cfg());
  check_steps(roce);
  // 14 dependent steps of 64 KB: far longer than one step, bounded by the steps' sum.
  EXPECT_GT(mrc.last_finish_us, 14 * 64 * 1024 * 8 / 100e3);
}

TEST(Workload, DependencyOnAMissingConnectionIsRejected) {
  ConnMatrix m = make_ring_allreduce(4, 4000);
  m.conns[5].after = 1000;
  EXPECT_THROW(run_matrix(fat4(), m, mrc_cfg()), std::invalid_argument);
}

TEST(Workload, AllToAllRunsEveryPair) {
  const ConnMatrix m = make_all_to_all(5, 20000);
  ASSERT_EQ(m.conns.size(), 20u);
  std::set<std::pair<std::uint32_t, std::uint32_t>> pairs;
  for (const ConnSpec& c : m.conns) {
    EXPECT_NE(c.src, c.dst);
    pairs.emplace(c.src, c.dst);
  }
  EXPECT_EQ(pairs.size(), 20u);
  EXPECT_EQ(run_matrix(fat4(), m, mrc_cfg()).finished, 20u);
  EXPECT_EQ(run_matrix(fat4(), m, roce_cfg()).finished, 20u);
}

TEST(Workload, IncastVictimSharesASendersNic) {
  const ConnMatrix m = make_incast(16, 7, 1000000, true, 4000000, 15);
  ASSERT_EQ(m.conns.size(), 8u);
  EXPECT_EQ(m.conns[7].src, 1u);
  EXPECT_EQ(m.conns[7].dst, 15u);
  EXPECT_THROW(make_incast(16, 7, 1000, true, 1000, 0), std::invalid_argument);
  const RunResult mrc = run_matrix(fat4(), m, mrc_cfg());
  const RunResult roce = run_matrix(fat4(), m, roce_cfg());
  ASSERT_EQ(mrc.finished, 8u);
  ASSERT_EQ(roce.finished, 8u);
  auto victim_gbps = [](const RunResult& r) { return 4e6 * 8 / (r.flows[7].fct_us * 1e3); };
  // MRC: the victim gets what the incast flow on its NIC leaves (~100 - 100/7 Gb/s). RoCE + PFC:
  // the incast's pauses stop the shared NIC link, so the victim loses throughput.
  EXPECT_GT(victim_gbps(mrc), 70.0);
  EXPECT_LT(victim_gbps(roce), victim_gbps(mrc));
  EXPECT_GT(roce.net.pfc_pauses, 0u);
}

TEST(Workload, SeveralQpsPerPeerUseSeveralPlanes) {
  ClosConfig cc;
  cc.radix = 4;
  cc.planes = 2;
  const Topology t = make_clos2(cc);
  ConnMatrix m;
  m.nodes = t.hosts;
  m.conns.push_back(ConnSpec{0, 7, 1, 0, 4000000});
  RunConfig one = roce_cfg();
  RunConfig two = one;
  two.qps_per_peer = 2;
  const RunResult a = run_matrix(t, m, one), b = run_matrix(t, m, two);
  ASSERT_EQ(a.finished, 1u);
  ASSERT_EQ(b.finished, 1u);
  EXPECT_LT(b.fct_max, 0.6 * a.fct_max);                         // two planes' worth of bandwidth
  EXPECT_LE(b.flows[0].qp.tx_data - a.flows[0].qp.tx_data, 1u);  // two halves: one more packet at most
  RunConfig bad = one;
  bad.qps_per_peer = 0;
  EXPECT_THROW(run_matrix(t, m, bad), std::invalid_argument);
}

TEST(Workload, MrcSurvivesItsNicLinkDying) {
  ClosConfig cc;
  cc.radix = 4;
  cc.planes = 2;
  const Topology t = make_clos2(cc);
  ConnMatrix m;
  m.nodes = t.hosts;
  m.conns.push_back(ConnSpec{0, 7, 1, 0, 4000000});
  RunConfig rc = mrc_cfg();
  rc.faults.push_back(LinkFault{50_us, t.host_link(0, 0), LinkFaultKind::kDown, 0, LinkDir::kBoth});
  rc.sample_interval = 10_us;
  const RunResult r = run_matrix(t, m, rc);
  ASSERT_EQ(r.finished, 1u);
  EXPECT_TRUE(r.flows[0].ok);
  EXPECT_EQ(r.bytes_failed, 0u);
  EXPECT_GT(r.net.drops_by(FabricDrop::kLinkDown), 0u);
  // Goodput samples (bytes placed at the receiver by the end of each 10 us): the rate halves once
  // one of the two planes is gone.
  ASSERT_GE(r.samples.size(), 20u);
  const double before = static_cast<double>(r.samples[4] - r.samples[1]) / 3;   // 20 .. 50 us
  const double after = static_cast<double>(r.samples[19] - r.samples[9]) / 10;  // 100 .. 200 us
  EXPECT_LT(after, 0.7 * before) << "bytes per 10 us: " << before << " before, " << after << " after";
  EXPECT_GT(after, 0.3 * before) << "bytes per 10 us: " << before << " before, " << after << " after";
  // Both planes: ~170 us. One plane from 50 us on: about 50 + 2.8 MB at 100 Gb/s = 275 us.
  EXPECT_GT(r.fct_max, 250.0);
}

}  // namespace
}  // namespace mrc::sim
