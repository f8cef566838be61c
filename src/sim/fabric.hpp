// Fabric: a packet-level network of switches and links (sim/topology.hpp) that drives
// engine::Endpoint hosts in deterministic virtual time, the same way PathNet does (sim/pathnet.hpp).
//
// Time. Internally picoseconds (so serialisation at any rate has no rounding drift); endpoints see
// nanoseconds (now_ps / 1000) and their deadlines are honoured at the nanosecond. The public API
// takes and returns nanoseconds unless a name says _ps.
//
// Links. Every undirected topology link is two egress ports (one per direction) of `rate_bps`
// followed by `latency` of propagation. A packet's wire size is the engine's bytes (header + payload
// + trailer) plus FabricConfig::wire_overhead (Ethernet + IP + UDP framing the engine does not build).
//
// Hosts. One NIC port per plane. A port serialises one packet at a time; the host's NIC is polled
// (poll_tx with the mask of free ports) whenever one of its ports frees up and after every receive,
// timer and kick(). Hosts have no queues: the NIC arbitrates. A host is either an MRC
// engine::Endpoint or a RoceNic (the RoCEv2 baseline, sim/roce.hpp); both have the same driver
// interface and the fabric picks one by a branch on the host's kind (no virtual call per packet).
// RoCE packets are never trimmed (without PFC they are tail-dropped instead). A host link going down
// or up is reported to an MRC endpoint at once (Endpoint::set_port_up: the NIC sees its link drop);
// a RoCE NIC is not told (its QPs time out, as RC over a dead port does).
//
// Switches. Zero forwarding latency. Routing: the FIB (a flat per-switch, per-destination array of
// next-hop groups: all neighbours one hop closer to the destination host) and ECMP within a group by
// a hash of the flow 5-tuple (src, dst, UDP source port = EV, UDP dport, protocol) and a per-switch
// salt. Each egress port has
//   * a data FIFO of at most QueueConfig::data_bytes queued bytes (the packet in service excluded);
//   * a strict-priority control queue (control packets: SACK/NACK/..., and trimmed headers) of at
//     most QueueConfig::control_bytes (0 = 2 x data_bytes); above that, control packets are dropped;
//   * trimming: a data packet with payload that does not fit the data FIFO is cut to its header
//     (TxPacket::header_len bytes + wire_overhead on the wire) and goes to the control queue,
//     delivered with RxMeta::trimmed (and trimmed_lasthop if the port leads to a host); with
//     trimming off it is tail-dropped;
//   * lazy dequeues (FabricConfig::lazy_ports, D68): a busy port does not have an event per packet;
//     it catches up on the dequeues due, each at its own time, at the end of the grid interval
//     (the smallest link latency) they are due in or when something reaches the port first; the
//     ports due at one grid line wake in one event (D73);
//   * ECN: RED-style CE marking of data packets on dequeue, with probability 0 below ecn_kmin bytes
//     left in the data FIFO, rising linearly to 1 at ecn_kmax (and above); optionally not on ports
//     that lead to a host (ecn_last_hop = false).
//   * PFC (QueueConfig::pfc, for the RoCE baseline): lossless, one priority. Each switch counts, per
//     ingress port, the bytes that arrived over it and are still queued in the switch; above
//     pfc_xoff it sends PAUSE upstream, below pfc_xon RESUME. PAUSE/RESUME take effect one link
//     latency later (frames are not serialised) and stop the upstream port (switch or host) from
//     starting new packets, control included. With PFC no queue has a byte limit: nothing is trimmed
//     or dropped for space (docs/htsim.md §2: htsim's lossless queues are unbounded too).
//
// Faults (LinkFault). A link that goes down loses everything on it: packets queued at both ends
// and packets on the wire are dropped (FabricDrop::kLinkDown). Until routing reconverges
// (FabricConfig::reconverge_delay after the change) switches keep hashing onto it and what they send
// there is blackholed; then every FIB is rebuilt from the links that are up (shortest paths over up
// links, so groups lose the dead member and upstream switches stop using a switch that lost its way
// down). A link coming back up is used again after the same delay.
//
// Determinism: all randomness comes from FabricConfig::seed: the ECMP salts, and one generator per
// egress port for its coin flips (ECN marks and gray loss, D67), so a port's draws depend neither on
// what other ports do nor on the order in which ports are served. Events of the same picosecond run in the
// order of a key that depends only on the event itself, never on when it was pushed: (class, object, counter
// of that object) with the classes, first to last, connection starts (schedule_call), faults, reconvergences,
// PFC PAUSE/RESUME (port, the port's PFC counter), arrivals (port), the lazy ports' wake-ups of one grid
// line (one event: a port's wake-up touches only that port, so they commute), port wake-ups (port) and host
// timers (host, the host's timer counter). No global state; the per-packet path does not allocate once the
// packet pool has warmed up.
//
// Partitions (parallel runs, D55). set_partition() makes this Fabric one partition of a network
// split over several Fabrics (one per thread, of every rank), each running only the events of its
// own nodes: the hosts attached to it and the switches the partition map gives it. A packet sent on
// a link to another partition's node leaves through an outbox, stamped with its arrival time;
// take_messages() moves another partition's outbox for us into our queue (PFC PAUSE/RESUME cross the
// same way). That is exact as long as every partition stops each window before the earliest arrival
// it could still receive: run_window() up to the window's end, at most the minimum link latency (the
// lookahead) after its start; between windows flip_outboxes(); at the next window's start, before
// running it, take_messages(). Because the tie-break key and the random draws are per
// object, the events of every node run in the same order as in one unpartitioned Fabric, so results
// do not depend on the partitioning. Every partition applies every fault and reconvergence (only
// partition 0 counts them in its statistics); the sum of the partitions' statistics (merge_stats)
// is that of one Fabric.
// What a partition holds: the topology is shared, not copied, by the Fabrics built from one
// shared_ptr (a process's partitions and its runner); Port records only for the ports that leave or
// reach its own nodes (its egress ports and the receiving side of the links into it), in global
// order, so inside the Fabric a port id is that local index and Port::gid the global id (2 * link +
// direction) that event keys, messages and the public API use (an unpartitioned Fabric holds all
// of them: local = global); FIB rows, and multi-port ECMP groups, for its own switches only, so the
// next switch of a packet crossing to another partition is chosen by the receiver when it takes the
// message (after the window, whose reconvergences it has applied as well: the same FIB the sender
// has). Routing is rebuilt from the topology and a per-link up flag, since every partition needs
// the whole network's shortest paths. Not divided: per-link and per-node arrays (up flags, the
// global-to-local port map, RNGs, salts, switch info), per (host, plane) leaf lookup and per-host
// records, of which it uses only its own nodes' entries (up to 48 bytes an item; a Port is 192).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "common/rng.hpp"
#include "common/time.hpp"
#include "engine/endpoint.hpp"
#include "sim/event_queue.hpp"
#include "sim/mapped_array.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

