// PathNet: an in-memory, multi-plane test network that drives engine::Endpoint objects in
// deterministic virtual time (nanoseconds, starting at 0).
//
// Topology. P planes, M paths per plane, shared by every node pair and both directions. Each node
// has one NIC port per plane. A packet that node s emits on port p (TxPacket::port) with entropy
// value ev travels on
//
//     path (p, ev.value % M)                                   -- the EV -> path rule
//
// to node TxPacket::peer (the node id returned by add_node(); QpRemote::peer must hold it).
//
// Per packet:
//   1. NIC port: serialisation of wire_size() bytes at the port rate. A port carries one packet at
//      a time; the node is asked for packets (Endpoint::poll_tx with the mask of free ports) whenever
//      a port becomes free and after every receive, timer and kick().
//   2. Path (when the packet has been serialised): dead path (dies_at) -> drop; loss -> drop;
//      trim (data packets with payload only) -> only the first header_len bytes go on;
//      ECN-CE marking; duplication (the copy travels independently). Optional path rate = a FIFO
//      server in front of the path; then delay plus uniform jitter in [0, jitter] (reordering).
//      A packet still on a path when the path dies is dropped too.
//   3. Optional last hop per (destination, plane): a FIFO at rate_bps with a tail-drop buffer,
//      RED-style ECN marking between ecn_kmin and ecn_kmax bytes of backlog, and trimming: a data
//      packet that would take the backlog above trim_bytes is cut to its header (RxMeta::trimmed
//      and trimmed_lasthop both set). Such packets, packets trimmed earlier and control packets
//      (TrafficClass::kControl) bypass the FIFO at strict priority; they still use the link,
//      delaying the FIFO by their serialisation time. peak_bytes records the deepest backlog.
//   4. Delivery: Endpoint::receive(bytes, RxMeta{port = plane, peer = source node, ecn_ce, trimmed,
//      trimmed_lasthop}, now).
//
// Timers: at most one live timer event per node, for Endpoint::next_deadline(); a superseded one
// is recognised by its sequence number and ignored, and on_timer() runs only once the deadline is
// due (an event that fires early because the deadline moved later just re-arms).
//
// Randomness comes only from the Rng seeded by PathNetConfig::seed, and events scheduled for the
// same instant run in scheduling order, so a run is a pure function of its inputs.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/rng.hpp"
#include "common/time.hpp"
#include "engine/endpoint.hpp"
#include "engine/types.hpp"
#include "sim/event_queue.hpp"
#include "sim/node_timer.hpp"

