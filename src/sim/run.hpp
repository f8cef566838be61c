// The simulator runner: one MRC QP per connection of a matrix over a Fabric, one RDMA WRITE of the
// connection's bytes posted at its start time, sender-side FCTs (completion time - start).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cc/nscc.hpp"
#include "engine/endpoint.hpp"
#include "sim/cm.hpp"
#include "sim/fabric.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

struct RunConfig {
  FabricConfig fabric;
  std::uint32_t evs_per_plane = 128;  ///< active EVs per plane per QP (no backups)
  std::uint32_t pmtu = 4096;
  bool icrc = false;
  bool nscc = true;      ///< false: no congestion control
  engine::Tunables tun;  ///< engine tunables (base_rtt_hint is set from the topology)
  std::uint64_t seed = 1;
  Time limit = 100_ms;  ///< simulated-time cap (ns); flows not done by then are reported unfinished
};

struct FlowResult {
  ConnSpec conn;
  Time finish = kNever;  ///< ns; kNever = did not complete
  bool ok = false;       ///< completion status success
  double fct_us = 0;
  engine::QpCounters qp;  ///< sender QP counters at the end
};

struct RunResult {
  std::vector<FlowResult> flows;
  std::uint32_t finished = 0;
  double fct_min = 0, fct_p50 = 0, fct_p99 = 0, fct_max = 0;  ///< us, over finished flows
  FabricStats net;
  std::uint64_t tx_data = 0, tx_rtx = 0, tx_sack = 0, tx_nack = 0, timeouts = 0;
  Duration base_rtt = 0;  ///< ns, used for NSCC
  std::uint32_t mtu_wire = 0, ack_wire = 0;
  cc::NsccConfig nscc;
  Time end = 0;  ///< simulated time when the run stopped (ns)
  double wall_s = 0, events_per_s = 0;
  long peak_rss_kb = 0;
  std::size_t pool_packets = 0;
};

/// Nearest-rank percentile of a sorted vector (q in [0, 1]).
double percentile(const std::vector<double>& sorted, double q);

/// Base RTT for a topology: 2 x the longest path's propagation plus one MTU data packet and one
/// ACK serialised on each of its links (htsim's formula).
Duration base_rtt(const Topology& topo, std::uint32_t mtu_wire, std::uint32_t ack_wire);

/// Runs the matrix on the topology (matrix nodes must not exceed topology hosts).
RunResult run_matrix(const Topology& topo, const ConnMatrix& m, const RunConfig& cfg);

/// A human-readable summary (one block).
std::string format_report(const RunResult& r);

}  // namespace mrc::sim
