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
  // of the load not yet placed (an all-to-all among the first half of the hosts splits that half,
  // not the hosts; after an incast's receiver, the senders spread over the partitions left).
  std::vector<std::uint32_t> group_part(hosts, parts);
  std::uint32_t cur = 0;
  std::uint64_t filled = 0, cur_start = 0;  // load placed in all, and before partition cur
  for (std::uint32_t h = 0; h < hosts; ++h) {
    const std::uint32_t g = find(up, h);
    if (group_part[g] == parts) {
      if (cur + 1 < parts && filled - cur_start >= (total - cur_start) / (parts - cur)) {
        ++cur;
        cur_start = filled;
      }
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
    // Each switch's switches one tier down (lower[first[n] .. first[n + 1])).
    const std::uint32_t nodes = topo.num_nodes();
    std::vector<std::uint32_t> first(nodes + 1, 0), lower;
    auto upper_end = [&](const TopoLink& l) {  // the link's upper end if it joins adjacent switch tiers
      if (l.a < hosts || l.b < hosts) return nodes;
      const std::uint8_t ta = topo.nodes[l.a].tier, tb = topo.nodes[l.b].tier;
      return ta == tb + 1 ? l.a : tb == ta + 1 ? l.b : nodes;
    };
    for (const TopoLink& l : topo.links)
      if (const std::uint32_t n = upper_end(l); n < nodes) ++first[n + 1];
    for (std::uint32_t n = 0; n < nodes; ++n) first[n + 1] += first[n];
    lower.resize(first[nodes]);
    std::vector<std::uint32_t> fill(first.begin(), first.end() - 1);
    for (const TopoLink& l : topo.links)
      if (const std::uint32_t n = upper_end(l); n < nodes) lower[fill[n]++] = n == l.a ? l.b : l.a;
    std::uint8_t top = 1;
    for (const TopoNode& node : topo.nodes) top = std::max(top, node.tier);
    std::vector<std::uint64_t> tally(parts, 0);  // one switch's load below it, by partition
    std::vector<std::uint8_t> seen(parts, 0);
    std::vector<std::uint32_t> touched;  // the partitions of its lower switches
    for (std::uint8_t tier = 2; tier <= top; ++tier) {
      for (std::uint32_t n = hosts; n < nodes; ++n) {
        if (topo.nodes[n].tier != tier) continue;
        for (std::uint32_t i = first[n]; i < first[n + 1]; ++i) {
          const std::uint32_t low = lower[i];
          if (seen[part[low]] == 0) {
            seen[part[low]] = 1;
            touched.push_back(part[low]);
          }
          tally[part[low]] += below[low];
          below[n] += below[low];
        }
        std::uint32_t best = parts;
        for (const std::uint32_t q : touched) {
          if (best == parts || tally[q] > tally[best] || (tally[q] == tally[best] && q < best)) best = q;
        }
        part[n] = best != parts && tally[best] * 4 >= below[n] * 3 && below[n] > 0
                      ? best
                      : topo.nodes[n].index % parts;
        placed[n] = true;
        for (const std::uint32_t q : touched) tally[q] = seen[q] = 0;
        touched.clear();
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
