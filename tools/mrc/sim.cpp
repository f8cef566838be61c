// `mrc sim [SCENARIO.toml]`: runs a packet-level fabric scenario (src/sim/run.hpp) described by a
// TOML file (schema: scenarios/README.md). Without a scenario it runs a built-in default (perm-128,
// k=8 fat tree) twice, MRC spraying over 128 EVs and MRC on a single EV (flow ECMP), and prints the
// comparison; the RoCEv2 baseline column is added when src/sim/roce.* lands.
#include <sys/resource.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/cm.hpp"
#include "sim/run.hpp"
#include "sim/topology.hpp"

namespace mrc::tools {

namespace {

struct SimOptions {
  std::string scenario;
  bool json = false;
  bool no_progress = false;
};
SimOptions g_opt;

/// A scenario error that names the file and line.
struct ScenarioError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Scenario {
  std::string name = "default";
  sim::Topology topo;
  sim::ConnMatrix matrix;
  sim::RunConfig run;
  std::vector<std::uint32_t> victims;  ///< flow indices reported separately (incast victim)
  std::string json_path, csv_path;
};

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

sim::ConnMatrix make_incast(std::uint32_t hosts, std::uint32_t senders, std::uint64_t bytes, bool victim,
                            std::vector<std::uint32_t>& victims) {
  sim::ConnMatrix m;
  m.nodes = hosts;
  // Senders 1..N to host 0; the victim flow goes from the last host to host 1, which shares the
  // incast target's leaf (and, on the way down, its congested aggregation/core links).
  for (std::uint32_t i = 1; i <= senders; ++i) m.conns.push_back(sim::ConnSpec{i, 0, i, 0, bytes});
  if (victim) {
    victims.push_back(static_cast<std::uint32_t>(m.conns.size()));
    m.conns.push_back(sim::ConnSpec{hosts - 1, 1, senders + 1, 0, bytes});
  }
  return m;
}

Scenario load_scenario(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream o;
    o << path << ':' << e.source().begin.line << ": " << e.description();
    throw ScenarioError(o.str());
  }
  const Reader rd(path);
  rd.keys(root, "scenario",
          {"name", "seed", "limit_us", "topology", "queue", "workload", "transport", "routing", "faults",
           "output"});
  Scenario sc;
  sc.name = rd.str(root, "name", std::filesystem::path(path).stem().string());
  sc.run.seed = rd.uint(root, "seed", 1, 0, ~0ull);
  sc.run.fabric.seed = sc.run.seed;
  sc.run.limit = static_cast<Time>(rd.num(root, "limit_us", 100000, 1, 1e9) * 1000);

  // [topology]
  const toml::table* t = rd.table(root, "topology");
  if (t == nullptr) rd.fail(&root, "missing [topology]");
  rd.keys(*t, "[topology]", {"kind", "k", "radix", "planes", "rate_gbps", "latency_ns"});
  const std::string kind = rd.str(*t, "kind", "fattree");
  const double rate = rd.num(*t, "rate_gbps", 100, 0.001, 1e5) * 1e9;
  const auto lat = static_cast<Duration>(rd.num(*t, "latency_ns", 1000, 0, 1e9));
  const auto planes = u32(rd.uint(*t, "planes", 1, 1, 32));
  try {
    if (kind == "fattree") {
      sim::FatTreeConfig c;
      c.k = u32(rd.uint(*t, "k", 8, 2, 128));
      if (c.k % 2 != 0) rd.fail(rd.node(*t, "k"), "'k' must be even");
      c.planes = planes;
      c.rate_bps = rate;
      c.latency = lat;
      sc.topo = sim::make_fat_tree(c);
    } else if (kind == "clos") {
      sim::ClosConfig c;
      c.radix = u32(rd.uint(*t, "radix", 16, 2, 1024));
      if (c.radix % 2 != 0) rd.fail(rd.node(*t, "radix"), "'radix' must be even");
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
            {"data_bytes", "control_bytes", "trimming", "ecn_kmin", "ecn_kmax", "ecn_last_hop"});
    sim::QueueConfig& qc = sc.run.fabric.queue;
    qc.data_bytes = rd.uint(*q, "data_bytes", qc.data_bytes, 1, 1ull << 40);
    qc.control_bytes = rd.uint(*q, "control_bytes", qc.control_bytes, 0, 1ull << 40);
    qc.trimming = rd.boolean(*q, "trimming", qc.trimming);
    qc.ecn_kmin = rd.uint(*q, "ecn_kmin", qc.ecn_kmin, 0, 1ull << 40);
    qc.ecn_kmax = rd.uint(*q, "ecn_kmax", qc.ecn_kmax, 0, 1ull << 40);
    qc.ecn_last_hop = rd.boolean(*q, "ecn_last_hop", qc.ecn_last_hop);
    if (qc.ecn_kmax > 0 && qc.ecn_kmax < qc.ecn_kmin) rd.fail(q, "ecn_kmax must be >= ecn_kmin");
  }

