// `mrc sim [SCENARIO.toml]`: runs a packet-level fabric scenario (src/sim/run.hpp) described by a
// TOML file (schema: scenarios/README.md): one run per [[variants]] entry (MRC, RoCE, ...) on the
// same topology, workload and faults, printed as one comparison table (or JSON / CSV). Without a
// scenario it runs a built-in default (perm-128, k=8 fat tree): MRC spraying over 128 EVs, MRC on a
// single EV (flow ECMP) and RoCEv2 + PFC. Started by mpirun (built with MPI), the processes run one
// distributed simulation and rank 0 prints it (docs/cli.md).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_checks.hpp"
#include "installed_file.hpp"
#include "sim/cm.hpp"
#include "sim/heap.hpp"
#include "sim/ranks.hpp"
#include "sim/run.hpp"
#include "sim/scenario.hpp"
#include "sim/topology.hpp"

namespace mrc::tools {

namespace {

struct SimOptions {
  std::string scenario;
  bool json = false, csv = false, stable = false;
  bool no_progress = false, progress = false;
  sim::ScenarioOverrides overrides;
  std::vector<std::string> variants;  ///< --variant: labels or 1-based indices to run
  std::string json_out, csv_out;      ///< replace [output] json / csv
  std::uint32_t threads = 1;          ///< --threads: parallel run (identical results)
  std::uint32_t partitions = 0;       ///< --partitions (0: one per thread)
  std::string heap = "tuned";         ///< --heap: tuned (sim/heap.hpp, D70) or plain (glibc's defaults)
  /// Distributed (mpirun): only rank 0 prints, writes files and shows progress.
  bool rank0 = true;
};
SimOptions g_opt;

using sim::load_scenario;
using sim::Scenario;
using sim::ScenarioError;
using sim::Variant;
using sim::Workload;

// --- metrics -----------------------------------------------------------------------------------------

double goodput_gbps(const sim::FlowResult& f) {
  return f.finish == kNever || f.fct_us <= 0 ? 0 : static_cast<double>(f.conn.bytes) * 8 / (f.fct_us * 1e3);
}

/// Workload-specific numbers of one variant's run.
struct Extra {
  double ring_us = 0, busbw_gbps = 0;                ///< ring all-reduce: completion, bus bandwidth per node
  double victim_gbps = 0, incast_gbps = 0;           ///< incast
  double pre_gbps = 0, post_gbps = 0, dip_gbps = 0;  ///< failover: goodput before/after, worst bin
  double recovery_us = -1, recovery_rtts = -1;       ///< failover: time to full goodput (-1: never)
  std::vector<double> goodput;                       ///< failover: Gb/s per bin
};

Extra extras(const Scenario& sc, const sim::RunResult& r) {
  Extra x;
  if (sc.workload == Workload::kRing && r.finished == r.flows.size() && r.last_finish_us > 0) {
    double last = 0;
    for (const sim::FlowResult& f : r.flows) last = std::max(last, static_cast<double>(f.arrived) / 1000.0);
    x.ring_us = last;
    const double n = sc.ring_nodes;
    x.busbw_gbps = static_cast<double>(sc.ring_bytes) * 8 * 2 * (n - 1) / n / (last * 1e3);
  }
  if (sc.workload == Workload::kIncast) {
    if (sc.victim != ~0u) x.victim_gbps = goodput_gbps(r.flows[sc.victim]);
    double bytes = 0, last = 0;
    for (std::uint32_t i = 0; i < r.flows.size(); ++i) {
      if (i == sc.victim || r.flows[i].finish == kNever) continue;
      bytes += static_cast<double>(r.flows[i].conn.bytes);
      last = std::max(last, r.flows[i].fct_us);
    }
    if (last > 0) x.incast_gbps = bytes * 8 / (last * 1e3);
  }
  if (sc.fail_at_us >= 0 && r.sample_interval > 0 && !r.samples.empty()) {
    // Goodput per bin; pre = second half before the failure, post = last quarter of the window.
    const double w = static_cast<double>(r.sample_interval) / 1000.0;  // us
    std::vector<double> g(r.samples.size());
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] = static_cast<double>(r.samples[i] - (i > 0 ? r.samples[i - 1] : 0)) * 8 / (w * 1e3);
    x.goodput = g;
    auto bin = [&](double us) { return std::min(g.size(), static_cast<std::size_t>(us / w)); };
    auto mean = [&](std::size_t a, std::size_t b) {
      double s = 0;
      for (std::size_t i = a; i < b; ++i) s += g[i];
      return b > a ? s / static_cast<double>(b - a) : 0.0;
    };
    const std::size_t f = bin(sc.fail_at_us), e = bin(sc.measure_end_us);
    x.pre_gbps = mean(bin(sc.fail_at_us / 2), f);
    x.post_gbps = mean(e - (e - f) / 4, e);
    x.dip_gbps = f < e ? *std::min_element(g.begin() + static_cast<std::ptrdiff_t>(f),
                                           g.begin() + static_cast<std::ptrdiff_t>(e))
                       : 0;
    const double target = sc.settle * x.post_gbps;
    std::size_t k = e;
    while (k > f && g[k - 1] >= target) --k;
    if (k < e) {
      x.recovery_us = std::max(0.0, static_cast<double>(k) * w - sc.fail_at_us);
      x.recovery_rtts = x.recovery_us * 1000 / static_cast<double>(r.base_rtt);
    }
  }
  return x;
}

// --- reporting -------------------------------------------------------------------------------------

nlohmann::json to_json(const Scenario& sc, const Variant& v, const sim::RunResult& r, bool flows) {
  nlohmann::json j;
  j["variant"] = v.label;
  j["transport"] = v.run.transport == sim::Transport::kMrc ? "mrc" : "roce";
  j["flows"] = r.flows.size();
  j["finished"] = r.finished;
  j["failed"] = r.failed;
  j["bytes_failed"] = r.bytes_failed;
  j["fct_us"] = {{"min", r.fct_min}, {"p50", r.fct_p50}, {"p99", r.fct_p99}, {"max", r.fct_max}};
  j["last_finish_us"] = r.last_finish_us;
  j["packets"] = {
      {"data", r.tx_data}, {"rtx", r.tx_rtx}, {"ack", r.tx_sack}, {"nack", r.tx_nack}, {"cnp", r.tx_cnp}};
  j["retransmits_by_cause"] = {
      {"nack", r.rtx_nack}, {"loss", r.rtx_loss}, {"timeout", r.rtx_timeout}, {"port", r.rtx_port}};
  j["timeouts"] = r.timeouts;
  j["ev_transitions"] = r.ev_transitions;
  if (v.run.transport == sim::Transport::kMrc)
    j["spurious"] = {{"rtx", r.rtx_spurious}, {"rx_dup", r.rx_dup}};
  j["fabric"] = {{"trims", r.net.trimmed},
                 {"ecn_marks", r.net.ecn_marked},
                 {"drops", r.net.dropped()},
                 {"drops_link_down", r.net.drops_by(sim::FabricDrop::kLinkDown)},
                 {"drops_gray", r.net.drops_by(sim::FabricDrop::kGrayLoss)},
                 {"pfc_pauses", r.net.pfc_pauses},
                 {"hops", r.net.hops},
                 {"queue_peak_bytes", r.net.peak_data_bytes}};
  j["base_rtt_ns"] = r.base_rtt;
  const Extra x = extras(sc, r);
  if (sc.workload == Workload::kRing)
    j["ring"] = {{"completion_us", x.ring_us}, {"busbw_gbps", x.busbw_gbps}};
  if (sc.workload == Workload::kIncast)
    j["incast"] = {{"victim_gbps", x.victim_gbps}, {"incast_gbps", x.incast_gbps}};
  if (sc.fail_at_us >= 0)
    j["failover"] = {{"pre_gbps", x.pre_gbps},
                     {"post_gbps", x.post_gbps},
                     {"dip_gbps", x.dip_gbps},
                     {"recovery_us", x.recovery_us},
                     {"recovery_base_rtts", x.recovery_rtts},
                     {"bin_us", static_cast<double>(r.sample_interval) / 1000.0},
                     {"goodput_gbps", x.goodput}};
  if (flows) {
    nlohmann::json a = nlohmann::json::array();
    for (const sim::FlowResult& f : r.flows)
      a.push_back({{"src", f.conn.src},
                   {"dst", f.conn.dst},
                   {"id", f.conn.id},
                   {"bytes", f.conn.bytes},
                   {"finished", f.finish != kNever},
                   {"ok", f.ok},
                   {"fct_us", f.fct_us},
                   {"goodput_gbps", goodput_gbps(f)},
                   {"rtx", f.qp.tx_rtx}});
    j["flow_results"] = a;
  }
  return j;
}

void write_flows_csv(std::ostream& o, const std::string& label, const sim::RunResult& r) {
  for (const sim::FlowResult& f : r.flows) {
    o << '"' << label << "\"," << f.conn.src << ',' << f.conn.dst << ',' << f.conn.id << ','
      << static_cast<double>(f.conn.start) / 1000.0 << ',' << f.conn.bytes << ','
      << (f.finish != kNever ? 1 : 0) << ',' << (f.ok ? 1 : 0) << ',' << f.fct_us << ',' << goodput_gbps(f)
      << ',' << f.qp.tx_rtx << ',' << f.qp.rtx_nack << ',' << f.qp.rtx_loss << ',' << f.qp.rtx_timeout
      << '\n';
  }
}

/// The comparison table: one row per variant (CSV when `csv`).
void print_table(const Scenario& sc, const std::vector<sim::RunResult>& rs, bool csv) {
  std::vector<std::string> head = {"variant", "done", "fct_p50_us", "fct_p99_us", "fct_max_us"};
  if (sc.workload == Workload::kRing) head.insert(head.end(), {"allreduce_us", "busbw_gbps"});
  if (sc.workload == Workload::kIncast) head.insert(head.end(), {"victim_gbps", "incast_gbps"});
  if (sc.fail_at_us >= 0)
    head.insert(head.end(),
                {"pre_gbps", "dip_gbps", "post_gbps", "full_goodput_us", "base_rtts", "bytes_lost"});
  head.insert(head.end(), {"rtx", "timeouts", "drops", "pfc_pauses"});
  std::vector<std::vector<std::string>> rows;
  auto fmt = [](double v, int prec) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return std::string(b);
  };
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const sim::RunResult& r = rs[i];
    const Extra x = extras(sc, r);
    std::vector<std::string> row = {sc.variants[i].label,
                                    std::to_string(r.finished) + "/" + std::to_string(r.flows.size()),
                                    fmt(r.fct_p50, 1), fmt(r.fct_p99, 1), fmt(r.fct_max, 1)};
    if (sc.workload == Workload::kRing) {
      row.push_back(x.ring_us > 0 ? fmt(x.ring_us, 1) : "-");
      row.push_back(fmt(x.busbw_gbps, 1));
    }
    if (sc.workload == Workload::kIncast) {
      row.push_back(fmt(x.victim_gbps, 1));
      row.push_back(fmt(x.incast_gbps, 1));
    }
    if (sc.fail_at_us >= 0) {
      row.push_back(fmt(x.pre_gbps, 0));
      row.push_back(fmt(x.dip_gbps, 0));
      row.push_back(fmt(x.post_gbps, 0));
      row.push_back(x.recovery_us >= 0 ? fmt(x.recovery_us, 1) : "never");
      row.push_back(x.recovery_rtts >= 0 ? fmt(x.recovery_rtts, 1) : "-");
      row.push_back(std::to_string(r.bytes_failed));
    }
    row.push_back(std::to_string(r.tx_rtx));
    row.push_back(std::to_string(r.timeouts));
    row.push_back(std::to_string(r.net.dropped()));
    row.push_back(std::to_string(r.net.pfc_pauses));
    rows.push_back(row);
  }
  if (csv) {
    for (std::size_t c = 0; c < head.size(); ++c) std::cout << (c ? "," : "") << head[c];
    std::cout << '\n';
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < row.size(); ++c)
        std::cout << (c ? "," : "") << (c == 0 ? "\"" + row[c] + "\"" : row[c]);
      std::cout << '\n';
    }
    return;
  }
  std::vector<std::size_t> wd(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    wd[c] = head[c].size();
    for (const auto& row : rows) wd[c] = std::max(wd[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& v) {
    for (std::size_t c = 0; c < v.size(); ++c)
      std::printf(c == 0 ? "%-*s" : "  %*s", static_cast<int>(wd[c]), v[c].c_str());
    std::printf("\n");
  };
  std::printf("scenario %s  topology %s  hosts %u  connections %zu\n\n", sc.name.c_str(),
              sc.topo.name.c_str(), sc.topo.hosts, sc.matrix.conns.size());
  line(head);
  for (const auto& row : rows) line(row);
}

void print_run_line(const std::string& label, const sim::RunResult& r) {
  std::printf("%s: events %llu  %.2f M events/s  simulated %.1f us  wall %.2f s  peak memory %.1f MB\n",
              label.c_str(), static_cast<unsigned long long>(r.net.events), r.events_per_s / 1e6,
              static_cast<double>(r.end) / 1000.0, r.wall_s, static_cast<double>(r.peak_rss_kb) / 1024.0);
  if (r.ranks > 1) {
    std::printf("  %u ranks, peak memory per rank MB:", r.ranks);
    for (const long kb : r.rank_rss_kb) std::printf(" %.1f", static_cast<double>(kb) / 1024.0);
    std::printf("\n");
  }
}

/// Seconds left: the wall time so far scaled by the part of the bytes still to deliver, or by the
/// simulated time left before the limit if that is sooner (-1: no estimate yet).
double eta_s(const sim::Progress& p, double wall) {
  double eta = -1;
  if (p.bytes_done > 0 && p.bytes > 0) {
    const double f = static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes);
    eta = wall * (1 - f) / f;
  }
  if (p.now > 0 && p.limit > p.now) {
    const double by_limit = wall * static_cast<double>(p.limit - p.now) / static_cast<double>(p.now);
    if (eta < 0 || by_limit < eta) eta = by_limit;
  }
  return eta;
}

