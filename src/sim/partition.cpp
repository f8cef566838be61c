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
  std::vector<std::uint32_t> size(hosts, 0);
  for (std::uint32_t h = 0; h < hosts; ++h) ++size[find(up, h)];
  // Groups in the order of their first host, filling partition after partition.
  std::vector<std::uint32_t> group_part(hosts, parts);
  std::uint32_t cur = 0, load = 0;
  for (std::uint32_t h = 0; h < hosts; ++h) {
    const std::uint32_t g = find(up, h);
    if (group_part[g] == parts) {
      const std::uint64_t target = static_cast<std::uint64_t>(hosts) * (cur + 1) / parts;
      if (cur + 1 < parts && load >= target) ++cur;
      group_part[g] = cur;
      load += size[g];
    }
    part[h] = group_part[g];
  }
  // Switches.
  std::vector<bool> placed(topo.nodes.size(), false);
  if (topo.planes < parts) {
    for (std::uint32_t h = 0; h < hosts; ++h)
      for (std::uint32_t p = 0; p < topo.planes; ++p) {
        const std::uint32_t leaf = topo.links[topo.host_link(h, p)].b;
        if (!placed[leaf]) {
          placed[leaf] = true;
          part[leaf] = part[h];
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