  // [routing]
  if (const toml::table* r = rd.table(root, "routing")) {
    rd.keys(*r, "[routing]", {"reconverge_us"});
    sc.run.fabric.reconverge_delay = static_cast<Duration>(rd.num(*r, "reconverge_us", 0, 0, 1e9) * 1000);
  }

  // [transport]
  if (const toml::table* tr = rd.table(root, "transport")) {
    rd.keys(*tr, "[transport]", {"kind", "evs", "nscc", "pmtu"});
    const std::string tk = rd.str(*tr, "kind", "mrc");
    if (tk == "roce") {
      rd.fail(rd.node(*tr, "kind"),
              "transport 'roce' is not available yet (the RoCEv2 baseline in src/sim/roce.* has not landed)");
    }
    if (tk != "mrc") rd.fail(rd.node(*tr, "kind"), "transport kind '" + tk + "' unknown (mrc | roce)");
    sc.run.evs_per_plane = u32(rd.uint(*tr, "evs", 128, 1, 4096));
    sc.run.nscc = rd.boolean(*tr, "nscc", true);
    sc.run.pmtu = u32(rd.uint(*tr, "pmtu", 4096, 256, 4096));
  }

  // [workload]
  const toml::table* w = rd.table(root, "workload");
  if (w == nullptr) rd.fail(&root, "missing [workload]");
  rd.keys(*w, "[workload]", {"kind", "cm", "bytes", "hosts", "senders", "victim", "seed"});
  const std::string wk = rd.str(*w, "kind", "permutation");
  const std::uint64_t bytes = rd.uint(*w, "bytes", 2000000, 1, 1ull << 31);
  const auto hosts = u32(rd.uint(*w, "hosts", sc.topo.hosts, 2, sc.topo.hosts));
  const std::uint64_t wseed = rd.uint(*w, "seed", sc.run.seed, 0, ~0ull);
  if (wk == "cm") {
    const toml::node* cn = rd.node(*w, "cm");
    if (cn == nullptr) rd.fail(w, "workload kind 'cm' needs 'cm' = path of an htsim .cm file");
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
    sc.matrix = sim::make_permutation(hosts, bytes, wseed);
  } else if (wk == "incast") {
    const auto senders = u32(rd.uint(*w, "senders", 8, 1, hosts - 3));
    sc.matrix = make_incast(hosts, senders, bytes, rd.boolean(*w, "victim", true), sc.victims);
  } else if (wk == "all_to_all") {
    sc.matrix.nodes = hosts;
    std::uint32_t id = 1;
    for (std::uint32_t s = 0; s < hosts; ++s)
      for (std::uint32_t d = 0; d < hosts; ++d)
        if (s != d) sc.matrix.conns.push_back(sim::ConnSpec{s, d, id++, 0, bytes});
  } else {
    rd.fail(rd.node(*w, "kind"),
            "workload kind '" + wk + "' unknown (cm | permutation | incast | all_to_all)");
  }