/// The progress line: bytes delivered (the bar), simulated time, events and their rate, the ETA.
void attach_progress(sim::RunConfig& rc, const std::string& label) {
  if (g_opt.no_progress || (!g_opt.progress && isatty(STDERR_FILENO) == 0)) return;
  rc.progress = [label, t0 = std::chrono::steady_clock::now()](const sim::Progress& p) {
    const double frac = p.bytes ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes) : 1.0;
    const int width = 20;
    const int filled = std::clamp(static_cast<int>(frac * width), 0, width);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double eta = eta_s(p, wall);
    char eta_txt[32] = "?";
    if (p.last)
      std::snprintf(eta_txt, sizeof eta_txt, "done");
    else if (eta >= 0)
      std::snprintf(eta_txt, sizeof eta_txt, "%.0f s", eta);
    std::fprintf(
        stderr,
        "\r%s [%.*s%*s] %3.0f%% bytes  sim %.1f us  events %.2f M (%.2f M/s)  flows %u/%u  wall %.1f s  "
        "ETA %s ",
        label.c_str(), filled, "####################", width - filled, "", frac * 100,
        static_cast<double>(p.now) / 1000.0, static_cast<double>(p.events) / 1e6,
        wall > 0 ? static_cast<double>(p.events) / 1e6 / wall : 0.0, p.flows_done, p.flows, wall, eta_txt);
    if (p.last) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

/// Keeps the variants --variant names (a label, or a 1-based index); throws ScenarioError for a
/// name that matches none.
void select_variants(Scenario& sc) {
  if (g_opt.variants.empty()) return;
  std::vector<Variant> keep;
  for (const std::string& want : g_opt.variants) {
    std::size_t at = sc.variants.size();
    for (std::size_t i = 0; i < sc.variants.size(); ++i)
      if (sc.variants[i].label == want) at = i;
    if (at == sc.variants.size() && !want.empty() &&
        want.find_first_not_of("0123456789") == std::string::npos && want.size() < 9) {
      const std::size_t n = std::stoul(want);
      if (n >= 1 && n <= sc.variants.size()) at = n - 1;
    }
    if (at == sc.variants.size()) {
      std::string names;
      for (std::size_t i = 0; i < sc.variants.size(); ++i) {
        // Appended piece by piece: `const char* + std::string` draws a false -Wstringop-overflow
        // from GCC 12 when the call is inlined at link time (LTO).
        if (i > 0) names += ", ";
        names += std::to_string(i + 1);
        names += " '";
        names += sc.variants[i].label;
        names += "'";
      }
      throw ScenarioError("--variant: no variant '" + want + "' (the scenario has " + names + ")");
    }
    keep.push_back(sc.variants[at]);
  }
  sc.variants = std::move(keep);
}

/// Whether `path` can be opened for writing: opened to append (an existing file keeps its bytes) and,
/// if this made it, removed again. Else false, and the reason in `why`.
bool can_write(const std::string& path, std::string& why) {
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
  return true;
}

/// An output file that cannot be written is found before the run, not after it (which may take
/// hours): rank 0, which writes them, tries each, and every rank learns the verdict. Throws
/// ScenarioError on rank 0; false on the other ranks (they stop quietly).
bool outputs_writable(const Scenario& sc, sim::Ranks* ranks) {
  std::string bad, why;
  if (g_opt.rank0)
    for (const std::string* p : {&sc.json_path, &sc.csv_path})
      if (!p->empty() && !can_write(*p, why)) {
        bad = *p;
        break;
      }
  std::uint64_t any = bad.empty() ? 0 : 1;
  if (ranks != nullptr) ranks->max(std::span<std::uint64_t>(&any, 1));
  if (!bad.empty()) throw ScenarioError("cannot write " + bad + ": " + why);
  return any == 0;
}

/// Runs every variant, prints the table (or JSON/CSV), writes the [output] files.
/// Writes an output file whole, or throws with the reason: a write that failed (a full disk,
/// /dev/full) would lose the run's results while the run reported success.
void write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  errno = 0;
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int e = wrote ? 0 : (errno != 0 ? errno : EIO);
  if (std::fclose(f) != 0 && e == 0) e = errno != 0 ? errno : EIO;
  if (e != 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(e));
}

