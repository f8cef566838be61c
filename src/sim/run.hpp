// The simulator runner: one MRC QP per connection of a matrix over a Fabric, one RDMA WRITE of the
// connection's bytes posted at its start time, sender-side FCTs (completion time - start).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/nscc.hpp"
#include "engine/endpoint.hpp"
#include "sim/cm.hpp"
#include "sim/fabric.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

/// Host transport. Integration point for the RoCEv2 baseline (src/sim/roce.*): run_matrix()
/// rejects kRoce until that NIC exists; the fabric then needs a closed switch over host kinds
/// (engine::Endpoint | RoceNic) in Fabric::service/deliver/reschedule_timer (no virtual call per
/// packet) plus PFC on the switch ports.
enum class Transport : std::uint8_t { kMrc, kRoce };

struct RunConfig {
  Transport transport = Transport::kMrc;
  /// Payload bytes are not carried through the fabric by default (nobody checks them in a run).
  FabricConfig fabric = [] {
    FabricConfig f;
    f.carry_payload = false;
    return f;
  }();
  std::uint32_t evs_per_plane = 128;  ///< active EVs per plane per QP (no backups)
  std::uint32_t pmtu = 4096;
  bool icrc = false;
  bool nscc = true;      ///< false: no congestion control
  engine::Tunables tun;  ///< engine tunables (base_rtt_hint is set from the topology)
  /// Work-queue depths per QP. The engine's defaults (4096) cost ~360 KB per QP (both ends of a
  /// connection reach RTS, so twice per connection); a run posts one WR per connection.
  std::uint32_t sq_depth = 16, rq_depth = 16;
  /// Requester/responder window in 128-PSN units (engine default 8 = 1024 PSNs, a 40 KB ring per
  /// QP). 2 = 256 PSNs = 1 MB at 4 KB MTU, still 4x NSCC's maximum window on the htsim networks.
  std::uint8_t mpr = 2;
  std::uint64_t seed = 1;
  Time limit = 100_ms;            ///< simulated-time cap (ns); flows not done by then are reported unfinished
  std::vector<LinkFault> faults;  ///< scheduled before the first flow starts
  /// Called about every 2^16 events and once at the end: (simulated ns, finished flows, total).
  std::function<void(Time, std::uint32_t, std::uint32_t)> progress;
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
  std::uint64_t rtx_nack = 0, rtx_loss = 0, rtx_timeout = 0, rtx_port = 0;  ///< senders, by cause
  std::uint64_t ev_transitions = 0;                                         ///< all QPs
  Duration base_rtt = 0;                                                    ///< ns, used for NSCC
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