  // [[faults]]
  if (const toml::node* fn = rd.node(root, "faults")) {
    const toml::array* fa = fn->as_array();
    if (fa == nullptr) rd.fail(fn, "'faults' must be an array of tables ([[faults]])");
    for (const toml::node& e : *fa) {
      const toml::table* f = e.as_table();
      if (f == nullptr) rd.fail(&e, "each [[faults]] entry must be a table");
      rd.keys(*f, "[[faults]]", {"kind", "at_us", "for_us", "link", "host", "plane", "rate_gbps", "loss"});
      sim::LinkFault lf;
      lf.at = static_cast<Time>(rd.num(*f, "at_us", 0, 0, 1e9) * 1000);
      if (rd.node(*f, "link") != nullptr) {
        lf.link = u32(rd.uint(*f, "link", 0, 0, sc.topo.links.size() - 1));
      } else if (rd.node(*f, "host") != nullptr) {
        const auto h = u32(rd.uint(*f, "host", 0, 0, sc.topo.hosts - 1));
        lf.link = sc.topo.host_link(h, u32(rd.uint(*f, "plane", 0, 0, sc.topo.planes - 1)));
      } else {
        rd.fail(f, "a fault needs 'link' (link id) or 'host' (+ 'plane') to name its link");
      }
      const std::string fk = rd.str(*f, "kind", "down");
      if (fk == "down") {
        lf.kind = sim::LinkFaultKind::kDown;
      } else if (fk == "rate") {
        lf.kind = sim::LinkFaultKind::kRate;
        if (rd.node(*f, "rate_gbps") == nullptr) rd.fail(f, "fault kind 'rate' needs 'rate_gbps'");
        lf.value = rd.num(*f, "rate_gbps", 0, 0.001, 1e5) * 1e9;
      } else if (fk == "loss") {
        lf.kind = sim::LinkFaultKind::kLoss;
        if (rd.node(*f, "loss") == nullptr) rd.fail(f, "fault kind 'loss' needs 'loss' (probability 0..1)");
        lf.value = rd.num(*f, "loss", 0, 0, 1);
      } else {
        rd.fail(rd.node(*f, "kind"), "fault kind '" + fk + "' unknown (down | rate | loss)");
      }
      sc.run.faults.push_back(lf);
      if (const toml::node* dn = rd.node(*f, "for_us")) {  // revert after the duration
        const double d = rd.num(*f, "for_us", 0, 0, 1e9);
        if (d <= 0) rd.fail(dn, "'for_us' must be > 0");
        sim::LinkFault back = lf;
        back.at = lf.at + static_cast<Time>(d * 1000);
        if (lf.kind == sim::LinkFaultKind::kDown) back.kind = sim::LinkFaultKind::kUp;
        if (lf.kind == sim::LinkFaultKind::kRate) back.value = sc.topo.links[lf.link].rate_bps;
        if (lf.kind == sim::LinkFaultKind::kLoss) back.value = 0;
        sc.run.faults.push_back(back);
      }
    }
  }