int run_scenario(Scenario& sc) {
  std::vector<sim::RunResult> rs;
  for (Variant& v : sc.variants) {
    if (g_opt.rank0) attach_progress(v.run, v.label);
    if (v.run.sample_interval > 0) {
      // Failover bins: [measure] window_us, or one base RTT of this transport's packets.
      const std::uint32_t ovh = v.run.fabric.wire_overhead;
      const Duration rtt = sim::base_rtt(sc.topo, v.run.pmtu + 64 + ovh, 64 + ovh);
      v.run.sample_interval = sc.window_us > 0 ? static_cast<Duration>(sc.window_us * 1000) : rtt;
    }
    rs.push_back(sim::run_matrix(sc.topo, sc.matrix, v.run));
  }
  bool all_done = true;
  for (const auto& r : rs) all_done = all_done && r.finished == r.flows.size();
  if (!g_opt.rank0) return all_done ? 0 : 3;
  if (!sc.json_path.empty()) {
    nlohmann::json all = {{"scenario", sc.name}, {"topology", sc.topo.name}, {"hosts", sc.topo.hosts}};
    all["variants"] = nlohmann::json::array();
    for (std::size_t i = 0; i < rs.size(); ++i)
      all["variants"].push_back(to_json(sc, sc.variants[i], rs[i], true));
    write_file(sc.json_path, all.dump(2) + '\n');
  }
  if (!sc.csv_path.empty()) {
    std::ostringstream o;
    o << "variant,src,dst,id,start_us,bytes,finished,ok,fct_us,goodput_gbps,rtx,rtx_nack,rtx_loss,rtx_"
         "timeout\n";
    for (std::size_t i = 0; i < rs.size(); ++i) write_flows_csv(o, sc.variants[i].label, rs[i]);
    write_file(sc.csv_path, o.str());
  }
  if (g_opt.json) {
    nlohmann::json all = {{"scenario", sc.name}, {"topology", sc.topo.name}, {"hosts", sc.topo.hosts}};
    all["variants"] = nlohmann::json::array();
    for (std::size_t i = 0; i < rs.size(); ++i) {
      nlohmann::json j = to_json(sc, sc.variants[i], rs[i], false);
      if (!g_opt.stable)
        j["run"] = {{"events", rs[i].net.events},
                    {"events_per_s", rs[i].events_per_s},
                    {"sim_time_us", static_cast<double>(rs[i].end) / 1000.0},
                    {"wall_s", rs[i].wall_s},
                    {"peak_rss_mb", static_cast<double>(rs[i].peak_rss_kb) / 1024.0},
                    {"fabric_packets", rs[i].pool_packets},
                    {"threads", rs[i].threads},
                    {"partitions", rs[i].partitions},
                    {"window_cpu_s", rs[i].work_s},
                    {"window_span_s", rs[i].span_s},
                    {"windows", rs[i].windows}};
      if (!g_opt.stable && rs[i].ranks > 1) {
        j["run"]["ranks"] = rs[i].ranks;
        nlohmann::json rss = nlohmann::json::array();
        for (const long kb : rs[i].rank_rss_kb) rss.push_back(static_cast<double>(kb) / 1024.0);
        j["run"]["rank_peak_rss_mb"] = rss;
        j["run"]["rank_bytes"] = rs[i].rank_bytes;
        j["run"]["rank_window_bytes_max"] = rs[i].rank_window_bytes;
      }
      if (!g_opt.stable && rs[i].qps > 0)
        j["qp_memory"] = {{"qps", rs[i].qps},
                          {"idle_bytes", rs[i].qp_bytes_idle},
                          {"sender_bytes", rs[i].qp_bytes_sender},
                          {"receiver_bytes", rs[i].qp_bytes_receiver}};
      all["variants"].push_back(j);
    }
    std::cout << all.dump(2) << '\n';
  } else if (g_opt.csv) {
    print_table(sc, rs, true);
  } else {
    print_table(sc, rs, false);
    std::printf("\n");
    for (std::size_t i = 0; i < rs.size(); ++i) print_run_line(sc.variants[i].label, rs[i]);
  }
  return all_done ? 0 : 3;
}

