// `mrc sim` scenario files: TOML reading with file:line errors (see scenario.hpp).
#include "sim/scenario.hpp"

// toml++ is the system's compiled library (Debian: libtomlplusplus-dev), as its CMake target says,
// also where the target's flags are not seen (the fuzz build compiles this file on its own): its
// parser then stays uninstrumented, like every other library a fuzz target links.
#ifndef TOML_HEADER_ONLY
#define TOML_HEADER_ONLY 0
#define TOML_SHARED_LIB 1
#endif
#include <toml++/toml.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/small_file.hpp"

namespace mrc::sim {

namespace {

// --- TOML reading with file:line errors ------------------------------------------------------------

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const toml::node* n, const std::string& msg) const {
    std::ostringstream o;
    o << file_;
    if (n != nullptr && n->source().begin.line > 0) o << ':' << n->source().begin.line;
    o << ": " << msg;
    throw ScenarioError(o.str());
  }
  /// Rejects keys of `t` not in `allowed`.
  void keys(const toml::table& t, const std::string& where,
            std::initializer_list<const char*> allowed) const {
    const std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto& [k, v] : t) {
      if (ok.count(std::string(k.str())) == 0)
        fail(&v, "unknown key '" + std::string(k.str()) + "' in " + where);
    }
  }
  const toml::table* table(const toml::table& t, const char* key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return nullptr;
    if (!n->is_table()) fail(n, std::string("'") + key + "' must be a table");
    return n->as_table();
  }
  double num(const toml::table& t, const char* key, double def, double lo, double hi) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return def;
    double v;
    if (const auto* i = n->as_integer()) {
      v = static_cast<double>(i->get());
    } else if (const auto* f = n->as_floating_point()) {
      v = f->get();
    } else {
      fail(n, std::string("'") + key + "' must be a number");
    }
    if (!(v >= lo && v <= hi)) {
      std::ostringstream o;
      o << "'" << key << "' = " << v << " out of range [" << lo << ", " << hi << "]";
      fail(n, o.str());
    }
    return v;
  }
  std::uint64_t uint(const toml::table& t, const char* key, std::uint64_t def, std::uint64_t lo,
                     std::uint64_t hi) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return def;
    const auto* i = n->as_integer();
    if (i == nullptr) fail(n, std::string("'") + key + "' must be an integer");
    if (i->get() < 0 || static_cast<std::uint64_t>(i->get()) < lo ||
        static_cast<std::uint64_t>(i->get()) > hi)
      fail(n, std::string("'") + key + "' = " + std::to_string(i->get()) + " out of range [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<std::uint64_t>(i->get());
  }
  bool boolean(const toml::table& t, const char* key, bool def) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return def;
    const auto* b = n->as_boolean();
    if (b == nullptr) fail(n, std::string("'") + key + "' must be true or false");
    return b->get();
  }
  std::string str(const toml::table& t, const char* key, const std::string& def) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return def;
    const auto* s = n->as_string();
    if (s == nullptr) fail(n, std::string("'") + key + "' must be a string");
    return s->get();
  }
  const toml::node* node(const toml::table& t, const char* key) const { return t.get(key); }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

std::uint32_t u32(std::uint64_t v) {
  return static_cast<std::uint32_t>(v);
}

sim::LinkDir parse_dir(const Reader& rd, const toml::table& f) {
  const std::string d = rd.str(f, "dir", "both");
  if (d == "both") return sim::LinkDir::kBoth;
  if (d == "up") return sim::LinkDir::kAtoB;
  if (d == "down") return sim::LinkDir::kBtoA;
  rd.fail(rd.node(f, "dir"), "'dir' must be \"both\", \"up\" (from the host / lower tier) or \"down\"");
}