namespace mrc::sim {

/// One path of one plane. Probabilities are per packet, in [0, 1].
struct PathSpec {
  Duration delay = 2_us;  ///< one-way propagation + switching delay
  Duration jitter = 0;    ///< extra delay, uniform in [0, jitter]
  double rate_bps = 0;    ///< > 0: FIFO server of this rate at the path entry; 0: none
  double loss = 0;
  double dup = 0;
  double trim = 0;  ///< data packets carrying payload only
  double ecn = 0;
  Time dies_at = kNever;  ///< from then on the path drops everything (also packets on it)
  /// With a node id, the death is one-way: only packets sent by that node are dropped (a failed
  /// link on the reverse path of an EV, which hashes differently from the forward one).
  std::uint32_t dies_for_src = kAnySource;
  static constexpr std::uint32_t kAnySource = 0xFFFFFFFFu;
  bool dead_for(std::uint32_t src, Time now) const {
    return now >= dies_at && (dies_for_src == kAnySource || dies_for_src == src);
  }
};

/// The queue in front of a destination NIC port. Disabled while rate_bps == 0.
struct LastHopSpec {
  double rate_bps = 0;
  std::uint64_t buffer_bytes = 1u << 20;  ///< tail drop above this backlog
  std::uint64_t ecn_kmin = 0;             ///< RED ramp; ecn_kmax == 0 disables marking
  std::uint64_t ecn_kmax = 0;
  double ecn_pmax = 1.0;         ///< marking probability at ecn_kmax (and above)
  std::uint64_t trim_bytes = 0;  ///< 0: no trimming
};

struct PathNetConfig {
  std::uint32_t planes = 1;                  ///< 1..engine::kMaxPorts
  std::uint32_t paths_per_plane = 1;         ///< M >= 1
  double port_rate_bps = 100e9;              ///< every NIC port
  PathSpec path;                             ///< template for every path
  Duration delay_spread = 0;                 ///< each path's delay += uniform [0, delay_spread)
  LastHopSpec last_hop;                      ///< template for every (node, plane)
  std::uint32_t mtu_wire_bytes = 4096 + 64;  ///< a full data packet on the wire (base_rtt())
  std::uint32_t ack_wire_bytes = 64;         ///< an ACK on the wire (base_rtt())
  std::uint64_t seed = 1;
};

enum class DropCause : std::uint8_t {
  kLoss,             ///< random path loss
  kPathDead,         ///< path past its dies_at
  kLastHopOverflow,  ///< last-hop buffer full
  kLinkDown,         ///< destination port down (port_down())
  kBadRoute,         ///< unknown destination node or port outside the network
  kCount,
};
const char* to_string(DropCause c);

/// What the observer sees for every delivered or dropped packet.
struct PacketRecord {
  Time time = 0;  ///< delivery or drop time
  Time sent = 0;  ///< when the packet had left the NIC port
  std::uint32_t src = 0, dst = 0;
  std::uint8_t plane = 0;
  std::uint32_t path = 0;  ///< index within the plane
  engine::Ev ev;
  engine::TrafficClass tc = engine::TrafficClass::kData;
  std::uint32_t psn = 0;
  std::uint32_t wire_bytes = 0;  ///< as sent (before any trim)
  bool delivered = false;
  DropCause cause = DropCause::kLoss;  ///< when !delivered
  bool trimmed = false, trimmed_lasthop = false, ecn_ce = false, duplicate = false;
};

struct PortStats {
  std::uint64_t tx_packets = 0, tx_bytes = 0;
  std::uint64_t rx_packets = 0, rx_bytes = 0;  ///< delivered to this node on this plane
};

struct PathStats {
  std::uint64_t packets = 0;  ///< entered the path (duplicates included)
  std::uint64_t delivered = 0, dropped = 0;
  std::uint64_t trimmed = 0, ecn_marked = 0, duplicated = 0;  ///< done by the path itself
};

struct LastHopStats {
  std::uint64_t packets = 0, drops = 0, trims = 0, ecn_marks = 0, bypassed = 0;
  std::uint64_t peak_bytes = 0;  ///< largest FIFO backlog, including the arriving packet
};

struct NetStats {
  std::uint64_t sent = 0;  ///< packets handed over by endpoints
  std::uint64_t delivered = 0, delivered_bytes = 0;
  std::uint64_t dropped = 0;
  std::uint64_t drops[static_cast<int>(DropCause::kCount)] = {};
  std::uint64_t trimmed = 0, ecn_marked = 0, duplicated = 0;  ///< by paths and last hops
  std::uint64_t peak_lasthop_bytes = 0;
  std::uint64_t events = 0;  ///< events processed
  std::uint64_t bad_tx = 0;  ///< poll_tx returned a packet for a busy/down/unknown port
  std::uint64_t drops_by(DropCause c) const { return drops[static_cast<int>(c)]; }
};

class PathNet {
 public:
  explicit PathNet(const PathNetConfig& cfg);
  ~PathNet();
  PathNet(const PathNet&) = delete;
  PathNet& operator=(const PathNet&) = delete;

  /// Attaches an endpoint (which must outlive the network); returns its node id.
  std::uint32_t add_node(engine::Endpoint& ep);
  std::uint32_t num_nodes() const { return static_cast<std::uint32_t>(nodes_.size()); }
  engine::Endpoint& endpoint(std::uint32_t node) { return *nodes_[node].ep; }
  const PathNetConfig& config() const { return cfg_; }

  // --- topology and failures --------------------------------------------------------------------
  PathSpec& path(std::uint32_t plane, std::uint32_t idx) {
    return paths_[plane * cfg_.paths_per_plane + idx];
  }
  const PathSpec& path(std::uint32_t plane, std::uint32_t idx) const {
    return paths_[plane * cfg_.paths_per_plane + idx];
  }
  /// The path a packet with this EV takes within its plane (ev.value % paths_per_plane).
  std::uint32_t path_index(const engine::Ev& ev) const { return ev.value % cfg_.paths_per_plane; }
  /// Valid after add_node(node); changes apply to packets arriving from then on.
  LastHopSpec& last_hop(std::uint32_t node, std::uint32_t plane) { return lasthop_at(node, plane).spec; }
  /// The path drops everything from `at` on (a time in the past means now).
  void kill_path(std::uint32_t plane, std::uint32_t idx, Time at);
  /// The path drops what `src` sends on it from `at` on; the other direction keeps working.
  void kill_path_from(std::uint32_t plane, std::uint32_t idx, std::uint32_t src, Time at);
  /// Every path of the plane dies at `at`.
  void kill_plane(std::uint32_t plane, Time at);
  /// A NIC-to-switch link failure the NIC can see: from `at` the node's port carries nothing in
  /// either direction and the endpoint is told (Endpoint::set_port_up(plane, false)).
  void port_down(std::uint32_t node, std::uint32_t plane, Time at);

