// `mrc sim` scenario files (schema: scenarios/README.md): the TOML text of a scenario becomes a
// Scenario (topology, connection matrix, faults, one RunConfig per [[variants]] entry). Every error
// is a ScenarioError naming the file and, where there is one, the line ("file:line: what").
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/cm.hpp"
#include "sim/run.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

/// A scenario error that names the file and line.
struct ScenarioError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Workload : std::uint8_t { kCm, kPermutation, kIncast, kAllToAll, kRing, kRingExchange };

struct Variant {
  std::string label;
  sim::RunConfig run;
};

struct Scenario {
  std::string name = "default";
  sim::Topology topo;
  sim::ConnMatrix matrix;
  Workload workload = Workload::kPermutation;
  std::uint32_t victim = ~0u;                ///< incast: victim connection index
  std::uint32_t ring_nodes = 0;              ///< ring all-reduce
  std::uint64_t ring_bytes = 0;              ///< per node
  double fail_at_us = -1;                    ///< [measure]: failover recovery after this time
  double measure_end_us = 0;                 ///< ... measured until this time
  double window_us = 0;                      ///< ... goodput bins (0 = one base RTT)
  double settle = 0.9;                       ///< ... "full goodput" = this fraction of the post-failure rate
  std::vector<std::uint32_t> measure_flows;  ///< ... of these connections (empty: all)
  std::vector<Variant> variants;
  std::string json_path, csv_path;
};

/// The label of a variant without one ("MRC 128 EV/plane", "RoCE+PFC", ...).
std::string default_label(const sim::RunConfig& rc);

/// Sizes a scenario may ask for, checked before anything of that size is built. The defaults admit
/// the largest fabric of scenarios/ (scen6_scale.toml: 131,072 hosts x 8 planes).
struct ScenarioLimits {
  std::uint64_t max_host_ports = 131072ull * 8;  ///< hosts x planes of the topology
  std::uint64_t max_connections = 1ull << 22;    ///< connections of the workload
  std::uint64_t max_faults = 1ull << 24;         ///< link faults, summed over the variants
  bool read_files = true;                        ///< a 'cm' workload may read its matrix file
};

/// Command-line replacements for values of the file (`mrc sim --seed`).
struct ScenarioOverrides {
  bool has_seed = false;
  std::uint64_t seed = 0;  ///< replaces the top-level `seed` (a [workload] `seed` of its own stays)
};

/// Parses the TOML text of a scenario. `name` is the file it came from: errors start with it, the
/// scenario's default name is its stem, and a 'cm' workload's relative path is taken from its
/// directory.
Scenario parse_scenario(const std::string& text, const std::string& name, const ScenarioLimits& limits = {},
                        const ScenarioOverrides& ov = {});

/// The largest scenario file load_scenario() reads: a scenario is a page of TOML (a 'cm' workload's
/// matrix is a file of its own), so a larger file is the wrong one.
inline constexpr std::size_t kScenarioMaxBytes = std::size_t{16} << 20;

/// Reads a scenario file (a missing, unreadable, non-regular or oversized file is named as such)
/// and parses it.
Scenario load_scenario(const std::string& path, const ScenarioLimits& limits = {},
                       const ScenarioOverrides& ov = {});

}  // namespace mrc::sim
