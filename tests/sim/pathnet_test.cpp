#include "sim/pathnet.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "rig.hpp"

namespace mrc::sim {
namespace {

using test::Rig;
using test::RigOptions;

constexpr Time kLimit = 200_ms;

std::uint64_t sum_tx(PathNet& net, std::uint32_t node) {
  std::uint64_t n = 0;
  for (std::uint32_t p = 0; p < net.config().planes; ++p) n += net.port_stats(node, p).tx_packets;
  return n;
}

// --- pure mechanics ----------------------------------------------------------------------------------

TEST(PathNet, SerializationAndBaseRtt) {
  EXPECT_EQ(PathNet::serialization(4160, 100e9), 333u);  // 332.8 ns
  EXPECT_EQ(PathNet::serialization(64, 100e9), 5u);      // 5.12 ns
  EXPECT_EQ(PathNet::serialization(1, 1e12), 1u);        // never 0
  PathNetConfig c;
  c.path.delay = 2_us;
  c.port_rate_bps = 100e9;
  c.mtu_wire_bytes = 4160;
  c.ack_wire_bytes = 64;
  EXPECT_EQ(PathNet(c).base_rtt(), 4000u + 333u + 5u);
  c.last_hop.rate_bps = 50e9;  // a rate-limited hop adds its own serialisation
  EXPECT_EQ(PathNet(c).base_rtt(), 4000u + 333u + 5u + 666u + 10u);
}

TEST(PathNet, DelaySpreadIsSeededAndBounded) {
  PathNetConfig c;
  c.planes = 4;
  c.paths_per_plane = 16;
  c.path.delay = 2_us;
  c.delay_spread = 1_us;
  PathNet a(c), b(c);
  c.seed = 2;
  PathNet other(c);
  std::set<Duration> distinct;
  bool differs = false;
  for (std::uint32_t p = 0; p < 4; ++p) {
    for (std::uint32_t i = 0; i < 16; ++i) {
      EXPECT_EQ(a.path(p, i).delay, b.path(p, i).delay);
      EXPECT_GE(a.path(p, i).delay, 2_us);
      EXPECT_LT(a.path(p, i).delay, 3_us);
      distinct.insert(a.path(p, i).delay);
      differs = differs || other.path(p, i).delay != a.path(p, i).delay;
    }
  }
  EXPECT_GT(distinct.size(), 32u);
  EXPECT_TRUE(differs);
}

// --- with real engine endpoints -----------------------------------------------------------------------

RigOptions spray_options() {
  RigOptions o;
  o.net.planes = 4;
  o.net.paths_per_plane = 16;
  o.net.path.delay = 2_us;
  o.net.delay_spread = 1_us;
  o.bytes = 4u << 20;
  o.active_per_plane = 32;
  o.backup_per_plane = 8;
  return o;
}

TEST(PathNetEngine, SprayUsesEveryPlaneAndPath) {
  Rig rig(spray_options());
  ASSERT_TRUE(rig.setup_ok());
  ASSERT_TRUE(rig.post_all());
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  PathNet& net = rig.net();
  EXPECT_EQ(net.stats().dropped, 0u);
  EXPECT_EQ(net.stats().bad_tx, 0u);
  std::uint64_t rx_bytes = 0;
  for (std::uint32_t p = 0; p < 4; ++p) {
    EXPECT_GT(net.port_stats(0, p).tx_packets, 100u) << "plane " << p;
    EXPECT_GT(net.port_stats(1, p).tx_packets, 0u) << "acks on plane " << p;
    rx_bytes += net.port_stats(1, p).rx_bytes;
    for (std::uint32_t i = 0; i < 16; ++i) EXPECT_GT(net.path_stats(p, i).delivered, 0u) << p << "/" << i;
  }
  EXPECT_GE(rx_bytes, 4u << 20);  // every payload byte arrived (plus headers)
  // 4 MiB at 400 Gb/s takes ~84 us plus an RTT; anything much slower means ports sat idle.
  EXPECT_LT(rig.finish_time(0), 400_us);
}

TEST(PathNetEngine, PortsSerializeOnePacketAtATime) {
  RigOptions o = spray_options();
  o.net.planes = 2;
  o.net.paths_per_plane = 4;
  o.active_per_plane = 16;
  o.backup_per_plane = 2;
  o.bytes = 2u << 20;
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  // (time the packet had left the port, its size) per (node, plane)
  std::map<std::pair<std::uint32_t, std::uint8_t>, std::vector<std::pair<Time, std::uint32_t>>> sent;
  rig.net().set_observer([&](const PacketRecord& r) {
    sent[{r.src, r.plane}].emplace_back(r.sent, r.wire_bytes);
  });
  ASSERT_TRUE(rig.post_all());
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  ASSERT_EQ(sent.size(), 4u);  // both nodes used both planes
  for (auto& [key, v] : sent) {
    std::sort(v.begin(), v.end());
    for (std::size_t i = 1; i < v.size(); ++i) {
      ASSERT_GE(v[i].first - v[i - 1].first, PathNet::serialization(v[i].second, 100e9))
          << "node " << key.first << " plane " << int(key.second) << " packet " << i;
    }
  }
  // The data alone needs 2 MiB / 200 Gb/s.
  EXPECT_GE(static_cast<double>(rig.finish_time(0)), (2u << 20) * 8.0 / 200.0);
}

TEST(PathNetEngine, ImpairmentCountersMatchConfiguredProbabilities) {
  RigOptions o = spray_options();
  o.bytes = 16u << 20;
  o.net.path.loss = 0.03;
  o.net.path.trim = 0.04;
  o.net.path.dup = 0.02;
  o.net.path.ecn = 0.05;
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  ASSERT_TRUE(rig.post_all());
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  const NetStats& s = rig.net().stats();
  const double sent = static_cast<double>(s.sent);
  ASSERT_GT(sent, 4000.0);
  EXPECT_EQ(s.dropped, s.drops_by(DropCause::kLoss));
  EXPECT_NEAR(static_cast<double>(s.drops_by(DropCause::kLoss)) / sent, 0.03, 0.01);
  const double survived = sent - static_cast<double>(s.dropped);
  EXPECT_NEAR(static_cast<double>(s.duplicated) / survived, 0.02, 0.008);
  // ECN applies to every surviving packet (duplicates inherit their original's mark).
  EXPECT_NEAR(static_cast<double>(s.ecn_marked) / survived, 0.05, 0.012);
  // Trimming hits data packets only; the sender's packets are (nearly) all data.
  const double data_survived = static_cast<double>(sum_tx(rig.net(), 0)) * 0.97;
  EXPECT_NEAR(static_cast<double>(s.trimmed) / data_survived, 0.04, 0.012);
  std::uint64_t path_sum = 0;
  for (std::uint32_t p = 0; p < 4; ++p)
    for (std::uint32_t i = 0; i < 16; ++i) path_sum += rig.net().path_stats(p, i).trimmed;
  EXPECT_EQ(path_sum, s.trimmed);
  EXPECT_EQ(s.delivered + s.dropped + rig.net().packets_in_flight(), s.sent + s.duplicated);
}

TEST(PathNetEngine, TrimmedPacketsAreHeaderOnlyAndFlagged) {
  RigOptions o = spray_options();
  o.net.path.trim = 0.1;
  o.bytes = 1u << 20;
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  std::uint64_t trimmed_seen = 0, bad = 0;
  rig.net().set_observer([&](const PacketRecord& r) {
    if (!r.trimmed) return;
    ++trimmed_seen;
    if (r.tc == engine::TrafficClass::kControl || r.src != 0 || !r.delivered) ++bad;
  });
  ASSERT_TRUE(rig.post_all());
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  EXPECT_GT(trimmed_seen, 5u);
  EXPECT_EQ(bad, 0u);
  // Trimmed deliveries carry only the header: the receiver got fewer bytes than were sent to it.
  std::uint64_t rx = 0;
  for (std::uint32_t p = 0; p < 4; ++p) rx += rig.net().port_stats(1, p).rx_bytes;
  std::uint64_t tx = 0;
  for (std::uint32_t p = 0; p < 4; ++p) tx += rig.net().port_stats(0, p).tx_bytes;
  EXPECT_LT(rx, tx);
}

TEST(PathNetEngine, KilledPlaneCarriesNothingAfterItsDeath) {
  RigOptions o = spray_options();
  o.bytes = 8u << 20;
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  const Time death = 40_us;
  rig.net().kill_plane(2, death);
  std::uint64_t before = 0, after = 0, dead_drops = 0;
  rig.net().set_observer([&](const PacketRecord& r) {
    if (r.plane != 2) return;
    if (r.delivered) (r.time < death ? before : after) += 1;
    if (!r.delivered && r.cause == DropCause::kPathDead) {
      ++dead_drops;
      EXPECT_GE(r.time, death);
    }
  });
  ASSERT_TRUE(rig.post_all());
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  EXPECT_GT(before, 50u);
  EXPECT_EQ(after, 0u);
  EXPECT_GT(dead_drops, 0u);
  EXPECT_EQ(rig.net().stats().drops_by(DropCause::kPathDead), dead_drops);
  for (std::uint32_t p = 0; p < 4; ++p) {
    if (p != 2) {
      EXPECT_EQ(rig.net().path_stats(p, 0).dropped, 0u);
    }
  }
}

TEST(PathNetEngine, KillPathAffectsOnlyThatPath) {
  RigOptions o = spray_options();
  o.bytes = 2u << 20;
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  rig.net().kill_path(1, 5, 0);
  ASSERT_TRUE(rig.post_all());
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  EXPECT_EQ(rig.net().path_stats(1, 5).delivered, 0u);
  EXPECT_GT(rig.net().path_stats(1, 5).dropped, 0u);
  EXPECT_EQ(rig.net().stats().dropped, rig.net().path_stats(1, 5).dropped);
}

TEST(PathNetEngine, JitterReordersAndNoJitterKeepsPathFifo) {
  for (const Duration jitter : {Duration{0}, Duration{3_us}}) {
    RigOptions o = spray_options();
    o.net.delay_spread = 0;
    o.net.path.jitter = jitter;
    o.bytes = 2u << 20;
    Rig rig(o);
    ASSERT_TRUE(rig.setup_ok());
    // Per (plane, path) from node 0: delivery order must follow send order unless jittered.
    std::map<std::uint32_t, Time> last_sent;
    std::uint64_t inversions = 0;
    rig.net().set_observer([&](const PacketRecord& r) {
      if (!r.delivered || r.src != 0) return;
      auto& l = last_sent[r.plane * 16 + r.path];
      if (r.sent < l) ++inversions;
      l = std::max(l, r.sent);
    });
    ASSERT_TRUE(rig.post_all());
    ASSERT_TRUE(rig.run_to_completion(kLimit));
    EXPECT_TRUE(rig.data_ok());
    if (jitter == 0) {
      EXPECT_EQ(inversions, 0u);
    } else {
      EXPECT_GT(inversions, 10u);
    }
  }
}

TEST(PathNetEngine, TimersRecoverFromABlackout) {
  RigOptions o = spray_options();
  o.bytes = 1u << 20;
  o.net.path.loss = 1.0;  // nothing gets through at first
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  ASSERT_TRUE(rig.post_all());
  rig.net().run_until(100_us);
  EXPECT_EQ(rig.net().stats().delivered, 0u);
  EXPECT_GT(rig.net().stats().drops_by(DropCause::kLoss), 0u);
  for (std::uint32_t p = 0; p < 4; ++p)
    for (std::uint32_t i = 0; i < 16; ++i) rig.net().path(p, i).loss = 0;
  // Only the endpoints' timers (RTO / probes) can restart the flow now.
  ASSERT_TRUE(rig.run_to_completion(2000_ms));
  EXPECT_TRUE(rig.data_ok());
}

TEST(PathNetEngine, SameSeedSameRunDifferentSeedDifferentRun) {
  struct Outcome {
    NetStats s;
    Time finish;
    std::vector<std::uint64_t> per_path;
  };
  auto run = [](std::uint64_t seed) {
    RigOptions o = spray_options();
    o.net.seed = seed;
    o.net.path.loss = 0.02;
    o.net.path.jitter = 1_us;
    o.net.path.dup = 0.01;
    o.bytes = 2u << 20;
    Rig rig(o);
    EXPECT_TRUE(rig.setup_ok());
    EXPECT_TRUE(rig.post_all());
    EXPECT_TRUE(rig.run_to_completion(kLimit));
    EXPECT_TRUE(rig.data_ok());
    Outcome out{rig.net().stats(), rig.finish_time(0), {}};
    for (std::uint32_t p = 0; p < 4; ++p)
      for (std::uint32_t i = 0; i < 16; ++i) out.per_path.push_back(rig.net().path_stats(p, i).delivered);
    return out;
  };
  const Outcome a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a.finish, b.finish);
  EXPECT_EQ(a.s.events, b.s.events);
  EXPECT_EQ(a.s.sent, b.s.sent);
  EXPECT_EQ(a.s.dropped, b.s.dropped);
  EXPECT_EQ(a.s.duplicated, b.s.duplicated);
  EXPECT_EQ(a.per_path, b.per_path);
  EXPECT_TRUE(a.finish != c.finish || a.s.dropped != c.s.dropped || a.per_path != c.per_path);
}

RigOptions incast_options() {
  RigOptions o;
  o.senders = 3;
  o.net.planes = 2;
  o.net.paths_per_plane = 8;
  o.net.path.delay = 2_us;
  o.net.last_hop.rate_bps = 100e9;
  o.net.last_hop.buffer_bytes = 256 * 1024;
  o.bytes = 2u << 20;
  o.active_per_plane = 16;
  o.backup_per_plane = 4;
  return o;
}

TEST(PathNetEngine, LastHopIsASharedBottleneck) {
  RigOptions o = incast_options();
  o.net.last_hop.ecn_kmin = 20 * 1024;
  o.net.last_hop.ecn_kmax = 80 * 1024;
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  // Bytes delivered to the receiver on each plane never exceed what its last hop can serialise
  // since the first delivery (plus one packet in service).
  Time first[2] = {kNever, kNever};
  std::uint64_t bytes[2] = {0, 0};
  std::uint64_t excess = 0;
  rig.net().set_observer([&](const PacketRecord& r) {
    if (!r.delivered || r.dst != rig.receiver()) return;
    if (first[r.plane] == kNever) first[r.plane] = r.time;
    bytes[r.plane] += r.wire_bytes;  // no trimming in this test
    const double capacity = static_cast<double>(r.time - first[r.plane]) * 100.0 / 8.0 + 2 * 4160.0;
    if (static_cast<double>(bytes[r.plane]) > capacity) ++excess;
  });
  ASSERT_TRUE(rig.post_all());
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  PathNet& net = rig.net();
  // 3 x 2 MiB through 2 x 100 Gb/s last hops takes at least 252 us.
  const Time last = std::max({rig.finish_time(0), rig.finish_time(1), rig.finish_time(2)});
  EXPECT_GE(last, static_cast<Time>(3.0 * (2u << 20) * 8.0 / 200.0));
  std::uint64_t marks = 0;
  for (std::uint32_t p = 0; p < 2; ++p) {
    const LastHopStats& lh = net.last_hop_stats(rig.receiver(), p);
    EXPECT_GT(lh.peak_bytes, 20u * 1024) << "a queue built on plane " << p;
    EXPECT_LE(lh.peak_bytes, o.net.last_hop.buffer_bytes);
    marks += lh.ecn_marks;
    // The senders' own last hops carry only ACKs: no queue there.
    EXPECT_EQ(net.last_hop_stats(0, p).peak_bytes, 0u);
  }
  EXPECT_GT(marks, 0u);
  EXPECT_EQ(excess, 0u);
  EXPECT_EQ(net.last_hop_stats(rig.receiver(), 0).drops + net.last_hop_stats(rig.receiver(), 1).drops,
            net.stats().drops_by(DropCause::kLastHopOverflow));
  EXPECT_EQ(net.stats().peak_lasthop_bytes, std::max(net.last_hop_stats(rig.receiver(), 0).peak_bytes,
                                                     net.last_hop_stats(rig.receiver(), 1).peak_bytes));
}

TEST(PathNetEngine, LastHopTrimsAboveThresholdAndTailDrops) {
  RigOptions o = incast_options();
  o.net.last_hop.trim_bytes = 64 * 1024;
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  std::uint64_t lasthop_trims = 0, bad = 0;
  rig.net().set_observer([&](const PacketRecord& r) {
    if (r.trimmed_lasthop) {
      ++lasthop_trims;
      if (!r.trimmed || r.dst != 3 || r.tc == engine::TrafficClass::kControl) ++bad;
    }
  });
  ASSERT_TRUE(rig.post_all());
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  const LastHopStats& a = rig.net().last_hop_stats(rig.receiver(), 0);
  const LastHopStats& b = rig.net().last_hop_stats(rig.receiver(), 1);
  EXPECT_GT(a.trims + b.trims, 0u);
  EXPECT_EQ(a.trims + b.trims, lasthop_trims);
  EXPECT_EQ(bad, 0u);
  // Nothing queues above the trim threshold, so nothing overflows the 256 KiB buffer.
  EXPECT_LE(std::max(a.peak_bytes, b.peak_bytes), 64u * 1024);
  EXPECT_EQ(rig.net().stats().drops_by(DropCause::kLastHopOverflow), 0u);

  // Without trimming and with a tiny buffer the queue tail-drops instead.
  RigOptions o2 = incast_options();
  o2.net.last_hop.buffer_bytes = 24 * 1024;
  Rig rig2(o2);
  ASSERT_TRUE(rig2.setup_ok());
  ASSERT_TRUE(rig2.post_all());
  ASSERT_TRUE(rig2.run_to_completion(2000_ms));
  EXPECT_TRUE(rig2.data_ok());
  EXPECT_GT(rig2.net().stats().drops_by(DropCause::kLastHopOverflow), 0u);
  EXPECT_LE(rig2.net().stats().peak_lasthop_bytes, 24u * 1024);
}

TEST(PathNetEngine, PortDownStopsThePortAndTellsTheEndpoint) {
  RigOptions o = spray_options();
  o.bytes = 8u << 20;
  Rig rig(o);
  ASSERT_TRUE(rig.setup_ok());
  const Time t = 30_us;
  rig.net().port_down(0, 3, t);
  std::uint64_t tx_after = 0;
  rig.net().set_observer([&](const PacketRecord& r) {
    if (r.src == 0 && r.plane == 3 && r.sent > t + 1_us) ++tx_after;  // started after the failure
  });
  ASSERT_TRUE(rig.post_all());
  rig.net().run_until(t);
  const std::uint64_t tx_at_failure = rig.net().port_stats(0, 3).tx_packets;
  EXPECT_GT(tx_at_failure, 0u);
  ASSERT_TRUE(rig.run_to_completion(kLimit));
  EXPECT_TRUE(rig.data_ok());
  EXPECT_LE(rig.net().port_stats(0, 3).tx_packets, tx_at_failure + 1);  // at most the one in service
  EXPECT_EQ(tx_after, 0u);
  EXPECT_EQ(rig.ep(0).port_mask() & (1u << 3), 0u);
}

}  // namespace
}  // namespace mrc::sim