/// The link a [[faults]] entry names: `link` (id), `host` + `plane`, or `tier` + `nth` + `plane`
/// (the nth link of that tier in that plane: 1 = ToR/leaf up, 2 = aggregation-core).
std::uint32_t fault_link(const Reader& rd, const toml::table& f, const sim::Topology& topo) {
  if (rd.node(f, "link") != nullptr) return u32(rd.uint(f, "link", 0, 0, topo.links.size() - 1));
  const auto plane = u32(rd.uint(f, "plane", 0, 0, topo.planes - 1));
  if (rd.node(f, "host") != nullptr)
    return topo.host_link(u32(rd.uint(f, "host", 0, 0, topo.hosts - 1)), plane);
  if (rd.node(f, "tier") != nullptr) {
    const auto tier = static_cast<std::uint8_t>(rd.uint(f, "tier", 1, 0, 2));
    const std::uint64_t nth = rd.uint(f, "nth", 0, 0, ~0ull);
    std::uint64_t seen = 0;
    for (std::uint32_t i = 0; i < topo.links.size(); ++i) {
      const sim::TopoLink& l = topo.links[i];
      if (l.tier == tier && topo.nodes[l.b].plane == plane && seen++ == nth) return i;
    }
    rd.fail(rd.node(f, "nth"), "no link " + std::to_string(nth) + " of tier " + std::to_string(tier) +
                                   " in plane " + std::to_string(plane));
  }
  rd.fail(&f, "a fault needs 'link', 'host' (+ 'plane') or 'tier' + 'nth' (+ 'plane') to name its link");
}

/// Gray loss with probability p on every host link of every plane, in direction `dir`.
void all_host_loss(const sim::Topology& topo, double p, sim::LinkDir dir, std::vector<sim::LinkFault>& out) {
  for (const std::uint32_t l : topo.host_links)
    out.push_back(sim::LinkFault{0, l, sim::LinkFaultKind::kLoss, p, dir});
}

struct TaggedFault {
  std::string set;  ///< empty: applies to every variant
  sim::LinkFault f;
};

void parse_faults(const Reader& rd, const toml::table& root, const sim::Topology& topo,
                  std::vector<TaggedFault>& out, std::uint64_t max_faults) {
  const toml::node* fn = rd.node(root, "faults");
  if (fn == nullptr) return;
  const toml::array* fa = fn->as_array();
  if (fa == nullptr) rd.fail(fn, "'faults' must be an array of tables ([[faults]])");
  for (const toml::node& e : *fa) {
    const toml::table* f = e.as_table();
    if (f == nullptr) rd.fail(&e, "each [[faults]] entry must be a table");
    rd.keys(*f, "[[faults]]",
            {"kind", "at_us", "for_us", "link", "host", "plane", "tier", "nth", "all_hosts", "switch",
             "rate_gbps", "loss", "dir", "down_us", "up_us", "count", "set"});
    const std::string set = rd.str(*f, "set", "");
    const auto at = static_cast<Time>(rd.num(*f, "at_us", 0, 0, 1e9) * 1000);
    const std::string fk = rd.str(*f, "kind", "down");
    auto push = [&](const sim::LinkFault& lf) {
      if (out.size() >= max_faults)
        rd.fail(f, "more than " + std::to_string(max_faults) + " link faults (the limit)");
      out.push_back(TaggedFault{set, lf});
    };
    auto need = [&](const char* key, const std::string& why) {
      if (rd.node(*f, key) == nullptr) rd.fail(f, "fault kind '" + fk + "' needs '" + key + "'" + why);
    };
    if (fk == "reboot") {
      need("switch", " (switch node id)");
      need("for_us", " (how long it is down)");
      const auto node = u32(rd.uint(*f, "switch", 0, topo.hosts, topo.num_nodes() - 1));
      const auto d = static_cast<Duration>(rd.num(*f, "for_us", 0, 0.001, 1e9) * 1000);
      for (const sim::LinkFault& lf : sim::switch_reboot(topo, node, at, d)) push(lf);
      continue;
    }
    if (fk == "loss" && rd.boolean(*f, "all_hosts", false)) {
      need("loss", " (probability 0..1)");
      std::vector<sim::LinkFault> v;
      all_host_loss(topo, rd.num(*f, "loss", 0, 0, 1), parse_dir(rd, *f), v);
      for (sim::LinkFault& lf : v) {
        lf.at = at;
        push(lf);
      }
      continue;
    }
    sim::LinkFault lf;
    lf.at = at;
    lf.link = fault_link(rd, *f, topo);
    lf.dir = parse_dir(rd, *f);
    if (fk == "flap") {
      need("down_us", "");
      need("up_us", "");
      need("count", "");
      for (const sim::LinkFault& x :
           sim::link_flaps(lf.link, at, static_cast<Duration>(rd.num(*f, "down_us", 0, 0.001, 1e9) * 1000),
                           static_cast<Duration>(rd.num(*f, "up_us", 0, 0.001, 1e9) * 1000),
                           u32(rd.uint(*f, "count", 1, 1, 100000))))
        push(x);
      continue;
    }
    if (fk == "down") {
      lf.kind = sim::LinkFaultKind::kDown;
    } else if (fk == "rate") {
      lf.kind = sim::LinkFaultKind::kRate;
      need("rate_gbps", "");
      lf.value = rd.num(*f, "rate_gbps", 0, 0.001, 1e5) * 1e9;
    } else if (fk == "loss") {
      lf.kind = sim::LinkFaultKind::kLoss;
      need("loss", " (probability 0..1)");
      lf.value = rd.num(*f, "loss", 0, 0, 1);
    } else {
      rd.fail(rd.node(*f, "kind"), "fault kind '" + fk + "' unknown (down | rate | loss | flap | reboot)");
    }
    push(lf);
    if (const toml::node* dn = rd.node(*f, "for_us")) {  // revert after the duration
      const double d = rd.num(*f, "for_us", 0, 0, 1e9);
      if (d <= 0) rd.fail(dn, "'for_us' must be > 0");
      sim::LinkFault back = lf;
      back.at = lf.at + static_cast<Time>(d * 1000);
      if (lf.kind == sim::LinkFaultKind::kDown) back.kind = sim::LinkFaultKind::kUp;
      if (lf.kind == sim::LinkFaultKind::kRate) back.value = topo.links[lf.link].rate_bps;
      if (lf.kind == sim::LinkFaultKind::kLoss) back.value = 0;
      push(back);
    }
  }
}