Scenario default_scenario() {
  Scenario sc;
  sc.name = "default: perm-128 (k=8 fat tree, 100G, 2 MB/flow)";
  sim::FatTreeConfig fc;
  fc.k = 8;
  sc.topo = sim::make_fat_tree(fc);
  const bool seeded = g_opt.overrides.has_seed;
  sc.matrix = sim::make_permutation(sc.topo.hosts, 2000000, seeded ? g_opt.overrides.seed : 1);
  Variant v;
  if (seeded) v.run.seed = v.run.fabric.seed = g_opt.overrides.seed;
  v.run.evs_per_plane = 128;
  v.label = "MRC 128 EVs";
  sc.variants.push_back(v);
  v.run.evs_per_plane = 1;
  v.label = "MRC 1 EV (ECMP)";
  sc.variants.push_back(v);
  v.run.transport = sim::Transport::kRoce;
  v.run.fabric.queue.pfc = true;
  v.label = "RoCEv2+PFC (ECMP)";
  sc.variants.push_back(v);
  return sc;
}

}  // namespace

CLI::App* add_sim_command(CLI::App& app) {
  CLI::App* c = app.add_subcommand(
      "sim", "run a packet-level fabric scenario (TOML, see scenarios/README.md); none: built-in default");
  c->add_option("scenario", g_opt.scenario, "scenario TOML file");
  c->add_flag("--json", g_opt.json, "print the comparison as JSON on stdout");
  c->add_flag("--csv", g_opt.csv, "print the comparison table as CSV on stdout");
  c->add_flag("--stable", g_opt.stable, "with --json: leave out wall time, memory and speed (golden files)");
  c->add_flag("--no-progress", g_opt.no_progress, "no progress line on stderr");
  c->add_flag("--progress", g_opt.progress, "the progress line on stderr even when it is not a terminal");
  c->add_option_function<std::uint64_t>(
       "--seed",
       [](const std::uint64_t& s) {
         g_opt.overrides.has_seed = true;
         g_opt.overrides.seed = s;
       },
       "replace the scenario's top-level seed")
      ->check(uint_range(0, ~std::uint64_t{0}))
      ->type_name("N");
  c->add_option("--variant", g_opt.variants,
                "run only this variant (its label or 1-based index; repeat for several, in that order)")
      ->type_name("NAME");
  c->add_option("--json-out", g_opt.json_out, "write the [output] JSON file here instead");
  c->add_option("--csv-out", g_opt.csv_out, "write the [output] CSV file here instead");
  c->add_option("--threads", g_opt.threads,
                "simulate on this many threads (the network split into as many partitions; results are "
                "byte-identical to one thread)")
      ->check(uint_range(1, 256));
  c->add_option("--partitions", g_opt.partitions,
                "split the network into this many partitions (default: one per thread, of every rank under "
                "mpirun; more than threads: "
                "each thread runs several in turn; results are the same)")
      ->check(uint_range(1, 256));
  c->add_option(
       "--heap", g_opt.heap,
       "tuned: the run takes its memory from a heap reserved ahead on transparent huge pages (faster; "
       "up to 2 MB more peak memory, more where blocks are freed mid-run; results identical; D70, D72); "
       "plain: glibc's defaults")
      ->check(CLI::IsMember({"tuned", "plain"}))
      ->capture_default_str();
  return c;
}