  // [output]
  if (const toml::table* o = rd.table(root, "output")) {
    rd.keys(*o, "[output]", {"json", "csv"});
    sc.json_path = rd.str(*o, "json", "");
    sc.csv_path = rd.str(*o, "csv", "");
  }
  return sc;
}

// --- reporting -------------------------------------------------------------------------------------

double goodput_gbps(const sim::FlowResult& f) {
  return f.finish == kNever || f.fct_us <= 0 ? 0 : static_cast<double>(f.conn.bytes) * 8 / (f.fct_us * 1e3);
}

nlohmann::json to_json(const Scenario& sc, const sim::RunResult& r, bool flows) {
  nlohmann::json j;
  j["scenario"] = sc.name;
  j["topology"] = sc.topo.name;
  j["hosts"] = sc.topo.hosts;
  j["flows"] = r.flows.size();
  j["finished"] = r.finished;
  j["fct_us"] = {{"min", r.fct_min}, {"p50", r.fct_p50}, {"p99", r.fct_p99}, {"max", r.fct_max}};
  j["packets"] = {{"data", r.tx_data}, {"rtx", r.tx_rtx}, {"sack", r.tx_sack}, {"nack", r.tx_nack}};
  j["retransmits_by_cause"] = {
      {"nack", r.rtx_nack}, {"loss", r.rtx_loss}, {"timeout", r.rtx_timeout}, {"port", r.rtx_port}};
  j["timeouts"] = r.timeouts;
  j["ev_transitions"] = r.ev_transitions;
  j["fabric"] = {{"trims", r.net.trimmed},
                 {"ecn_marks", r.net.ecn_marked},
                 {"drops", r.net.dropped()},
                 {"drops_link_down", r.net.drops_by(sim::FabricDrop::kLinkDown)},
                 {"drops_gray", r.net.drops_by(sim::FabricDrop::kGrayLoss)},
                 {"hops", r.net.hops},
                 {"queue_peak_bytes", r.net.peak_data_bytes}};
  j["run"] = {{"events", r.net.events},
              {"events_per_s", r.events_per_s},
              {"sim_time_us", static_cast<double>(r.end) / 1000.0},
              {"wall_s", r.wall_s},
              {"peak_rss_mb", static_cast<double>(r.peak_rss_kb) / 1024.0}};
  if (!sc.victims.empty()) {
    nlohmann::json v = nlohmann::json::array();
    for (std::uint32_t i : sc.victims) v.push_back(r.flows[i].fct_us);
    j["victim_fct_us"] = v;
  }
  if (flows) {
    nlohmann::json a = nlohmann::json::array();
    for (const sim::FlowResult& f : r.flows)
      a.push_back({{"src", f.conn.src},
                   {"dst", f.conn.dst},
                   {"id", f.conn.id},
                   {"bytes", f.conn.bytes},
                   {"finished", f.finish != kNever},
                   {"fct_us", f.fct_us},
                   {"goodput_gbps", goodput_gbps(f)},
                   {"rtx", f.qp.tx_rtx}});
    j["flow_results"] = a;
  }
  return j;
}

void write_csv(const std::string& path, const sim::RunResult& r) {
  std::ofstream o(path);
  if (!o) throw std::runtime_error("cannot write " + path);
  o << "src,dst,id,start_us,bytes,finished,fct_us,goodput_gbps,rtx,rtx_nack,rtx_loss,rtx_timeout\n";
  for (const sim::FlowResult& f : r.flows) {
    o << f.conn.src << ',' << f.conn.dst << ',' << f.conn.id << ','
      << static_cast<double>(f.conn.start) / 1000.0 << ',' << f.conn.bytes << ','
      << (f.finish != kNever ? 1 : 0) << ',' << f.fct_us << ',' << goodput_gbps(f) << ',' << f.qp.tx_rtx
      << ',' << f.qp.rtx_nack << ',' << f.qp.rtx_loss << ',' << f.qp.rtx_timeout << '\n';
  }
}

void print_summary(const Scenario& sc, const sim::RunResult& r) {
  std::printf("scenario %s  topology %s  hosts %u  flows %zu finished %u\n", sc.name.c_str(),
              sc.topo.name.c_str(), sc.topo.hosts, r.flows.size(), r.finished);
  std::printf("FCT us min/p50/p99/max  %.1f / %.1f / %.1f / %.1f\n", r.fct_min, r.fct_p50, r.fct_p99,
              r.fct_max);
  for (std::uint32_t i : sc.victims) std::printf("victim flow %u FCT %.1f us\n", i, r.flows[i].fct_us);
  std::printf("data %llu  rtx %llu (nack %llu, loss %llu, timeout %llu, port %llu)  sack %llu  nack %llu\n",
              static_cast<unsigned long long>(r.tx_data), static_cast<unsigned long long>(r.tx_rtx),
              static_cast<unsigned long long>(r.rtx_nack), static_cast<unsigned long long>(r.rtx_loss),
              static_cast<unsigned long long>(r.rtx_timeout), static_cast<unsigned long long>(r.rtx_port),
              static_cast<unsigned long long>(r.tx_sack), static_cast<unsigned long long>(r.tx_nack));
  std::printf(
      "trims %llu  ecn %llu  drops %llu (link down %llu, gray %llu)  EV transitions %llu  queue peak %llu "
      "B\n",
      static_cast<unsigned long long>(r.net.trimmed), static_cast<unsigned long long>(r.net.ecn_marked),
      static_cast<unsigned long long>(r.net.dropped()),
      static_cast<unsigned long long>(r.net.drops_by(sim::FabricDrop::kLinkDown)),
      static_cast<unsigned long long>(r.net.drops_by(sim::FabricDrop::kGrayLoss)),
      static_cast<unsigned long long>(r.ev_transitions),
      static_cast<unsigned long long>(r.net.peak_data_bytes));
}

void print_run_line(const sim::RunResult& r) {
  std::printf("events %llu  %.2f M events/s  simulated %.1f us  wall %.2f s  peak memory %.1f MB\n",
              static_cast<unsigned long long>(r.net.events), r.events_per_s / 1e6,
              static_cast<double>(r.end) / 1000.0, r.wall_s, static_cast<double>(r.peak_rss_kb) / 1024.0);
}

void attach_progress(sim::RunConfig& rc, const std::string& label) {
  if (g_opt.no_progress || isatty(STDERR_FILENO) == 0) return;
  rc.progress = [label, t0 = std::chrono::steady_clock::now()](Time now, std::uint32_t done,
                                                               std::uint32_t total) {
    const double frac = total ? static_cast<double>(done) / total : 1.0;
    const int width = 30;
    const int filled = static_cast<int>(frac * width);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "\r%s [%.*s%*s] %u/%u flows  sim %.1f us  wall %.1f s", label.c_str(), filled,
                 "##############################", width - filled, "", done, total,
                 static_cast<double>(now) / 1000.0, wall);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

int run_default() {
  Scenario sc;
  sc.name = "default: perm-128 (k=8 fat tree, 100G, 2 MB/flow)";
  sim::FatTreeConfig fc;
  fc.k = 8;
  sc.topo = sim::make_fat_tree(fc);
  sc.matrix = sim::make_permutation(sc.topo.hosts, 2000000, 1);
  struct Variant {
    const char* label;
    std::uint32_t evs;
  };
  const Variant variants[] = {{"MRC spray 128 EVs", 128}, {"MRC single EV (ECMP)", 1}};
  nlohmann::json all = nlohmann::json::array();
  std::vector<sim::RunResult> results;
  for (const Variant& v : variants) {
    sim::RunConfig rc = sc.run;
    rc.evs_per_plane = v.evs;
    attach_progress(rc, v.label);
    results.push_back(sim::run_matrix(sc.topo, sc.matrix, rc));
    if (g_opt.json) {
      nlohmann::json j = to_json(sc, results.back(), false);
      j["variant"] = v.label;
      all.push_back(j);
    }
  }
  if (g_opt.json) {
    std::cout << all.dump(2) << '\n';
    return 0;
  }
  std::printf("%s\n\n%-24s %8s %8s %8s %8s %8s %8s\n", sc.name.c_str(), "transport", "min", "p50", "p99",
              "max", "rtx", "trims");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const sim::RunResult& r = results[i];
    std::printf("%-24s %8.1f %8.1f %8.1f %8.1f %8llu %8llu\n", variants[i].label, r.fct_min, r.fct_p50,
                r.fct_p99, r.fct_max, static_cast<unsigned long long>(r.tx_rtx),
                static_cast<unsigned long long>(r.net.trimmed));
  }
  std::printf("%-24s %8s (baseline pending: src/sim/roce.*)\n", "RoCEv2 + PFC", "n/a");
  std::printf(
      "(FCT in us; htsim reference for the same network: spray 180.6/193.2/200.7/200.9, single path "
      "173.3/356.0/688.9/694.0, RoCE 178.5/497.6/805.5/812.5 on its own perm_128 matrix)\n\n");
  for (const auto& r : results) print_run_line(r);
  return 0;
}

}  // namespace