class RoceNic;
struct FabricTestAccess;  ///< tests/sim/lazy_ports_test.cpp: packets placed at a port directly

struct QueueConfig {
  std::uint64_t data_bytes = 178450;  ///< data FIFO capacity (htsim default: 43 x 4150 B)
  std::uint64_t control_bytes = 0;    ///< 0 = 2 x data_bytes
  bool trimming = true;               ///< false: a data packet that does not fit is dropped
  /// With trimming, when a data packet finds the data FIFO full: the chance that the newest queued
  /// data packet is trimmed instead and the arrival takes its place (htsim's CompositeQueue: 0.5;
  /// 0: always the arrival). Breaks the phase lock of a simulated network whose every timing is
  /// exact (D82).
  double trim_queued = 0.5;
  std::uint64_t ecn_kmin = 37350;  ///< ecn_kmax == 0 disables marking
  std::uint64_t ecn_kmax = 145250;
  bool ecn_last_hop = true;            ///< mark on ports that lead to a host
  bool pfc = false;                    ///< lossless with per-ingress PAUSE/RESUME (see above)
  std::uint64_t pfc_xoff = 15 * 4086;  ///< htsim RoCE: XOFF above 15 x 4086 B per ingress port
  std::uint64_t pfc_xon = 12 * 4086;   ///< ... XON below 12 x 4086 B
};

