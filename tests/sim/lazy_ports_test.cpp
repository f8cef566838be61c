// A switch's egress port on its own: packets placed in its queue directly (as arrivals of one
// picosecond would). Lazy ports (D68) against one event per dequeue; which packet a full queue
// trims (D82).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "sim/fabric.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

struct FabricTestAccess {
  static void arrive(Fabric& f, std::uint32_t port, std::uint32_t in_port, std::uint32_t dst,
                     std::uint32_t wire, bool control) {
    f.test_arrival(port, in_port, dst, wire, control);
  }
  static std::vector<std::uint32_t> tags(const Fabric& f, std::uint32_t port) {
    return f.test_queue_tags(port);
  }
};

namespace {

struct Uplink {
  Topology t;
  std::uint32_t link = 0;  ///< a leaf's uplink (tier 1)
  Uplink() {
    FatTreeConfig fc;
    fc.k = 4;
    t = make_fat_tree(fc);
    while (t.links[link].tier != 1) ++link;
  }
  FabricConfig config(bool lazy) const {
    FabricConfig c;
    c.lazy_ports = lazy;
    c.carry_payload = false;
    c.reconverge_delay = 1000;  // the uplink stays in the FIB: nothing reroutes in these tests
    return c;
  }
};

// The uplink goes down while a packet is in service and another waits, and comes back before the
// first would have ended. Eagerly the port still has its wake-up at that end; a data packet and
// then a control packet arriving at that very picosecond both wait for it, and the control
// packet goes first. A lazy port must do the same (it used to send the data packet at once).
TEST(LazyPort, FlushedPortWaitsForItsWakeUpAtTheTie) {
  const Uplink s;
  std::uint64_t sent[2] = {};
  for (const bool lazy : {false, true}) {
    Fabric f(s.t, s.config(lazy));
    const std::uint32_t port = 2 * s.link, in = 2 * s.t.host_link(0, 0), dst = s.t.hosts - 1;
    FabricTestAccess::arrive(f, port, in, dst, 4000, false);  // 320 ns at 100 Gb/s, sent at once
    FabricTestAccess::arrive(f, port, in, dst, 4000, false);  // queued behind it
    f.advance_to(100);
    f.apply_fault(LinkFault{100, s.link, LinkFaultKind::kDown, 0});
    f.advance_to(101);
    f.apply_fault(LinkFault{101, s.link, LinkFaultKind::kUp, 0});
    f.advance_to(320);
    FabricTestAccess::arrive(f, port, in, dst, 4000, false);
    FabricTestAccess::arrive(f, port, in, dst, 110, true);
    f.run_until(320);
    sent[lazy] = f.port_counters(port).tx_bytes;
    EXPECT_EQ(f.stats().drops_by(FabricDrop::kLinkDown), 1u);  // the one queued (the other when due)
  }
  EXPECT_EQ(sent[0], 4000u + 110u);  // the control packet started at 320 ns, the data waits
  EXPECT_EQ(sent[1], sent[0]);
}

// run_until(t) runs what is due up to t's last picosecond and leaves the clock at the last event
// or dequeue, not at a lazy port's wake-up: a packet sent next starts at the same picosecond.
TEST(LazyPort, RunUntilLeavesTheClockAtTheLastDequeue) {
  const Uplink s;
  Time clock[2] = {};
  for (const bool lazy : {false, true}) {
    Fabric f(s.t, s.config(lazy));
    const std::uint32_t port = 2 * s.link, in = 2 * s.t.host_link(0, 0), dst = s.t.hosts - 1;
    for (int i = 0; i < 2; ++i) FabricTestAccess::arrive(f, port, in, dst, 4006, false);  // 320,480 ps
    f.run_until(320);
    clock[lazy] = f.now_ps();
    EXPECT_EQ(f.port_counters(port).tx_packets, 2u);
  }
  EXPECT_EQ(clock[0], 320480u);
  EXPECT_EQ(clock[1], clock[0]);
}

// A data packet that finds the queue full: with trim_queued 0 it is trimmed itself; with 1 the
// newest queued data packet is trimmed and the arrival takes its place (htsim's rule, D82). Told
// apart by the bytes the port sends (the header of the trimmed one, 110 B; the others whole) and
// by the packets' own bytes, whether the fabric carries payloads or headers only.
TEST(TrimQueued, AFullQueueTrimsTheArrivalOrTheNewestQueuedPacket) {
  const Uplink s;
  for (const bool lazy : {false, true}) {
    for (const bool carry : {false, true}) {
      for (const double chance : {0.0, 1.0}) {
        SCOPED_TRACE(testing::Message()
                     << "lazy " << lazy << ", carry_payload " << carry << ", trim_queued " << chance);
        FabricConfig c = s.config(lazy);
        c.carry_payload = carry;
        c.queue.data_bytes = 12'600;
        c.queue.ecn_kmax = 0;
        c.queue.trim_queued = chance;
        Fabric f(s.t, c);
        const std::uint32_t port = 2 * s.link, in = 2 * s.t.host_link(0, 0), dst = s.t.hosts - 1;
        for (const std::uint32_t wire : {4000u, 4001u, 4002u, 4500u})  // the first is sent at once
          FabricTestAccess::arrive(f, port, in, dst, wire, false);
        EXPECT_EQ(f.stats().trimmed, 0u);  // 12,503 B queued
        FabricTestAccess::arrive(f, port, in, dst, 3000, false);
        EXPECT_EQ(f.stats().trimmed, 1u);
        // The trimmed header first (control queue), then the data queue in order.
        const std::vector<std::uint32_t> want = chance == 0
                                                    ? std::vector<std::uint32_t>{3000, 4001, 4002, 4500}
                                                    : std::vector<std::uint32_t>{4500, 4001, 4002, 3000};
        EXPECT_EQ(FabricTestAccess::tags(f, port), want);
        f.run_until(10'000);
        const PortCounters& pc = f.port_counters(port);
        EXPECT_EQ(pc.tx_packets, 5u);
        EXPECT_EQ(pc.tx_bytes, 4000u + 4001u + 4002u + 110u + (chance == 0 ? 4500u : 3000u));
        EXPECT_EQ(pc.peak_data_bytes, 12'503u);
        EXPECT_EQ(f.stats().dropped(), 0u);
      }
    }
  }
}

// The arrival takes the queued packet's place only if it fits there; else it is trimmed itself.
TEST(TrimQueued, AnArrivalThatWouldNotFitInTheQueuedPacketsPlaceIsTrimmed) {
  const Uplink s;
  FabricConfig c = s.config(true);
  c.queue.data_bytes = 12'600;
  c.queue.ecn_kmax = 0;
  c.queue.trim_queued = 1;
  Fabric f(s.t, c);
  const std::uint32_t port = 2 * s.link, in = 2 * s.t.host_link(0, 0), dst = s.t.hosts - 1;
  for (const std::uint32_t wire : {4000u, 4000u, 4000u, 4500u})
    FabricTestAccess::arrive(f, port, in, dst, wire, false);
  FabricTestAccess::arrive(f, port, in, dst, 4700, false);  // 12,700 B in the 4,500 B packet's place
  f.run_until(10'000);
  EXPECT_EQ(f.stats().trimmed, 1u);
  EXPECT_EQ(f.port_counters(port).tx_bytes, 3 * 4000u + 4500u + 110u);
  EXPECT_LE(f.port_counters(port).peak_data_bytes, c.queue.data_bytes);
}

// At the default 0.5 the port's own coin decides, about half of the time, across seeds.
TEST(TrimQueued, TheDefaultTrimsTheQueuedPacketAboutHalfOfTheTime) {
  const Uplink s;
  int queued_trimmed = 0;
  constexpr int kSeeds = 400;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    FabricConfig c = s.config(true);
    c.queue.data_bytes = 12'600;
    c.queue.ecn_kmax = 0;
    c.seed = static_cast<std::uint64_t>(seed);
    ASSERT_EQ(c.queue.trim_queued, 0.5);
    Fabric f(s.t, c);
    const std::uint32_t port = 2 * s.link, in = 2 * s.t.host_link(0, 0), dst = s.t.hosts - 1;
    for (const std::uint32_t wire : {4000u, 4000u, 4000u, 4500u, 3000u})
      FabricTestAccess::arrive(f, port, in, dst, wire, false);
    f.run_until(10'000);
    ASSERT_EQ(f.stats().trimmed, 1u);
    const std::uint64_t sent = f.port_counters(port).tx_bytes;
    ASSERT_TRUE(sent == 3 * 4000u + 110u + 4500u || sent == 3 * 4000u + 110u + 3000u) << sent;
    queued_trimmed += sent == 3 * 4000u + 110u + 3000u;
  }
  EXPECT_GT(queued_trimmed, kSeeds * 4 / 10);  // binomial(400, 0.5): 200 +- 10 (one sd)
  EXPECT_LT(queued_trimmed, kSeeds * 6 / 10);
}

TEST(TrimQueued, OutOfRangeIsRefused) {
  const Uplink s;
  for (const double bad : {-0.1, 1.5}) {
    FabricConfig c = s.config(true);
    c.queue.trim_queued = bad;
    EXPECT_THROW(Fabric(s.t, c), std::invalid_argument);
  }
}

}  // namespace
}  // namespace mrc::sim
