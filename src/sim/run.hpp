// The simulator runner: the connections of a matrix over a Fabric of MRC endpoints or RoCEv2 NICs.
//
// QPs are per ordered host pair: `qps_per_peer` QPs from src to dst, shared by every connection of
// that pair (a ring all-reduce reuses its neighbour QPs at every step). A connection is one RDMA
// WRITE_WITH_IMM per QP of its pair (its bytes split evenly, the remainder on the first ones), posted
// at its start time, or when the connection it depends on (ConnSpec::after) has fully arrived at its
// receiver, whichever is later. FCTs are sender-side (last WRITE completion - start); `arrived` is
// when the receiver completed the last WRITE_WITH_IMM (all bytes placed). The receives the
// WRITE_WITH_IMMs complete are all posted before the run starts.
//
// The run advances in windows of simulated time no longer than the smallest link latency (the
// lookahead of a parallel run, D55; same windows with one thread or several): a window processes
// every event due before its end. Between windows the runner takes the samples due, reports
// progress, and ends the run once every connection has completed (so the run ends at the end of the
// window in which the last one completed), once the limit has passed, or when no event is left.
// Windows lie on a grid of that latency from time 0 (a sample cuts one short; D68). RunResult::end is
// the time of the last event processed (Fabric::last_event).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/nscc.hpp"
#include "engine/endpoint.hpp"
#include "sim/cm.hpp"
#include "sim/fabric.hpp"
#include "sim/ranks.hpp"
#include "sim/roce.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

/// Host transport: MRC (engine::Endpoint) or the RoCEv2 RC baseline (RoceNic), each behind the
/// interface of sim/hosts.hpp. A RoCE QP is bound to NIC port (q + dst) % planes, q = its index
/// among the pair's QPs.
enum class Transport : std::uint8_t { kMrc, kRoce };

/// A progress report (RunConfig::progress): where the run is, in simulated time, events and bytes.
struct Progress {
  Time now = 0;  ///< simulated ns
  Time limit = 0;
  std::uint64_t events = 0;
  std::uint32_t flows_done = 0, flows = 0;
  std::uint64_t bytes_done = 0, bytes = 0;  ///< placed at the receivers / of every connection
  bool last = false;                        ///< the run has ended
};

struct RunConfig {
  Transport transport = Transport::kMrc;
  /// Payload bytes are not carried through the fabric by default (nobody checks them in a run).
  FabricConfig fabric = [] {
    FabricConfig f;
    f.carry_payload = false;
    return f;
  }();
  std::uint32_t evs_per_plane = 128;  ///< active EVs per plane per QP (no backups)
  std::uint32_t qps_per_peer = 1;     ///< QPs per ordered host pair
  /// From this many QPs in the run (both ends counted), the hosts prefetch QP state
  /// (engine::EndpointConfig::prefetch). Speed only: the results do not depend on it.
  std::uint64_t prefetch_qps = 1024;
  /// RoCE NICs: line rate, framing, port count and seed are set by the run; CNPs are sent only
  /// with DCQCN on (without it nobody reacts to them: htsim's RoCE sends none). The default MTU
  /// is htsim's 4086 B payload (a 4148 B packet with our framing, htsim 4150 B).
  RoceConfig roce = [] {
    RoceConfig r;
    r.mtu = 4086;
    return r;
  }();
  std::uint32_t pmtu = 4096;
  bool icrc = false;
  bool nscc = true;      ///< false: no congestion control
  engine::Tunables tun;  ///< engine tunables (base_rtt_hint is set from the topology)
  /// Work-queue depths per QP. The engine's defaults (4096) cost ~360 KB per QP (both ends of a
  /// connection reach RTS, so twice per connection); a run posts one WR per connection.
  std::uint32_t sq_depth = 16, rq_depth = 16;
  /// Requester/responder window in 128-PSN units (engine default 8 = 1024 PSNs, a 40 KB ring per
  /// QP). 2 = 256 PSNs = 1 MB at 4 KB MTU, still 4x NSCC's maximum window on the htsim networks.
  /// 0 = auto: enough PSNs for 4 x the BDP of all planes, at least 2, at most 8 (one plane of the
  /// htsim networks: 2; 8 x 100 Gb/s: 8).
  std::uint8_t mpr = 0;
  std::uint64_t seed = 1;
  Time limit = 100_ms;            ///< simulated-time cap (ns); flows not done by then are reported unfinished
  std::vector<LinkFault> faults;  ///< scheduled before the first flow starts
  /// > 0: record the bytes placed at receivers (in order, duplicates excluded) every this many ns.
  Duration sample_interval = 0;
  std::vector<std::uint32_t> sample_conns;  ///< connections whose pairs are sampled; empty = all
  /// Called about every 2^16 events and once at the end (Progress::last).
  std::function<void(const Progress&)> progress;
  /// Threads of a parallel run (D55): the network is split into `partitions` (0 = one per
  /// thread) by partition_nodes (sim/partition.hpp), each simulated by one Fabric; results do not
  /// depend on either number.
  std::uint32_t threads = 1;
  std::uint32_t partitions = 0;
  /// A distributed run (`mpirun -n R mrc sim`, D55): the processes taking part, nullptr for one.
  /// Partition p runs in rank p % R (partitions: 0 = threads x R); each rank holds the Fabrics and
  /// NICs of its own partitions only, exchanges the packets that cross between ranks at the end of
  /// every window, and every rank returns the same RunResult (the whole run's), apart from wall
  /// time and memory. Every rank must call run_matrix with the same arguments.
  Ranks* ranks = nullptr;
};