/// [transport] keys, also allowed in a [[variants]] entry (which starts from the scenario's).
void parse_transport(const Reader& rd, const toml::table& t, sim::RunConfig& rc, const char* kind_key) {
  if (const toml::node* k = rd.node(t, kind_key)) {
    const std::string tk = rd.str(t, kind_key, "mrc");
    if (tk == "mrc") {
      rc.transport = sim::Transport::kMrc;
    } else if (tk == "roce") {
      rc.transport = sim::Transport::kRoce;
    } else {
      rd.fail(k, "transport '" + tk + "' unknown (mrc | roce)");
    }
  }
  rc.evs_per_plane = u32(rd.uint(t, "evs", rc.evs_per_plane, 1, 4096));
  rc.nscc = rd.boolean(t, "nscc", rc.nscc);
  rc.pmtu = u32(rd.uint(t, "pmtu", rc.pmtu, 256, 4096));
  if ((rc.pmtu & (rc.pmtu - 1)) != 0) rd.fail(rd.node(t, "pmtu"), "'pmtu' must be a power of two");
  rc.qps_per_peer = u32(rd.uint(t, "qps_per_peer", rc.qps_per_peer, 1, 256));
  rc.roce.dcqcn = rd.boolean(t, "dcqcn", rc.roce.dcqcn);
  rc.roce.mtu = u32(rd.uint(t, "roce_mtu", rc.roce.mtu, 256, 9000));
  rc.roce.rto =
      static_cast<Duration>(rd.num(t, "rto_us", static_cast<double>(rc.roce.rto) / 1000, 1, 1e9) * 1000);
  rc.roce.retry_limit = u32(rd.uint(t, "retry_limit", rc.roce.retry_limit, 0, 1000000));
  rc.fabric.queue.pfc = rd.boolean(t, "pfc", rc.fabric.queue.pfc);
}

}  // namespace

std::string default_label(const sim::RunConfig& rc) {
  std::ostringstream o;
  if (rc.transport == sim::Transport::kMrc) {
    o << "MRC " << rc.evs_per_plane * 1 << " EV/plane";
  } else {
    o << "RoCE" << (rc.roce.dcqcn ? "+DCQCN" : "") << (rc.fabric.queue.pfc ? "+PFC" : "");
  }
  if (rc.qps_per_peer > 1) o << " x" << rc.qps_per_peer << " QPs";
  return o.str();
}

