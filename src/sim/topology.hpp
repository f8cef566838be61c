// Static network topologies for the packet-level fabric (sim/fabric.hpp): a list of nodes (hosts
// first, then switches) and undirected full-duplex links between them.
//
// Hosts are nodes 0 .. hosts-1. A host has one NIC port per plane; host_link(h, p) is the link of
// port p. Every plane is a separate copy of the switch topology, so a packet's plane is fixed by the
// NIC port it leaves on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/time.hpp"

namespace mrc::sim {

enum class NodeKind : std::uint8_t { kHost, kSwitch };

struct TopoNode {
  NodeKind kind = NodeKind::kHost;
  std::uint8_t tier = 0;    ///< 0 = host, 1 = ToR/leaf, 2 = aggregation/spine, 3 = core
  std::uint16_t plane = 0;  ///< switches only
  std::uint32_t index = 0;  ///< position within (plane, tier)
};

struct TopoLink {
  std::uint32_t a = 0, b = 0;  ///< node ids; for host links a is the host
  double rate_bps = 100e9;
  Duration latency = 1_us;  ///< propagation, ns
  std::uint8_t tier = 0;    ///< 0 = host-ToR, 1 = ToR-agg (leaf-spine), 2 = agg-core
};

struct Topology {
  std::string name;
  std::uint32_t hosts = 0;
  std::uint32_t planes = 1;
  std::vector<TopoNode> nodes;
  std::vector<TopoLink> links;
  std::vector<std::uint32_t> host_links;  ///< [h * planes + p] = link id of host h's port p
  std::uint32_t max_path_links = 0;       ///< links on the longest shortest host-to-host path

  std::uint32_t num_nodes() const { return static_cast<std::uint32_t>(nodes.size()); }
  std::uint32_t host_link(std::uint32_t h, std::uint32_t p) const { return host_links[h * planes + p]; }
  std::uint32_t count_switches(std::uint8_t tier) const;
  std::uint32_t count_links(std::uint8_t tier) const;
  /// Throws std::invalid_argument if ids are out of range, a host has a missing/extra port, ...
  void validate() const;
};

/// The 3-tier k-ary fat tree of docs/htsim.md §2 (htsim's default): k even, N = k^3/4 hosts, host h
/// on ToR h/(k/2), ToR t in pod t/(k/2) linked to the k/2 aggregation switches of its pod, the
/// aggregation switch at pod position p linked to cores p*(k/2) + l, l = 0..k/2-1 (each core reaches
/// one aggregation switch per pod). `planes` copies of the switches; host h's port p is in plane p.
struct FatTreeConfig {
  std::uint32_t k = 8;
  std::uint32_t planes = 1;
  double rate_bps = 100e9;
  Duration latency = 1_us;
};
Topology make_fat_tree(const FatTreeConfig& cfg);

/// A 2-tier leaf-spine Clos per plane built from radix-R switches: R leaves with R/2 hosts and R/2
/// spine uplinks each, R/2 spines with R ports (one per leaf). Hosts = R^2/2, one port per plane.
struct ClosConfig {
  std::uint32_t radix = 16;
  std::uint32_t planes = 4;
  double rate_bps = 100e9;
  Duration latency = 1_us;
};
Topology make_clos2(const ClosConfig& cfg);

}  // namespace mrc::sim
