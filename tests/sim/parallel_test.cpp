// Parallel runs (D55): the network split into partitions, one Fabric each, on one or more threads,
// or over several ranks (distributed runs, here in-process: thread_ranks.hpp), must give exactly the
// result of one Fabric, on every rank; and the partition map itself.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "fat_tree.hpp"
#include "sim/cm.hpp"
#include "sim/fabric.hpp"
#include "sim/partition.hpp"
#include "sim/run.hpp"
#include "sim/topology.hpp"
#include "thread_ranks.hpp"

namespace mrc::sim {
namespace {

using test::fat4;

Topology clos(std::uint32_t radix, std::uint32_t planes) {
  ClosConfig c;
  c.radix = radix;
  c.planes = planes;
  return make_clos2(c);
}

// Everything a run reports except wall time, memory and the packet pool (each partition has its own);
// and the events processed unless `events` is false (lazy switch ports process fewer, D68).
void expect_same(const RunResult& a, const RunResult& b, bool events = true) {
  ASSERT_EQ(a.flows.size(), b.flows.size());
  for (std::size_t i = 0; i < a.flows.size(); ++i) {
    const FlowResult &x = a.flows[i], &y = b.flows[i];
    EXPECT_EQ(x.posted, y.posted) << i;
    EXPECT_EQ(x.finish, y.finish) << i;
    EXPECT_EQ(x.arrived, y.arrived) << i;
    EXPECT_EQ(x.ok, y.ok) << i;
    EXPECT_EQ(x.bytes_failed, y.bytes_failed) << i;
    EXPECT_EQ(std::memcmp(&x.qp, &y.qp, sizeof x.qp), 0) << i;
  }
  EXPECT_EQ(a.finished, b.finished);
  if (events) {
    EXPECT_EQ(a.net.events, b.net.events);
  }
  EXPECT_EQ(a.net.sent, b.net.sent);
  EXPECT_EQ(a.net.delivered, b.net.delivered);
  EXPECT_EQ(a.net.hops, b.net.hops);
  EXPECT_EQ(a.net.trimmed, b.net.trimmed);
  EXPECT_EQ(a.net.ecn_marked, b.net.ecn_marked);
  for (int d = 0; d < static_cast<int>(FabricDrop::kCount); ++d)
    EXPECT_EQ(a.net.drops[d], b.net.drops[d]) << d;
  EXPECT_EQ(a.net.pfc_pauses, b.net.pfc_pauses);
  EXPECT_EQ(a.net.reconvergences, b.net.reconvergences);
  EXPECT_EQ(a.net.peak_data_bytes, b.net.peak_data_bytes);
  EXPECT_EQ(a.tx_data, b.tx_data);
  EXPECT_EQ(a.tx_rtx, b.tx_rtx);
  EXPECT_EQ(a.tx_sack, b.tx_sack);
  EXPECT_EQ(a.tx_cnp, b.tx_cnp);
  EXPECT_EQ(a.ev_transitions, b.ev_transitions);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.end, b.end);
}

// The run at 1 thread, then at (threads, partitions) = (1, 2), (2, 2), (1, 3), (2, 3): all equal.
RunResult expect_partition_independent(const Topology& t, const ConnMatrix& m, const RunConfig& rc,
                                       bool all_finish = true) {
  RunResult one = run_matrix(t, m, rc);
  if (all_finish) {
    EXPECT_EQ(one.finished, m.conns.size());
  }
  for (const auto& [threads, parts] : {std::pair{1u, 2u}, {2u, 2u}, {1u, 3u}, {2u, 3u}}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads, " << parts << " partitions");
    RunConfig p = rc;
    p.threads = threads;
    p.partitions = parts;
    expect_same(one, run_matrix(t, m, p));
  }
  // Distributed: (ranks, threads per rank, partitions) = (2, 1, 2), (2, 2, 4), (3, 1, 3), (2, 1, 3).
  for (const auto& [nr, threads, parts] :
       {std::tuple{2u, 1u, 2u}, {2u, 2u, 4u}, {3u, 1u, 3u}, {2u, 1u, 3u}}) {
    SCOPED_TRACE(::testing::Message()
                 << nr << " ranks, " << threads << " threads, " << parts << " partitions");
    std::vector<RunResult> got(nr);
    test::run_ranks(nr, [&](Ranks& ranks) {
      RunConfig p = rc;
      p.threads = threads;
      p.partitions = parts;
      p.ranks = &ranks;
      if (ranks.rank() != 0) p.progress = nullptr;  // reports are made on the ranks that ask
      got[ranks.rank()] = run_matrix(t, m, p);
    });
    for (std::uint32_t r = 0; r < nr; ++r) {
      SCOPED_TRACE(::testing::Message() << "rank " << r);
      expect_same(one, got[r]);
      EXPECT_EQ(got[r].ranks, nr);
      EXPECT_EQ(got[r].rank_rss_kb.size(), nr);
    }
  }
  return one;
}

TEST(SimPartition, WholePlanesAndHostBlocks) {
  const Topology t = clos(8, 4);  // 32 hosts, 4 planes
  const std::vector<std::uint32_t> part = partition_nodes(t, make_permutation(32, 1000, 1), 2);
  ASSERT_EQ(part.size(), t.nodes.size());
  for (std::uint32_t h = 0; h < 32; ++h) EXPECT_EQ(part[h], h < 16 ? 0u : 1u) << h;
  for (std::uint32_t n = 32; n < t.num_nodes(); ++n) EXPECT_EQ(part[n], t.nodes[n].plane / 2u) << n;
  // One plane: a leaf goes with its hosts.
  const Topology f = fat4();
  const std::vector<std::uint32_t> fp = partition_nodes(f, make_permutation(16, 1000, 1), 2);
  for (std::uint32_t h = 0; h < 16; ++h) EXPECT_EQ(fp[f.links[f.host_link(h, 0)].b], fp[h]) << h;
  EXPECT_EQ(partition_nodes(f, ConnMatrix{}, 1), std::vector<std::uint32_t>(f.nodes.size(), 0));
  EXPECT_EQ(lookahead_ps(f), 1'000'000u);
}

// An all-to-all among the first half of the hosts splits that half (the load), not the hosts; an
// aggregation switch goes with its pod, the core switches are shared out.
TEST(SimPartition, SplitsTheLoadAndKeepsPodsWhole) {
  const Topology t = fat4();  // 16 hosts, 4 pods of 4
  const std::vector<std::uint32_t> part = partition_nodes(t, make_all_to_all(8, 1000), 2);
  for (std::uint32_t h = 0; h < 16; ++h) EXPECT_EQ(part[h], h < 4 ? 0u : 1u) << h;
  std::uint32_t aggs = 0, cores[2] = {0, 0};
  for (const TopoLink& l : t.links) {
    if (l.tier != 1) continue;  // leaf - aggregation switch
    const std::uint32_t leaf = t.nodes[l.a].tier == 1 ? l.a : l.b, agg = leaf == l.a ? l.b : l.a;
    const bool loaded = std::any_of(t.links.begin(), t.links.end(),
                                    [&](const TopoLink& h) { return h.tier == 0 && h.b == leaf && h.a < 8; });
    if (!loaded) continue;
    EXPECT_EQ(part[agg], part[leaf]) << agg;
    ++aggs;
  }
  EXPECT_EQ(aggs, 8u);  // pods 0 and 1: 2 leaves x 2 aggregation switches each
  for (std::uint32_t n = 16; n < t.num_nodes(); ++n)
    if (t.nodes[n].tier == 3) ++cores[part[n]];
  EXPECT_EQ(cores[0], cores[1]);
  EXPECT_GT(cores[0], 0u);
  // A connection whose size is not given counts as one byte: sizes decide only where they are given.
  ConnMatrix m = make_all_to_all(8, 1000);
  for (ConnSpec& c : m.conns) c.bytes = 0;
  EXPECT_EQ(partition_nodes(t, m, 2), part);
}

// Unequal loads: an incast's receiver carries half the load; the senders after it spread evenly
// over the partitions left (not all into the next one). Idle hosts go with the loaded hosts after
// them, and sizes count, not connections.
TEST(SimPartition, SharesTheLoadLeftAfterAHeavyHost) {
  const Topology t = fat4();
  ConnMatrix incast;
  incast.nodes = 16;
  for (std::uint32_t s = 1; s < 16; ++s) incast.conns.push_back(ConnSpec{s, 0, s, 0, 1000});
  const std::vector<std::uint32_t> p = partition_nodes(t, incast, 4);
  EXPECT_EQ(p[0], 0u);
  for (std::uint32_t h = 1; h < 16; ++h) EXPECT_EQ(p[h], 1 + (h - 1) / 5) << h;  // 5 senders each
  // All-to-all among hosts 8-15: hosts 0-7 have nothing to do and do not count.
  ConnMatrix late = make_all_to_all(8, 1000);
  for (ConnSpec& c : late.conns) {
    c.src += 8;
    c.dst += 8;
  }
  late.nodes = 16;
  const std::vector<std::uint32_t> q = partition_nodes(t, late, 2);
  for (std::uint32_t h = 0; h < 16; ++h) EXPECT_EQ(q[h], h < 12 ? 0u : 1u) << h;
  // Host 0 sends 3 units, hosts 1-3 one each: host 0 alone is half.
  ConnMatrix sized;
  sized.nodes = 16;
  sized.conns = {ConnSpec{0, 8, 1, 0, 3000}, ConnSpec{1, 9, 2, 0, 1000}, ConnSpec{2, 10, 3, 0, 1000},
                 ConnSpec{3, 11, 4, 0, 1000}};
  const std::vector<std::uint32_t> r = partition_nodes(t, sized, 2);
  EXPECT_EQ(r[0], 0u);
  EXPECT_EQ(r[1], 0u);  // 3 of 12 units placed, then host 1: partition 0 holds 4 < 6
  EXPECT_EQ(r[2], 0u);  // 4, then host 2 (5)
  EXPECT_EQ(r[3], 0u);  // 5 < 6: still 0, then host 3 (6)
  EXPECT_EQ(r[4], 1u);  // 6 >= 6: the next partition
}

// A switch with less than 3/4 of the load below it in one partition is shared out round robin: a
// pod split down the middle, and on a multi-plane Clos with fewer planes than partitions the
// spines (every leaf below each). Leaves always go with their first host.
TEST(SimPartition, SwitchesWithoutAClearMajorityGoRoundRobin) {
  const Topology t = fat4();
  const std::vector<std::uint32_t> p = partition_nodes(t, make_all_to_all(4, 1000), 2);  // pod 0 only
  for (std::uint32_t h = 0; h < 4; ++h) EXPECT_EQ(p[h], h < 2 ? 0u : 1u) << h;
  std::uint32_t pod0_aggs = 0;
  for (const TopoLink& l : t.links) {
    if (l.tier != 1) continue;
    const std::uint32_t leaf = t.nodes[l.a].tier == 1 ? l.a : l.b, agg = leaf == l.a ? l.b : l.a;
    if (leaf != t.links[t.host_link(0, 0)].b) continue;  // the aggregation switches above host 0's leaf
    EXPECT_EQ(p[agg], t.nodes[agg].index % 2u) << agg;
    ++pod0_aggs;
  }
  EXPECT_EQ(pod0_aggs, 2u);
  const Topology c = clos(8, 2);  // 2 planes, 4 partitions
  const std::vector<std::uint32_t> cp = partition_nodes(c, make_permutation(c.hosts, 1000, 1), 4);
  std::uint32_t spines = 0;
  for (std::uint32_t n = c.hosts; n < c.num_nodes(); ++n) {
    if (c.nodes[n].tier != 2) continue;
    EXPECT_EQ(cp[n], c.nodes[n].index % 4u) << n;
    ++spines;
  }
  EXPECT_GT(spines, 0u);
  std::vector<bool> seen(c.num_nodes(), false);
  for (std::uint32_t h = 0; h < c.hosts; ++h)
    for (std::uint32_t pl = 0; pl < 2; ++pl) {
      const std::uint32_t leaf = c.links[c.host_link(h, pl)].b;
      if (seen[leaf]) continue;
      seen[leaf] = true;
      EXPECT_EQ(cp[leaf], cp[h]) << leaf;
    }
}

TEST(SimPartition, DependentStartsWhereItsDependencyArrives) {
  const Topology t = fat4();
  ConnMatrix m;
  m.nodes = 16;
  m.conns.push_back(ConnSpec{0, 9, 1, 0, 1000});
  ConnSpec dep{14, 3, 2, 0, 1000};
  dep.after = 0;  // posted at host 14 when connection 0 has arrived at host 9
  m.conns.push_back(dep);
  const std::vector<std::uint32_t> part = partition_nodes(t, m, 2);
  EXPECT_EQ(part[9], part[14]);
  EXPECT_NE(part[0], part[15]);  // the rest still splits
}

// A partition's outbox for another process: nothing when it sent nothing, and a record is read
// only whole (a short buffer is refused, not read past).
TEST(SimPartition, PackedRecords) {
  const Topology t = fat4();
  const std::vector<std::uint32_t> part = partition_nodes(t, make_permutation(16, 1000, 1), 2);
  Fabric a(t, FabricConfig{});
  a.set_partition(part, 0, 2);
  std::vector<std::uint8_t> buf;
  a.pack_messages(1, buf);
  EXPECT_TRUE(buf.empty());
  const std::uint32_t head[4] = {0, 1, 0, 5};  // from 0 to 1, no messages, 5 bytes
  std::vector<std::uint8_t> rec(sizeof head + 5, 0);
  std::memcpy(rec.data(), head, sizeof head);
  const Fabric::Packed r = Fabric::packed_record(rec);
  EXPECT_EQ(r.from, 0u);
  EXPECT_EQ(r.to, 1u);
  EXPECT_EQ(r.size, rec.size());
  EXPECT_THROW(Fabric::packed_record(std::span<const std::uint8_t>(rec).first(rec.size() - 1)),
               std::runtime_error);
  EXPECT_THROW(Fabric::packed_record(std::span<const std::uint8_t>(rec).first(3)), std::runtime_error);
  EXPECT_THROW(a.take_packed(rec), std::runtime_error);  // addressed to partition 1, not to us
}

// A partition shares the topology it is given, holds the ports that leave or reach its nodes and
// FIB rows for its own switches only: a route through them is one Fabric's (the same global port
// ids), a route that reaches another partition's switch is not known here.
TEST(SimPartition, HoldsItsOwnPortsAndFibRowsOnly) {
  const auto t = std::make_shared<const Topology>(clos(8, 2));
  const std::vector<std::uint32_t> part = partition_nodes(*t, make_permutation(t->hosts, 1000, 1), 2);
  Fabric whole(t, FabricConfig{});
  Fabric a(t, FabricConfig{});
  a.set_partition(part, 0, 2);
  EXPECT_EQ(&a.topology(), t.get());
  std::uint32_t own = 0;
  for (std::uint32_t n = t->hosts; n < t->num_nodes(); ++n) own += part[n] == 0 ? 1 : 0;
  EXPECT_EQ(whole.fib_rows(), t->num_nodes() - t->hosts);
  EXPECT_EQ(a.fib_rows(), own);
  EXPECT_GT(own, 0u);
  EXPECT_LT(own, whole.fib_rows());
  std::uint32_t held = 0;
  for (std::uint32_t p = 0; p < whole.num_ports(); ++p)
    held += part[whole.port_from(p)] == 0 || part[whole.port_to(p)] == 0 ? 1 : 0;
  EXPECT_EQ(whole.ports_held(), whole.num_ports());
  EXPECT_EQ(a.ports_held(), held);
  EXPECT_LT(held, whole.num_ports());
  EXPECT_EQ(a.num_ports(), whole.num_ports());
  // A partition made at construction is the same as one made by set_partition.
  const Fabric b(t, FabricConfig{}, part, 0, 2);
  EXPECT_EQ(b.ports_held(), held);
  EXPECT_EQ(b.fib_rows(), own);
  std::uint32_t same = 0, unknown = 0;
  for (std::uint32_t s = 0; s < t->hosts; ++s) {
    if (part[s] != 0) continue;
    for (std::uint32_t d = 0; d < t->hosts; ++d)
      for (std::uint32_t plane = 0; plane < t->planes; ++plane) {
        const std::vector<std::uint32_t> w = whole.trace(s, d, plane, s * 31 + d),
                                         p = a.trace(s, d, plane, s * 31 + d);
        ASSERT_FALSE(w.empty());
        bool mine = true;
        for (std::size_t i = 0; i + 1 < w.size(); ++i) mine = mine && part[whole.port_to(w[i])] == 0;
        if (mine) {
          EXPECT_EQ(p, w);
          EXPECT_EQ(b.trace(s, d, plane, s * 31 + d), w);
          ++same;
        } else {
          EXPECT_TRUE(p.empty());
          ++unknown;
        }
      }
  }
  EXPECT_GT(same, 0u);
  EXPECT_GT(unknown, 0u);
}

// On fat4: a leaf uplink down at 8 us and up at 30 us (reconvergence 10 us later each), gray loss
// on another uplink, a third slowed to 25 Gb/s from `slow_at`.
RunConfig faulty_fat4(const Topology& t, Time slow_at) {
  RunConfig rc;
  rc.evs_per_plane = 16;
  rc.limit = 20_ms;
  rc.fabric.reconverge_delay = 10_us;
  std::uint32_t uplink = 0;
  while (t.links[uplink].tier != 1) ++uplink;
  rc.faults.push_back(LinkFault{8_us, uplink, LinkFaultKind::kDown, 0});
  rc.faults.push_back(LinkFault{30_us, uplink, LinkFaultKind::kUp, 0});
  rc.faults.push_back(LinkFault{0, uplink + 3, LinkFaultKind::kLoss, 0.02});
  rc.faults.push_back(LinkFault{slow_at, uplink + 5, LinkFaultKind::kRate, 25e9});
  return rc;
}

TEST(SimParallel, PermutationWithFaultsAndReconvergence) {
  const Topology t = fat4();
  const RunConfig rc = faulty_fat4(t, 0);
  const RunResult r = expect_partition_independent(t, make_permutation(16, 300000, 3), rc);
  EXPECT_GT(r.net.drops_by(FabricDrop::kLinkDown), 0u);
  EXPECT_GT(r.net.drops_by(FabricDrop::kGrayLoss), 0u);
  EXPECT_EQ(r.net.reconvergences, 2u);
}

TEST(SimParallel, MultiPlaneIncastWithNicLinkDown) {
  const Topology t = clos(8, 2);
  RunConfig rc;
  rc.evs_per_plane = 8;
  rc.limit = 20_ms;
  rc.faults.push_back(LinkFault{20_us, t.host_link(0, 0), LinkFaultKind::kDown, 0});
  const RunResult r = expect_partition_independent(t, make_incast(32, 7, 200000, true, 1000000, 30), rc);
  EXPECT_GT(r.net.trimmed, 0u);
  EXPECT_GT(r.net.ecn_marked, 0u);
  EXPECT_GT(r.net.drops_by(FabricDrop::kLinkDown), 0u);
}

TEST(SimParallel, RocePfcIncast) {
  const Topology t = clos(8, 2);
  RunConfig rc;
  rc.transport = Transport::kRoce;
  rc.fabric.queue.pfc = true;
  rc.qps_per_peer = 2;
  rc.limit = 20_ms;
  const RunResult r = run_matrix(t, make_incast(32, 12, 300000, false, 0, 0), rc);
  EXPECT_GT(r.net.pfc_pauses, 0u);  // PAUSE and RESUME cross partitions too
  expect_partition_independent(t, make_incast(32, 12, 300000, false, 0, 0), rc);
}

TEST(SimParallel, RingAllReduceWithSamplesAndPayload) {
  const Topology t = clos(4, 2);
  RunConfig rc;
  rc.evs_per_plane = 4;
  rc.limit = 20_ms;
  rc.sample_interval = 3_us;
  rc.fabric.carry_payload = true;
  rc.faults.push_back(LinkFault{0, t.host_link(2, 1), LinkFaultKind::kLoss, 0.01});
  const RunResult r = expect_partition_independent(t, make_ring_allreduce(8, 200000), rc);
  EXPECT_GT(r.samples.size(), 3u);
  EXPECT_GT(r.net.drops_by(FabricDrop::kGrayLoss), 0u);
}

// Prefetching QP state (RunConfig::prefetch_qps, on from 1,024 QPs) is a hint: forced on for a run
// of 240 QPs with faults, and for a multi-plane incast, the results are those without it.
TEST(SimPrefetch, HintsChangeNothing) {
  const Topology t = fat4();
  RunConfig rc;
  rc.evs_per_plane = 16;
  rc.limit = 20_ms;
  std::uint32_t uplink = 0;
  while (t.links[uplink].tier != 1) ++uplink;
  rc.faults.push_back(LinkFault{5_us, uplink, LinkFaultKind::kDown, 0});
  rc.faults.push_back(LinkFault{0, uplink + 3, LinkFaultKind::kLoss, 0.02});
  const ConnMatrix a2a = make_all_to_all(16, 40000);
  RunConfig on = rc;
  on.prefetch_qps = 0;
  const RunResult off_r = run_matrix(t, a2a, rc), on_r = run_matrix(t, a2a, on);
  EXPECT_EQ(off_r.finished, a2a.conns.size());
  EXPECT_GT(off_r.net.drops_by(FabricDrop::kGrayLoss), 0u);
  expect_same(off_r, on_r);
  const Topology c = clos(8, 2);
  const ConnMatrix incast = make_incast(32, 7, 200000, true, 1000000, 30);
  RunConfig ic;
  ic.evs_per_plane = 8;
  ic.limit = 20_ms;
  RunConfig ic_on = ic;
  ic_on.prefetch_qps = 0;
  const RunResult a = run_matrix(c, incast, ic);
  EXPECT_GT(a.net.trimmed, 0u);
  expect_same(a, run_matrix(c, incast, ic_on));
}

// Lazy switch ports (D68) catch up on their dequeues in batches, with the results of one event per
// dequeue (FabricConfig::lazy_ports = false): over link failure, reconvergence, gray loss, a rate
// change, trimming, ECN, a NIC link down, samples, and at 2 threads; with fewer events.
TEST(SimLazyPorts, SameResultsAsOneEventPerDequeue) {
  auto check = [](const Topology& t, const ConnMatrix& m, RunConfig rc) {
    RunConfig eager = rc;
    eager.fabric.lazy_ports = false;
    const RunResult e = run_matrix(t, m, eager), l = run_matrix(t, m, rc);
    EXPECT_EQ(e.finished, m.conns.size());
    EXPECT_LT(l.net.events, e.net.events);
    expect_same(e, l, false);
    rc.threads = 2;
    expect_same(e, run_matrix(t, m, rc), false);
    return e;
  };
  const Topology t = fat4();
  const RunConfig rc = faulty_fat4(t, 12_us);
  {
    SCOPED_TRACE("permutation with faults");
    const RunResult e = check(t, make_permutation(16, 300000, 3), rc);
    EXPECT_GT(e.net.drops_by(FabricDrop::kLinkDown), 0u);
    EXPECT_GT(e.net.drops_by(FabricDrop::kGrayLoss), 0u);
  }
  {
    SCOPED_TRACE("all-to-all with faults");
    check(t, make_all_to_all(16, 40000), rc);
  }
  {
    // A packet takes 33 us on a 1 Gb/s link: the wake-ups of the leaf's port to host 0 (which
    // receives a flow) lie beyond the ring of grid intervals the lazy ports' wake-ups share (8 of
    // 1 us) and are events of their own.
    SCOPED_TRACE("a link slower than the wake ring");
    RunConfig slow = rc;
    slow.faults.push_back(LinkFault{0, t.host_link(0, 0), LinkFaultKind::kRate, 1e9});
    const RunResult e = check(t, make_permutation(16, 100000, 3), slow);
    EXPECT_GT(e.end, 800_us);  // 100 KB at 1 Gb/s
  }
  const Topology c = clos(8, 2);
  RunConfig ic;
  ic.evs_per_plane = 8;
  ic.limit = 20_ms;
  ic.sample_interval = 3_us;
  ic.faults.push_back(LinkFault{20_us, c.host_link(0, 0), LinkFaultKind::kDown, 0});
  {
    SCOPED_TRACE("incast");
    const RunResult e = check(c, make_incast(32, 7, 200000, true, 1000000, 30), ic);
    EXPECT_GT(e.net.trimmed, 0u);
    EXPECT_GT(e.net.ecn_marked, 0u);
  }
}

// The limit cuts every partition at the same event, and the progress reports (from the thread that
// runs between windows) see the whole run.
TEST(SimParallel, LimitAndProgress) {
  const Topology t = clos(8, 2);
  RunConfig rc;
  rc.evs_per_plane = 8;
  rc.limit = 12_us;
  std::uint32_t reports = 0;
  Progress last;
  rc.progress = [&](const Progress& p) {
    ++reports;
    last = p;
  };
  const RunResult r = expect_partition_independent(t, make_permutation(32, 1000000, 5), rc, false);
  EXPECT_LT(r.finished, 32u);
  EXPECT_LE(r.end, 12_us);
  EXPECT_GT(r.end, 11_us);
  EXPECT_GT(reports, 5u);
  EXPECT_TRUE(last.last);
  EXPECT_EQ(last.events, r.net.events);
}

}  // namespace
}  // namespace mrc::sim
