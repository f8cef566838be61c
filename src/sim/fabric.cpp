#include "sim/fabric.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "sim/node_timer.hpp"
#include "sim/partition.hpp"
#include "sim/roce.hpp"
#include "wire/packet.hpp"

namespace mrc::sim {

namespace {
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint32_t kTrailerBytes = sizeof(engine::TxPacket::trailer);    // pad + ICRC or MAC
constexpr std::uint32_t kInlineBytes = wire::kMaxHeaderSize + kTrailerBytes;  // header + trailer
/// The largest packet the fabric takes without payloads: its delivery buffer holds one, and a
/// trailer's whole array past it (deliver() copies the array, not its used length).
constexpr std::uint32_t kMaxWireBytes = 65536;
constexpr std::uint32_t kMinBuffer = 4096 + 128;
// Event queue slots of 1024 ps: a busy fabric has a few events per slot (wider slots cost more in
// sorting on all-to-alls than they save in slot changes, narrower ones the reverse: 2^8..2^12 ps
// measured), and the ring (2^16 slots, 67 us) reaches past a packet's arrival at the far end of a
// link (serialisation + latency) and past the hosts' timers (a retransmission timeout, 16-64 us
// ahead on htsim's network: with 2^14 slots they went to the heap, one push and pop per re-arm).
constexpr unsigned kEventSlotShift = 10;

// Packet::dst_qp: the BTH's 24-bit destination QP, and whether the packet is feedback for the
// requester (ACK, SACK, NACK) rather than for the responder.
constexpr std::uint32_t kQpnMask = 0xFFFFFF;
constexpr std::uint32_t kFeedbackBit = 1u << 31;

std::uint32_t bit(std::uint32_t i) {
  return 1u << i;
}
}  // namespace

/// A packet in the network (hot fields only, one cache line); its bytes live in hdr_[slot] (header +
/// trailer) or bufs_[slot] (carry_payload).
struct alignas(64) Fabric::Packet {
  Time arrive_ps = 0;       ///< while on a link: when it reaches the far end
  Time next_arrive_ps = 0;  ///< ... and when the packet behind it on the link does (no extra miss)
  /// While on a link to a switch: the egress port that switch will pick (select() when it was sent,
  /// redone by reconverge()), so the lookup is off the arrival's critical path ...
  /// On a link to a host: the BTH's destination QP instead (dst_qp), which that host prefetches.
  std::uint32_t out = kNone;
  std::uint32_t next_out = kNone;  ///< ... and the same for the packet behind it
  std::uint32_t len = 0;           ///< engine bytes carried (header_len once trimmed)
  std::uint32_t dst_qp = kNone;    ///< the BTH's destination QP | kFeedbackBit (on the wire: wire_bytes())
  std::uint32_t src = 0, dst = 0;
  std::uint32_t ev = 0;
  std::uint32_t port = 0;  ///< the egress port it is on / queued at
  std::uint32_t next = kNone;
  std::uint16_t header_len = 0;
  std::uint16_t payload_len = 0;
  std::uint8_t trailer_len = 0;
  std::uint8_t plane = 0;
  engine::TrafficClass tc = engine::TrafficClass::kData;
  bool ecn_ce = false, trimmed = false, trimmed_lasthop = false;
  bool trimmable = true;  ///< false: RoCE (tail-dropped instead)
  std::uint8_t lost = 0;  ///< 1 = sent onto a down link, 2 = gray loss
};
std::uint32_t Fabric::wire_bytes(const Packet& p) const {
  return p.len + cfg_.wire_overhead;
}

struct Fabric::InlineBytes {
  std::uint8_t b[kInlineBytes];  ///< !carry_payload: header, then trailer
};

// What every hop reads and writes is in the first two cache lines (the queues and the link in the
// first; where it leads, its flags, the loss coin and the counters every packet adds to in the
// second); PFC and the rare counters in the third. The record is line-aligned, so the event loop
// prefetches the two lines of a port a packet will reach.
struct alignas(64) Fabric::Port {
  std::uint64_t busy_until = 0;  ///< ps
  std::uint64_t latency_ps = 0;
  /// serialization_ps(bytes, rate_bps) == bytes * ps_per_byte for every wire size up to
  /// Fabric::fast_wire_max_; 0 if no such integer (then the formula runs per packet).
  std::uint64_t ps_per_byte = 0;
  std::uint64_t data_bytes = 0, ctrl_bytes = 0;
  std::uint32_t wire_head = kNone, wire_tail = kNone;  ///< packets on the link, in arrival order
  std::uint32_t data_head = kNone, data_tail = kNone, ctrl_head = kNone, ctrl_tail = kNone;
  // -- line 2
  std::uint32_t head_out = kNone;  ///< Packet::out of the wire head (prefetched before it arrives)
  std::uint32_t from = 0, to = 0;
  std::uint32_t gid = 0;  ///< global id (2 * link + direction): event keys, messages
  bool from_host = false, to_host = false;
  bool wake_pending = false;
  bool up = true;
  /// Dequeues lazily (FabricConfig::lazy_ports; a switch port, no PFC): its wake-up comes at the
  /// end of the grid interval its next dequeue is due in and catches up on every dequeue due by
  /// then; an arrival catches up on those due before it first. Invariant: a packet queued here
  /// means a wake-up pending (possibly early: it then catches up on nothing and re-arms).
  bool lazy = false;
  // PFC. As an ingress: bytes that came over this port and are queued in switch `to`, and whether
  // `to` has paused us. As an egress: whether we are paused (takes effect a link latency later).
  bool xoff = false, paused = false;
  bool remote = false;  ///< partitioned: `to` is another partition's node (send_remote)
  double loss = 0;      ///< gray failure: probability a transmitted packet is lost
  PortCounters ctr;     ///< its first four in line 2, the rest in line 3
  // -- line 3
  std::uint32_t pfc_ctr = 0;  ///< as an ingress: PAUSE/RESUME frames sent (their key)
  double rate_bps = 0;
  /// The coin flips of this egress port (ECN marks, gray loss), seeded from FabricConfig::seed and
  /// gid: no other port's draws, and no order of events across ports, change its outcomes (D67).
  SplitMix rng;
  std::uint64_t pfc_in = 0;
};

struct Fabric::Host {
  engine::Endpoint* ep = nullptr;
  RoceNic* roce = nullptr;
  NodeTimer timer;              ///< queue time in ps
  std::uint32_t timer_gen = 0;  ///< timer events pushed (their key)
  bool settled = false;         ///< a port of it went without a wake-up (Endpoint::settle_tx)
};

/// An event for another partition: an arrival (a copy of the packet, its bytes at bytes_at in the
/// outbox's byte buffer; its port, out and next fields are the sender's and not used) or a
/// PAUSE/RESUME. `port` is the global port id.
struct Fabric::Msg {
  Packet pkt;
  Time time = 0;
  std::uint64_t key = 0;
  std::uint32_t port = 0;
  std::uint32_t bytes_at = 0;
  Kind kind = kArrive;
};

template <class F>
decltype(auto) Fabric::with_nic(Host& h, F&& f) {
  return h.roce != nullptr ? f(*h.roce) : f(*h.ep);
}

std::uint32_t Fabric::local_port(std::uint32_t port) const {
  if (g2l_.empty()) return port < ports_.size() ? port : kNone;
  return port < g2l_.size() ? g2l_[port] : kNone;
}

bool Fabric::port_paused(std::uint32_t port) const {
  const std::uint32_t l = local_port(port);
  return l != kNone && ports_[l].paused;
}

std::uint64_t Fabric::queued_bytes(std::uint32_t port) const {
  const std::uint32_t l = local_port(port);
  return l == kNone ? 0 : ports_[l].data_bytes + ports_[l].ctrl_bytes;
}

std::vector<LinkFault> link_flaps(std::uint32_t link, Time at, Duration down, Duration up,
                                  std::uint32_t count) {
  std::vector<LinkFault> v;
  for (std::uint32_t i = 0; i < count; ++i) {
    v.push_back(LinkFault{at, link, LinkFaultKind::kDown, 0, LinkDir::kBoth});
    v.push_back(LinkFault{at + down, link, LinkFaultKind::kUp, 0, LinkDir::kBoth});
    at += down + up;
  }
  return v;
}

std::vector<LinkFault> switch_reboot(const Topology& topo, std::uint32_t node, Time at, Duration down_for) {
  if (node >= topo.num_nodes() || topo.nodes[node].kind != NodeKind::kSwitch)
    throw std::invalid_argument("switch reboot: node " + std::to_string(node) + " is not a switch");
  std::vector<LinkFault> v;
  for (std::uint32_t i = 0; i < topo.links.size(); ++i) {
    if (topo.links[i].a != node && topo.links[i].b != node) continue;
    v.push_back(LinkFault{at, i, LinkFaultKind::kDown, 0, LinkDir::kBoth});
    v.push_back(LinkFault{at + down_for, i, LinkFaultKind::kUp, 0, LinkDir::kBoth});
  }
  return v;
}

std::uint32_t Fabric::num_ports() const {
  return static_cast<std::uint32_t>(2 * topo_.links.size());
}
std::size_t Fabric::pool_size() const {
  return pool_.size();
}
std::uint32_t Fabric::port_from(std::uint32_t port) const {
  const TopoLink& l = topo_.links[port / 2];
  return port % 2 == 0 ? l.a : l.b;
}
std::uint32_t Fabric::port_to(std::uint32_t port) const {
  const TopoLink& l = topo_.links[port / 2];
  return port % 2 == 0 ? l.b : l.a;
}
std::uint32_t Fabric::ports_held() const {
  return static_cast<std::uint32_t>(ports_.size());
}
std::uint32_t Fabric::fib_rows() const {
  return leaves_ == 0 ? 0 : static_cast<std::uint32_t>(fib_.size() / leaves_);
}
const PortCounters& Fabric::port_counters(std::uint32_t port) const {
  static const PortCounters kZero{};
  const std::uint32_t l = local_port(port);
  return l == kNone ? kZero : ports_[l].ctr;
}

std::uint64_t Fabric::serialization_ps(std::uint64_t bytes, double rate_bps) {
  const double ps = std::ceil(static_cast<double>(bytes) * 8e12 / rate_bps - 1e-6);
  const auto d = static_cast<std::uint64_t>(ps);
  return d == 0 ? 1 : d;
}

std::uint64_t Fabric::exact_ps_per_byte(double rate_bps, std::uint64_t max_bytes) {
  const std::uint64_t c = serialization_ps(1, rate_bps);
  for (std::uint64_t b = 2; b <= max_bytes; ++b)
    if (serialization_ps(b, rate_bps) != b * c) return 0;
  return c;
}

void Fabric::set_rate(Port& pt, double rate_bps) {
  pt.rate_bps = rate_bps;
  // Checking a rate costs a division per wire size: once per distinct rate (a network has a few).
  for (const auto& [rate, ps] : ps_per_byte_memo_) {
    if (rate == rate_bps) {
      pt.ps_per_byte = ps;
      return;
    }
  }
  pt.ps_per_byte = exact_ps_per_byte(rate_bps, fast_wire_max_);
  ps_per_byte_memo_.emplace_back(rate_bps, pt.ps_per_byte);
}

Fabric::Fabric(const Topology& topo, const FabricConfig& cfg)
    : Fabric(std::make_shared<const Topology>(topo), cfg) {}

Fabric::Fabric(std::shared_ptr<const Topology> topo, const FabricConfig& cfg)
    : Fabric(std::move(topo), cfg, {}, 0, 1) {}

Fabric::Fabric(std::shared_ptr<const Topology> topo, const FabricConfig& cfg,
               const std::vector<std::uint32_t>& part_of_node, std::uint32_t self, std::uint32_t parts)
    : shared_topo_(std::move(topo)),
      topo_(*shared_topo_),
      nhosts_(topo_.hosts),
      planes_(topo_.planes),
      cfg_(cfg),
      fast_wire_max_(
          std::min<std::uint64_t>(0xFFFF + kInlineBytes + std::uint64_t{cfg.wire_overhead}, 1u << 18)),
      events_(kEventSlotShift),
      tx_(new engine::TxPacket) {
  static_assert(sizeof(Packet) == 64, "a packet is one cache line");
  topo_.validate();
  if (cfg_.queue.data_bytes == 0) throw std::invalid_argument("fabric: queue.data_bytes must be > 0");
  if (cfg_.queue.ecn_kmax > 0 && cfg_.queue.ecn_kmax < cfg_.queue.ecn_kmin)
    throw std::invalid_argument("fabric: ecn_kmax must be >= ecn_kmin");
  if (!(cfg_.queue.trim_queued >= 0 && cfg_.queue.trim_queued <= 1))
    throw std::invalid_argument("fabric: queue.trim_queued must be in [0, 1]");
  if (cfg_.queue.pfc && (cfg_.queue.pfc_xon == 0 || cfg_.queue.pfc_xon > cfg_.queue.pfc_xoff))
    throw std::invalid_argument("fabric: PFC needs 0 < pfc_xon <= pfc_xoff");
  control_cap_ = cfg_.queue.control_bytes > 0 ? cfg_.queue.control_bytes : 2 * cfg_.queue.data_bytes;
  link_up_.assign(topo_.links.size(), 1);
  if (!part_of_node.empty()) assign_partition(part_of_node, self, parts);
  grid_ps_ = lookahead_ps(topo_);
  init_ports();
  salt_.resize(topo_.nodes.size());
  Rng salts(cfg_.seed);
  for (auto& s : salt_) s = salts.next();
  hosts_.resize(nhosts_);
  index_leaves();
  build_fib();
  events_.reserve(4096);
  if (!cfg_.carry_payload) scratch_.assign(kMaxWireBytes + kTrailerBytes, 0);
}

Fabric::~Fabric() = default;

// The ports this Fabric holds, in global order: all of them, or (partitioned) those that leave or
// reach one of our nodes; and each host's egress port per plane (kNone: not ours).
void Fabric::init_ports() {
  const bool all = part_.empty();
  const auto global = static_cast<std::uint32_t>(2 * topo_.links.size());
  const auto held = [&](std::uint32_t g) {
    return all || part_[port_from(g)] == self_ || part_[port_to(g)] == self_;
  };
  std::uint32_t count = 0;
  for (std::uint32_t g = 0; g < global; ++g) count += held(g) ? 1 : 0;
  std::vector<Port> ports;
  ports.reserve(count);  // exactly: no regrowth (a transient 1.5 x the ports at the peak RSS)
  std::vector<std::uint32_t> g2l;
  if (!all) g2l.assign(global, kNone);
  for (std::uint32_t g = 0; g < global; ++g) {
    if (!held(g)) continue;
    const TopoLink& l = topo_.links[g / 2];
    const std::uint32_t from = port_from(g), to = port_to(g);
    if (!all) g2l[g] = static_cast<std::uint32_t>(ports.size());
    Port& p = ports.emplace_back();
    p.gid = g;
    p.from = from;
    p.to = to;
    p.from_host = from < nhosts_;
    p.to_host = to < nhosts_;
    set_rate(p, l.rate_bps);
    p.latency_ps = l.latency * 1000;
    p.rng = SplitMix(mix64(cfg_.seed ^ mix64(g + 0x6a09e667f3bcc909ULL)));
    p.remote = !all && part_[from] == self_ && part_[to] != self_;
    p.lazy = cfg_.lazy_ports && grid_ps_ > 0 && !cfg_.queue.pfc && !p.from_host;
  }
  ports_.swap(ports);
  g2l_.swap(g2l);
  host_port_.resize(topo_.host_links.size());
  for (std::size_t i = 0; i < host_port_.size(); ++i) host_port_[i] = local_port(2 * topo_.host_links[i]);
}

// Leaves (switches hosts attach to), their index within their plane, and each host's leaf per plane.
void Fabric::index_leaves() {
  const std::uint32_t n = topo_.num_nodes(), hosts = nhosts_, sw = n - hosts, planes = planes_;
  sw_.assign(sw, SwInfo{});
  for (std::uint32_t s = hosts; s < n; ++s) {
    sw_[s - hosts].plane = topo_.nodes[s].plane;
  }
  std::uint32_t rows = 0;  // FIB rows: every switch, or (partitioned) our own, in node order
  for (std::uint32_t s = hosts; s < n; ++s)
    sw_[s - hosts].row = part_.empty() || part_[s] == self_ ? rows++ : kNone;
  std::vector<std::uint32_t> per_plane(planes, 0);
  std::vector<std::uint32_t>& leaf_nodes = leaf_nodes_;
  leaf_nodes.clear();
  dst_.resize(static_cast<std::size_t>(hosts) * planes);
  for (std::uint32_t h = 0; h < hosts; ++h) {
    for (std::uint32_t p = 0; p < planes; ++p) {
      const std::uint32_t link = topo_.host_link(h, p);
      const std::uint32_t leaf = topo_.links[link].b;
      SwInfo& si = sw_[leaf - hosts];
      if (si.leaf == kNone) {
        si.leaf = per_plane[si.plane]++;
        leaf_nodes.push_back(leaf);
      }
      dst_[static_cast<std::size_t>(h) * planes + p] = DstInfo{leaf, si.leaf, local_port(2 * link + 1)};
    }
  }
  leaves_ = *std::max_element(per_plane.begin(), per_plane.end());
}

// For every leaf switch: a reverse BFS over switches and the links that are up gives each switch
// its distance; the group of switch s for that leaf is its up egress ports towards a neighbour
// switch one hop closer. A host is reachable only through its leaf, so this is also the route to
// each of the leaf's hosts from every switch but the leaf itself (which uses its port to the host).
// Singleton groups are the port ids themselves; larger groups are deduplicated per switch. Only
// switches with a FIB row (partitioned: this partition's) get their groups.
void Fabric::build_fib() {
  const std::uint32_t n = topo_.num_nodes(), hosts = nhosts_, sw = n - hosts;
  const std::vector<std::uint32_t>& leaf_nodes = leaf_nodes_;
  // Over every link of the network (from the topology: a partition holds only its own ports).
  const auto global = static_cast<std::uint32_t>(2 * topo_.links.size());
  std::vector<std::uint32_t> in_start(n + 1, 0), out_start(n + 1, 0);
  for (std::uint32_t i = 0; i < global; ++i) {
    if (link_up_[i / 2] == 0) continue;
    ++in_start[port_to(i) + 1];
    ++out_start[port_from(i) + 1];
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    in_start[i + 1] += in_start[i];
    out_start[i + 1] += out_start[i];
  }
  // Adjacency as flat arrays of neighbour ids (the BFS below runs once per leaf: at 131k hosts x 8
  // planes that is 4096 walks over 4 M ports, which must not chase the large Port records).
  std::vector<std::uint32_t> in_from(global), out_ports(global), out_to(global);
  {
    std::vector<std::uint32_t> fi(in_start.begin(), in_start.end() - 1),
        fo(out_start.begin(), out_start.end() - 1);
    for (std::uint32_t i = 0; i < global; ++i) {
      if (link_up_[i / 2] == 0) continue;
      const std::uint32_t from = port_from(i), to = port_to(i);
      in_from[fi[to]++] = from;
      const std::uint32_t k = fo[from]++;
      out_ports[k] = i;
      out_to[k] = to;
    }
  }
  groups_.resize(ports_.size());
  group_ports_.resize(ports_.size());  // drops the multi-port groups of an earlier build
  for (std::uint32_t i = 0; i < ports_.size(); ++i) {
    groups_[i] = Group{i, 1};
    group_ports_[i] = i;
  }
  std::vector<std::vector<std::uint32_t>> sw_groups(sw);  // per switch: its multi-port group ids
  const auto rows = static_cast<std::size_t>(
      std::count_if(sw_.begin(), sw_.end(), [](const SwInfo& si) { return si.row != kNone; }));
  fib_.assign(rows * leaves_, kNone);
  std::vector<std::uint32_t> dist(n, kNone), queue;
  std::vector<std::uint32_t> cand;
  queue.reserve(n);
  for (const std::uint32_t leaf : leaf_nodes) {
    for (std::uint32_t v : queue) dist[v] = kNone;
    dist[leaf] = 0;
    queue.clear();
    queue.push_back(leaf);
    for (std::size_t qi = 0; qi < queue.size(); ++qi) {
      const std::uint32_t u = queue[qi];
      for (std::uint32_t k = in_start[u]; k < in_start[u + 1]; ++k) {
        const std::uint32_t v = in_from[k];
        if (v < hosts || dist[v] != kNone) continue;  // hosts do not forward
        dist[v] = dist[u] + 1;
        queue.push_back(v);
      }
    }
    const std::uint32_t li = sw_[leaf - hosts].leaf;
    for (const std::uint32_t s : queue) {
      const std::uint32_t row = sw_[s - hosts].row;
      if (s == leaf || row == kNone) continue;
      cand.clear();
      for (std::uint32_t k = out_start[s]; k < out_start[s + 1]; ++k) {
        const std::uint32_t v = out_to[k];
        if (v >= hosts && dist[v] + 1 == dist[s]) cand.push_back(local_port(out_ports[k]));
      }
      std::uint32_t gid = kNone;
      if (cand.size() == 1) {
        gid = cand[0];
      } else if (!cand.empty()) {
        for (std::uint32_t g : sw_groups[s - hosts]) {
          const Group& gr = groups_[g];
          if (gr.count == cand.size() &&
              std::equal(cand.begin(), cand.end(), group_ports_.begin() + gr.start)) {
            gid = g;
            break;
          }
        }
        if (gid == kNone) {
          gid = static_cast<std::uint32_t>(groups_.size());
          groups_.push_back(Group{static_cast<std::uint32_t>(group_ports_.size()),
                                  static_cast<std::uint32_t>(cand.size())});
          group_ports_.insert(group_ports_.end(), cand.begin(), cand.end());
          sw_groups[s - hosts].push_back(gid);
        }
      }
      fib_[static_cast<std::size_t>(row) * leaves_ + li] = gid;
    }
  }
  for (std::uint32_t v : queue) dist[v] = kNone;
  build_routes();
}

// select()'s answers for every (switch, destination) of the FIB just built.
void Fabric::build_routes() {
  route_.clear();
  const std::size_t nsw = sw_.size();
  if (!part_.empty() || nsw * nhosts_ > kRouteTableMax) return;
  route_.assign_zero(nsw * nhosts_);
  for (std::uint32_t i = 0; i < nsw; ++i)
    for (std::uint32_t d = 0; d < nhosts_; ++d)
      route_[std::size_t{i} * nhosts_ + d] = route_of(nhosts_ + i, d);
}

const std::uint32_t* Fabric::fib_entry(std::uint32_t node, std::uint32_t dst) const {
  const SwInfo& si = sw_[node - nhosts_];
  const DstInfo& di = dst_[static_cast<std::size_t>(dst) * planes_ + si.plane];
  if (di.leaf_node == node) return nullptr;
  assert(si.row != kNone);
  return &fib_[static_cast<std::size_t>(si.row) * leaves_ + di.leaf];
}

Fabric::Group Fabric::route_of(std::uint32_t node, std::uint32_t dst) const {
  const SwInfo& si = sw_[node - nhosts_];
  const DstInfo& di = dst_[static_cast<std::size_t>(dst) * planes_ + si.plane];
  if (di.leaf_node == node) return {di.down_port, 0};
  if (si.row == kNone) return {kNone, 0};
  const std::uint32_t gid = fib_[static_cast<std::size_t>(si.row) * leaves_ + di.leaf];
  if (gid == kNone) return {kNone, 0};
  const Group& g = groups_[gid];
  return g.count == 1 ? Group{group_ports_[g.start], 0} : g;
}

std::uint32_t Fabric::select(std::uint32_t node, std::uint32_t src, std::uint32_t dst,
                             std::uint32_t ev) const {
  const Group g = route_.empty() ? route_of(node, dst) : route_at(node, dst);
  if (g.count == 0) return g.start;
  // 5-tuple: src, dst, UDP sport (the EV), UDP dport, protocol 17; salted per switch.
  std::uint64_t h = mix64(salt_[node] ^ ((static_cast<std::uint64_t>(src) << 32) | dst));
  h = mix64(
      h ^ ((static_cast<std::uint64_t>(ev) << 24) | (static_cast<std::uint64_t>(cfg_.udp_dport) << 8) | 17));
  const auto idx = static_cast<std::uint32_t>(((h >> 32) * g.count) >> 32);
  return group_ports_[g.start + idx];
}

std::vector<std::uint32_t> Fabric::trace(std::uint32_t src, std::uint32_t dst, std::uint32_t plane,
                                         std::uint32_t ev) const {
  std::vector<std::uint32_t> path;
  if (src >= nhosts_ || dst >= nhosts_ || plane >= planes_) return path;
  std::uint32_t port = host_port_[src * planes_ + plane];
  if (port == kNone) return path;  // another partition's host
  for (int hop = 0; hop < 64; ++hop) {
    path.push_back(ports_[port].gid);
    const std::uint32_t node = ports_[port].to;
    if (node < nhosts_) {
      if (node != dst) path.clear();
      return path;
    }
    if (sw_[node - nhosts_].row == kNone) break;  // another partition's switch: no route here
    port = select(node, src, dst, ev);
    if (port == kNone) break;
  }
  path.clear();
  return path;
}

void Fabric::attach(std::uint32_t host, engine::Endpoint& ep) {
  if (host >= nhosts_) throw std::invalid_argument("fabric: attach to a host id out of range");
  hosts_[host].ep = &ep;
  hosts_[host].roce = nullptr;
}

void Fabric::attach(std::uint32_t host, RoceNic& nic) {
  if (host >= nhosts_) throw std::invalid_argument("fabric: attach to a host id out of range");
  hosts_[host].roce = &nic;
  hosts_[host].ep = nullptr;
}

// --- faults -----------------------------------------------------------------------------------------

bool Fabric::link_up(std::uint32_t link) const {
  return link < topo_.links.size() && link_up_[link] != 0;
}

void Fabric::schedule_fault(const LinkFault& f) {
  if (f.link >= topo_.links.size())
    throw std::invalid_argument("fabric: fault on link " + std::to_string(f.link) + " out of range");
  if (f.kind == LinkFaultKind::kRate && !(f.value > 0))
    throw std::invalid_argument("fabric: link rate must be > 0");
  if (f.kind == LinkFaultKind::kLoss && !(f.value >= 0 && f.value <= 1))
    throw std::invalid_argument("fabric: loss probability must be in [0, 1]");
  if (f.at < now()) throw std::invalid_argument("fabric: fault scheduled in the past");
  faults_.push_back(f);
  const auto id = static_cast<std::uint32_t>(faults_.size() - 1);
  events_.push_keyed(f.at * 1000, kFault, id, event_key(kcFault, id, 0));
}

void Fabric::apply_fault(const LinkFault& f) {
  if (f.link >= topo_.links.size()) throw std::invalid_argument("fabric: fault link out of range");
  const bool was_up = link_up_[f.link] != 0;
  if (f.kind == LinkFaultKind::kDown || f.kind == LinkFaultKind::kUp)
    link_up_[f.link] = f.kind == LinkFaultKind::kUp ? 1 : 0;
  for (std::uint32_t dir = 0; dir < 2; ++dir) {
    // A link goes down or up as a whole; only rate and loss may change in one direction.
    const bool one_way = f.kind == LinkFaultKind::kRate || f.kind == LinkFaultKind::kLoss;
    if (one_way && ((f.dir == LinkDir::kAtoB && dir == 1) || (f.dir == LinkDir::kBtoA && dir == 0))) continue;
    const std::uint32_t port = local_port(2 * f.link + dir);
    if (port == kNone) continue;  // neither end is ours
    Port& pt = ports_[port];
    if (pt.lazy && now_ps_ > 0) catch_up(port, now_ps_ - 1);  // a fault of this instant comes first
    switch (f.kind) {
      case LinkFaultKind::kDown:
        pt.up = false;
        flush(port);
        break;
      case LinkFaultKind::kUp:
        pt.up = true;
        break;
      case LinkFaultKind::kRate:
        set_rate(pt, f.value);
        break;
      case LinkFaultKind::kLoss:
        pt.loss = f.value;
        break;
    }
  }
  const bool is_up = link_up_[f.link] != 0;
  if (was_up == is_up) return;
  if (topo_.links[f.link].a < nhosts_) {
    host_link_changed(f.link, is_up);
    return;  // leaf-host links are not in any ECMP group
  }
  if (cfg_.reconverge_delay == 0) {
    reconverge();
  } else {
    events_.push_keyed(now_ps_ + cfg_.reconverge_delay * 1000, kReconverge, f.link,
                       event_key(kcReconverge, 0, reconverge_ctr_++));
  }
}

void Fabric::reconverge() {
  settle_ports(now_ps_);  // what left before now chose its next hop on the old FIB
  build_fib();
  if (primary_) ++stats_.reconvergences;
  // Packets on the wire carry their next switch's choice: make it again with the new FIB. (Those
  // on their way to another partition carry none: the receiver chooses when it takes them, after
  // the window, whose reconvergences it has applied too.)
  for (Port& pt : ports_) {
    if (pt.to_host) continue;
    std::uint32_t prev = kNone;
    for (std::uint32_t idx = pt.wire_head; idx != kNone; idx = pool_[idx].next) {
      Packet& p = pool_[idx];
      p.out = select(pt.to, p.src, p.dst, p.ev);
      if (prev == kNone) {
        pt.head_out = p.out;
      } else {
        pool_[prev].next_out = p.out;
      }
      prev = idx;
    }
  }
}

// The NIC sees its own link go down or up; an MRC endpoint moves its EVs off (or back onto) that
// plane and tells its peers.
void Fabric::host_link_changed(std::uint32_t link, bool up) {
  const TopoLink& l = topo_.links[link];
  Host& h = hosts_[l.a];
  if (h.ep == nullptr) return;
  h.ep->set_port_up(static_cast<std::uint8_t>(topo_.nodes[l.b].plane), up, now());
  if (hook_) hook_(l.a);
  service(l.a);
}

// A link went down: everything queued at this egress and everything on its wire is lost.
void Fabric::flush(std::uint32_t port) {
  Port& pt = ports_[port];
  if (pt.lazy && (pt.ctrl_head != kNone || pt.data_head != kNone)) {
    if (flushed_until_.empty()) flushed_until_.assign(ports_.size(), kNever);
    flushed_until_[port] = pt.busy_until;
  }
  for (std::uint32_t* head : {&pt.ctrl_head, &pt.data_head}) {
    while (*head != kNone) {
      const std::uint32_t idx = *head;
      Packet& p = pool_[idx];
      *head = p.next;
      if (cfg_.queue.pfc) pfc_dequeued(p.port, wire_bytes(p));
      drop(port, idx, FabricDrop::kLinkDown);
    }
  }
  pt.ctrl_tail = pt.data_tail = kNone;
  pt.ctrl_bytes = pt.data_bytes = 0;
  for (std::uint32_t idx = pt.wire_head; idx != kNone; idx = pool_[idx].next) pool_[idx].lost = 1;
  if (pt.remote)                            // on the wire to another partition, not there yet
    for (Msg& m : out_[wr_][part_[pt.to]])  // (last window's: the far end takes them before this fault)
      if (m.kind == kArrive && m.port == pt.gid) m.pkt.lost = 1;
}

// --- PFC ---------------------------------------------------------------------------------------------

void Fabric::pfc_enqueued(std::uint32_t in_port, std::uint32_t wire) {
  Port& in = ports_[in_port];
  in.pfc_in += wire;
  in.ctr.peak_ingress_bytes = std::max(in.ctr.peak_ingress_bytes, in.pfc_in);
  if (in.xoff || in.pfc_in <= cfg_.queue.pfc_xoff) return;
  in.xoff = true;
  ++stats_.pfc_pauses;
  ++in.ctr.pauses;
  push_pfc(now_ps_ + in.latency_ps, kPause, in_port);
}

void Fabric::push_pfc(Time at_ps, Kind kind, std::uint32_t port) {
  Port& pt = ports_[port];
  const std::uint64_t key = event_key(kcPfc, pt.gid, pt.pfc_ctr++);
  if (part_.empty() || part_[pt.from] == self_) {
    events_.push_keyed(at_ps, kind, port, key);
    return;
  }
  Msg& m = out_[wr_][part_[pt.from]].emplace_back();
  m.time = at_ps;
  m.key = key;
  m.port = pt.gid;
  m.kind = kind;
}

void Fabric::pfc_dequeued(std::uint32_t in_port, std::uint32_t wire) {
  Port& in = ports_[in_port];
  in.pfc_in -= wire;
  if (!in.xoff || in.pfc_in >= cfg_.queue.pfc_xon) return;
  in.xoff = false;
  push_pfc(now_ps_ + in.latency_ps, kResume, in_port);
}

void Fabric::on_resume(std::uint32_t port) {
  Port& pt = ports_[port];
  pt.paused = false;
  if (pt.from_host) {
    service(pt.from);
    return;
  }
  if (pt.wake_pending || (pt.ctrl_head == kNone && pt.data_head == kNone)) return;
  if (pt.busy_until <= now_ps_) {
    on_port_free(port);
  } else {
    wake(port);
  }
}

void Fabric::wake(std::uint32_t port) {
  Port& pt = ports_[port];
  pt.wake_pending = true;
  // A lazy port wakes at the end of the grid interval (the smallest link latency) in which its next
  // dequeue is due: what it sends then still reaches the far end in the future (serialisation +
  // latency after the dequeue), at or after that grid line (so at or after the end of the window
  // it is sent in, as a message to another partition must), and the runner's windows, which start
  // on grid lines unless a sample cut one short, start where they would without laziness (D68).
  if (!pt.lazy) {
    events_.push_keyed(pt.busy_until, kPortFree, port, event_key(kcPortFree, pt.gid, 0));
    return;
  }
  const Time k = pt.busy_until / grid_ps_;
  const Time at = (k + 1) * grid_ps_ - 1;
  const std::uint32_t slot = static_cast<std::uint32_t>(k % kWakeRing);
  WakeList& w = wakes_[slot];
  if (w.ports.empty()) {
    w.interval = k;
    events_.push_keyed(at, kWakeBatch, slot, event_key(kcWakeBatch, 0, 0));
  } else if (w.interval != k) [[unlikely]] {  // the slot holds an interval a multiple of kWakeRing away
    events_.push_keyed(at, kPortFree, port, event_key(kcPortFree, pt.gid, 0));
    return;
  }
  w.ports.push_back(port);
}

void Fabric::wake_batch(std::uint32_t slot) {
  // Swapped out: a port may re-arm into this slot's next interval (k + kWakeRing) meanwhile.
  waking_.swap(wakes_[slot].ports);
  const std::uint32_t* w = waking_.data();
  const std::size_t n = waking_.size();
  stats_.events += n - 1;  // each port's wake-up counts, as its own event did (step_ps counted one)
  for (std::size_t i = 0; i < n; ++i) {
    // The ports were last touched a grid interval ago: fetch ahead (two lines a port, then the
    // packet at the head of its queues).
    if (i + 2 < n) prefetch_hop_lines(w[i + 2]);
    if (i + 1 < n) {
      const Port& nx = ports_[w[i + 1]];
      const std::uint32_t head = nx.ctrl_head != kNone ? nx.ctrl_head : nx.data_head;
      if (head != kNone) __builtin_prefetch(&pool_[head]);
    }
    on_port_free(w[i]);
  }
  waking_.clear();
}

void Fabric::catch_up(std::uint32_t port, Time limit_ps) {
  Port& pt = ports_[port];
  while (pt.busy_until <= limit_ps && dequeue(port, pt.busy_until)) {
  }
}

bool Fabric::flushed_at_tie(std::uint32_t port) const {
  return !flushed_until_.empty() && flushed_until_[port] == ports_[port].busy_until;
}

void Fabric::catch_up_all(Time limit_ps) {
  for (std::uint32_t port = 0; port < ports_.size(); ++port)
    if (ports_[port].lazy) catch_up(port, limit_ps);
}

void Fabric::settle_ports(Time end_ps) {
  if (end_ps > 0) catch_up_all(end_ps - 1);
}

// --- packet pool -------------------------------------------------------------------------------------

std::uint32_t Fabric::alloc_packet() {
  std::uint32_t idx;
  if (!free_.empty()) {
    idx = free_.back();
    free_.pop_back();
  } else {
    idx = static_cast<std::uint32_t>(pool_.size());
    pool_.emplace_back();
    if (!cfg_.carry_payload) hdr_.emplace_back();
    if (cfg_.carry_payload) {
      bufs_.emplace_back();
      buf_cap_.push_back(0);
    }
  }
  ++live_;
  return idx;
}

void Fabric::free_packet(std::uint32_t idx) {
  free_.push_back(idx);
  --live_;
}

// --- running -----------------------------------------------------------------------------------------

void Fabric::kick(std::uint32_t host) {
  service(host);
}

bool Fabric::step(Time limit) {
  return step_ps(limit >= kNever / 1000 ? kNever : limit * 1000 + 999);
}

void Fabric::advance_to(Time t) {
  const Time ps = t >= kNever / 1000 ? kNever : t * 1000;
  assert(events_.empty() || events_.top().time >= ps);
  if (ps > now_ps_) now_ps_ = ps;
}

bool Fabric::step_ps(Time lim_ps) {
  QueuedEvent e;
  if (!events_.pop_due(lim_ps, e)) return false;
  now_ps_ = e.time;
  // (A port's wake-up counts by what it does, on_port_free: a lazy one dequeues earlier packets.)
  if (e.kind != kPortFree && e.kind != kWakeBatch) last_ps_ = e.time;
  if (!events_.empty()) prefetch_ahead();
  if (primary_ || (e.kind != kFault && e.kind != kReconverge)) ++stats_.events;
  switch (e.kind) {
    case kCall:
      if (call_hook_) call_hook_(e.index);
      break;
    case kArrive:
      on_wire(e.index);
      break;
    case kFault:
      apply_fault(faults_[e.index]);
      break;
    case kPortFree:
      on_port_free(e.index);
      break;
    case kWakeBatch:
      wake_batch(e.index);
      break;
    case kTimer:
      on_timer_event(e.index, e.seq);
      break;
    case kPause:
      ports_[e.index].paused = true;
      break;
    case kResume:
      on_resume(e.index);
      break;
    case kReconverge:
      reconverge();
      break;
    default:
      assert(false);
  }
  return true;
}

// The objects of the next events are usually cold (last touched a link latency ago). In two stages:
// the two lines of its record a hop reads of the port of the event after next; then, for the next
// event, whose port was fetched one step ago, its packet and the port that packet will be queued at.
void Fabric::prefetch_ahead() {
  static_assert(sizeof(Port) == 192, "a port is three cache lines");
  static_assert(offsetof(Port, head_out) == 64 && offsetof(Port, ctr) + 32 == 128,
                "a port's per-hop state is its first two lines");
  const QueuedEvent& n = events_.top();
  if (n.kind == kArrive) {
    const Port& pt = ports_[n.index];
    __builtin_prefetch(&pool_[pt.wire_head]);
    if (pt.to_host) {
      if (!cfg_.carry_payload) __builtin_prefetch(&hdr_[pt.wire_head]);
      if (const Host& h = hosts_[pt.to]; h.ep != nullptr && pt.head_out != kNone)
        h.ep->prefetch_rx(pt.head_out & kQpnMask, (pt.head_out & kFeedbackBit) != 0);
    } else if (pt.head_out != kNone) {
      prefetch_hop_lines(pt.head_out);
    }
  } else if (n.kind == kWakeBatch) {
    if (const std::vector<std::uint32_t>& w = wakes_[n.index].ports; !w.empty()) prefetch_hop_lines(w[0]);
  } else if (n.kind == kPortFree) {
    const Port& pt = ports_[n.index];
    const std::uint32_t head = pt.ctrl_head != kNone ? pt.ctrl_head : pt.data_head;
    if (!pt.from_host && head != kNone) __builtin_prefetch(&pool_[head]);
  }
  if (const QueuedEvent* n2 = events_.peek(1);
      n2 != nullptr && (n2->kind == kArrive || n2->kind == kPortFree))
    prefetch_hop_lines(n2->index);
}

// A port's per-hop lines, the first two of its three (the third is PFC's).
void Fabric::prefetch_hop_lines(std::uint32_t port) const {
  const char* b = reinterpret_cast<const char*>(&ports_[port]);
  __builtin_prefetch(b);
  __builtin_prefetch(b + 64);
}

void Fabric::run_until(Time t) {
  while (step(t)) {
  }
  const Time limit_ps = t >= kNever / 1000 ? kNever : t * 1000 + 999;
  catch_up_all(limit_ps);
  // The clock where one event per dequeue would have left it (not at a lazy wake-up's time).
  now_ps_ = last_ps_;
  if (now() < t) now_ps_ = t * 1000;  // now() == t afterwards
}

void Fabric::schedule_call(Time at_ps, std::uint32_t id) {
  events_.push_keyed(std::max(at_ps, now_ps_), kCall, id, event_key(kcCall, id, 0));
}

// --- partitions --------------------------------------------------------------------------------------

void merge_stats(FabricStats& into, const FabricStats& from) {
  into.events += from.events;
  into.sent += from.sent;
  into.delivered += from.delivered;
  into.hops += from.hops;
  into.trimmed += from.trimmed;
  into.ecn_marked += from.ecn_marked;
  for (int i = 0; i < static_cast<int>(FabricDrop::kCount); ++i) into.drops[i] += from.drops[i];
  into.bad_tx += from.bad_tx;
  into.pfc_pauses += from.pfc_pauses;
  into.reconvergences += from.reconvergences;
  into.peak_data_bytes = std::max(into.peak_data_bytes, from.peak_data_bytes);
}

void Fabric::set_partition(const std::vector<std::uint32_t>& part_of_node, std::uint32_t self,
                           std::uint32_t parts) {
  if (part_of_node.size() != topo_.nodes.size() || self >= parts)
    throw std::invalid_argument("fabric: partition map does not fit the topology");
  assign_partition(part_of_node, self, parts);
  init_ports();
  index_leaves();
  build_fib();
}

void Fabric::assign_partition(const std::vector<std::uint32_t>& part_of_node, std::uint32_t self,
                              std::uint32_t parts) {
  if (part_of_node.size() != topo_.nodes.size() || self >= parts)
    throw std::invalid_argument("fabric: partition map does not fit the topology");
  part_ = part_of_node;
  self_ = self;
  primary_ = self == 0;
  for (int i = 0; i < 2; ++i) {
    out_[i].assign(parts, {});
    out_bytes_[i].assign(parts, {});
  }
  wr_ = 0;
}

void Fabric::run_window(Time end_ps) {
  if (end_ps == 0) return;
  while (step_ps(end_ps - 1)) {
  }
}

Time Fabric::next_event_ps() {
  return events_.empty() ? kNever : events_.top().time;
}

Time Fabric::next_message_ps() const {
  Time t = kNever;
  for (const auto& set : out_)
    for (const auto& box : set)
      for (const Msg& m : box) t = std::min(t, m.time);
  return t;
}

// The packet leaves this partition: a copy with its bytes goes to the outbox of the partition of
// the link's far end, which queues it on its side of the link (its record of the same port, found
// by the global id) and picks its next hop when it takes its messages.
void Fabric::send_remote(std::uint32_t port, std::uint32_t idx) {
  const std::uint32_t to = part_[ports_[port].to];
  const Packet& p = pool_[idx];
  std::vector<std::uint8_t>& bytes = out_bytes_[wr_][to];
  Msg& m = out_[wr_][to].emplace_back();
  m.pkt = p;
  m.time = p.arrive_ps;
  m.key = event_key(kcArrive, ports_[port].gid, 0);
  m.port = ports_[port].gid;
  m.kind = kArrive;
  m.bytes_at = static_cast<std::uint32_t>(bytes.size());
  const std::uint8_t* b = cfg_.carry_payload ? bufs_[idx].get() : hdr_[idx].b;
  const std::uint32_t n = cfg_.carry_payload ? p.len : p.header_len + p.trailer_len;
  bytes.insert(bytes.end(), b, b + n);
  free_packet(idx);
}

void Fabric::take_message(const Msg& m, const std::uint8_t* bytes) {
  const std::uint32_t port = local_port(m.port);  // its far end (or, PFC, its sender) is ours
  assert(port != kNone);
  if (m.kind != kArrive) {
    events_.push_keyed(m.time, m.kind, port, m.key);
    return;
  }
  const std::uint32_t idx = alloc_packet();
  Packet& p = pool_[idx];
  p = m.pkt;
  const std::uint8_t* b = bytes + m.bytes_at;
  if (cfg_.carry_payload) {
    std::memcpy(slot_buffer(idx, p.len), b, p.len);
  } else {
    std::memcpy(hdr_[idx].b, b, p.header_len + p.trailer_len);
  }
  p.next = kNone;
  p.port = port;
  const Port& pt = ports_[port];
  p.out = pt.to_host ? p.dst_qp : select(pt.to, p.src, p.dst, p.ev);
  append_to_wire(port, idx, m.key);
}

void Fabric::take_messages(Fabric& from) {
  const std::uint32_t rd = from.wr_ ^ 1;
  std::vector<Msg>& box = from.out_[rd][self_];
  const std::uint8_t* bytes = from.out_bytes_[rd][self_].data();
  for (const Msg& m : box) take_message(m, bytes);
  box.clear();
  from.out_bytes_[rd][self_].clear();
}

void Fabric::flip_outboxes() {
  wr_ ^= 1;
  for ([[maybe_unused]] const auto& box : out_[wr_]) assert(box.empty());  // taken during the window
}

// A packed outbox: four u32 (from, to, messages, bytes), the Msg records as they are in memory (the
// same executable reads them: every rank runs the same binary), then the packets' bytes.
namespace {
constexpr std::size_t kPackedHeader = 4 * sizeof(std::uint32_t);
}

void Fabric::pack_messages(std::uint32_t to, std::vector<std::uint8_t>& out) {
  static_assert(std::is_trivially_copyable_v<Msg>);
  std::vector<Msg>& box = out_[wr_][to];
  std::vector<std::uint8_t>& bytes = out_bytes_[wr_][to];
  if (box.empty()) return;
  const std::uint32_t head[4] = {self_, to, static_cast<std::uint32_t>(box.size()),
                                 static_cast<std::uint32_t>(bytes.size())};
  const std::size_t at = out.size();
  out.resize(at + kPackedHeader + box.size() * sizeof(Msg) + bytes.size());
  std::uint8_t* o = out.data() + at;
  std::memcpy(o, head, kPackedHeader);
  if (!box.empty()) std::memcpy(o + kPackedHeader, box.data(), box.size() * sizeof(Msg));
  if (!bytes.empty()) std::memcpy(o + kPackedHeader + box.size() * sizeof(Msg), bytes.data(), bytes.size());
  box.clear();
  bytes.clear();
}

Fabric::Packed Fabric::packed_record(std::span<const std::uint8_t> in) {
  std::uint32_t head[4];
  if (in.size() < kPackedHeader) throw std::runtime_error("fabric: truncated packed messages");
  std::memcpy(head, in.data(), kPackedHeader);
  const std::size_t size = kPackedHeader + std::size_t{head[2]} * sizeof(Msg) + head[3];
  if (in.size() < size) throw std::runtime_error("fabric: truncated packed messages");
  return Packed{head[0], head[1], size};
}

void Fabric::take_packed(std::span<const std::uint8_t> record) {
  const Packed r = packed_record(record);
  if (r.to != self_) throw std::runtime_error("fabric: packed messages for another partition");
  std::uint32_t head[4];
  std::memcpy(head, record.data(), kPackedHeader);
  const std::uint8_t* msgs = record.data() + kPackedHeader;
  const std::uint8_t* bytes = msgs + std::size_t{head[2]} * sizeof(Msg);
  for (std::uint32_t i = 0; i < head[2]; ++i) {
    Msg m;
    std::memcpy(static_cast<void*>(&m), msgs + i * sizeof(Msg), sizeof(Msg));
    take_message(m, bytes);
  }
}

bool Fabric::idle() const {
  if (live_ != 0) return false;
  return std::all_of(hosts_.begin(), hosts_.end(), [](const Host& h) {
    if (h.roce != nullptr) return h.roce->next_deadline() == kNever;
    return h.ep == nullptr || h.ep->next_deadline() == kNever;
  });
}

// --- hosts -------------------------------------------------------------------------------------------

void Fabric::service(std::uint32_t host) {
  Host& h = hosts_[host];
  if (h.ep == nullptr && h.roce == nullptr) return;
  engine::TxPacket& tx = *tx_;
  const std::uint32_t planes = planes_;
  for (;;) {
    std::uint32_t free_ports = 0;
    for (std::uint32_t p = 0; p < planes; ++p) {
      const Port& pt = ports_[host_port_[host * planes + p]];
      if (pt.busy_until <= now_ps_ && !pt.paused) free_ports |= bit(p);
    }
    if (free_ports == 0) break;
    if (!with_nic(h, [&](auto& nic) { return nic.poll_tx(tx, now(), free_ports); })) break;
    if (tx.port >= planes || (free_ports & bit(tx.port)) == 0 || tx.peer >= nhosts_ ||
        tx.payload_len > 0xFFFF || tx.header_len > wire::kMaxHeaderSize || tx.trailer_len > kTrailerBytes ||
        (!cfg_.carry_payload && tx.wire_size() > kMaxWireBytes)) {
      ++stats_.bad_tx;
      continue;
    }
    inject(host, tx);
  }
  // A port the endpoint let go of its wake-up (settle_tx) gets it back once there is something to
  // send: the event the send would have queued, at the same time, with the same key.
  if (h.settled && with_nic(h, [](auto& nic) { return nic.tx_pending(); })) {
    h.settled = false;
    for (std::uint32_t p = 0; p < planes; ++p) {
      const std::uint32_t port = host_port_[host * planes + p];
      if (!ports_[port].wake_pending && ports_[port].busy_until > now_ps_) wake(port);
    }
  }
  reschedule_timer(host);
}

void Fabric::inject(std::uint32_t host, const engine::TxPacket& tx) {
  const std::uint32_t idx = alloc_packet();
  Packet& p = pool_[idx];
  const std::uint32_t size = tx.wire_size();
  if (cfg_.carry_payload) {
    std::uint8_t* b = slot_buffer(idx, size);
    std::memcpy(b, tx.header, tx.header_len);
    if (tx.payload_len > 0) std::memcpy(b + tx.header_len, tx.payload, tx.payload_len);
    if (tx.trailer_len > 0) std::memcpy(b + tx.header_len + tx.payload_len, tx.trailer, tx.trailer_len);
  } else {
    // Whole arrays, not their used lengths: a copy of constant size is a few vector moves, not a
    // call. The slot holds them both (header_len <= kMaxHeaderSize, checked by service()); the bytes
    // past header_len + trailer_len are never read.
    std::uint8_t* b = hdr_[idx].b;
    static_assert(sizeof(tx.header) == wire::kMaxHeaderSize);
    std::memcpy(b, tx.header, wire::kMaxHeaderSize);
    std::memcpy(b + tx.header_len, tx.trailer, kTrailerBytes);
  }
  p.len = size;
  p.dst_qp = kNone;
  if (tx.header_len >= 8) {
    const bool feedback = wire::is_feedback(static_cast<wire::Opcode>(tx.header[0]));
    p.dst_qp = engine::Endpoint::bth_dest_qp(std::span<const std::uint8_t>(tx.header, 8)) |
               (feedback ? kFeedbackBit : 0);
  }
  p.src = host;
  p.dst = tx.peer;
  p.ev = tx.ev.value;
  p.next = kNone;
  p.header_len = tx.header_len;
  p.payload_len = static_cast<std::uint16_t>(tx.payload_len);
  p.trailer_len = tx.trailer_len;
  p.plane = tx.port;
  p.tc = tx.tc;
  p.ecn_ce = p.trimmed = p.trimmed_lasthop = false;
  p.trimmable = hosts_[host].roce == nullptr;
  ++stats_.sent;
  const std::uint32_t port = host_port_[host * planes_ + tx.port];
  start_tx(port, idx, now_ps_);
  Port& pt = ports_[port];
  // Re-poll the endpoint when the port frees up, unless that poll would find nothing (service()
  // brings the wake-up back if an input gives the endpoint something to send before then).
  if (pt.wake_pending) return;
  Host& h = hosts_[host];
  if (with_nic(h, [&](auto& nic) { return nic.settle_tx(pt.busy_until / 1000); })) {
    h.settled = true;
  } else {
    wake(port);
  }
}

void Fabric::reschedule_timer(std::uint32_t host) {
  Host& h = hosts_[host];
  const Time d = with_nic(h, [](auto& nic) { return nic.next_deadline(); });
  const std::uint64_t at_ps = h.timer.arm(d, now(), now_ps_, 1000);
  if (at_ps != kNever)
    h.timer.seq = events_.push_keyed(at_ps, kTimer, host, event_key(kcTimer, host, ++h.timer_gen));
}

void Fabric::on_timer_event(std::uint32_t host, std::uint64_t seq) {
  Host& h = hosts_[host];
  if (!h.timer.fire(seq)) return;
  if (with_nic(h, [](auto& nic) { return nic.next_deadline(); }) > now()) {
    reschedule_timer(host);
    return;
  }
  h.timer.fired_at = now();
  with_nic(h, [&](auto& nic) { nic.on_timer(now()); });
  if (hook_) hook_(host);
  service(host);
}

// --- links and switches --------------------------------------------------------------------------------

void Fabric::start_tx(std::uint32_t port, std::uint32_t idx, Time at_ps) {
  Port& pt = ports_[port];
  Packet& p = pool_[idx];
  p.port = port;
  const std::uint64_t start = std::max(pt.busy_until, at_ps);
  // Usually an integer number of ps per byte (a multiply instead of a division and a ceil).
  const std::uint64_t ser = pt.ps_per_byte != 0 && wire_bytes(p) <= fast_wire_max_
                                ? wire_bytes(p) * pt.ps_per_byte
                                : serialization_ps(wire_bytes(p), pt.rate_bps);
  pt.busy_until = start + ser;
  ++pt.ctr.tx_packets;
  pt.ctr.tx_bytes += wire_bytes(p);
  ++stats_.hops;
  // Lost on this link (down, or a gray failure's coin flip): dropped when it would arrive.
  p.lost = !pt.up ? 1 : (pt.loss > 0 && pt.rng.chance(pt.loss)) ? 2 : 0;
  // A link is FIFO (constant latency, serialisation in order): packets on it wait in a list and
  // only the head has an event, so the event queue holds O(busy links), not O(packets in flight).
  p.arrive_ps = pt.busy_until + pt.latency_ps;
  p.next = kNone;
  if (pt.remote) [[unlikely]] {
    send_remote(port, idx);  // the receiving partition looks its route up
    return;
  }
  p.out = pt.to_host ? p.dst_qp : select(pt.to, p.src, p.dst, p.ev);
  append_to_wire(port, idx, event_key(kcArrive, pt.gid, 0));
}

// Packet idx joins the end of `port`'s wire list; the list's head alone has an arrival event
// (keyed `key`), the others ride on their predecessor's next_arrive_ps.
void Fabric::append_to_wire(std::uint32_t port, std::uint32_t idx, std::uint64_t key) {
  Port& pt = ports_[port];
  const Packet& p = pool_[idx];
  if (pt.wire_tail == kNone) {
    pt.wire_head = idx;
    pt.head_out = p.out;
    events_.push_keyed(p.arrive_ps, kArrive, port, key);
  } else {
    Packet& tail = pool_[pt.wire_tail];
    tail.next = idx;
    tail.next_arrive_ps = p.arrive_ps;
    tail.next_out = p.out;
  }
  pt.wire_tail = idx;
}

void Fabric::on_wire(std::uint32_t port) {
  Port& pt = ports_[port];
  const std::uint32_t idx = pt.wire_head;
  Packet& p = pool_[idx];
  pt.wire_head = p.next;
  pt.head_out = p.next_out;
  if (pt.wire_head == kNone) {
    pt.wire_tail = kNone;
  } else {
    events_.push_keyed(p.next_arrive_ps, kArrive, port, event_key(kcArrive, pt.gid, 0));
  }
  if (p.lost != 0) {
    drop(port, idx, p.lost == 1 ? FabricDrop::kLinkDown : FabricDrop::kGrayLoss);
    return;
  }
  on_arrive(idx);
}

void Fabric::on_port_free(std::uint32_t port) {
  Port& pt = ports_[port];
  pt.wake_pending = false;
  if (pt.from_host) {
    last_ps_ = now_ps_;
    // An event of this very picosecond that ran before this wake-up (an arrival, a post, the
    // wake-up of another of the host's ports) may have sent on this port while this wake-up was
    // pending, so inject() queued none: the end of that packet needs one (without it the NIC
    // stayed silent until its next input). A packet service() sends now has inject() see to it.
    const bool sent_while_pending = pt.busy_until > now_ps_;
    service(pt.from);
    if (sent_while_pending && !pt.wake_pending) wake(port);
    return;
  }
  if (pt.lazy) {
    catch_up(port, now_ps_);
  } else {
    if (pt.paused) return;  // on_resume restarts it
    dequeue(port, now_ps_);
  }
  if (pt.ctrl_head != kNone || pt.data_head != kNone) wake(port);
}

bool Fabric::dequeue(std::uint32_t port, Time at_ps) {
  Port& pt = ports_[port];
  std::uint32_t idx = kNone;
  if (pt.ctrl_head != kNone) {
    idx = pt.ctrl_head;
    pt.ctrl_head = pool_[idx].next;
    if (pt.ctrl_head == kNone) pt.ctrl_tail = kNone;
    pt.ctrl_bytes -= wire_bytes(pool_[idx]);
  } else if (pt.data_head != kNone) {
    idx = pt.data_head;
    Packet& p = pool_[idx];
    pt.data_head = p.next;
    if (pt.data_head == kNone) pt.data_tail = kNone;
    pt.data_bytes -= wire_bytes(p);
    const QueueConfig& q = cfg_.queue;
    if (q.ecn_kmax > 0 && (q.ecn_last_hop || !pt.to_host) && pt.data_bytes > q.ecn_kmin) {
      bool mark = pt.data_bytes >= q.ecn_kmax;
      if (!mark) {
        const double prob =
            static_cast<double>(pt.data_bytes - q.ecn_kmin) / static_cast<double>(q.ecn_kmax - q.ecn_kmin);
        mark = pt.rng.chance(prob);
      }
      if (mark && !p.ecn_ce) {
        p.ecn_ce = true;
        ++pt.ctr.ecn_marks;
        ++stats_.ecn_marked;
      }
    }
  }
  if (idx == kNone) return false;
  if (cfg_.queue.pfc) pfc_dequeued(pool_[idx].port, wire_bytes(pool_[idx]));
  start_tx(port, idx, at_ps);
  last_ps_ = std::max(last_ps_, at_ps);
  return true;
}

void Fabric::note_peak(Port& pt) {
  if (pt.data_bytes > pt.ctr.peak_data_bytes) {  // (the fabric's peak is the ports' largest)
    pt.ctr.peak_data_bytes = pt.data_bytes;
    stats_.peak_data_bytes = std::max(stats_.peak_data_bytes, pt.data_bytes);
  }
}

// carry_payload: slot idx's byte buffer, grown to hold `size` bytes (kept for the slot's next packets).
std::uint8_t* Fabric::slot_buffer(std::uint32_t idx, std::uint32_t size) {
  if (buf_cap_[idx] < size) {
    buf_cap_[idx] = std::max(size, kMinBuffer);
    bufs_[idx].reset(new std::uint8_t[buf_cap_[idx]]);
  }
  return bufs_[idx].get();
}

// Slots a and b exchange their packets, bytes included (each packet's links stay with its slot).
void Fabric::swap_slots(std::uint32_t a, std::uint32_t b) {
  std::swap(pool_[a], pool_[b]);
  std::swap(pool_[a].next, pool_[b].next);
  if (cfg_.carry_payload) {
    std::swap(bufs_[a], bufs_[b]);
    std::swap(buf_cap_[a], buf_cap_[b]);
  } else {
    std::swap(hdr_[a], hdr_[b]);
  }
}

void Fabric::enqueue(std::uint32_t port, std::uint32_t idx) {
  Port& pt = ports_[port];
  // What left before this arrival has left (the queue it sees, the order of the coin flips);
  // what is due at this very instant leaves after it, as a wake-up of this instant would.
  if (pt.lazy && pt.busy_until < now_ps_) catch_up(port, now_ps_ - 1);
  const bool was_empty = pt.ctrl_head == kNone && pt.data_head == kNone;
  Packet& p = pool_[idx];
  p.next = kNone;
  if (!pt.up) {  // routing has not converged around the dead link yet: blackholed
    drop(port, idx, FabricDrop::kLinkDown);
    return;
  }
  const bool lossless = cfg_.queue.pfc;
  bool control = p.tc == engine::TrafficClass::kControl || p.trimmed;
  if (!control && !lossless && pt.data_bytes + wire_bytes(p) > cfg_.queue.data_bytes) {
    if (!cfg_.queue.trimming || !p.trimmable || p.payload_len == 0) {
      drop(port, idx, FabricDrop::kDataTail);
      return;
    }
    // Half of the time (trim_queued) the newest queued data packet is trimmed instead, as in
    // htsim, if the arrival fits in its place: the arrival takes that place in the queue (the two
    // slots swap their contents) and p, still slot idx, is then the packet to trim (D82).
    if (const std::uint32_t tail = pt.data_tail;
        tail != kNone && cfg_.queue.trim_queued > 0 && pool_[tail].trimmable && pool_[tail].payload_len > 0 &&
        pt.data_bytes - wire_bytes(pool_[tail]) + wire_bytes(p) <= cfg_.queue.data_bytes &&
        pt.rng.chance(cfg_.queue.trim_queued)) {
      swap_slots(tail, idx);
      pt.data_bytes = pt.data_bytes - wire_bytes(p) + wire_bytes(pool_[tail]);
      note_peak(pt);
    }
    // Trim to the header: payload and trailer are cut off.
    p.len = p.header_len;
    p.trailer_len = 0;
    p.trimmed = true;
    p.trimmed_lasthop = pt.to_host;
    ++pt.ctr.trims;
    ++stats_.trimmed;
    control = true;
  }
  if (lossless) pfc_enqueued(p.port, wire_bytes(p));  // p.port is still the ingress port
  if (control) {
    if (!lossless && pt.ctrl_bytes + wire_bytes(p) > control_cap_) {
      drop(port, idx, FabricDrop::kControlOverflow);
      return;
    }
    pt.ctrl_bytes += wire_bytes(p);
    if (pt.ctrl_tail == kNone) {
      pt.ctrl_head = idx;
    } else {
      pool_[pt.ctrl_tail].next = idx;
    }
    pt.ctrl_tail = idx;
  } else {
    pt.data_bytes += wire_bytes(p);
    note_peak(pt);
    if (pt.data_tail == kNone) {
      pt.data_head = idx;
    } else {
      pool_[pt.data_tail].next = idx;
    }
    pt.data_tail = idx;
  }
  // An idle port sends at once. (A lazy port's wake-up may still be pending from a queue that
  // its catch-up emptied: it comes early at worst, finds nothing due and re-arms.)
  if (pt.lazy && was_empty && pt.busy_until <= now_ps_ &&
      !(pt.busy_until == now_ps_ && flushed_at_tie(port))) {  // (else: its wake-up sends it)
    dequeue(port, now_ps_);
    return;
  }
  if (pt.wake_pending) return;
  if (pt.busy_until <= now_ps_) {
    on_port_free(port);  // idle port (unless paused): send now
  } else {
    wake(port);
  }
}

void Fabric::on_arrive(std::uint32_t idx) {
  Packet& p = pool_[idx];
  const std::uint32_t node = ports_[p.port].to;
  if (node < nhosts_) {
    deliver(idx);
    return;
  }
  const std::uint32_t out = p.out;  // select(node, ...) as of the current FIB
  if (out == kNone) {
    drop(p.port, idx, FabricDrop::kNoRoute);
    return;
  }
  // start_tx on `out` will look up the next switch's route: it is usually cold, fetch it now.
  if (const Port& o = ports_[out]; !o.to_host && !o.remote) {
    if (!route_.empty()) {
      __builtin_prefetch(&route_at(o.to, p.dst));
    } else if (const std::uint32_t* fe = fib_entry(o.to, p.dst)) {
      __builtin_prefetch(fe);
    }
  }
  enqueue(out, idx);
}

void Fabric::deliver(std::uint32_t idx) {
  Packet& p = pool_[idx];
  const std::uint32_t dst = ports_[p.port].to;
  Host& h = hosts_[dst];
  engine::RxMeta meta;
  meta.port = p.plane;
  meta.peer = p.src;
  meta.ev = p.ev;
  meta.ecn_ce = p.ecn_ce;
  meta.trimmed = p.trimmed;
  meta.trimmed_lasthop = p.trimmed_lasthop;
  meta.no_payload = !cfg_.carry_payload;
  ++stats_.delivered;
  const std::uint8_t* data;
  if (cfg_.carry_payload) {
    data = bufs_[idx].get();
  } else {
    // Header, zero payload (whatever an earlier header left there is irrelevant: no ICRC), trailer.
    // Constant sizes, as in inject().
    std::uint8_t* s = scratch_.data();
    const std::uint8_t* b = hdr_[idx].b;
    std::memcpy(s, b, wire::kMaxHeaderSize);
    if (!p.trimmed && p.trailer_len > 0)
      std::memcpy(s + p.header_len + p.payload_len, b + p.header_len, kTrailerBytes);
    data = s;
  }
  const std::uint32_t len = p.len;
  if (h.ep == nullptr && h.roce == nullptr) {
    free_packet(idx);
    return;
  }
  // The NIC does not touch the pool.
  with_nic(h, [&](auto& nic) { nic.receive(std::span<const std::uint8_t>(data, len), meta, now()); });
  free_packet(idx);
  if (hook_) hook_(dst);
  service(dst);
}

void Fabric::test_arrival(std::uint32_t port, std::uint32_t in_port, std::uint32_t dst, std::uint32_t wire,
                          bool control) {
  const std::uint32_t idx = alloc_packet();
  Packet& p = pool_[idx];
  p = Packet{};
  p.len = wire - cfg_.wire_overhead;
  p.header_len = 64;
  p.payload_len = static_cast<std::uint16_t>(p.len - 64);
  p.tc = control ? engine::TrafficClass::kControl : engine::TrafficClass::kData;
  p.dst = dst;
  p.port = in_port;
  std::memcpy(cfg_.carry_payload ? slot_buffer(idx, wire) : hdr_[idx].b, &wire, sizeof wire);
  enqueue(port, idx);
}

std::vector<std::uint32_t> Fabric::test_queue_tags(std::uint32_t port) const {
  std::vector<std::uint32_t> tags;
  for (std::uint32_t head : {ports_[port].ctrl_head, ports_[port].data_head}) {
    for (std::uint32_t i = head; i != kNone; i = pool_[i].next) {
      std::uint32_t t = 0;
      std::memcpy(&t, cfg_.carry_payload ? bufs_[i].get() : hdr_[i].b, sizeof t);
      tags.push_back(t);
    }
  }
  return tags;
}

void Fabric::drop(std::uint32_t port, std::uint32_t idx, FabricDrop why) {
  ++ports_[port].ctr.drops;
  ++stats_.drops[static_cast<int>(why)];
  free_packet(idx);
}

}  // namespace mrc::sim