struct FlowResult {
  ConnSpec conn;
  Time posted = kNever;            ///< ns; when its WRITEs were posted (start, or its dependency's arrival)
  Time finish = kNever;            ///< ns; kNever = did not complete
  Time arrived = kNever;           ///< ns; receiver completed every part
  bool ok = false;                 ///< every part completed with success
  double fct_us = 0;               ///< finish - start (sender-side, htsim's definition)
  std::uint64_t bytes_failed = 0;  ///< bytes of parts that completed in error
  /// Counters of the sender QPs carrying this connection at the end (shared with the other
  /// connections of the same pair; RoCE fills tx_data, tx_rtx, tx_ack, tx_nack, timeouts).
  engine::QpCounters qp;
};

struct RunResult {
  std::vector<FlowResult> flows;
  std::uint32_t finished = 0;  ///< completed successfully (FCT statistics cover these)
  double fct_min = 0, fct_p50 = 0, fct_p99 = 0, fct_max = 0;  ///< us, over finished flows
  FabricStats net;
  std::uint64_t tx_data = 0, tx_rtx = 0, tx_sack = 0, tx_nack = 0, timeouts = 0;
  std::uint64_t rtx_nack = 0, rtx_loss = 0, rtx_timeout = 0, rtx_port = 0;  ///< senders, by cause
  std::uint64_t ev_transitions = 0;                                         ///< all QPs
  /// MRC: retransmissions the requester learnt were spurious (D7b duplicate echo), and duplicate
  /// data arrivals counted by the responders (every spurious retransmission that arrived).
  std::uint64_t rtx_spurious = 0, rx_dup = 0;
  std::uint64_t tx_cnp = 0;        ///< RoCE CNPs
  std::uint32_t failed = 0;        ///< connections with a part completed in error
  std::uint64_t bytes_failed = 0;  ///< application bytes whose WRITE completed in error
  double last_finish_us = 0;       ///< latest sender completion (collective completion time)
  /// sample_interval > 0: samples[i] = bytes placed at receivers by time (i + 1) * interval.
  std::vector<std::uint64_t> samples;
  Duration sample_interval = 0;
  Duration base_rtt = 0;  ///< ns, used for NSCC
  std::uint32_t mtu_wire = 0, ack_wire = 0;
  cc::NsccConfig nscc;
  Time end = 0;  ///< simulated time of the run's last event or dequeue (ns; Fabric::last_event)
  double wall_s = 0, events_per_s = 0;
  long peak_rss_kb = 0;
  /// MRC: bytes held per QP (engine::Qp::memory_bytes): the mean over every QP once all are
  /// connected (idle), and at the end the means over QPs that sent data and over the others.
  std::size_t qps = 0;
  double qp_bytes_idle = 0, qp_bytes_sender = 0, qp_bytes_receiver = 0;
  std::size_t pool_packets = 0;
  /// The windows' busy time (taking messages, running events, the exchange between ranks; barriers
  /// excluded; s): summed over threads (work_s), and summed per window over the busiest thread
  /// (span_s: what the run's windows take on `threads` cores of their own, barrier latency aside;
  /// work_s / span_s is the speed-up the partitioning allows). One thread: the CPU time of its
  /// loop; several: each thread's share of each window on the monotonic clock (D66), which on a
  /// shared machine also counts time a thread was descheduled.
  std::uint32_t threads = 1, partitions = 1;
  double work_s = 0, span_s = 0;
  /// Distributed: the ranks, and each one's peak RSS (peak_rss_kb is then the largest). work_s is
  /// summed over ranks; span_s is the largest rank's sum of its busiest thread per window.
  std::uint32_t ranks = 1;
  std::vector<long> rank_rss_kb;
  std::uint64_t windows = 0;  ///< windows the run went through (a parallel run's synchronisations)
  /// Distributed: bytes the ranks sent each other (packed messages), in all and at most by one rank
  /// in one window.
  std::uint64_t rank_bytes = 0, rank_window_bytes = 0;
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