struct FabricConfig {
  QueueConfig queue;
  std::uint32_t wire_overhead = 46;  ///< Ethernet 14 + FCS 4 + IPv4 20 + UDP 8
  std::uint16_t udp_dport = 4791;    ///< part of the ECMP 5-tuple
  /// false: packets carry only their headers and trailers through the network and are delivered
  /// with a zero-filled payload of the right length (large runs: no 4 KB copy or buffer per packet;
  /// the receiver's memory gets zeros, which is fine when nobody checks the data and ICRC is off).
  bool carry_payload = true;
  /// Switch egress ports catch up on their dequeues in batches (D68): a busy port has one wake-up
  /// event per link latency instead of one per packet, with the same results (each dequeue still
  /// happens at its own time, before anything that could see it). false: one event per dequeue
  /// (the reference the tests compare against). Never with PFC or on host ports.
  bool lazy_ports = true;
  std::uint64_t seed = 1;  ///< ECMP salts and ECN coin flips
  /// ECMP reconvergence: this long (ns) after a link goes down or up, every FIB is rebuilt from the
  /// links that are up. Until then packets hashed onto a dead link are dropped (blackholed).
  Duration reconverge_delay = 0;
};

enum class FabricDrop : std::uint8_t { kDataTail, kControlOverflow, kNoRoute, kLinkDown, kGrayLoss, kCount };

/// A scheduled change of one undirected link. kDown: what is queued on it and on the wire is lost,
/// packets sent onto it are lost, switches drop what they would queue on it until routing
/// reconverges, then route around it. kRate: new rate (bits/s) for packets serialised from then on.
/// kLoss: gray failure, each packet sent on it is lost with probability `value`. `dir` limits kRate
/// and kLoss to one direction (kAtoB: from the link's `a` end, the host for host links).
enum class LinkFaultKind : std::uint8_t { kDown, kUp, kRate, kLoss };
enum class LinkDir : std::uint8_t { kBoth, kAtoB, kBtoA };
struct LinkFault {
  Time at = 0;  ///< ns
  std::uint32_t link = 0;
  LinkFaultKind kind = LinkFaultKind::kDown;
  double value = 0;
  LinkDir dir = LinkDir::kBoth;
};

/// A flap schedule: `count` times, down for `down` then up for `up` (ns), starting at `at`.
std::vector<LinkFault> link_flaps(std::uint32_t link, Time at, Duration down, Duration up,
                                  std::uint32_t count);
/// A switch reboot: every link of switch `node` down at `at`, up again `down_for` later. Throws
/// std::invalid_argument if `node` is not a switch.
std::vector<LinkFault> switch_reboot(const Topology& topo, std::uint32_t node, Time at, Duration down_for);

struct FabricStats {
  std::uint64_t events = 0;
  std::uint64_t sent = 0;       ///< packets handed over by endpoints
  std::uint64_t delivered = 0;  ///< to endpoints
  std::uint64_t hops = 0;       ///< link traversals (every port transmission)
  std::uint64_t trimmed = 0, ecn_marked = 0;
  std::uint64_t drops[static_cast<int>(FabricDrop::kCount)] = {};
  std::uint64_t bad_tx = 0;          ///< poll_tx returned a packet for a busy/unknown port or peer
  std::uint64_t pfc_pauses = 0;      ///< PAUSE frames sent (XOFF crossings)
  std::uint64_t reconvergences = 0;  ///< FIB rebuilds after link changes
  std::uint64_t peak_data_bytes = 0;
  std::uint64_t dropped() const {
    std::uint64_t n = 0;
    for (std::uint64_t d : drops) n += d;
    return n;
  }
  std::uint64_t drops_by(FabricDrop d) const { return drops[static_cast<int>(d)]; }
};