CLI::App* add_sim_command(CLI::App& app) {
  CLI::App* c = app.add_subcommand(
      "sim", "run a packet-level fabric scenario (TOML, see scenarios/README.md); none: built-in default");
  c->add_option("scenario", g_opt.scenario, "scenario TOML file");
  c->add_flag("--json", g_opt.json, "print the summary as JSON on stdout");
  c->add_flag("--no-progress", g_opt.no_progress, "no progress bar on stderr");
  return c;
}

int run_sim() {
  try {
    if (g_opt.scenario.empty()) return run_default();
    Scenario sc = load_scenario(g_opt.scenario);
    attach_progress(sc.run, sc.name);
    const sim::RunResult r = sim::run_matrix(sc.topo, sc.matrix, sc.run);
    if (!sc.json_path.empty()) {
      std::ofstream o(sc.json_path);
      if (!o) throw std::runtime_error("cannot write " + sc.json_path);
      o << to_json(sc, r, true).dump(2) << '\n';
    }
    if (!sc.csv_path.empty()) write_csv(sc.csv_path, r);
    if (g_opt.json) {
      std::cout << to_json(sc, r, false).dump(2) << '\n';
    } else {
      print_summary(sc, r);
      print_run_line(r);
    }
    return r.finished == r.flows.size() ? 0 : 3;
  } catch (const ScenarioError& e) {
    std::fprintf(stderr, "mrc sim: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mrc sim: %s\n", e.what());
    return 1;
  }
}

}  // namespace mrc::tools
