// How a parallel simulation run (RunConfig::threads, D55) splits the network into partitions, one
// Fabric each. Any split gives the same results (sim/fabric.hpp); this one aims at balanced work and
// few packets between partitions, under the one constraint the runner has: a connection that waits
// for another's arrival (ConnSpec::after) is posted by the partition that saw the arrival, so its
// source must be in the partition of that connection's destination.
#pragma once
#include <cstdint>
#include <vector>

#include "common/time.hpp"
#include "sim/cm.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

/// The partition (0 .. parts-1) of every node. Hosts: in blocks of consecutive ids, each holding
/// about an equal share of the load not yet placed (a connection's bytes count at its source and
/// its destination, a connection of no size as one byte; a matrix without connections splits the
/// hosts evenly), a dependent connection's source joined
/// with its dependency's destination (such groups move whole, so a matrix whose dependencies chain
/// every host leaves the other partitions without hosts). Switches: with at least `parts` planes,
/// whole planes (plane * parts / planes); otherwise a leaf (tier 1) goes with its first host, a
/// higher switch with the partition that holds at least 3/4 of the load below it (an aggregation
/// switch with its pod), the others round robin by index.
std::vector<std::uint32_t> partition_nodes(const Topology& topo, const ConnMatrix& m, std::uint32_t parts);

/// The window of a parallel run: the smallest link latency (ps; 0 if some link has none).
Time lookahead_ps(const Topology& topo);

}  // namespace mrc::sim