/// Adds a partition's statistics to `into` (counters add up, peaks take the larger).
void merge_stats(FabricStats& into, const FabricStats& from);

struct PortCounters {
  // Those of every packet first (they share a cache line with the port's per-hop state).
  std::uint64_t tx_packets = 0, tx_bytes = 0;  ///< wire bytes
  std::uint64_t peak_data_bytes = 0;
  std::uint64_t ecn_marks = 0;
  std::uint64_t trims = 0, drops = 0;
  std::uint64_t pauses = 0;              ///< times this port was paused by its downstream switch
  std::uint64_t peak_ingress_bytes = 0;  ///< PFC accounting of the switch this port leads to
};

class Fabric {
  friend struct FabricTestAccess;

 public:
  /// Keeps its own copy of `topo`.
  Fabric(const Topology& topo, const FabricConfig& cfg);
  /// Shares `topo` (read only) with whoever else holds it: the partitions of one process.
  Fabric(std::shared_ptr<const Topology> topo, const FabricConfig& cfg);
  /// The same made partition `self` of `parts` at once (see set_partition; the whole network's
  /// ports are never built).
  Fabric(std::shared_ptr<const Topology> topo, const FabricConfig& cfg,
         const std::vector<std::uint32_t>& part_of_node, std::uint32_t self, std::uint32_t parts);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  /// Attaches host h's NIC: an MRC endpoint or a RoCE NIC (must outlive the fabric; its number of
  /// ports should equal planes). QpRemote::peer must be the peer's host id.
  void attach(std::uint32_t host, engine::Endpoint& ep);
  void attach(std::uint32_t host, RoceNic& nic);
  const Topology& topology() const { return topo_; }
  const FabricConfig& config() const { return cfg_; }

  /// Called after host h's endpoint received a packet or ran its timer (drivers drain completions).
  void set_activity_hook(std::function<void(std::uint32_t host)> fn) { hook_ = std::move(fn); }
  /// Called when an event of schedule_call() is due (drivers post work at a time).
  void set_call_hook(std::function<void(std::uint32_t id)> fn) { call_hook_ = std::move(fn); }
  /// Schedules a call of the call hook with `id` at `at_ps` (>= now_ps). Calls of the same instant
  /// run before every other event of that instant, in id order (ids of one instant must differ).
  void schedule_call(Time at_ps, std::uint32_t id);

  // --- partitions (see the top of this file) --------------------------------------------------
  /// Makes this Fabric partition `self` of `parts`: part_of_node[n] is node n's partition. Call
  /// before anything is sent or any fault applied; attach only the hosts of this partition.
  void set_partition(const std::vector<std::uint32_t>& part_of_node, std::uint32_t self, std::uint32_t parts);
  /// Processes every event due before `end_ps` (exclusive).
  void run_window(Time end_ps);
  /// Moves what partition `from` sent us during the window before the last flip_outboxes() into our
  /// event queue. It may run while `from` runs its next window: that writes the other outboxes.
  void take_messages(Fabric& from);
  /// Between windows (no partition running): what this window sent becomes what the others take.
  void flip_outboxes();
  /// Time (ps) of the earliest queued event, kNever if none.
  Time next_event_ps();
  /// Time (ps) of the earliest message in our outboxes, either set (what another partition will
  /// queue when it takes them), kNever if none.
  Time next_message_ps() const;
  /// Partitions in other processes (sim/ranks.hpp): pack_messages appends what we sent partition
  /// `to` during the window just run (before flip_outboxes()) to `out` as one record (nothing if it
  /// sent nothing) and empties that outbox; packed_record
  /// reads a record's sender, receiver and size (throws std::runtime_error if `in` is shorter);
  /// take_packed does what take_messages does with a record addressed to us.
  struct Packed {
    std::uint32_t from = 0, to = 0;
    std::size_t size = 0;
  };
  void pack_messages(std::uint32_t to, std::vector<std::uint8_t>& out);
  static Packed packed_record(std::span<const std::uint8_t> in);
  void take_packed(std::span<const std::uint8_t> record);

