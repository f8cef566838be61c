// Lazy switch ports (D68) at the level of one port: packets placed in a switch's egress queue
// directly (as two arrivals of one picosecond would), lazy against one event per dequeue.
#include <gtest/gtest.h>

#include <cstdint>

#include "sim/fabric.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

struct FabricTestAccess {
  static void arrive(Fabric& f, std::uint32_t port, std::uint32_t in_port, std::uint32_t dst,
                     std::uint32_t wire, bool control) {
    f.test_arrival(port, in_port, dst, wire, control);
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

}  // namespace
}  // namespace mrc::sim
