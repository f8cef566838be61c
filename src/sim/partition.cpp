#include "sim/partition.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace mrc::sim {

namespace {
std::uint32_t find(std::vector<std::uint32_t>& up, std::uint32_t x) {
  while (up[x] != x) x = up[x] = up[up[x]];
  return x;
}
}  // namespace

std::vector<std::uint32_t> partition_nodes(const Topology& topo, const ConnMatrix& m, std::uint32_t parts) {
  if (parts == 0) throw std::invalid_argument("partition: parts must be >= 1");
  const std::uint32_t hosts = topo.hosts;
  std::vector<std::uint32_t> part(topo.nodes.size(), 0);
  if (parts == 1) return part;
  // Hosts that must share a partition: a dependent's source and its dependency's destination.
  std::vector<std::uint32_t> up(hosts);
  std::iota(up.begin(), up.end(), 0u);
  for (const ConnSpec& c : m.conns) {
    if (c.after == ConnSpec::kNoDep || c.after >= m.conns.size()) continue;
    const std::uint32_t a = m.conns[c.after].dst, b = c.src;
    if (a >= hosts || b >= hosts) continue;
    up[find(up, a)] = find(up, b);
  }
  // A host's work is about the packets it sends and receives: a connection's bytes count at both
  // ends (a connection whose size the matrix leaves open counts as one byte, so a matrix without
  // sizes splits by connections; one without connections, by hosts).
  std::vector<std::uint64_t> load(hosts, 0);
  for (const ConnSpec& c : m.conns) {
    const std::uint64_t w = std::max<std::uint64_t>(c.bytes, 1);
    if (c.src < hosts) load[c.src] += w;
    if (c.dst < hosts) load[c.dst] += w;
  }
  if (std::all_of(load.begin(), load.end(), [](std::uint64_t w) { return w == 0; }))
    std::fill(load.begin(), load.end(), 1);
  std::vector<std::uint64_t> group_load(hosts, 0);
  for (std::uint32_t h = 0; h < hosts; ++h) group_load[find(up, h)] += load[h];
  const std::uint64_t total = std::accumulate(load.begin(), load.end(), std::uint64_t{0});
  // Groups in the order of their first host, filling partition after partition to an equal share
  // of the load (an all-to-all among the first half of the hosts splits that half, not the hosts).
  std::vector<std::uint32_t> group_part(hosts, parts);
  std::uint32_t cur = 0;
  std::uint64_t filled = 0;
  for (std::uint32_t h = 0; h < hosts; ++h) {
    const std::uint32_t g = find(up, h);
    if (group_part[g] == parts) {
      const std::uint64_t target = total / parts * (cur + 1) + total % parts * (cur + 1) / parts;
      if (cur + 1 < parts && filled >= target) ++cur;
      group_part[g] = cur;
      filled += group_load[g];
    }
    part[h] = group_part[g];
  }
  // Switches. With at least `parts` planes, whole planes. Otherwise a leaf goes with its first host;
  // then tier by tier, a switch goes where at least 3/4 of the load below it is (an aggregation
  // switch with its pod), else round robin by index (core switches and spines, which every
  // partition's traffic crosses).
  std::vector<bool> placed(topo.nodes.size(), false);
  std::vector<std::uint64_t> below(topo.nodes.size(), 0);  // the load of the hosts under a switch
  if (topo.planes < parts) {
    for (std::uint32_t h = 0; h < hosts; ++h)
      for (std::uint32_t p = 0; p < topo.planes; ++p) {
        const std::uint32_t leaf = topo.links[topo.host_link(h, p)].b;
        below[leaf] += load[h];
        if (!placed[leaf]) {
          placed[leaf] = true;
          part[leaf] = part[h];
        }
      }
    std::uint8_t top = 1;
    for (const TopoNode& node : topo.nodes) top = std::max(top, node.tier);
    std::vector<std::uint64_t> tally;  // [node * parts + partition]: load below it in that partition
    for (std::uint8_t tier = 2; tier <= top; ++tier) {
      tally.assign(topo.nodes.size() * parts, 0);
      for (const TopoLink& l : topo.links) {
        if (l.a < hosts || l.b < hosts) continue;
        const std::uint8_t ta = topo.nodes[l.a].tier, tb = topo.nodes[l.b].tier;
        constexpr std::uint32_t kNone = ~0u;
        const std::uint32_t n = ta == tier && tb + 1 == tier   ? l.a
                                : tb == tier && ta + 1 == tier ? l.b
                                                               : kNone;
        if (n == kNone) continue;
        const std::uint32_t lower = n == l.a ? l.b : l.a;
        tally[std::size_t{n} * parts + part[lower]] += below[lower];
        below[n] += below[lower];
      }
      for (std::uint32_t n = hosts; n < topo.num_nodes(); ++n) {
        if (topo.nodes[n].tier != tier) continue;
        const auto first = tally.begin() + static_cast<std::ptrdiff_t>(std::size_t{n} * parts);
        const auto best = std::max_element(first, first + parts);
        part[n] = below[n] > 0 && *best * 4 >= below[n] * 3 ? static_cast<std::uint32_t>(best - first)
                                                            : topo.nodes[n].index % parts;
        placed[n] = true;
      }
    }
  }
  for (std::uint32_t n = hosts; n < topo.num_nodes(); ++n) {
    if (placed[n]) continue;
    const TopoNode& node = topo.nodes[n];
    part[n] = topo.planes >= parts
                  ? static_cast<std::uint32_t>(std::uint64_t{node.plane} * parts / topo.planes)
                  : node.index % parts;
  }
  return part;
}

Time lookahead_ps(const Topology& topo) {
  Time l = kNever;
  for (const TopoLink& link : topo.links) l = std::min<Time>(l, link.latency * 1000);
  return l == kNever ? 0 : l;
}

}  // namespace mrc::sim