  // --- faults -----------------------------------------------------------------------------------
  /// Schedules a link fault (at >= now); throws std::invalid_argument on a bad link id or value.
  void schedule_fault(const LinkFault& f);
  /// Applies a fault now.
  void apply_fault(const LinkFault& f);
  bool link_up(std::uint32_t link) const;
  /// Rebuilds every FIB from the links that are up now (what reconvergence does).
  void reconverge();

  // --- running --------------------------------------------------------------------------------
  Time now() const { return now_ps_ / 1000; }
  /// Time (ns) of the last thing that happened: an event, or a packet leaving a switch queue (which
  /// a lazy port does in its wake-up, at the time it was due). Unlike now(), the same with lazy
  /// ports or without.
  Time last_event() const { return last_ps_ / 1000; }
  Time now_ps() const { return now_ps_; }
  void kick(std::uint32_t host);
  /// Processes the earliest event if it is due at or before `limit` (ns); false if none.
  bool step(Time limit);
  /// Same with the limit in picoseconds (events due at or before it).
  bool step_ps(Time limit_ps);
  /// Moves the clock forward to `t` (ns) without processing anything; no event may be due earlier.
  void advance_to(Time t);
  void run_until(Time t);
  /// No packet in this Fabric and no host deadline (partitioned: this partition's only, outboxes
  /// not counted).
  bool idle() const;
  /// Lazy switch ports (FabricConfig::lazy_ports) perform the dequeues due before `end_ps`, so that
  /// queues and counters are those of a fabric that ran every event before it: a driver that ran
  /// run_window(end_ps) calls this before reading them at the end (run_until does it itself).
  void settle_ports(Time end_ps);

  // --- routing introspection --------------------------------------------------------------------
  /// The egress ports (directed links) a packet from src to dst with this EV leaving on NIC port
  /// `plane` crosses, in order; empty if unreachable (partitioned: also if src or a switch on the
  /// way is another partition's).
  std::vector<std::uint32_t> trace(std::uint32_t src, std::uint32_t dst, std::uint32_t plane,
                                   std::uint32_t ev) const;
  /// Directed port id: 2*link for a->b, 2*link+1 for b->a.
  std::uint32_t num_ports() const;
  bool port_paused(std::uint32_t port) const;
  /// Bytes queued at an egress port (data + control, the packet in service excluded).
  std::uint64_t queued_bytes(std::uint32_t port) const;
  std::uint32_t port_from(std::uint32_t port) const;
  std::uint32_t port_to(std::uint32_t port) const;
  /// Switches with a row in the FIB: all of them, partitioned only this partition's (a trace()
  /// that reaches another partition's switch is empty).
  std::uint32_t fib_rows() const;
  /// Port records held: num_ports(), partitioned only the ports that leave or reach its nodes.
  std::uint32_t ports_held() const;

  // --- statistics -------------------------------------------------------------------------------
  /// Partitioned: this partition's share (merge_stats adds them up).
  const FabricStats& stats() const { return stats_; }
  /// Partitioned: what this partition counted for the port (its sender's side: transmissions,
  /// trims, marks, queue drops, peak; its receiver's side: drops on the wire, PFC pauses, peak
  /// ingress bytes); zeros for a port neither end of which is ours.
  const PortCounters& port_counters(std::uint32_t port) const;
  std::uint64_t packets_in_flight() const { return live_; }
  std::size_t pool_size() const;

  /// Serialisation time in ps of `bytes` at `rate_bps` (rounded up, >= 1).
  static std::uint64_t serialization_ps(std::uint64_t bytes, double rate_bps);
  /// c if serialization_ps(b, rate_bps) == b * c for every b in [1, max_bytes], else 0.
  static std::uint64_t exact_ps_per_byte(double rate_bps, std::uint64_t max_bytes);