int run_sim() {
  try {
    // Started by mpirun (or another launcher) as one of several processes: one distributed run.
    std::unique_ptr<sim::Ranks> ranks;
    const std::uint32_t launched = sim::launcher_ranks();
#ifdef MRC_HAVE_MPI
    if (launched > 0) {
      std::string why;
      // $MRC_SIM_MPI, else the installed module (PREFIX/bin/mrc -> PREFIX/LIBDIR/mrc/), else this build's.
      ranks =
          sim::load_mpi_ranks(installed_file("MRC_SIM_MPI", "../" MRC_INSTALL_LIBDIR "/mrc/" MRC_SIM_MPI_NAME,
                                             MRC_SIM_MPI_BUILD_PATH),
                              why);
      if (ranks == nullptr) {
        std::fprintf(stderr, "mrc sim: started as one of %u processes (mpirun?), but MPI did not start: %s\n",
                     launched, why.c_str());
        return 1;
      }
    }
#else
    if (launched > 1) {
      std::fprintf(stderr,
                   "mrc sim: started as one of %u processes (mpirun?), but this mrc was built without MPI; "
                   "install libopenmpi-dev, reconfigure and rebuild, or run it as one process\n",
                   launched);
      return 1;
    }
#endif
    if (ranks != nullptr) g_opt.rank0 = ranks->rank() == 0;
    Scenario sc =
        g_opt.scenario.empty() ? default_scenario() : load_scenario(g_opt.scenario, {}, g_opt.overrides);
    select_variants(sc);
    for (Variant& v : sc.variants) {
      v.run.threads = g_opt.threads;
      v.run.partitions = g_opt.partitions;
      v.run.ranks = ranks.get();
    }
    if (!g_opt.json_out.empty()) sc.json_path = g_opt.json_out;
    if (!g_opt.csv_out.empty()) sc.csv_path = g_opt.csv_out;
    if (!outputs_writable(sc, ranks.get())) return 2;
    if (g_opt.heap == "tuned" && !sc.variants.empty()) {  // before the runs allocate their state
      std::uint64_t qps = 0;
      for (const Variant& v : sc.variants)
        qps = std::max<std::uint64_t>(qps, 2 * sc.matrix.conns.size() * v.run.qps_per_peer);
      sim::tune_heap(sim::heap_tuning_for(qps, sc.variants.front().run.prefetch_qps));
    }
    const int rc = run_scenario(sc);
    if (g_opt.scenario.empty() && !g_opt.json && !g_opt.csv && g_opt.rank0)
      std::printf(
          "(htsim reference, docs/htsim.md §4, its own perm_128 matrix: spray 180.6/193.2/200.7/200.9, "
          "single path "
          "173.3/356.0/688.9/694.0, RoCE+PFC 178.5/497.6/805.5/812.5 us min/p50/p99/max)\n");
    return rc;
  } catch (const ScenarioError& e) {
    std::fprintf(stderr, "mrc sim: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mrc sim: %s\n", e.what());
    return 1;
  }
}

}  // namespace mrc::tools
