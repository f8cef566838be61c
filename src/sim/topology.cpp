#include "sim/topology.hpp"

#include <stdexcept>

namespace mrc::sim {

std::uint32_t Topology::count_switches(std::uint8_t tier) const {
  std::uint32_t n = 0;
  for (const auto& node : nodes) n += node.kind == NodeKind::kSwitch && node.tier == tier ? 1 : 0;
  return n;
}

std::uint32_t Topology::count_links(std::uint8_t tier) const {
  std::uint32_t n = 0;
  for (const auto& l : links) n += l.tier == tier ? 1 : 0;
  return n;
}

void Topology::validate() const {
  if (hosts == 0) throw std::invalid_argument("topology: no hosts");
  if (planes == 0 || planes > 32) throw std::invalid_argument("topology: planes must be 1..32");
  if (nodes.size() < hosts) throw std::invalid_argument("topology: fewer nodes than hosts");
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    const bool is_host = nodes[i].kind == NodeKind::kHost;
    if (is_host != (i < hosts)) throw std::invalid_argument("topology: hosts must be nodes 0..hosts-1");
  }
  if (host_links.size() != static_cast<std::size_t>(hosts) * planes)
    throw std::invalid_argument("topology: host_links must have hosts * planes entries");
  for (const auto& l : links) {
    if (l.a >= nodes.size() || l.b >= nodes.size() || l.a == l.b)
      throw std::invalid_argument("topology: link with a bad endpoint");
    if (!(l.rate_bps > 0)) throw std::invalid_argument("topology: link rate must be > 0");
    if (l.b < hosts) throw std::invalid_argument("topology: a host must be the link's `a` end");
  }
  std::vector<std::uint32_t> host_degree(hosts, 0);
  for (const auto& l : links) {
    if (l.a < hosts) ++host_degree[l.a];
  }
  for (std::uint32_t h = 0; h < hosts; ++h) {
    if (host_degree[h] != planes)
      throw std::invalid_argument("topology: every host needs one link per plane");
    for (std::uint32_t p = 0; p < planes; ++p) {
      const std::uint32_t id = host_link(h, p);
      if (id >= links.size() || links[id].a != h)
        throw std::invalid_argument("topology: host_links entry does not start at its host");
      const TopoNode& sw = nodes[links[id].b];
      if (sw.plane != p) throw std::invalid_argument("topology: host port p must attach to plane p");
    }
  }
}

namespace {

std::uint32_t add_switch(Topology& t, std::uint8_t tier, std::uint32_t plane, std::uint32_t index) {
  t.nodes.push_back(TopoNode{NodeKind::kSwitch, tier, static_cast<std::uint16_t>(plane), index});
  return static_cast<std::uint32_t>(t.nodes.size() - 1);
}

std::uint32_t add_link(Topology& t, std::uint32_t a, std::uint32_t b, double rate, Duration lat,
                       std::uint8_t tier) {
  t.links.push_back(TopoLink{a, b, rate, lat, tier});
  return static_cast<std::uint32_t>(t.links.size() - 1);
}

void add_hosts(Topology& t, std::uint32_t n) {
  t.hosts = n;
  t.nodes.reserve(n);
  for (std::uint32_t h = 0; h < n; ++h) t.nodes.push_back(TopoNode{NodeKind::kHost, 0, 0, h});
  t.host_links.assign(static_cast<std::size_t>(n) * t.planes, 0);
}

void check_planes_rate(std::uint32_t planes, double rate, const char* what) {
  if (planes == 0 || planes > 32) throw std::invalid_argument(std::string(what) + ": planes must be 1..32");
  if (!(rate > 0)) throw std::invalid_argument(std::string(what) + ": rate_bps must be > 0");
}

}  // namespace

Topology make_fat_tree(const FatTreeConfig& cfg) {
  const std::uint32_t k = cfg.k;
  if (k < 2 || k % 2 != 0 || k > 128) throw std::invalid_argument("fat tree: k must be even, 2..128");
  check_planes_rate(cfg.planes, cfg.rate_bps, "fat tree");
  const std::uint32_t half = k / 2;
  const std::uint32_t tors = k * half, aggs = k * half, cores = half * half;
  Topology t;
  t.name = "fat_tree_k" + std::to_string(k) + "_p" + std::to_string(cfg.planes);
  t.planes = cfg.planes;
  t.max_path_links = 6;
  add_hosts(t, k * k * k / 4);
  for (std::uint32_t p = 0; p < cfg.planes; ++p) {
    const std::uint32_t tor0 = t.num_nodes();
    for (std::uint32_t i = 0; i < tors; ++i) add_switch(t, 1, p, i);
    const std::uint32_t agg0 = t.num_nodes();
    for (std::uint32_t i = 0; i < aggs; ++i) add_switch(t, 2, p, i);
    const std::uint32_t core0 = t.num_nodes();
    for (std::uint32_t i = 0; i < cores; ++i) add_switch(t, 3, p, i);
    for (std::uint32_t h = 0; h < t.hosts; ++h)
      t.host_links[h * t.planes + p] = add_link(t, h, tor0 + h / half, cfg.rate_bps, cfg.latency, 0);
    for (std::uint32_t tor = 0; tor < tors; ++tor) {
      const std::uint32_t pod = tor / half;
      for (std::uint32_t a = 0; a < half; ++a)
        add_link(t, tor0 + tor, agg0 + pod * half + a, cfg.rate_bps, cfg.latency, 1);
    }
    for (std::uint32_t agg = 0; agg < aggs; ++agg) {
      const std::uint32_t pos = agg % half;
      for (std::uint32_t l = 0; l < half; ++l)
        add_link(t, agg0 + agg, core0 + pos * half + l, cfg.rate_bps, cfg.latency, 2);
    }
  }
  t.validate();
  return t;
}

Topology make_clos2(const ClosConfig& cfg) {
  const std::uint32_t r = cfg.radix;
  if (r < 2 || r % 2 != 0 || r > 1024) throw std::invalid_argument("clos: radix must be even, 2..1024");
  check_planes_rate(cfg.planes, cfg.rate_bps, "clos");
  const std::uint32_t half = r / 2;
  const std::uint32_t leaves = r, spines = half;
  Topology t;
  t.name = "clos2_r" + std::to_string(r) + "_p" + std::to_string(cfg.planes);
  t.planes = cfg.planes;
  t.max_path_links = 4;
  add_hosts(t, leaves * half);
  for (std::uint32_t p = 0; p < cfg.planes; ++p) {
    const std::uint32_t leaf0 = t.num_nodes();
    for (std::uint32_t i = 0; i < leaves; ++i) add_switch(t, 1, p, i);
    const std::uint32_t spine0 = t.num_nodes();
    for (std::uint32_t i = 0; i < spines; ++i) add_switch(t, 2, p, i);
    for (std::uint32_t h = 0; h < t.hosts; ++h)
      t.host_links[h * t.planes + p] = add_link(t, h, leaf0 + h / half, cfg.rate_bps, cfg.latency, 0);
    for (std::uint32_t l = 0; l < leaves; ++l) {
      for (std::uint32_t s = 0; s < spines; ++s)
        add_link(t, leaf0 + l, spine0 + s, cfg.rate_bps, cfg.latency, 1);
    }
  }
  t.validate();
  return t;
}

}  // namespace mrc::sim