 private:
  enum Kind : std::uint8_t {
    kArrive,
    kPortFree,
    kTimer,
    kFault,
    kPause,
    kResume,
    kReconverge,
    kCall,
    kWakeBatch
  };
  /// Tie-break classes of the event key, in order (see the top of this file). kcWakeBatch: the lazy
  /// ports' wake-ups of one grid line, one event (they commute with each other and with the other
  /// port wake-ups and host timers of that instant; they come after its arrivals).
  enum KeyClass : std::uint8_t {
    kcCall,
    kcFault,
    kcReconverge,
    kcPfc,
    kcArrive,
    kcWakeBatch,
    kcPortFree,
    kcTimer
  };
  static std::uint64_t event_key(KeyClass c, std::uint32_t object, std::uint32_t counter) {
    return (static_cast<std::uint64_t>(c) << 61) | (static_cast<std::uint64_t>(object) << 29) |
           (counter & ((1u << 29) - 1));
  }
  struct Packet;
  struct Msg;
  struct InlineBytes;
  /// Per switch: its plane, for a switch that hosts attach to (a leaf) its index among the leaves
  /// of that plane, and its row of fib_ (~0u: another partition's switch, no row here).
  struct SwInfo {
    std::uint32_t plane = 0, leaf = ~0u, row = ~0u;
  };
  /// Per (host, plane): the leaf switch it attaches to, that leaf's index and the leaf's port to it.
  struct DstInfo {
    std::uint32_t leaf_node = 0, leaf = 0, down_port = 0;
  };
  struct Port;
  struct Host;
  struct Group {
    std::uint32_t start = 0, count = 0;
  };

