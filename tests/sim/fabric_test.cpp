#include "sim/fabric.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "sim/run.hpp"
#include "sim/topology.hpp"
#include "wire/packet.hpp"

namespace mrc::sim {
namespace {

// --- topologies ----------------------------------------------------------------------------------

// The per-port fast path of serialisation (bytes x an integer ps per byte) is taken only for a rate
// where it equals the formula at every size up to the bound.
TEST(Serialization, ExactPsPerByteMatchesTheFormula) {
  constexpr std::uint64_t kMax = 70000;
  for (const auto& [rate, ps] : std::vector<std::pair<double, std::uint64_t>>{
           {100e9, 80}, {400e9, 20}, {800e9, 10}, {25e9, 320}, {8e12, 1}}) {
    EXPECT_EQ(Fabric::exact_ps_per_byte(rate, kMax), ps) << rate;
    for (const std::uint64_t b : {std::uint64_t{1}, std::uint64_t{64}, std::uint64_t{1500},
                                  std::uint64_t{4196}, std::uint64_t{65535}, kMax})
      EXPECT_EQ(Fabric::serialization_ps(b, rate), b * ps) << rate << " " << b;
  }
  // Not a whole number of ps per byte (2666.67; 20.5 rounds to 21 for one byte but 41 for two),
  // or faster than a byte per ps: no fast path.
  EXPECT_EQ(Fabric::exact_ps_per_byte(3e9, kMax), 0u);
  EXPECT_EQ(Fabric::serialization_ps(2, 8e12 / 20.5), 41u);
  EXPECT_EQ(Fabric::exact_ps_per_byte(8e12 / 20.5, kMax), 0u);
  EXPECT_EQ(Fabric::exact_ps_per_byte(16e12, kMax), 0u);
}

TEST(FatTree, WiringCounts) {
  for (std::uint32_t k : {4u, 8u}) {
    FatTreeConfig c;
    c.k = k;
    const Topology t = make_fat_tree(c);
    EXPECT_EQ(t.hosts, k * k * k / 4);
    EXPECT_EQ(t.count_switches(1), k * k / 2);  // ToRs
    EXPECT_EQ(t.count_switches(2), k * k / 2);  // aggregation
    EXPECT_EQ(t.count_switches(3), k * k / 4);  // core
    EXPECT_EQ(t.count_links(0), k * k * k / 4);
    EXPECT_EQ(t.count_links(1), k * k * k / 4);
    EXPECT_EQ(t.count_links(2), k * k * k / 4);
    EXPECT_EQ(t.nodes.size(), t.hosts + 5 * k * k / 4);
    // Every switch has k ports; every core reaches each pod exactly once.
    std::vector<std::uint32_t> degree(t.nodes.size(), 0);
    for (const auto& l : t.links) {
      ++degree[l.a];
      ++degree[l.b];
    }
    for (std::uint32_t n = t.hosts; n < t.nodes.size(); ++n) EXPECT_EQ(degree[n], k) << n;
    // Host h hangs off ToR h / (k/2).
    for (std::uint32_t h = 0; h < t.hosts; ++h)
      EXPECT_EQ(t.nodes[t.links[t.host_link(h, 0)].b].index, h / (k / 2));
  }
  FatTreeConfig bad;
  bad.k = 5;
  EXPECT_THROW(make_fat_tree(bad), std::invalid_argument);
}

TEST(FatTree, AllPairsReachableWithExpectedPathLengths) {
  for (std::uint32_t k : {4u, 8u}) {
    FatTreeConfig c;
    c.k = k;
    Fabric f(make_fat_tree(c), FabricConfig{});
    const std::uint32_t n = f.topology().hosts, half = k / 2, pod = k * k / 4;
    for (std::uint32_t s = 0; s < n; ++s) {
      for (std::uint32_t d = 0; d < n; ++d) {
        if (s == d) continue;
        const auto path = f.trace(s, d, 0, s * 31 + d);
        const std::size_t want = s / half == d / half ? 2 : (s / pod == d / pod ? 4 : 6);
        ASSERT_EQ(path.size(), want) << s << "->" << d;
        EXPECT_EQ(f.port_from(path.front()), s);
        EXPECT_EQ(f.port_to(path.back()), d);
        for (std::size_t i = 1; i < path.size(); ++i) EXPECT_EQ(f.port_from(path[i]), f.port_to(path[i - 1]));
      }
    }
  }
}

TEST(FatTree, EcmpSpreadsEvsOverUplinks) {
  FatTreeConfig c;
  c.k = 8;
  Fabric f(make_fat_tree(c), FabricConfig{});
  // Host 0 to a host in another pod: 4 ToR uplinks, then 4 agg uplinks = 16 distinct core paths.
  std::vector<std::uint32_t> tor_up(f.num_ports(), 0);
  std::set<std::uint32_t> cores;
  const std::uint32_t evs = 1024;
  for (std::uint32_t ev = 0; ev < evs; ++ev) {
    const auto p = f.trace(0, 100, 0, ev);
    ASSERT_EQ(p.size(), 6u);
    ++tor_up[p[1]];
    cores.insert(f.port_to(p[2]));
  }
  std::uint32_t used = 0;
  for (std::uint32_t n : tor_up) {
    if (n == 0) continue;
    ++used;
    EXPECT_GT(n, evs / 4 * 7 / 10);  // within 30% of an even share
    EXPECT_LT(n, evs / 4 * 13 / 10);
  }
  EXPECT_EQ(used, 4u);
  EXPECT_EQ(cores.size(), 16u);
  // One EV is one path (flow ECMP), and different flows with the same EV use different uplinks.
  EXPECT_EQ(f.trace(0, 100, 0, 7), f.trace(0, 100, 0, 7));
  std::set<std::uint32_t> by_flow;
  for (std::uint32_t d = 64; d < 128; ++d) by_flow.insert(f.trace(0, d, 0, 7)[1]);
  EXPECT_EQ(by_flow.size(), 4u);
}

TEST(Clos2, MultiPlaneWiringAndPlaneSelection) {
  ClosConfig c;
  c.radix = 8;
  c.planes = 4;
  const Topology t = make_clos2(c);
  EXPECT_EQ(t.hosts, 32u);
  EXPECT_EQ(t.count_switches(1), 4u * 8u);
  EXPECT_EQ(t.count_switches(2), 4u * 4u);
  EXPECT_EQ(t.count_links(0), 32u * 4u);
  EXPECT_EQ(t.count_links(1), 4u * 8u * 4u);
  Fabric f(t, FabricConfig{});
  for (std::uint32_t plane = 0; plane < 4; ++plane) {
    for (std::uint32_t d = 1; d < 32; ++d) {
      const auto p = f.trace(0, d, plane, d);
      ASSERT_EQ(p.size(), d / 4 == 0 ? 2u : 4u);
      for (std::size_t i = 0; i + 1 < p.size(); ++i) EXPECT_EQ(t.nodes[f.port_to(p[i])].plane, plane);
    }
  }
}

// --- with endpoints ------------------------------------------------------------------------------

/// htsim's default network: a k=8 fat tree, 128 hosts, 100 Gb/s, 1 us a link.
Topology k8() {
  FatTreeConfig c;
  c.k = 8;
  return make_fat_tree(c);
}

ConnMatrix one_flow(std::uint32_t nodes, std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) {
  ConnMatrix m;
  m.nodes = nodes;
  m.conns.push_back(ConnSpec{src, dst, 1, 0, bytes});
  return m;
}

TEST(FabricRun, SingleFlowOnIdleFatTreeMatchesUnloadedFct) {
  const Topology t = k8();
  RunConfig rc;
  // One EV: with spraying, the short last packet overtakes full ones on parallel paths and the
  // engine's responder then waits for a tail probe before its final SACK (see the report).
  rc.evs_per_plane = 1;
  const std::uint64_t bytes = 2000000;
  const RunResult r = run_matrix(t, one_flow(t.hosts, 0, 127, bytes), rc);  // inter-pod: 6 links
  ASSERT_EQ(r.finished, 1u);
  EXPECT_TRUE(r.flows[0].ok);
  EXPECT_EQ(r.tx_rtx, 0u);
  EXPECT_EQ(r.net.dropped() + r.net.trimmed, 0u);
  // Serialisation of every packet once, the last packet on 5 more links, 6 x 1 us there, an ACK on
  // 6 links and 6 x 1 us back.
  const std::uint32_t hdr = static_cast<std::uint32_t>(wire::header_size(wire::Opcode::kWriteMiddle, true)) +
                            static_cast<std::uint32_t>(wire::kIcrcSize) + rc.fabric.wire_overhead;
  const std::uint64_t full = bytes / rc.pmtu, last = bytes - full * rc.pmtu;
  const double ns_per_byte = 8.0 / 100.0;
  const double ser = static_cast<double>(full * (rc.pmtu + hdr) + last + hdr) * ns_per_byte;
  const double expect = ser + 5 * static_cast<double>(last + hdr) * ns_per_byte + 6000 +
                        6 * static_cast<double>(r.ack_wire) * ns_per_byte + 6000;
  EXPECT_NEAR(r.flows[0].fct_us * 1000, expect, expect * 0.02) << "expected " << expect / 1000 << " us";
  EXPECT_GE(r.flows[0].fct_us * 1000, ser + 12000 - 100);
  // Intra-ToR is 4 links shorter each way: 8 us less propagation, 4 fewer store-and-forward hops.
  const RunResult r2 = run_matrix(t, one_flow(t.hosts, 0, 1, bytes), rc);
  ASSERT_EQ(r2.finished, 1u);
  const double expect2 = expect - 8000 - 4 * static_cast<double>(last + hdr + r.ack_wire) * ns_per_byte;
  EXPECT_NEAR(r2.flows[0].fct_us * 1000, expect2, expect2 * 0.02) << "expected " << expect2 / 1000 << " us";
  EXPECT_LT(r2.flows[0].fct_us + 7.0, r.flows[0].fct_us);
}

// A post at the very picosecond host 0's port frees up (a call runs before that port's
// wake-up) sends the first packet of the new message at once. The wake-up that follows found the
// port busy again and queued none for that packet's end: the rest of the message waited for host
// 0's next input (an ACK, a microsecond or more later). Now it goes out back to back, as it does
// when the message starts alone on an idle NIC.
TEST(FabricRun, PostAtThePortFreeInstantKeepsSending) {
  const Topology t = k8();
  RunConfig rc;
  rc.evs_per_plane = 1;
  // A one-packet message whose wire size makes its end a whole nanosecond at 100 Gb/s (80 ps a
  // byte): the second message starts then. (No pad: a multiple of 4 bytes.)
  const std::uint32_t fixed =
      static_cast<std::uint32_t>(wire::header_size(wire::Opcode::kWriteOnlyImm, false)) +
      static_cast<std::uint32_t>(wire::kIcrcSize) + rc.fabric.wire_overhead;
  std::uint64_t first = 1000;
  while ((first + fixed) % 25 != 0 || first % 4 != 0) ++first;
  const Time at = (first + fixed) * 80 / 1000;
  const std::uint64_t bytes = 3 * rc.pmtu;
  ConnMatrix both;
  both.nodes = t.hosts;
  both.conns.push_back(ConnSpec{0, 1, 1, 0, first});
  both.conns.push_back(ConnSpec{0, 2, 2, at, bytes});
  ConnMatrix alone;
  alone.nodes = t.hosts;
  alone.conns.push_back(ConnSpec{0, 2, 1, at, bytes});
  const RunResult r = run_matrix(t, both, rc), a = run_matrix(t, alone, rc);
  ASSERT_EQ(r.finished, 2u);
  ASSERT_EQ(a.finished, 1u);
  EXPECT_EQ(r.flows[1].posted, at);
  // Within an ACK's serialisation (the first message's ACK shares host 0's downlink).
  EXPECT_NEAR(r.flows[1].fct_us, a.flows[0].fct_us, 0.05);
}

/// The 3 other hosts of host 0's ToR (k=8) write into host 0: congestion only on its downlink.
ConnMatrix incast(std::uint64_t bytes) {
  ConnMatrix m;
  m.nodes = 128;
  for (std::uint32_t s = 1; s <= 3; ++s) m.conns.push_back(ConnSpec{s, 0, s, 0, bytes});
  return m;
}

RunResult run_incast(const QueueConfig& q, bool nscc) {
  RunConfig rc;
  rc.fabric.queue = q;
  rc.nscc = nscc;
  rc.limit = 50_ms;
  return run_matrix(k8(), incast(512 * 1024), rc);
}

TEST(FabricRun, IncastTrimsAndMarks) {
  QueueConfig q;
  q.data_bytes = 40000;
  q.ecn_kmin = 8000;
  q.ecn_kmax = 30000;
  const RunResult r = run_incast(q, true);
  EXPECT_EQ(r.finished, 3u);
  for (const auto& f : r.flows) EXPECT_TRUE(f.ok);
  EXPECT_GT(r.net.ecn_marked, 0u);
  EXPECT_GT(r.net.trimmed, 0u);  // initial windows (1.5 BDP each) overflow the 40 KB queue
  EXPECT_EQ(r.net.dropped(), 0u);
  EXPECT_LE(r.net.peak_data_bytes, q.data_bytes);
  EXPECT_GT(r.tx_nack, 0u);
  EXPECT_GE(r.tx_rtx, r.net.trimmed / 2);  // trimmed packets are retransmitted
  // The same with ECN off on the last hop: the only congested queue is host 0's downlink.
  q.ecn_last_hop = false;
  const RunResult r2 = run_incast(q, true);
  EXPECT_EQ(r2.finished, 3u);
  EXPECT_EQ(r2.net.ecn_marked, 0u);
}

TEST(FabricRun, TailDropWithoutTrimmingAndControlQueueOverflow) {
  QueueConfig q;
  q.data_bytes = 40000;
  q.trimming = false;
  q.ecn_kmax = 0;
  const RunResult r = run_incast(q, false);
  EXPECT_GT(r.net.drops_by(FabricDrop::kDataTail), 0u);
  EXPECT_EQ(r.net.trimmed, 0u);
  EXPECT_EQ(r.net.ecn_marked, 0u);
  // Trimming on, but a control queue too small for the burst of headers: they are dropped.
  QueueConfig q2;
  q2.data_bytes = 20000;
  q2.control_bytes = 300;
  q2.ecn_kmax = 0;
  const RunResult r2 = run_incast(q2, false);
  EXPECT_GT(r2.net.trimmed, 0u);
  EXPECT_GT(r2.net.drops_by(FabricDrop::kControlOverflow), 0u);
  EXPECT_EQ(r2.net.drops_by(FabricDrop::kDataTail), 0u);
}

TEST(FabricRun, DeterministicForASeed) {
  FatTreeConfig c;
  c.k = 4;
  const Topology t = make_fat_tree(c);
  const ConnMatrix m = make_permutation(t.hosts, 400000, 3);
  RunConfig rc;
  rc.evs_per_plane = 16;
  auto fcts = [&](std::uint64_t seed) {
    rc.seed = seed;
    rc.fabric.seed = seed;
    const RunResult r = run_matrix(t, m, rc);
    EXPECT_EQ(r.finished, t.hosts);
    std::vector<Time> out;
    for (const auto& f : r.flows) out.push_back(f.finish);
    out.push_back(r.net.events);
    return out;
  };
  const auto a = fcts(5), b = fcts(5), other = fcts(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
}

TEST(FabricRun, CarryPayloadOffGivesTheSameRun) {
  FatTreeConfig c;
  c.k = 4;
  const Topology t = make_fat_tree(c);
  const ConnMatrix m = make_permutation(t.hosts, 200000, 9);
  RunConfig rc;
  rc.evs_per_plane = 8;
  const RunResult a = run_matrix(t, m, rc);
  rc.fabric.carry_payload = false;
  const RunResult b = run_matrix(t, m, rc);
  ASSERT_EQ(a.finished, t.hosts);
  ASSERT_EQ(b.finished, t.hosts);
  for (std::size_t i = 0; i < a.flows.size(); ++i) EXPECT_EQ(a.flows[i].finish, b.flows[i].finish);
}

// A full queue that trims its newest queued packet swaps the two packets' slots (D82; the bytes of
// each: TrimQueued.*). End to end, an incast where every full queue does so, its payloads carried
// and every ICRC checked (a payload left in the other slot would fail it and be dropped), runs as
// it does with headers only (whose zero payloads the receivers do not check against the ICRC).
TEST(FabricRun, PacketsTrimmedInTheQueueKeepTheirBytes) {
  RunConfig rc;
  rc.fabric.queue.data_bytes = 40000;
  rc.fabric.queue.trim_queued = 1;
  rc.fabric.carry_payload = true;
  rc.icrc = true;
  rc.limit = 50_ms;
  const RunResult a = run_matrix(k8(), incast(512 * 1024), rc);
  rc.fabric.carry_payload = false;
  const RunResult b = run_matrix(k8(), incast(512 * 1024), rc);
  ASSERT_EQ(a.finished, 3u);
  ASSERT_EQ(b.finished, 3u);
  EXPECT_GT(a.net.trimmed, 50u);  // (87; 103 before D86)
  EXPECT_EQ(a.net.trimmed, b.net.trimmed);
  EXPECT_EQ(a.net.events, b.net.events);
  EXPECT_EQ(a.tx_rtx, b.tx_rtx);
  for (std::size_t i = 0; i < a.flows.size(); ++i) EXPECT_EQ(a.flows[i].finish, b.flows[i].finish);
}

TEST(FabricRun, MultiPlaneClosUsesEveryPlane) {
  ClosConfig c;
  c.radix = 8;
  c.planes = 4;
  const Topology t = make_clos2(c);
  RunConfig rc;
  rc.evs_per_plane = 8;
  const ConnMatrix m = make_permutation(t.hosts, 1000000, 2);
  const RunResult r = run_matrix(t, m, rc);
  EXPECT_EQ(r.finished, t.hosts);
  c.planes = 1;
  const RunResult one = run_matrix(make_clos2(c), m, rc);
  EXPECT_EQ(one.finished, t.hosts);
  // 4 x 100G per host: a 1 MB flow needs ~21 us of serialisation on 4 planes, ~84 us on one.
  EXPECT_LT(r.fct_p50, 0.7 * one.fct_p50) << r.fct_p50 << " vs " << one.fct_p50;
  EXPECT_GT(one.fct_min, 84.0);
}

}  // namespace
}  // namespace mrc::sim