Scenario parse_scenario(const std::string& text, const std::string& name, const ScenarioLimits& limits,
                        const ScenarioOverrides& ov) {
  const std::string& path = name;
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    std::ostringstream o;
    o << path << ':' << e.source().begin.line << ": " << e.description();
    throw ScenarioError(o.str());
  }
  const Reader rd(path);
  rd.keys(root, "scenario",
          {"name", "seed", "limit_us", "topology", "queue", "workload", "transport", "routing", "faults",
           "variants", "measure", "output"});
  Scenario sc;
  sim::RunConfig base;
  sc.name = rd.str(root, "name", std::filesystem::path(path).stem().string());
  base.seed = rd.uint(root, "seed", 1, 0, ~0ull);
  if (ov.has_seed) base.seed = ov.seed;
  base.fabric.seed = base.seed;
  base.limit = static_cast<Time>(rd.num(root, "limit_us", 100000, 1, 1e9) * 1000);

  // [topology]
  const toml::table* t = rd.table(root, "topology");
  if (t == nullptr) rd.fail(&root, "missing [topology]");
  rd.keys(*t, "[topology]", {"kind", "k", "radix", "planes", "rate_gbps", "latency_ns"});
  const std::string kind = rd.str(*t, "kind", "fattree");
  const double rate = rd.num(*t, "rate_gbps", 100, 0.001, 1e5) * 1e9;
  const auto lat = static_cast<Duration>(rd.num(*t, "latency_ns", 1000, 0, 1e9));
  const auto planes = u32(rd.uint(*t, "planes", 1, 1, 32));
  // The fabric is built below: refuse one above the limit first.
  const auto check_ports = [&](std::uint64_t hosts) {
    if (hosts * planes > limits.max_host_ports)
      rd.fail(t, "topology of " + std::to_string(hosts) + " hosts x " + std::to_string(planes) +
                     " planes is above the limit of " + std::to_string(limits.max_host_ports) +
                     " host ports");
  };
  try {
    if (kind == "fattree") {
      sim::FatTreeConfig c;
      c.k = u32(rd.uint(*t, "k", 8, 2, 128));
      if (c.k % 2 != 0) rd.fail(rd.node(*t, "k"), "'k' must be even");
      check_ports(std::uint64_t{c.k} * c.k * c.k / 4);
      c.planes = planes;
      c.rate_bps = rate;
      c.latency = lat;
      sc.topo = sim::make_fat_tree(c);
    } else if (kind == "clos") {
      sim::ClosConfig c;
      c.radix = u32(rd.uint(*t, "radix", 16, 2, 1024));
      if (c.radix % 2 != 0) rd.fail(rd.node(*t, "radix"), "'radix' must be even");
      check_ports(std::uint64_t{c.radix} * c.radix / 2);
      c.planes = planes;
      c.rate_bps = rate;
      c.latency = lat;
      sc.topo = sim::make_clos2(c);
    } else {
      rd.fail(rd.node(*t, "kind"), "topology kind '" + kind + "' unknown (fattree | clos)");
    }
  } catch (const std::invalid_argument& e) {
    rd.fail(t, e.what());
  }

  // [queue]
  if (const toml::table* q = rd.table(root, "queue")) {
    rd.keys(*q, "[queue]",
            {"data_bytes", "control_bytes", "trimming", "trim_queued", "ecn_kmin", "ecn_kmax", "ecn_last_hop",
             "pfc_xoff", "pfc_xon"});
    sim::QueueConfig& qc = base.fabric.queue;
    qc.data_bytes = rd.uint(*q, "data_bytes", qc.data_bytes, 1, 1ull << 40);
    qc.control_bytes = rd.uint(*q, "control_bytes", qc.control_bytes, 0, 1ull << 40);
    qc.trimming = rd.boolean(*q, "trimming", qc.trimming);
    qc.trim_queued = rd.num(*q, "trim_queued", qc.trim_queued, 0, 1);
    qc.ecn_kmin = rd.uint(*q, "ecn_kmin", qc.ecn_kmin, 0, 1ull << 40);
    qc.ecn_kmax = rd.uint(*q, "ecn_kmax", qc.ecn_kmax, 0, 1ull << 40);
    qc.ecn_last_hop = rd.boolean(*q, "ecn_last_hop", qc.ecn_last_hop);
    qc.pfc_xoff = rd.uint(*q, "pfc_xoff", qc.pfc_xoff, 1, 1ull << 40);
    qc.pfc_xon = rd.uint(*q, "pfc_xon", qc.pfc_xon, 1, 1ull << 40);
    if (qc.ecn_kmax > 0 && qc.ecn_kmax < qc.ecn_kmin) rd.fail(q, "ecn_kmax must be >= ecn_kmin");
    if (qc.pfc_xon > qc.pfc_xoff) rd.fail(q, "pfc_xon must be <= pfc_xoff");
  }

  // [routing]
  if (const toml::table* r = rd.table(root, "routing")) {
    rd.keys(*r, "[routing]", {"reconverge_us"});
    base.fabric.reconverge_delay = static_cast<Duration>(rd.num(*r, "reconverge_us", 0, 0, 1e9) * 1000);
  }

  // [transport]
  if (const toml::table* tr = rd.table(root, "transport")) {
    rd.keys(
        *tr, "[transport]",
        {"kind", "evs", "nscc", "pmtu", "qps_per_peer", "dcqcn", "roce_mtu", "rto_us", "retry_limit", "pfc"});
    parse_transport(rd, *tr, base, "kind");
  }

  // [workload]
  const toml::table* w = rd.table(root, "workload");
  if (w == nullptr) rd.fail(&root, "missing [workload]");
  rd.keys(*w, "[workload]",
          {"kind", "cm", "bytes", "hosts", "senders", "victim", "victim_bytes", "victim_dst", "seed",
           "stride", "rings"});
  const std::string wk = rd.str(*w, "kind", "permutation");
  const std::uint64_t bytes = rd.uint(*w, "bytes", 2000000, 1, 1ull << 40);
  const auto hosts = u32(rd.uint(*w, "hosts", sc.topo.hosts, 2, sc.topo.hosts));
  const std::uint64_t wseed = rd.uint(*w, "seed", base.seed, 0, ~0ull);
  // Connections a generated workload has, checked before it is built.
  const auto check_conns = [&](std::uint64_t n) {
    if (n > limits.max_connections)
      rd.fail(w, "workload '" + wk + "' on " + std::to_string(hosts) + " hosts has " + std::to_string(n) +
                     " connections, above the limit of " + std::to_string(limits.max_connections));
  };
  try {
    if (wk == "cm") {
      sc.workload = Workload::kCm;
      const toml::node* cn = rd.node(*w, "cm");
      if (cn == nullptr) rd.fail(w, "workload kind 'cm' needs 'cm' = path of an htsim .cm file");
      if (!limits.read_files) rd.fail(cn, "workload kind 'cm' reads a file, which is not allowed here");
      std::filesystem::path cp = rd.str(*w, "cm", "");
      if (cp.is_relative()) cp = std::filesystem::path(path).parent_path() / cp;
      try {
        sc.matrix = sim::load_cm(cp.string(), bytes);
      } catch (const std::exception& e) {
        rd.fail(cn, e.what());
      }
      if (sc.matrix.nodes > sc.topo.hosts)
        rd.fail(cn, "matrix has " + std::to_string(sc.matrix.nodes) + " nodes, topology " +
                        std::to_string(sc.topo.hosts) + " hosts");
    } else if (wk == "permutation") {
      sc.workload = Workload::kPermutation;
      check_conns(hosts);
      sc.matrix = sim::make_permutation(hosts, bytes, wseed);
    } else if (wk == "incast") {
      sc.workload = Workload::kIncast;
      if (hosts < 4) rd.fail(w, "incast needs at least 4 hosts");
      if (rd.node(*w, "senders") == nullptr && hosts - 2 < 7)
        rd.fail(w, "incast on " + std::to_string(hosts) + " hosts needs 'senders' (1.." +
                       std::to_string(hosts - 2) + "; the default, 7, needs 9 hosts)");
      const auto senders = u32(rd.uint(*w, "senders", 7, 1, hosts - 2));
      const bool victim = rd.boolean(*w, "victim", true);
      const std::uint64_t vb = rd.uint(*w, "victim_bytes", bytes, 1, 1ull << 40);
      const auto vd = u32(rd.uint(*w, "victim_dst", hosts - 1, senders + 1, hosts - 1));
      sc.matrix = sim::make_incast(hosts, senders, bytes, victim, vb, vd);
      if (victim) sc.victim = senders;
    } else if (wk == "all_to_all") {
      sc.workload = Workload::kAllToAll;
      check_conns(std::uint64_t{hosts} * (hosts - 1));
      sc.matrix = sim::make_all_to_all(hosts, bytes);
    } else if (wk == "ring_allreduce") {
      sc.workload = Workload::kRing;
      check_conns(2 * std::uint64_t{hosts} * (hosts - 1));
      sc.matrix = sim::make_ring_allreduce(hosts, bytes);
      sc.ring_nodes = hosts;
      sc.ring_bytes = sc.matrix.conns.front().bytes * hosts;
    } else if (wk == "ring_exchange") {
      // One large step of a ring collective: nodes 0, stride, 2 stride, ... < hosts, each sending
      // `bytes` to the next (stride = hosts per leaf puts one node on each leaf). `rings` rings side
      // by side, ring r on nodes r, r + stride, ... (rings = stride = hosts per leaf: every host
      // sends to the host of its index on the next leaf, one step of a hierarchical all-reduce's
      // phase across leaves).
      sc.workload = Workload::kRingExchange;
      const auto stride = u32(rd.uint(*w, "stride", 1, 1, hosts / 2));
      const auto rings = u32(rd.uint(*w, "rings", 1, 1, stride));
      const std::uint32_t n = hosts / stride;
      sc.matrix.nodes = hosts;
      for (std::uint32_t r = 0; r < rings; ++r)
        for (std::uint32_t j = 0; j < n; ++j)
          sc.matrix.conns.push_back(
              sim::ConnSpec{j * stride + r, ((j + 1) % n) * stride + r, r * n + j + 1, 0, bytes});
    } else {
      rd.fail(rd.node(*w, "kind"), "workload kind '" + wk +
                                       "' unknown (cm | permutation | incast | all_to_all | ring_allreduce | "
                                       "ring_exchange)");
    }
  } catch (const std::invalid_argument& e) {  // a generator refusing its arguments
    rd.fail(w, e.what());
  }

  std::vector<TaggedFault> faults;
  parse_faults(rd, root, sc.topo, faults, limits.max_faults);
  std::set<std::string> sets;
  for (const TaggedFault& f : faults)
    if (!f.set.empty()) sets.insert(f.set);

  // [measure]
  if (const toml::table* ms = rd.table(root, "measure")) {
    rd.keys(*ms, "[measure]", {"fail_at_us", "end_us", "window_us", "settle", "flows"});
    if (const toml::node* fl = rd.node(*ms, "flows")) {
      const toml::array* a = fl->as_array();
      if (a == nullptr) rd.fail(fl, "'flows' must be an array of connection indices");
      for (const toml::node& n : *a) {
        const auto* i = n.as_integer();
        if (i == nullptr || i->get() < 0 || static_cast<std::size_t>(i->get()) >= sc.matrix.conns.size())
          rd.fail(&n, "'flows' entries must be connection indices of the workload");
        sc.measure_flows.push_back(static_cast<std::uint32_t>(i->get()));
      }
    }
    if (rd.node(*ms, "fail_at_us") == nullptr || rd.node(*ms, "end_us") == nullptr)
      rd.fail(ms, "[measure] needs 'fail_at_us' and 'end_us'");
    sc.fail_at_us = rd.num(*ms, "fail_at_us", 0, 0, 1e9);
    sc.measure_end_us = rd.num(*ms, "end_us", 0, sc.fail_at_us + 1e-3, 1e9);
    sc.window_us = rd.num(*ms, "window_us", 0, 0, 1e9);
    sc.settle = rd.num(*ms, "settle", 0.9, 0.01, 1);
  }

  // [[variants]]: each starts from the scenario's transport and applies the untagged faults plus
  // the sets it names.
  std::uint64_t variant_faults = 0;  // over all variants, at most limits.max_faults
  const auto add_faults = [&](const toml::node* at, std::uint64_t n) {
    variant_faults += n;
    if (variant_faults > limits.max_faults)
      rd.fail(at, "the variants have more than " + std::to_string(limits.max_faults) +
                      " link faults in all (the limit)");
  };
  auto make_variant = [&](const toml::table* v) {
    Variant out;
    out.run = base;
    std::set<std::string> use;
    if (v != nullptr) {
      rd.keys(*v, "[[variants]]",
              {"label", "transport", "evs", "nscc", "pmtu", "qps_per_peer", "dcqcn", "roce_mtu", "rto_us",
               "retry_limit", "pfc", "loss", "faults"});
      parse_transport(rd, *v, out.run, "transport");
      if (const toml::node* fs = rd.node(*v, "faults")) {
        const toml::array* a = fs->as_array();
        if (a == nullptr) rd.fail(fs, "'faults' must be an array of fault set names");
        for (const toml::node& n : *a) {
          const auto* s = n.as_string();
          if (s == nullptr || sets.count(s->get()) == 0)
            rd.fail(&n, "unknown fault set (name one used in 'set')");
          use.insert(s->get());
        }
      }
      if (rd.node(*v, "loss") != nullptr) {
        // Loss on the way out of every NIC: each packet (data and ACK) crosses one lossy hop.
        add_faults(rd.node(*v, "loss"), sc.topo.host_links.size());
        all_host_loss(sc.topo, rd.num(*v, "loss", 0, 0, 1), sim::LinkDir::kAtoB, out.run.faults);
      }
    }
    std::uint64_t tagged = 0;
    for (const TaggedFault& f : faults) tagged += f.set.empty() || use.count(f.set) != 0 ? 1 : 0;
    add_faults(v != nullptr ? static_cast<const toml::node*>(v) : &root, tagged);
    for (const TaggedFault& f : faults)
      if (f.set.empty() || use.count(f.set) != 0) out.run.faults.push_back(f.f);
    out.label = v != nullptr ? rd.str(*v, "label", default_label(out.run)) : default_label(out.run);
    if (sc.fail_at_us >= 0) {
      out.run.sample_interval = 1;  // resolved to the window once base RTT is known
      out.run.sample_conns = sc.measure_flows;
    }
    return out;
  };
  if (const toml::node* vn = rd.node(root, "variants")) {
    const toml::array* va = vn->as_array();
    if (va == nullptr || va->empty())
      rd.fail(vn, "'variants' must be a non-empty array of tables ([[variants]])");
    for (const toml::node& e : *va) {
      const toml::table* v = e.as_table();
      if (v == nullptr) rd.fail(&e, "each [[variants]] entry must be a table");
      sc.variants.push_back(make_variant(v));
    }
  } else {
    sc.variants.push_back(make_variant(nullptr));
  }

  // [output]
  if (const toml::table* o = rd.table(root, "output")) {
    rd.keys(*o, "[output]", {"json", "csv"});
    sc.json_path = rd.str(*o, "json", "");
    sc.csv_path = rd.str(*o, "csv", "");
  }
  return sc;
}

Scenario load_scenario(const std::string& path, const ScenarioLimits& limits, const ScenarioOverrides& ov) {
  // toml++ reads a directory or an unreadable file as an empty document; say what is wrong instead
  // of "missing [topology]". A scenario is a page of TOML (its matrix is a .cm file of its own).
  std::string text, err;
  if (!read_small_file(path, "a scenario .toml file, e.g. scenarios/perm128.toml", kScenarioMaxBytes, text,
                       err))
    throw ScenarioError(err);
  return parse_scenario(text, path, limits, ov);
}

}  // namespace mrc::sim