  void assign_partition(const std::vector<std::uint32_t>& part_of_node, std::uint32_t self,
                        std::uint32_t parts);
  void init_ports();
  /// Sets the port's rate and its ps_per_byte.
  void set_rate(Port& pt, double rate_bps);
  /// Our index of global port `port` (kNone if we do not hold it).
  std::uint32_t local_port(std::uint32_t port) const;
  void index_leaves();
  void build_fib();
  std::uint32_t select(std::uint32_t sw_node, std::uint32_t src, std::uint32_t dst, std::uint32_t ev) const;
  /// The FIB entry select() reads for (switch, destination host); nullptr if the switch is the
  /// destination's leaf (it uses its port to the host).
  const std::uint32_t* fib_entry(std::uint32_t sw_node, std::uint32_t dst) const;
  /// What select() draws from for (switch, destination host), from the FIB: the port (count 0;
  /// kNone: no route) or the group the hash picks in.
  Group route_of(std::uint32_t sw_node, std::uint32_t dst) const;
  /// route_of(sw_node, dst) as of the last build, in route_ (which must not be empty).
  const Group& route_at(std::uint32_t sw_node, std::uint32_t dst) const {
    return route_[static_cast<std::size_t>(sw_node - nhosts_) * nhosts_ + dst];
  }
  /// Calls f(nic) with the host's NIC of either kind.
  template <class F>
  decltype(auto) with_nic(Host& h, F&& f);
  std::uint32_t wire_bytes(const Packet& p) const;  ///< on the wire: engine bytes + framing
  std::uint32_t alloc_packet();
  void free_packet(std::uint32_t idx);
  void service(std::uint32_t host);
  void inject(std::uint32_t host, const engine::TxPacket& tx);
  void enqueue(std::uint32_t port, std::uint32_t idx);
  void note_peak(Port& pt);
  void swap_slots(std::uint32_t a, std::uint32_t b);
  std::uint8_t* slot_buffer(std::uint32_t idx, std::uint32_t size);
  /// Starts serialising packet idx on `port` at `at_ps` (or when the port frees up, if later).
  void start_tx(std::uint32_t port, std::uint32_t idx, Time at_ps);
  /// Takes the next packet off the port's queues (control first, ECN marking a data packet) and
  /// starts it at `at_ps`; false if both queues are empty.
  bool dequeue(std::uint32_t port, Time at_ps);
  /// A lazy port: performs, each at its own time, the dequeues due at or before `limit_ps`.
  void catch_up(std::uint32_t port, Time limit_ps);
  /// The same for every lazy port (before a reconvergence, at the end of a run).
  void catch_up_all(Time limit_ps);
  /// A lazy port flushed with packets queued and not sent from since (its busy_until is still the
  /// one of the flush): one dequeuing eagerly would still have its wake-up at busy_until, which an
  /// arrival of that very instant waits for.
  bool flushed_at_tie(std::uint32_t port) const;
  void on_wire(std::uint32_t port);
  void on_arrive(std::uint32_t idx);
  void on_port_free(std::uint32_t port);
  void flush(std::uint32_t port);
  void host_link_changed(std::uint32_t link, bool up);
  void pfc_enqueued(std::uint32_t in_port, std::uint32_t wire);
  void pfc_dequeued(std::uint32_t in_port, std::uint32_t wire);
  void on_resume(std::uint32_t port);
  void on_timer_event(std::uint32_t host, std::uint64_t seq);
  void prefetch_ahead();
  void prefetch_hop_lines(std::uint32_t port) const;
  void reschedule_timer(std::uint32_t host);
  void deliver(std::uint32_t idx);
  void drop(std::uint32_t port, std::uint32_t idx, FabricDrop why);
  /// Schedules a kPortFree of `port` at its busy_until (a lazy port: at the end of that time's
  /// grid interval, in that interval's wake list when the ring has room for it).
  void wake(std::uint32_t port);
  /// The lazy wake-ups of one grid line (wakes_[slot]): each port's as its own kPortFree would be.
  void wake_batch(std::uint32_t slot);
  /// Pushes a PAUSE or RESUME for `port` (an egress port whose sender may be in another partition).
  void push_pfc(Time at_ps, Kind kind, std::uint32_t port);
  /// start_tx onto a link to another partition: the packet goes to that partition's outbox.
  void send_remote(std::uint32_t port, std::uint32_t idx);
  void append_to_wire(std::uint32_t port, std::uint32_t idx, std::uint64_t key);
  /// Queues one message from another partition (its packet's bytes at bytes + m.bytes_at).
  void take_message(const Msg& m, const std::uint8_t* bytes);
  /// For tests (FabricTestAccess): a packet of `wire` bytes on the wire, of no host's, reaching
  /// egress `port` now as if over `in_port` (enqueue, as an arrival would).
  /// Its first header bytes carry `wire` (test_queue_tags).
  void test_arrival(std::uint32_t port, std::uint32_t in_port, std::uint32_t dst, std::uint32_t wire,
                    bool control);
  /// For tests: the tags in the bytes of the packets queued at `port`, control queue then data.
  std::vector<std::uint32_t> test_queue_tags(std::uint32_t port) const;