  // --- running ------------------------------------------------------------------------------------
  Time now() const { return now_; }
  /// Lets the node send (call after post_send and other API calls on its endpoint).
  void kick(std::uint32_t node);
  /// Processes the earliest event if it is due at or before `limit`; false if none.
  bool step(Time limit);
  /// Processes every event up to `t`, then sets now() to t (if later).
  void run_until(Time t);
  /// Runs while pred() holds and time <= limit. Returns true if pred() became false.
  template <class Pred>
  bool run_while(Pred&& pred, Time limit) {
    while (pred()) {
      if (!step(limit)) {
        if (now_ < limit) now_ = limit;
        return !pred();
      }
    }
    return true;
  }
  /// Runs until no packet is in the network and no endpoint has a timer pending (or `limit`).
  /// Endpoints that keep periodic timers never become idle; use run_while() for them.
  bool run_until_idle(Time limit);
  bool idle() const;

  // --- statistics -------------------------------------------------------------------------------
  const NetStats& stats() const { return stats_; }
  const PortStats& port_stats(std::uint32_t node, std::uint32_t plane) const {
    return nodes_[node].ports[plane];
  }
  const PathStats& path_stats(std::uint32_t plane, std::uint32_t idx) const {
    return path_stats_[plane * cfg_.paths_per_plane + idx];
  }
  const LastHopStats& last_hop_stats(std::uint32_t node, std::uint32_t plane) const {
    return nodes_[node].lasthop[plane].stats;
  }
  std::uint64_t packets_in_flight() const { return live_packets_; }
  /// Called for every delivered or dropped packet (tests and tools; not for hot paths).
  void set_observer(std::function<void(const PacketRecord&)> fn) { observer_ = std::move(fn); }

  // --- derived quantities -------------------------------------------------------------------------
  /// Serialisation time of `bytes` at `rate_bps` (rounded to the nearest ns, at least 1).
  static Duration serialization(std::uint64_t bytes, double rate_bps);
  /// 2 x the template path delay + serialisation of one MTU packet and one ACK on every
  /// rate-limited hop (NIC port, path, last hop). No jitter, no spread, no queueing.
  Duration base_rtt() const;

 private:
  enum Kind : std::uint8_t { kTxDone, kPathExit, kDeliver, kTimer, kPortDown };

  struct Packet;
  struct PacketBuffer {
    std::unique_ptr<std::uint8_t[]> data;
    std::uint32_t cap = 0;
  };
  struct LastHop {
    LastHopSpec spec;
    Time busy_until = 0;
    LastHopStats stats;
  };
  struct Node {
    engine::Endpoint* ep = nullptr;
    std::uint32_t busy = 0;  ///< ports serialising a packet
    std::uint32_t down = 0;  ///< ports that are down
    std::uint32_t usable = 0;
    NodeTimer timer;
    std::vector<PortStats> ports;
    std::vector<LastHop> lasthop;
  };
  struct PortDownOrder {
    std::uint32_t node;
    std::uint32_t plane;
  };

  LastHop& lasthop_at(std::uint32_t node, std::uint32_t plane) { return nodes_[node].lasthop[plane]; }
  std::uint32_t alloc_packet();
  void free_packet(std::uint32_t idx);
  /// The byte buffer of slot `idx`, grown to hold at least `size` bytes.
  std::uint8_t* buffer(std::uint32_t idx, std::uint32_t size);
  void service(std::uint32_t node);
  void start_tx(std::uint32_t node, const engine::TxPacket& tx);
  void on_tx_done(std::uint32_t idx);
  void enter_path(std::uint32_t idx);
  void schedule_path_exit(std::uint32_t idx);
  void on_path_exit(std::uint32_t idx);
  void deliver(std::uint32_t idx);
  void drop(std::uint32_t idx, DropCause cause);
  void on_timer_event(std::uint32_t node, std::uint64_t seq);
  void on_port_down(std::uint32_t order);
  void reschedule_timer(std::uint32_t node);
  void record(const Packet& p, bool delivered, DropCause cause);
  void trim_packet(Packet& p);

  PathNetConfig cfg_;
  Rng rng_;
  Time now_ = 0;
  EventQueue events_;
  std::vector<PathSpec> paths_;
  std::vector<Time> path_busy_;  ///< rate-limited paths: FIFO busy until
  std::vector<PathStats> path_stats_;
  std::vector<Node> nodes_;
  std::vector<Packet> pool_;
  std::vector<PacketBuffer> bufs_;  ///< parallel to pool_
  std::vector<std::uint32_t> free_;
  std::uint64_t live_packets_ = 0;
  std::vector<PortDownOrder> port_down_orders_;
  std::uint64_t pending_port_down_ = 0;
  std::unique_ptr<engine::TxPacket> tx_;  ///< scratch for poll_tx
  NetStats stats_;
  std::function<void(const PacketRecord&)> observer_;
};

}  // namespace mrc::sim
