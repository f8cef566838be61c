// The scenario parser of `mrc sim` (src/sim/scenario.cpp): text in, Scenario or a file:line error.
#include "sim/scenario.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mrc::sim {
namespace {

std::string error_of(const std::string& text, const ScenarioLimits& lim = {}) {
  try {
    parse_scenario(text, "t.toml", lim);
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

TEST(Scenario, ParsesTextWithTheNameItCameFrom) {
  const Scenario sc = parse_scenario(
      "[topology]\nkind = \"clos\"\nradix = 8\nplanes = 2\n[workload]\nkind = \"permutation\"\nbytes = 1000\n"
      "[[faults]]\nkind = \"down\"\nhost = 3\nplane = 1\nat_us = 5\n[[variants]]\nevs = 4\n",
      "dir/my_scen.toml");
  EXPECT_EQ(sc.name, "my_scen");
  EXPECT_EQ(sc.topo.hosts, 32u);
  EXPECT_EQ(sc.matrix.conns.size(), 32u);
  ASSERT_EQ(sc.variants.size(), 1u);
  EXPECT_EQ(sc.variants[0].run.evs_per_plane, 4u);
  EXPECT_EQ(sc.variants[0].run.faults.size(), 1u);
}

TEST(Scenario, RingExchangeRingsSideBySide) {
  // radix 8, 2 tiers: 32 hosts, 4 a leaf. stride 4, rings 4: every host sends to the host of its
  // index on the next leaf (the last leaf wraps to the first), each host once.
  const Scenario sc = parse_scenario(
      "[topology]\nkind = \"clos\"\nradix = 8\nplanes = 2\n[workload]\nkind = \"ring_exchange\"\n"
      "bytes = 1000\nstride = 4\nrings = 4\n",
      "x.toml");
  ASSERT_EQ(sc.matrix.conns.size(), 32u);
  std::vector<int> sends(32, 0), recvs(32, 0);
  for (const ConnSpec& c : sc.matrix.conns) {
    EXPECT_EQ(c.dst % 4, c.src % 4);            // the same index ...
    EXPECT_EQ(c.dst / 4, (c.src / 4 + 1) % 8);  // ... on the next leaf
    ++sends[c.src];
    ++recvs[c.dst];
  }
  for (int h = 0; h < 32; ++h) EXPECT_TRUE(sends[h] == 1 && recvs[h] == 1) << h;
  EXPECT_EQ(parse_scenario("[topology]\nkind = \"clos\"\nradix = 8\nplanes = 2\n[workload]\n"
                           "kind = \"ring_exchange\"\nstride = 4\n",
                           "y.toml")
                .matrix.conns.size(),
            8u);  // one ring by default
  EXPECT_EQ(error_of("[topology]\nkind = \"clos\"\nradix = 8\nplanes = 2\n[workload]\nkind = "
                     "\"ring_exchange\"\nstride = 4\nrings = 5\n"),
            "t.toml:8: 'rings' = 5 out of range [1, 4]");
}

TEST(Scenario, ErrorsNameFileAndLine) {
  EXPECT_EQ(error_of("[topology]\nkind = \"ring\"\n[workload]\n"),
            "t.toml:2: topology kind 'ring' unknown (fattree | clos)");
  EXPECT_EQ(error_of("name = \n").rfind("t.toml:1: ", 0), 0u);
  EXPECT_EQ(error_of("[workload]\n"), "t.toml:1: missing [topology]");
}

// [queue] trim_queued (D82): htsim's 0.5 unless set, a probability.
TEST(Scenario, TrimQueuedIsAProbability) {
  const std::string topo = "[topology]\nkind = \"clos\"\nradix = 8\n[workload]\nkind = \"permutation\"\n";
  EXPECT_EQ(parse_scenario(topo, "a.toml").variants[0].run.fabric.queue.trim_queued, 0.5);
  EXPECT_EQ(
      parse_scenario(topo + "[queue]\ntrim_queued = 0\n", "b.toml").variants[0].run.fabric.queue.trim_queued,
      0.0);
  EXPECT_EQ(
      parse_scenario(topo + "[queue]\ntrim_queued = 1\n", "c.toml").variants[0].run.fabric.queue.trim_queued,
      1.0);
  EXPECT_EQ(error_of(topo + "[queue]\ntrim_queued = 1.5\n"),
            "t.toml:7: 'trim_queued' = 1.5 out of range [0, 1]");
  EXPECT_NE(error_of(topo + "[queue]\ntrim_queued = \"half\"\n"), "");
}

// The largest fabric of scenarios/ (scen6_scale.toml, 131,072 hosts x 8 planes) is within the
// default limits; a bigger one is refused before it is built (a fat tree of k=128 on 32 planes
// would be 16.8 M host links).
TEST(Scenario, RefusesATopologyAboveTheLimitBeforeBuildingIt) {
  EXPECT_EQ(error_of("[topology]\nkind = \"fattree\"\nk = 128\nplanes = 32\n[workload]\n"),
            "t.toml:1: topology of 524288 hosts x 32 planes is above the limit of 1048576 host ports");
  ScenarioLimits small;
  small.max_host_ports = 64;
  EXPECT_EQ(error_of("[topology]\nkind = \"clos\"\nradix = 8\nplanes = 3\n[workload]\n", small),
            "t.toml:1: topology of 32 hosts x 3 planes is above the limit of 64 host ports");
  EXPECT_EQ(error_of("[topology]\nkind = \"clos\"\nradix = 8\nplanes = 2\n[workload]\n", small), "");
}

// all_to_all and ring_allreduce grow with hosts^2: 131,072 hosts asked for 1.7e10 connections.
TEST(Scenario, RefusesAWorkloadAboveTheConnectionLimit) {
  EXPECT_EQ(
      error_of("[topology]\nkind = \"clos\"\nradix = 512\nplanes = 1\n[workload]\nkind = \"all_to_all\"\n"),
      "t.toml:5: workload 'all_to_all' on 131072 hosts has 17179738112 connections, above the limit of "
      "4194304");
  ScenarioLimits small;
  small.max_connections = 100;
  EXPECT_EQ(
      error_of("[topology]\nkind = \"clos\"\nradix = 8\n[workload]\nkind = \"ring_allreduce\"\n", small),
      "t.toml:4: workload 'ring_allreduce' on 32 hosts has 1984 connections, above the limit of 100");
}

// Each [[faults]] flap may expand to 200,000 faults, and every variant copies them: the sum is
// bounded.
TEST(Scenario, RefusesMoreFaultsThanTheLimit) {
  ScenarioLimits small;
  small.max_faults = 1000;
  const std::string base = "[topology]\nkind = \"clos\"\nradix = 8\n[workload]\n";
  EXPECT_EQ(
      error_of(base + "[[faults]]\nkind = \"flap\"\nlink = 1\ndown_us = 1\nup_us = 1\ncount = 600\n", small),
      "t.toml:5: more than 1000 link faults (the limit)");
  std::string many = base + "[[faults]]\nkind = \"flap\"\nlink = 1\ndown_us = 1\nup_us = 1\ncount = 200\n";
  for (int i = 0; i < 3; ++i) many += "[[variants]]\n";
  EXPECT_EQ(error_of(many, small),
            "t.toml:13: the variants have more than 1000 link faults in all (the limit)");
}

TEST(Scenario, CmFilesCanBeTurnedOff) {
  ScenarioLimits no_files;
  no_files.read_files = false;
  EXPECT_EQ(error_of("[topology]\n[workload]\nkind = \"cm\"\ncm = \"/dev/zero\"\n", no_files),
            "t.toml:4: workload kind 'cm' reads a file, which is not allowed here");
}

// An incast on fewer than 9 hosts without 'senders' took the default 7 unchecked, and
// make_incast's std::invalid_argument left mrc sim with exit 1 and no file:line.
TEST(Scenario, IncastDefaultSendersMustFitAndGeneratorErrorsNameTheTable) {
  EXPECT_EQ(error_of("[topology]\nkind = \"clos\"\nradix = 8\n[workload]\nkind = \"incast\"\nhosts = 5\n"),
            "t.toml:4: incast on 5 hosts needs 'senders' (1..3; the default, 7, needs 9 hosts)");
  EXPECT_EQ(error_of("[topology]\nkind = \"clos\"\nradix = 8\n[workload]\nkind = \"incast\"\nhosts = 5\n"
                     "senders = 3\n"),
            "");
}

}  // namespace
}  // namespace mrc::sim
