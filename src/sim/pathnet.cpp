#include "sim/pathnet.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <span>
#include <stdexcept>

namespace mrc::sim {

namespace {
constexpr std::uint32_t kPacketBufferBytes = 9216;  // jumbo frame; grown on demand

std::uint32_t bit(std::uint32_t i) {
  return 1u << i;
}
}  // namespace

const char* to_string(DropCause c) {
  switch (c) {
    case DropCause::kLoss:
      return "loss";
    case DropCause::kPathDead:
      return "path_dead";
    case DropCause::kLastHopOverflow:
      return "lasthop_overflow";
    case DropCause::kLinkDown:
      return "link_down";
    case DropCause::kBadRoute:
      return "bad_route";
    case DropCause::kCount:
      break;
  }
  return "?";
}

/// A packet in the network (plain data; its bytes live in bufs_[slot]). Slots are recycled through
/// a free list and buffers keep their capacity, so steady-state traffic allocates nothing.
struct PathNet::Packet {
  std::uint32_t len = 0;  ///< bytes currently carried (header_len once trimmed)
  std::uint32_t wire_bytes = 0;
  std::uint32_t header_len = 0;
  std::uint32_t payload_len = 0;
  std::uint32_t src = 0, dst = 0;
  std::uint32_t plane = 0;
  std::uint32_t path = 0;  ///< global path index: plane * M + index
  std::uint32_t psn = 0;
  engine::Ev ev;
  engine::TrafficClass tc = engine::TrafficClass::kData;
  Time sent = 0;
  bool trimmed = false, trimmed_lasthop = false, ecn_ce = false, duplicate = false;
};

PathNet::PathNet(const PathNetConfig& cfg) : cfg_(cfg), rng_(cfg.seed), tx_(new engine::TxPacket) {
  if (cfg_.planes == 0 || cfg_.planes > engine::kMaxPorts)
    throw std::invalid_argument("PathNet: planes must be 1..32");
  if (cfg_.paths_per_plane == 0) throw std::invalid_argument("PathNet: paths_per_plane must be >= 1");
  if (!(cfg_.port_rate_bps > 0)) throw std::invalid_argument("PathNet: port_rate_bps must be > 0");
  const std::size_t n = static_cast<std::size_t>(cfg_.planes) * cfg_.paths_per_plane;
  paths_.assign(n, cfg_.path);
  if (cfg_.delay_spread > 0) {
    for (auto& p : paths_) {
      p.delay += static_cast<Duration>(rng_.uniform() * static_cast<double>(cfg_.delay_spread));
    }
  }
  path_busy_.assign(n, 0);
  path_stats_.assign(n, PathStats{});
  events_.reserve(1024);
}

PathNet::~PathNet() = default;

std::uint32_t PathNet::add_node(engine::Endpoint& ep) {
  Node node;
  node.ep = &ep;
  const std::uint32_t ports = std::min(cfg_.planes, ep.config().num_ports);
  node.usable = ports >= 32 ? ~0u : bit(ports) - 1;
  node.ports.assign(cfg_.planes, PortStats{});
  node.lasthop.assign(cfg_.planes, LastHop{cfg_.last_hop, 0, LastHopStats{}});
  nodes_.push_back(std::move(node));
  return static_cast<std::uint32_t>(nodes_.size() - 1);
}

void PathNet::kill_path(std::uint32_t plane, std::uint32_t idx, Time at) {
  PathSpec& p = path(plane, idx);
  p.dies_at = std::min(p.dies_at, std::max(at, now_));
}

void PathNet::kill_path_from(std::uint32_t plane, std::uint32_t idx, std::uint32_t src, Time at) {
  kill_path(plane, idx, at);
  path(plane, idx).dies_for_src = src;
}

void PathNet::kill_plane(std::uint32_t plane, Time at) {
  for (std::uint32_t i = 0; i < cfg_.paths_per_plane; ++i) kill_path(plane, i, at);
}

void PathNet::port_down(std::uint32_t node, std::uint32_t plane, Time at) {
  port_down_orders_.push_back(PortDownOrder{node, plane});
  ++pending_port_down_;
  events_.push(std::max(at, now_), kPortDown, static_cast<std::uint32_t>(port_down_orders_.size() - 1));
}

Duration PathNet::serialization(std::uint64_t bytes, double rate_bps) {
  const double ns = static_cast<double>(bytes) * 8e9 / rate_bps;
  const auto d = static_cast<Duration>(std::llround(ns));
  return d == 0 ? 1 : d;
}

Duration PathNet::base_rtt() const {
  Duration rtt = 2 * cfg_.path.delay;
  auto hop = [&](double rate) {
    if (rate > 0) rtt += serialization(cfg_.mtu_wire_bytes, rate) + serialization(cfg_.ack_wire_bytes, rate);
  };
  hop(cfg_.port_rate_bps);
  hop(cfg_.path.rate_bps);
  hop(cfg_.last_hop.rate_bps);
  return rtt;
}

// --- packet pool -----------------------------------------------------------------------------------

std::uint32_t PathNet::alloc_packet() {
  std::uint32_t idx;
  if (!free_.empty()) {
    idx = free_.back();
    free_.pop_back();
  } else {
    idx = static_cast<std::uint32_t>(pool_.size());
    pool_.emplace_back();
    bufs_.emplace_back();
  }
  ++live_packets_;
  return idx;
}

std::uint8_t* PathNet::buffer(std::uint32_t idx, std::uint32_t size) {
  PacketBuffer& b = bufs_[idx];
  if (b.cap < size) {
    b.cap = std::max(size, kPacketBufferBytes);
    b.data.reset(new std::uint8_t[b.cap]);
  }
  return b.data.get();
}

void PathNet::free_packet(std::uint32_t idx) {
  free_.push_back(idx);
  --live_packets_;
}

// --- running ---------------------------------------------------------------------------------------

void PathNet::kick(std::uint32_t node) {
  service(node);
}

bool PathNet::step(Time limit) {
  if (events_.empty() || events_.top().time > limit) return false;
  const QueuedEvent e = events_.pop();
  now_ = e.time;
  ++stats_.events;
  switch (e.kind) {
    case kTxDone:
      on_tx_done(e.index);
      break;
    case kPathExit:
      on_path_exit(e.index);
      break;
    case kDeliver:
      deliver(e.index);
      break;
    case kTimer:
      on_timer_event(e.index, e.seq);
      break;
    case kPortDown:
      on_port_down(e.index);
      break;
    default:
      assert(false);
  }
  return true;
}

void PathNet::run_until(Time t) {
  while (step(t)) {
  }
  if (now_ < t) now_ = t;
}

bool PathNet::idle() const {
  if (live_packets_ != 0 || pending_port_down_ != 0) return false;
  return std::all_of(nodes_.begin(), nodes_.end(),
                     [](const Node& n) { return n.ep->next_deadline() == kNever; });
}

bool PathNet::run_until_idle(Time limit) {
  while (!idle()) {
    if (!step(limit)) return false;
  }
  return true;
}

// --- nodes -----------------------------------------------------------------------------------------

void PathNet::service(std::uint32_t node) {
  Node& n = nodes_[node];
  engine::TxPacket& tx = *tx_;
  for (;;) {
    const std::uint32_t free_ports = n.usable & ~n.busy & ~n.down;
    if (free_ports == 0) break;
    if (!n.ep->poll_tx(tx, now_, free_ports)) break;
    if (tx.port >= 32 || (free_ports & bit(tx.port)) == 0) {
      ++stats_.bad_tx;  // engine bug: the packet is discarded
      continue;
    }
    start_tx(node, tx);
  }
  reschedule_timer(node);
}

void PathNet::start_tx(std::uint32_t node, const engine::TxPacket& tx) {
  const std::uint32_t idx = alloc_packet();
  Packet& p = pool_[idx];
  const std::uint32_t size = tx.wire_size();
  std::uint8_t* b = buffer(idx, size);
  std::memcpy(b, tx.header, tx.header_len);
  if (tx.payload_len > 0) std::memcpy(b + tx.header_len, tx.payload, tx.payload_len);
  if (tx.trailer_len > 0) std::memcpy(b + tx.header_len + tx.payload_len, tx.trailer, tx.trailer_len);
  p.len = size;
  p.wire_bytes = size;
  p.header_len = tx.header_len;
  p.payload_len = tx.payload_len;
  p.src = node;
  p.dst = tx.peer;
  p.plane = tx.port;
  p.path = tx.port * cfg_.paths_per_plane + path_index(tx.ev);
  p.psn = tx.psn;
  p.ev = tx.ev;
  p.tc = tx.tc;
  p.sent = now_;
  p.trimmed = p.trimmed_lasthop = p.ecn_ce = p.duplicate = false;

  Node& n = nodes_[node];
  n.busy |= bit(tx.port);
  PortStats& ps = n.ports[tx.port];
  ++ps.tx_packets;
  ps.tx_bytes += size;
  ++stats_.sent;
  events_.push(now_ + serialization(size, cfg_.port_rate_bps), kTxDone, idx);
}

void PathNet::on_tx_done(std::uint32_t idx) {
  Packet& p = pool_[idx];
  const std::uint32_t src = p.src;
  p.sent = now_;
  nodes_[src].busy &= ~bit(p.plane);
  enter_path(idx);  // may free the packet
  service(src);
}

// One live timer event per node (sim/node_timer.hpp).
void PathNet::reschedule_timer(std::uint32_t node) {
  Node& n = nodes_[node];
  const Time at = n.timer.arm(n.ep->next_deadline(), now_, now_, 1);
  if (at != kNever) n.timer.seq = events_.push(at, kTimer, node);
}

void PathNet::on_timer_event(std::uint32_t node, std::uint64_t seq) {
  Node& n = nodes_[node];
  if (!n.timer.fire(seq)) return;
  if (n.ep->next_deadline() > now_) {  // the deadline moved later (or went away)
    reschedule_timer(node);
    return;
  }
  n.timer.fired_at = now_;
  n.ep->on_timer(now_);
  service(node);
}

void PathNet::on_port_down(std::uint32_t order) {
  const PortDownOrder o = port_down_orders_[order];
  --pending_port_down_;
  Node& n = nodes_[o.node];
  n.down |= bit(o.plane);
  n.ep->set_port_up(static_cast<std::uint8_t>(o.plane), false, now_);
  service(o.node);
}

// --- paths and last hops -----------------------------------------------------------------------------

void PathNet::trim_packet(Packet& p) {
  p.trimmed = true;
  p.len = p.header_len;
  ++stats_.trimmed;
}

void PathNet::enter_path(std::uint32_t idx) {
  Packet& p = pool_[idx];
  if (p.dst >= nodes_.size() || p.plane >= cfg_.planes) {
    drop(idx, DropCause::kBadRoute);
    return;
  }
  const PathSpec& spec = paths_[p.path];
  PathStats& st = path_stats_[p.path];
  ++st.packets;
  if (spec.dead_for(p.src, now_)) {
    drop(idx, DropCause::kPathDead);
    return;
  }
  if (rng_.chance(spec.loss)) {
    drop(idx, DropCause::kLoss);
    return;
  }
  if (p.tc != engine::TrafficClass::kControl && p.payload_len > 0 && rng_.chance(spec.trim)) {
    trim_packet(p);
    ++st.trimmed;
  }
  if (rng_.chance(spec.ecn)) {
    p.ecn_ce = true;
    ++st.ecn_marked;
    ++stats_.ecn_marked;
  }
  if (rng_.chance(spec.dup)) {
    const std::uint32_t copy = alloc_packet();  // may grow pool_: no references held across it
    pool_[copy] = pool_[idx];
    Packet& c = pool_[copy];
    c.duplicate = true;
    std::memcpy(buffer(copy, c.len), buffer(idx, c.len), c.len);
    ++path_stats_[c.path].duplicated;
    ++path_stats_[c.path].packets;
    ++stats_.duplicated;
    schedule_path_exit(idx);
    schedule_path_exit(copy);
    return;
  }
  schedule_path_exit(idx);
}

void PathNet::schedule_path_exit(std::uint32_t idx) {
  const Packet& p = pool_[idx];
  const PathSpec& spec = paths_[p.path];
  Time t = now_;
  if (spec.rate_bps > 0) {
    Time& busy = path_busy_[p.path];
    t = std::max(t, busy) + serialization(p.len, spec.rate_bps);
    busy = t;
  }
  t += spec.delay;
  if (spec.jitter > 0)
    t += rng_.below(static_cast<std::uint32_t>(std::min<Duration>(spec.jitter, 0xFFFFFFFEu)) + 1);
  events_.push(t, kPathExit, idx);
}

void PathNet::on_path_exit(std::uint32_t idx) {
  Packet& p = pool_[idx];
  if (paths_[p.path].dead_for(p.src, now_)) {
    drop(idx, DropCause::kPathDead);
    return;
  }
  LastHop& lh = lasthop_at(p.dst, p.plane);
  const LastHopSpec& spec = lh.spec;
  if (!(spec.rate_bps > 0)) {
    deliver(idx);
    return;
  }
  ++lh.stats.packets;
  const Duration pending = lh.busy_until > now_ ? lh.busy_until - now_ : 0;
  const auto backlog = static_cast<std::uint64_t>(static_cast<double>(pending) * spec.rate_bps / 8e9);
  bool bypass = p.tc == engine::TrafficClass::kControl || p.trimmed;
  if (!bypass && spec.trim_bytes > 0 && p.payload_len > 0 && backlog + p.len > spec.trim_bytes) {
    trim_packet(p);
    p.trimmed_lasthop = true;
    ++lh.stats.trims;
    bypass = true;
  }
  const Duration ser = serialization(p.len, spec.rate_bps);
  if (bypass) {
    // Strict priority over the FIFO: leaves after its own serialisation (ignoring the rest of a
    // FIFO packet in service), and the FIFO behind it is delayed by that much.
    ++lh.stats.bypassed;
    lh.busy_until = std::max(lh.busy_until, now_) + ser;
    events_.push(now_ + ser, kDeliver, idx);
    return;
  }
  if (backlog + p.len > spec.buffer_bytes) {
    ++lh.stats.drops;
    drop(idx, DropCause::kLastHopOverflow);
    return;
  }
  if (spec.ecn_kmax > 0 && backlog > spec.ecn_kmin) {
    double prob = spec.ecn_pmax;
    if (backlog < spec.ecn_kmax && spec.ecn_kmax > spec.ecn_kmin) {
      prob *=
          static_cast<double>(backlog - spec.ecn_kmin) / static_cast<double>(spec.ecn_kmax - spec.ecn_kmin);
    }
    if (rng_.chance(prob)) {
      if (!p.ecn_ce) ++stats_.ecn_marked;
      p.ecn_ce = true;
      ++lh.stats.ecn_marks;
    }
  }
  const std::uint64_t depth = backlog + p.len;
  lh.stats.peak_bytes = std::max(lh.stats.peak_bytes, depth);
  stats_.peak_lasthop_bytes = std::max(stats_.peak_lasthop_bytes, depth);
  lh.busy_until = std::max(lh.busy_until, now_) + ser;
  events_.push(lh.busy_until, kDeliver, idx);
}

void PathNet::deliver(std::uint32_t idx) {
  Packet& p = pool_[idx];
  Node& n = nodes_[p.dst];
  if (n.down & bit(p.plane)) {
    drop(idx, DropCause::kLinkDown);
    return;
  }
  engine::RxMeta meta;
  meta.port = static_cast<std::uint8_t>(p.plane);
  meta.peer = p.src;
  meta.ev = p.ev.value;  // the EV travels in the headers the network routes on
  meta.ecn_ce = p.ecn_ce;
  meta.trimmed = p.trimmed;
  meta.trimmed_lasthop = p.trimmed_lasthop;
  ++path_stats_[p.path].delivered;
  PortStats& ps = n.ports[p.plane];
  ++ps.rx_packets;
  ps.rx_bytes += p.len;
  ++stats_.delivered;
  stats_.delivered_bytes += p.len;
  if (observer_) record(p, true, DropCause::kCount);
  const std::uint32_t dst = p.dst;
  n.ep->receive(std::span<const std::uint8_t>(bufs_[idx].data.get(), p.len), meta, now_);
  free_packet(idx);
  service(dst);
}

void PathNet::drop(std::uint32_t idx, DropCause cause) {
  Packet& p = pool_[idx];
  if (p.path < path_stats_.size() && cause != DropCause::kBadRoute) ++path_stats_[p.path].dropped;
  ++stats_.dropped;
  ++stats_.drops[static_cast<int>(cause)];
  if (observer_) record(p, false, cause);
  free_packet(idx);
}

void PathNet::record(const Packet& p, bool delivered, DropCause cause) {
  PacketRecord r;
  r.time = now_;
  r.sent = p.sent;
  r.src = p.src;
  r.dst = p.dst;
  r.plane = static_cast<std::uint8_t>(p.plane);
  r.path = p.path % cfg_.paths_per_plane;
  r.ev = p.ev;
  r.tc = p.tc;
  r.psn = p.psn;
  r.wire_bytes = p.wire_bytes;
  r.delivered = delivered;
  r.cause = cause;
  r.trimmed = p.trimmed;
  r.trimmed_lasthop = p.trimmed_lasthop;
  r.ecn_ce = p.ecn_ce;
  r.duplicate = p.duplicate;
  observer_(r);
}

}  // namespace mrc::sim