  std::shared_ptr<const Topology> shared_topo_;
  const Topology& topo_;                   ///< *shared_topo_
  std::uint32_t nhosts_ = 0, planes_ = 0;  ///< topo_.hosts and topo_.planes (read per packet)
  FabricConfig cfg_;
  std::uint64_t control_cap_ = 0;
  Time grid_ps_ = 0;  ///< lazy ports wake at the ends of intervals this long (lookahead_ps, D68)
  /// The largest wire size a packet can have (header + 64 KB payload + trailer + overhead, at most
  /// 256 KB): Port::ps_per_byte holds up to it.
  std::uint64_t fast_wire_max_ = 0;
  std::vector<std::pair<double, std::uint64_t>> ps_per_byte_memo_;  ///< (rate, Port::ps_per_byte)
  Time now_ps_ = 0;
  Time last_ps_ = 0;  ///< last_event() in ps
  /// Per port: busy_until when a link failure flushed its queue (kNever: never; empty until the
  /// first such flush). Read only when an arrival comes exactly at busy_until (flushed_at_tie), so
  /// no dequeue has to clear it: each moves busy_until on.
  std::vector<Time> flushed_until_;
  EventQueue events_;
  /// Lazy wake-ups by grid interval k (one event a grid line instead of one a port: every busy port
  /// wakes on the same picosecond, which the event queue would have to sort by key): wakes_[k %
  /// kWakeRing] lists the ports due at the end of interval `interval`, with one kWakeBatch event
  /// pending while it is not empty. A wake-up whose slot holds another interval (kWakeRing or more
  /// intervals apart: a link slower than a grid interval a packet is waiting there, or this is one)
  /// is a kPortFree of its own.
  struct WakeList {
    Time interval = 0;
    std::vector<std::uint32_t> ports;
  };
  static constexpr std::uint32_t kWakeRing = 8;
  std::array<WakeList, kWakeRing> wakes_;
  std::vector<std::uint32_t> waking_;  ///< the list wake_batch is running (swapped out of wakes_)
  /// The ports we hold (partitioned: those from or to our nodes), in global order; every port id
  /// inside the Fabric (events, packets, groups) is an index here, the global id is Port::gid.
  std::vector<Port> ports_;
  std::vector<std::uint32_t> g2l_;        ///< partitioned: global port id -> ours (kNone: not held)
  std::vector<std::uint8_t> link_up_;     ///< per link of the network (routing sees all of them)
  std::vector<std::uint32_t> host_port_;  ///< [h * planes + p] = egress port (kNone: not ours)
  std::vector<std::uint64_t> salt_;       ///< per node (switches)
  /// [SwInfo::row * leaves_ + leaf index of the destination] = group id. Routes are the same for
  /// all hosts of a leaf except at the leaf itself (DstInfo::down_port), so the FIB scales with
  /// switches x leaves, not switches x hosts. Partitioned: rows for this partition's switches only.
  std::vector<std::uint32_t> fib_;
  std::uint32_t leaves_ = 0;  ///< max leaves per plane
  std::vector<std::uint32_t> leaf_nodes_;
  std::vector<SwInfo> sw_;
  std::vector<DstInfo> dst_;  ///< [h * planes + p]
  std::vector<LinkFault> faults_;
  std::vector<Group> groups_;
  std::vector<std::uint32_t> group_ports_;
  /// [(switch node - nhosts) * nhosts + dst]: what select() draws from, flattened from the FIB
  /// (count 0: `start` is the port itself, or kNone). One load where the FIB takes four dependent
  /// ones (sw_, dst_, fib_, groups_); built only for an unpartitioned fabric of at most
  /// kRouteTableMax entries, else empty and select() reads the FIB (decisions.md D77). In a
  /// mapping of its own: from the heap, its 80 KB on k=8 took a small run into one more 2 MB page.
  MappedArray<Group> route_;
  static constexpr std::size_t kRouteTableMax = std::size_t{1} << 20;  // 8 MB
  void build_routes();
  std::vector<Host> hosts_;
  std::vector<Packet> pool_;
  std::vector<InlineBytes> hdr_;                       ///< !carry_payload: per-slot header + trailer
  std::vector<std::unique_ptr<std::uint8_t[]>> bufs_;  ///< carry_payload: per-slot bytes
  std::vector<std::uint32_t> buf_cap_;
  std::vector<std::uint8_t> scratch_;  ///< !carry_payload: delivery buffer
  std::vector<std::uint32_t> free_;
  std::uint64_t live_ = 0;
  std::unique_ptr<engine::TxPacket> tx_;
  FabricStats stats_;
  std::function<void(std::uint32_t)> hook_;
  std::function<void(std::uint32_t)> call_hook_;
  std::uint32_t reconverge_ctr_ = 0;  ///< reconvergences scheduled (their key)
  // Partitions: empty part_ = not partitioned.
  std::vector<std::uint32_t> part_;
  std::uint32_t self_ = 0;
  bool primary_ = true;  ///< counts faults and reconvergences
  /// Outboxes per destination partition, two sets: this window's messages go to set wr_, while
  /// the other partitions take last window's from the other set (flip_outboxes() swaps them).
  std::vector<std::vector<Msg>> out_[2];
  std::vector<std::vector<std::uint8_t>> out_bytes_[2];  ///< their packets' bytes
  std::uint32_t wr_ = 0;
};

}  // namespace mrc::sim
