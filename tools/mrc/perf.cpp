// `mrc perf`: an ib_write_bw-like benchmark over the software MRC endpoint (UDP).
//
//   mrc perf --server [--bind 127.0.0.1] [--local A,B,C,D]
//   mrc perf --client 127.0.0.1 [--local A,B,C,D] [-a | -s SIZE] [-n ITERS | -D SECONDS] [-q QPS] [--imm]
//
// The client connects to the server over TCP (out of band), both exchange QPN / PSN / rkey / VA /
// plane addresses per QP, then the client runs RDMA WRITE (or WRITE_WITH_IMM) bandwidth tests and
// a WRITE_IMM ping-pong for latency.
//
// Every byte written is verified: the region of each QP is filled with a pattern derived from
// (seed, QP, verification window, offset). When the region is used up (or a size or the latency
// phase ends) the client waits for its writes to complete and asks the server, out of band, to
// compare the bytes written in that window with the same pattern; the next window uses a new
// pattern, so a lost, misplaced or stale write always shows up as a mismatch. With the default
// region (the whole transfer of a size, up to 1 GiB per QP) a count-mode run has no pause.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "api/ctl.hpp"
#include "api/device_tuning.hpp"
#include "api/profile_store.hpp"
#include "api/profile_toml.hpp"
#include "api/vendor_cfg.hpp"
#include "cli_checks.hpp"
#include "common/rng.hpp"
#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "io/impair.hpp"
#include "io/metrics.hpp"
#include "io/oob.hpp"
#include "io/pcap.hpp"
#include "io/udp_endpoint.hpp"
#include "mrc/mrc.h"
#include "mrc/mrc_ctl.h"
#include "wire/packet.hpp"

namespace mrc::tools {
namespace {

constexpr std::uint64_t kHello = 0x4D52435045524632ull;  // "MRCPERF2": + the client's UDP port
constexpr std::uint64_t kVerify = 0x5645524946590000ull;
constexpr std::uint64_t kDone = 0x444F4E4500000000ull;
constexpr std::uint32_t kPingBit = 0x80000000u;
constexpr std::uint32_t kPongBit = 0x40000000u;
constexpr std::uint32_t kRecvsPerQp = 512;
constexpr int kPollBatch = 64;  ///< completions taken per mrc_poll_cq call
constexpr Duration kOobTimeout = 30'000'000'000ull;
/// Server: a session with no OOB message and no UDP datagram for this long has lost its client.
constexpr Duration kSessionIdle = 60'000'000'000ull;
constexpr int kExitUsage = 2;  ///< bad option or input, found before anything runs (tools/mrc/main.cpp)
constexpr std::uint64_t kMaxIters = 1'000'000'000'000ull;
constexpr double kMaxDuration = 86'400;
constexpr Duration kStallLimit = 10'000'000'000ull;  // no completion for this long = give up
constexpr std::uint32_t kMaxQps = 256;
constexpr std::uint64_t kMaxRegion = 1ull << 30;       ///< per QP
constexpr std::uint64_t kMaxRegionTotal = 4ull << 30;  ///< over all QPs, allocated on both sides
constexpr std::uint64_t kTimedRegion = 256ull << 20;   ///< default per-QP region of a timed run
/// Server: the most memory a client may have it allocate for its data regions (qps x region), 1 GiB
/// by default (--max-memory, 1 MiB .. the 4 GiB protocol limit): checked before anything is allocated.
constexpr std::uint64_t kDefaultMaxMemory = 1ull << 30;
constexpr std::uint64_t kMinMaxMemory = 1ull << 20;

struct PerfOptions {
  bool server = false;
  std::string client_host;
  std::string bind = "0.0.0.0";
  std::uint16_t oob_port = io::kOobDefaultPort;
  std::vector<std::string> local, remote;
  bool all_sizes = false;
  std::uint64_t size = 65536;
  std::uint64_t iters = 1000;
  double duration = 0;
  std::uint32_t qps = 1;
  bool imm = false;
  std::uint32_t tx_depth = 64;
  std::uint32_t lat_iters = 1000;
  std::uint32_t lat_size = 8;
  std::uint32_t pmtu = 0;  ///< 0: the largest of 4096..256 that fits every plane's interface MTU
  std::string cc = "none";
  double rate_gbps = 10;  ///< per plane, for NSCC
  /// 32 active EVs per plane: with 8, an ECMP stage hashing them over 2 next hops splits them 7:1
  /// or worse on 7 % of planes (binomial); with 32, beyond 1.5x a next hop's share on 0.2 %.
  std::uint32_t evs_per_plane = 32;
  std::uint32_t backup_per_plane = 2;
  std::uint8_t timeout = 15;  ///< 33.5 ms: loopback queues under a full window reach several ms
  std::string ev_mode = "udp";
  std::vector<std::string> srv6_paths;  ///< --ev-mode srv6: uSID paths, hex uSIDs joined by ':'
  bool auth = false;                    ///< MAC-authenticated packets (client: use; server: require)
  bool wire_ext = true;                 ///< offer the project's wire extensions (used if both sides do)
  std::uint32_t gso = 0;                ///< UDP GSO/GRO burst (packets per EV pick), 0 = off
  std::string impair;
  std::string impair_file;
  std::string pcap;
  bool progress_thread = false;
  bool json = false;
  bool metrics = false;
  std::uint64_t seed = 1;
  std::uint32_t interval_ms = 0;  ///< goodput time series period (0 = off)
  std::uint64_t window = 0;       ///< per-QP region (0 = automatic)
  std::uint16_t udp_port = 4791;  ///< this side's UDP receive port (the peer learns it out of band)
  double connect_timeout = 5;     ///< client: seconds to wait for the server's TCP port
  double hello_timeout = 10;      ///< server: seconds a new connection has to send its hello
  std::uint64_t max_memory = kDefaultMaxMemory;  ///< server: data regions of a session, at most
  bool once = false;                             ///< server: serve one client, exit with its result
};

PerfOptions g_opt;
std::unique_ptr<io::PcapWriter> g_pcap;  ///< --pcap, shared by every session of a server
volatile sig_atomic_t g_stop = 0;        ///< server: the signal that asked it to stop (SIGINT, SIGTERM)

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

bool parse_addrs(const std::vector<std::string>& in, std::vector<io::IpAddr>& out, std::string& err) {
  out.clear();
  for (const std::string& s : in) {
    io::IpAddr a;
    if (!io::IpAddr::parse(s, a)) {
      err = "not an IP address: '" + s + "'";
      return false;
    }
    out.push_back(a);
  }
  return true;
}

std::vector<std::string> default_planes(int host) {
  std::vector<std::string> v;
  for (int i = 1; i <= 4; ++i) v.push_back("127.0." + std::to_string(i) + "." + std::to_string(host));
  return v;
}

/// The name of a completion status as the engine spells it (the messages perf has always printed).
const char* status_text(ibv_wc_status st) {
  switch (st) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_RETRY_EXC_ERR:
      return "retry_exceeded";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote_access_error";
    case IBV_WC_REM_INV_REQ_ERR:
      return "remote_invalid_request";
    case IBV_WC_REM_OP_ERR:
      return "remote_op_error";
    case IBV_WC_LOC_PROT_ERR:
      return "local_protection_error";
    case IBV_WC_WR_FLUSH_ERR:
      return "flushed";
    default:
      return "error";
  }
}

/// The error a failed QP's completions report: when a QP fails, the WRs before the failing one
/// come first, flushed (D6), so the first error polled is seldom the cause. Looks at wc[i, n) and
/// what else `cq` holds for the first status that is not a flush, and says how many were flushed.
std::string first_error(mrc_cq* cq, ibv_wc* wc, int i, int n) {
  int flushed = 0;
  for (int rounds = 0; rounds < 64; ++rounds) {
    for (; i < n; ++i) {
      if (wc[i].status == IBV_WC_SUCCESS) continue;
      if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
        return std::string(status_text(wc[i].status)) +
               (flushed ? " (after " + std::to_string(flushed) + " flushed)" : std::string());
      ++flushed;
    }
    if ((n = mrc_poll_cq(cq, kPollBatch, wc)) <= 0) break;
    i = 0;
  }
  return "flushed (" + std::to_string(flushed) + " WRs; no other error among them)";
}

/// A CQ that failed (EOVERFLOW: it overran and lost completions).
std::string cq_error(int e) {
  return std::string("completion queue: ") + std::strerror(e);
}

/// Session state shared by both roles: one libmrc device (mrc.h) with its context, PD, MR, two
/// CQs and the QPs. Completions come straight from libmrc's CQs (mrc_poll_cq).
struct Session {
  ibv_context* dev = nullptr;
  mrc_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  mrc_cq* send_cq = nullptr;
  mrc_cq* recv_cq = nullptr;
  std::vector<mrc_qp*> qps;
  bool app_progress = true;        ///< MRC_CONTEXT_APP_PROGRESS: perf calls mrc_progress
  io::UdpConfig cfg;               ///< what the device's endpoint was opened with
  io::PcapWriter* pcap = nullptr;  ///< --pcap: opened once before any connection (g_pcap)
  std::vector<std::uint8_t> buf;   ///< qps x region
  std::uint64_t region = 0;
  std::vector<std::uint32_t> qpns;
  std::vector<io::ConnInfo> remote;

  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  /// libmrc's teardown order: QPs, CQs, MR, PD, context, device.
  ~Session() {
    for (mrc_qp* q : qps) (void)mrc_destroy_qp(q);
    if (send_cq != nullptr) (void)mrc_destroy_cq(send_cq);
    if (recv_cq != nullptr) (void)mrc_destroy_cq(recv_cq);
    if (mr != nullptr) (void)ibv_dereg_mr(mr);
    if (pd != nullptr) (void)ibv_dealloc_pd(pd);
    if (ctx != nullptr) (void)mrc_destroy_context(ctx);
    if (dev != nullptr) (void)ibv_close_device(dev);
  }

  std::size_t qp_index(std::uint32_t qpn) const {
    return static_cast<std::size_t>(std::find(qpns.begin(), qpns.end(), qpn) - qpns.begin());
  }
  std::uint8_t* region_of(std::size_t q) { return buf.data() + q * region; }
  /// Posts one RDMA WRITE (WITH_IMM) of QP q: 0 or the errno of mrc_post_send.
  int post_write(std::size_t q, std::uint64_t wr_id, std::uint64_t off, std::uint32_t len, bool imm,
                 std::uint32_t imm_data) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(buf.data() + q * region + off);
    sge.length = len;
    sge.lkey = mr->lkey;
    ibv_send_wr w{};
    w.wr_id = wr_id;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    w.imm_data = htonl(imm_data);
    w.wr.rdma.remote_addr = remote[q].va + off;
    w.wr.rdma.rkey = remote[q].rkey;
    ibv_send_wr* bad = nullptr;
    return mrc_post_send(qps[q], &w, &bad) == 0 ? 0 : errno;
  }
  int post_recv(std::size_t q, std::uint64_t wr_id) {
    ibv_recv_wr w{};
    w.wr_id = wr_id;
    ibv_recv_wr* bad = nullptr;
    return mrc_post_recv(qps[q], &w, &bad) == 0 ? 0 : errno;
  }
  void progress() {
    if (app_progress) (void)mrc_progress(ctx, 0);
  }
  /// Reads the device endpoint's statistics (counters, metrics): libmrc's API has no call for
  /// them, so this goes through the internal accessor, inside UdpEndpoint::execute() so that it
  /// never races a progress thread.
  void stats(const std::function<void(io::UdpEndpoint&)>& fn) const { (void)api::with_endpoint(dev, fn); }
};

struct Params {  // what the client tells the server
  std::uint32_t qps = 1;
  std::uint64_t region = 0;
  std::uint32_t pmtu = 4096;
  std::uint32_t cc = 0;
  std::uint32_t evs_per_plane = 8, backup_per_plane = 2;
  std::uint32_t timeout = 12;
  std::uint32_t ev_mode = 0;
  std::uint32_t planes = 4;
  std::uint64_t seed = 1;  ///< of the data pattern
  std::uint32_t udp_port = 4791;
  std::vector<std::uint64_t> encode() const {
    return {kHello,           qps,     region,  pmtu,   cc,   evs_per_plane,
            backup_per_plane, timeout, ev_mode, planes, seed, udp_port};
  }
  /// False with `err` naming the refused parameter, its value and its range. `hello` tells whether
  /// the values were an mrc perf hello at all (false: a stray connection, not a client).
  bool decode(const std::vector<std::uint64_t>& v, bool& hello, std::string& err) {
    hello = v.size() == 12 && v[0] == kHello;
    if (!hello) {
      err = "not an mrc perf hello (" + std::to_string(v.size()) + " values" +
            (v.empty() ? std::string() : ", first " + std::to_string(v[0])) + ")";
      return false;
    }
    const auto in = [&](const char* name, std::uint64_t x, std::uint64_t lo, std::uint64_t hi) {
      if (x >= lo && x <= hi) return true;
      err = std::string("client parameter ") + name + " = " + std::to_string(x) + " is out of range [" +
            std::to_string(lo) + ", " + std::to_string(hi) + "]";
      return false;
    };
    if (!in("qps (-q)", v[1], 1, kMaxQps) || !in("region per QP (--window)", v[2], 1, kMaxRegion) ||
        !in("pmtu (--pmtu)", v[3], 256, 4096) || !in("cc (--cc)", v[4], 0, 1) ||
        !in("evs_per_plane (--evs)", v[5], 1, 256) || !in("backup_per_plane (--backup-evs)", v[6], 0, 256) ||
        !in("timeout (--timeout)", v[7], 0, 24) || !in("ev_mode (--ev-mode)", v[8], 0, 2) ||
        !in("planes (--local)", v[9], 1, engine::kMaxPorts) || !in("udp_port (--udp-port)", v[11], 1, 65535))
      return false;
    if ((v[3] & (v[3] - 1)) != 0) {
      err = "client parameter pmtu (--pmtu) = " + std::to_string(v[3]) +
            " is not a power of two in [256, 4096]";
      return false;
    }
    if (v[2] * v[1] > kMaxRegionTotal) {
      err = "client parameters region per QP (--window) " + std::to_string(v[2]) + " x qps (-q) " +
            std::to_string(v[1]) + " exceed the limit of " + std::to_string(kMaxRegionTotal) +
            " bytes (4 GiB) over all QPs";
      return false;
    }
    qps = static_cast<std::uint32_t>(v[1]);
    region = v[2];
    pmtu = static_cast<std::uint32_t>(v[3]);
    cc = static_cast<std::uint32_t>(v[4]);
    evs_per_plane = static_cast<std::uint32_t>(v[5]);
    backup_per_plane = static_cast<std::uint32_t>(v[6]);
    timeout = static_cast<std::uint32_t>(v[7]);
    ev_mode = static_cast<std::uint32_t>(v[8]);
    planes = static_cast<std::uint32_t>(v[9]);
    seed = v[10];
    udp_port = static_cast<std::uint32_t>(v[11]);
    return true;
  }
};

/// "2001" or "1001:2002:1002" (hex uSIDs) per path; each side lists its own paths to the other.
bool parse_srv6_paths(const std::vector<std::string>& in, io::Srv6Config& out, std::string& err) {
  if (in.empty()) {
    err = "SRv6 mode needs --srv6-paths (the uSIDs of each path, e.g. 2001,2002)";
    return false;
  }
  out.paths.clear();
  for (const std::string& p : in) {
    std::vector<std::uint16_t> usids;
    std::size_t at = 0;
    for (;;) {
      const std::size_t end = std::min(p.find(':', at), p.size());
      const std::string u = p.substr(at, end - at);
      const bool hex = !u.empty() && u.size() <= 4 &&
                       std::all_of(u.begin(), u.end(), [](char ch) { return std::isxdigit(ch) != 0; });
      const unsigned long v = hex ? std::stoul(u, nullptr, 16) : 0;
      if (v == 0) {
        err = "--srv6-paths: '" + p + "' is not a list of non-zero hex uSIDs joined by ':'";
        return false;
      }
      usids.push_back(static_cast<std::uint16_t>(v));
      if (end == p.size()) break;
      at = end + 1;
    }
    out.paths.push_back(std::move(usids));
  }
  return true;
}

/// Opt-in authentication: this side's announcement carries a fresh transmit key.
bool add_auth_key(io::ConnInfo& c, std::string& err) {
  c.auth = true;
  return io::random_mac_key(c.auth_key, err);
}

constexpr std::uint64_t kProfileId = 1;  ///< perf's EV format, EV and CC profile on its own device

/// The QPs' EV set and congestion control as profiles of the session's device, applied through
/// mrc_ctl.h on perf's own context as a controller would, by the code `mrc ctl apply` runs
/// (api::apply_profiles; docs/perf.md): an explicit EV profile holding the EVs
/// engine::make_ev_set(planes, evs, backup) makes (STEV format 16 + 16 bits, source port 0 and the
/// value as flow label, so each EV keeps that value: D37), and a CC profile with no CC or NSCC
/// derived for --rate per plane. Which of the EVs are active comes with each QP's vendor
/// configuration (make_vendor_cfg).
bool program_profiles(Session& s, const PerfOptions& o, const Params& prm, std::string& err) {
  api::ProfileFile f;
  f.file = "mrc perf's profiles";
  api::FmtDef& fmt = f.fmts.emplace_back();
  fmt.id = kProfileId;
  fmt.mode = MRC_CTL_EV_FMT_MODE_STEV;
  fmt.widths = {{16}, {16}};
  api::EvDef& ev = f.evps.emplace_back();
  ev.id = kProfileId;
  ev.mode = MRC_CTL_EV_MODE_EXP;
  ev.fmt_id = kProfileId;
  ev.fields = {{16, 0, 0, 0xFFFF, 0xFFFF}, {16, 0, 0, 0xFFFF, 0xFFFF}};
  ev.event_mask = 0;  // perf reads no EV events
  for (const engine::Ev& e : engine::make_ev_set(prm.planes, prm.evs_per_plane, prm.backup_per_plane)) {
    mrc_ctl_ev_op_entry& x = ev.evs.emplace_back();  // ev unpopulated: each fills the next free entry
    x.ev_new.val[2] = static_cast<std::uint8_t>(e.value >> 8);
    x.ev_new.val[3] = static_cast<std::uint8_t>(e.value);
    x.ev_new.port = static_cast<std::uint8_t>(e.port + 1);
    x.state = MRC_CTL_EV_GOOD;
  }
  ev.count = static_cast<std::uint32_t>(ev.evs.size());
  api::CcDef& cc = f.ccs.emplace_back();
  cc.id = kProfileId;
  cc.algorithm = "none";
  if (prm.cc == 1) {
    // The UET derivation for the QP's line rate (all planes) and a 20 us base RTT; the rate itself
    // reaches NSCC through the vendor configuration (OCP's NSCC struct has no line rate).
    cc.algorithm = "uet-1.0-nscc";
    cc.cfg = api::ProfileStore::nscc_to_ctl(cc::NsccConfig::derive(
        static_cast<std::uint64_t>(o.rate_gbps * 1e9 * prm.planes), 20'000, prm.pmtu + 64, false));
  }
  const api::ApplyResult r = api::apply_profiles(api::ctl_handle(s.ctx), f);
  if (r.rc != 0) err = r.message;
  return r.rc == 0;
}

/// The settings of a QP that OCP's attributes do not carry (src/api/vendor_cfg.hpp, docs/api.md):
/// the active / backup split of the EV profile, NSCC's line rate and, once both sides announced
/// themselves, the authentication keys and the wire-extension agreement.
void make_vendor_cfg(const PerfOptions& o, const Params& prm, const engine::QpAuth* auth,
                     const bool* wire_ext, std::uint8_t (&out)[MRC_MAX_VENDOR_CFG_SIZE]) {
  api::VendorCfg vc;
  vc.flags = api::kVcActiveEvs;
  vc.active_evs = prm.planes * prm.evs_per_plane;
  if (prm.cc == 1) {
    vc.flags |= api::kVcCcLineRate;
    vc.line_rate_bps = static_cast<std::uint64_t>(o.rate_gbps * 1e9 * prm.planes);
  }
  if (auth != nullptr && auth->on) {
    vc.flags |= api::kVcAuth;
    vc.tx_key = auth->tx;
    vc.rx_key = auth->rx;
  }
  if (wire_ext != nullptr) vc.flags |= api::kVcWireExtSet | (*wire_ext ? api::kVcWireExtOn : 0);
  api::encode_vendor_cfg(vc, out);
}

bool open_session(Session& s, const PerfOptions& o, const Params& prm, const std::vector<io::IpAddr>& local,
                  std::string& err) {
  // The harness settings the public API has no call for, through libmrc's one internal entry point.
  api::DeviceTuning t;
  io::UdpConfig& uc = t.udp;
  uc.ev_mode = prm.ev_mode == 2 ? io::EvMode::kSrv6 : prm.ev_mode == 1 ? io::EvMode::kStev : io::EvMode::kUdp;
  if (uc.ev_mode == io::EvMode::kSrv6 && !parse_srv6_paths(o.srv6_paths, uc.srv6, err)) return false;
  uc.max_packet = prm.pmtu + 256;
  uc.gso_burst = o.gso;
  uc.engine.wire_ext = o.wire_ext;
  if (!o.impair_file.empty() && !io::load_impair_file(o.impair_file, uc.impair, err)) return false;
  if (!o.impair.empty() && !io::parse_impair(o.impair, uc.impair, err)) return false;
  t.owner_controls = true;         // perf programs its own device's profiles (program_profiles)
  t.warn_prefix = "mrc perf";      // `mrc ctl list` finds the device as "perf"; it works without
  std::vector<std::string> addrs;  // mrc_device_config points into these
  for (const io::IpAddr& a : local) addrs.push_back(a.str());
  mrc_device_config dc{};
  dc.num_planes = static_cast<std::uint32_t>(addrs.size());
  for (std::size_t i = 0; i < addrs.size(); ++i) dc.plane_addr[i] = addrs[i].c_str();
  dc.udp_port = o.udp_port;
  dc.seed = o.seed * 2 + (o.server ? 1 : 2);
  dc.name = "perf";
  s.dev = api::open_tuned_device(dc, &t, &err);
  if (s.dev == nullptr) {
    if (err.empty()) err = std::string("cannot open the device: ") + std::strerror(errno);
    return false;
  }
  s.cfg = uc;
  s.cfg.planes = local;
  s.cfg.port = o.udp_port;
  if (g_pcap) {
    s.pcap = g_pcap.get();
    s.stats([&](io::UdpEndpoint& ep) { ep.set_pcap(s.pcap); });
  }
  // The client always drives progress itself; --progress-thread is the server's.
  s.app_progress = !(o.server && o.progress_thread);
  mrc_context_attr ca{};
  s.ctx = mrc_create_context_ex(s.dev, &ca, s.app_progress ? MRC_CONTEXT_APP_PROGRESS : 0);
  if (s.ctx == nullptr) return err = std::string("mrc_create_context_ex: ") + std::strerror(errno), false;
  if (!program_profiles(s, o, prm, err)) return false;
  s.region = prm.region;
  s.buf.assign(prm.qps * prm.region, 0);
  s.pd = ibv_alloc_pd(s.dev);
  if (s.pd != nullptr)
    s.mr = ibv_reg_mr(s.pd, s.buf.data(), s.buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (s.mr == nullptr) {
    err = "memory registration failed";
    return false;
  }
  constexpr std::uint32_t kQueueDepth = 4096;  // send and receive WRs per QP (the engine's default)
  s.send_cq = mrc_create_cq(s.ctx, static_cast<int>(prm.qps * kQueueDepth), nullptr, nullptr, 0);
  s.recv_cq = mrc_create_cq(s.ctx, static_cast<int>(prm.qps * kRecvsPerQp), nullptr, nullptr, 0);
  if (s.send_cq == nullptr || s.recv_cq == nullptr)
    return err = std::string("mrc_create_cq failed: ") + std::strerror(errno), false;
  for (std::uint32_t q = 0; q < prm.qps; ++q) {
    mrc_qp_init_attr ia{};
    ia.send_cq = s.send_cq;
    ia.recv_cq = s.recv_cq;
    ia.pd = s.pd;
    ia.cap.max_send_wr = kQueueDepth;
    ia.cap.max_recv_wr = kRecvsPerQp;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.sq_sig_all = 1;
    ia.protocol_version = MRC_PROTOCOL_VERSION_1;
    mrc_qp* qp = mrc_create_qp(s.ctx, &ia);
    if (qp == nullptr) return err = "create_qp failed: " + std::string(std::strerror(errno)), false;
    s.qps.push_back(qp);
    std::uint32_t qpn = 0;
    (void)mrc_get_qpn(qp, &qpn);
    s.qpns.push_back(qpn);
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_INIT;
    v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    mrc_qp_attr m{};
    m.profile.ev_profile_id = kProfileId;
    m.profile.cc_profile_id = kProfileId;
    make_vendor_cfg(o, prm, nullptr, nullptr, m.vendor_cfg);
    if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &m,
                      MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | MRC_QP_VENDOR_CFG) != 0)
      return err = "create_qp failed: " + std::string(std::strerror(errno)), false;
  }
  return true;
}

io::ConnInfo local_info(const Session& s, std::size_t q, const std::vector<io::IpAddr>& local) {
  io::ConnInfo c;
  c.qpn = s.qpns[q];
  c.psn = io::random_psn();
  c.rkey = s.mr->rkey;
  c.va = reinterpret_cast<std::uintptr_t>(s.buf.data() + q * s.region);
  c.length = s.region;
  c.planes = local;
  c.wire_ext = s.cfg.engine.wire_ext;
  return c;
}

ibv_mtu to_ibv_mtu(std::uint32_t pmtu) {
  switch (pmtu) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    default:
      return IBV_MTU_4096;
  }
}

bool connect_qps(Session& s, const PerfOptions& o, const Params& prm, const std::vector<io::ConnInfo>& mine,
                 const std::vector<io::ConnInfo>& theirs, const std::vector<io::IpAddr>& remote_override,
                 std::uint16_t peer_udp_port, std::string& err) {
  const std::vector<io::IpAddr>& peer_addrs = remote_override.empty() ? theirs[0].planes : remote_override;
  mrc_peer_attr pa{};
  pa.num_planes = static_cast<std::uint32_t>(peer_addrs.size());
  const int family = s.cfg.planes[0].family;
  for (std::size_t i = 0; i < peer_addrs.size() && i < MRC_MAX_PLANES; ++i) {
    if (peer_addrs[i].family != family) pa.num_planes = 0;  // refused below, as a count mismatch is
    peer_addrs[i].to_gid(pa.plane_gid[i].raw);
  }
  pa.udp_port = peer_udp_port;
  if (peer_addrs.size() > MRC_MAX_PLANES || mrc_add_peer(s.dev, &pa) != 0) {
    err = "peer plane addresses do not match the local planes (count or family)";
    return false;
  }
  s.remote = theirs;
  for (std::size_t q = 0; q < s.qpns.size(); ++q) {
    engine::QpAuth auth;
    if (!io::qp_auth(mine[q], theirs[q], auth, err)) return false;
    const bool wire_ext = io::qp_wire_ext(mine[q], theirs[q]);  // D45: both sides offer them, or spec packets
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_RTR;
    v.path_mtu = to_ibv_mtu(prm.pmtu);
    v.dest_qp_num = theirs[q].qpn;
    v.rq_psn = theirs[q].psn;
    v.ah_attr.is_global = 1;
    v.ah_attr.port_num = 1;
    peer_addrs[0].to_gid(v.ah_attr.grh.dgid.raw);
    mrc_qp_attr m{};
    // Our responder windows as announced to the peer (ConnInfo); the peer's bound our requester
    // through its SACKs, and our own MPR / MAX_WIMM (the engine's, equal to what it announces).
    m.mpr.mpr_dest = mine[q].mpr_dest;
    m.wimm.max_wimm_dest = mine[q].max_wimm_dest;
    make_vendor_cfg(o, prm, &auth, &wire_ext, m.vendor_cfg);
    if (mrc_modify_qp(s.qps[q], &v,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, &m,
                      MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM_DEST | MRC_QP_VENDOR_CFG) != 0) {
      err = "connect_qp failed: " + std::string(std::strerror(errno));
      return false;
    }
    v = ibv_qp_attr{};
    v.qp_state = IBV_QPS_RTS;
    v.sq_psn = mine[q].psn;
    m = mrc_qp_attr{};
    m.timeout = static_cast<std::uint8_t>(prm.timeout);
    if (mrc_modify_qp(s.qps[q], &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m, MRC_QP_TIMEOUT) != 0) {
      err = "connect_qp failed: " + std::string(std::strerror(errno));
      return false;
    }
    for (std::uint32_t i = 0; i < kRecvsPerQp; ++i)
      if (const int rc = s.post_recv(q, i); rc != 0) {
        err = "post_recv failed: " + std::string(std::strerror(rc));
        return false;
      }
  }
  return true;
}

// ------------------------------------------------------------------------------------------------
// Data pattern: the 8-byte word at offset i of a region is mix64(key + i), key = f(seed, QP, window).

std::uint64_t pattern_key(std::uint64_t seed, std::size_t q, std::uint64_t window) {
  return mix64(mix64(seed) ^ (static_cast<std::uint64_t>(q) << 40) ^ window);
}

/// Writes bytes [0, len) of a region whose byte 0 is at region offset `base` (a multiple of 8).
void fill_pattern(std::uint8_t* p, std::uint64_t base, std::uint64_t len, std::uint64_t key) {
  std::uint64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const std::uint64_t w = mix64(key + base + i);
    std::memcpy(p + i, &w, 8);
  }
  if (i < len) {
    const std::uint64_t w = mix64(key + base + i);
    std::memcpy(p + i, &w, static_cast<std::size_t>(len - i));
  }
}

/// Bytes of region[0, len) that differ from the pattern `key`.
std::uint64_t pattern_mismatches(const std::uint8_t* region, std::uint64_t len, std::uint64_t key) {
  constexpr std::uint64_t kChunk = 1 << 16;
  std::vector<std::uint8_t> want(kChunk);
  std::uint64_t bad = 0;
  for (std::uint64_t off = 0; off < len; off += kChunk) {
    const std::uint64_t n = std::min(kChunk, len - off);
    fill_pattern(want.data(), off, n, key);
    if (std::memcmp(want.data(), region + off, static_cast<std::size_t>(n)) == 0) continue;
    for (std::uint64_t i = 0; i < n; ++i) bad += want[i] != region[off + i];
  }
  return bad;
}

// ------------------------------------------------------------------------------------------------
// Path MTU from the interfaces

/// IP + UDP + the largest MRC header + room for a trailer (ICRC, authentication tag).
std::uint32_t packet_overhead(int family) {
  return (family == AF_INET6 ? 40u : 20u) + 8u + static_cast<std::uint32_t>(wire::kMaxHeaderSize) + 32u;
}

/// MTU of the interface holding `a` (io::interface_of); 0 if no interface has it.
std::uint32_t interface_mtu(const io::IpAddr& a) {
  const int idx = io::interface_of(a);
  ifreq r{};
  if (idx == 0 || ::if_indextoname(static_cast<unsigned>(idx), r.ifr_name) == nullptr) return 0;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const bool ok = fd >= 0 && ::ioctl(fd, SIOCGIFMTU, &r) == 0;
  if (fd >= 0) ::close(fd);
  return ok && r.ifr_mtu > 0 ? static_cast<std::uint32_t>(r.ifr_mtu) : 0;
}

/// Checks `pmtu` against every plane's MTU, or (pmtu == 0) picks the largest of 4096, 2048, ...,
/// 256 that fits all of them, so no datagram is ever fragmented (the send sockets set DF).
bool choose_pmtu(const std::vector<io::IpAddr>& planes, std::uint32_t& pmtu, std::string& err) {
  std::uint32_t fit = 4096;
  for (const io::IpAddr& a : planes) {
    const std::uint32_t mtu = interface_mtu(a);
    if (mtu == 0) {
      err = "no interface has the plane address " + a.str() + " (cannot read its MTU; give --pmtu)";
      return false;
    }
    const std::uint32_t room = mtu > packet_overhead(a.family) ? mtu - packet_overhead(a.family) : 0;
    if (pmtu != 0 && pmtu > room) {
      err = "--pmtu " + std::to_string(pmtu) + " does not fit the MTU " + std::to_string(mtu) + " of plane " +
            a.str() + " (at most " + std::to_string(room) + " payload bytes)";
      return false;
    }
    while (fit >= 256 && fit > room) fit /= 2;
  }
  if (pmtu != 0) return true;
  if (fit < 256) {
    err = "a plane's MTU is too small for a 256-byte payload";
    return false;
  }
  pmtu = fit;
  return true;
}

// ------------------------------------------------------------------------------------------------
// Server

/// "ADDR:PORT" of the TCP peer on `fd` ("?" if the kernel does not say).
std::string peer_name(int fd) {
  sockaddr_in6 sa{};
  socklen_t len = sizeof sa;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  io::IpAddr a;
  std::uint16_t port = 0;
  if (sa.sin6_family == AF_INET) {
    sockaddr_in s4{};
    std::memcpy(&s4, &sa, sizeof s4);
    a.family = AF_INET;
    std::memcpy(a.bytes.data(), &s4.sin_addr, 4);
    port = ntohs(s4.sin_port);
  } else {
    a.family = AF_INET6;
    std::memcpy(a.bytes.data(), &sa.sin6_addr, 16);
    port = ntohs(sa.sin6_port);
  }
  return (a.family == AF_INET6 ? "[" + a.str() + "]" : a.str()) + ":" + std::to_string(port);
}

std::string size_text(std::uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + " GiB";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

std::string stop_text() {
  return std::string("the server was stopped (") + (g_stop == SIGTERM ? "SIGTERM" : "SIGINT") + ")";
}

constexpr std::size_t kMaxPending = 64;  ///< connections reading their hello at once (then: the oldest goes)
constexpr std::size_t kMaxClosing = 64;  ///< refused connections whose reason is still being delivered
constexpr Duration kLinger = 2'000'000'000ull;       ///< for the peer to read a reason and close
constexpr Duration kSessionSend = 5'000'000'000ull;  ///< a session's client that reads nothing: ended

/// The setup port apart from the connection of the session being served. Every connection is
/// accepted as it comes and the hellos of all of them are read at once, each against its own total
/// deadline (--hello-timeout, for the whole message, however it trickles in), so a silent, slow or
/// malformed peer only ever ends its own connection and the first valid hello is served at once.
/// While a session runs, every new connection is told at once that the server is busy (none is
/// queued). Refusals are sent without waiting on any peer: the reason goes out, our side is
/// half-closed, and the connection is kept (at most 2 s, 64 of them) until the peer closes it, so
/// the reason is read before any reset.
class Lobby {
 public:
  /// A connection whose first message is a complete value list (possibly a hello).
  struct Arrival {
    io::OobChannel ch;
    std::string who;
    std::vector<std::uint64_t> values;
  };

  Lobby(io::OobListener& l, Duration hello_timeout) : l_(l), hello_timeout_(hello_timeout) {}

  /// Up to `timeout` (or a stop signal) for the next connection that completes its first message.
  std::optional<Arrival> next(Duration timeout) {
    const Time until = io::UdpEndpoint::now() + timeout;
    for (;;) {
      for (std::size_t i = 0; i < pending_.size(); ++i) {
        if (pending_[i].rd.status() != io::OobFrameReader::Status::kDone) continue;
        Pending p = std::move(pending_[i]);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        std::string err;
        std::vector<std::uint64_t> v;
        if (p.rd.is(io::OobType::kValues, err) && io::decode_values_body(p.rd.body(), v, err))
          return Arrival{std::move(p.ch), std::move(p.who), std::move(v)};
        drop(std::move(p.ch), p.who, err);
        --i;
      }
      if (g_stop != 0 || io::UdpEndpoint::now() >= until) return std::nullopt;
      step(until, -1, Mode::kRead, "");
    }
  }

  /// A stray connection (not an mrc perf client): said on stderr, counted, and told why.
  void drop(io::OobChannel ch, const std::string& who, const std::string& why, std::string tell = {}) {
    std::fprintf(stderr, "mrc perf server: dropped the connection from %s: %s\n", who.c_str(), why.c_str());
    ++stray_;
    if (g_stop == 0) close_with(std::move(ch), tell.empty() ? "not an mrc perf client: " + why : tell);
  }

  /// Sends `why` (never waiting for room), half-closes and keeps the connection until the peer closes.
  void close_with(io::OobChannel ch, const std::string& why) {
    std::string e;
    ch.set_send_timeout(0);
    if (!ch.valid() || !ch.send_error(why, e)) return;
    ::shutdown(ch.fd(), SHUT_WR);
    if (closing_.size() >= kMaxClosing) closing_.erase(closing_.begin());  // the oldest: closed now
    closing_.push_back({std::move(ch), io::UdpEndpoint::now() + kLinger});
  }

  /// While a session with `busy_with` runs (never blocks): the connections still reading their hello
  /// and every new one are told the server is busy; reasons already sent are delivered.
  void turn_away(const std::string& busy_with) {
    for (Pending& p : pending_) turn_away_one(std::move(p.ch), p.who, busy_with);
    pending_.clear();
    step(io::UdpEndpoint::now(), -1, Mode::kBusy, busy_with);
  }

  /// Until `fd` is readable (true), `until` or a stop signal (false), turning others away meanwhile.
  bool wait_readable(int fd, Time until, const std::string& busy_with) {
    turn_away(busy_with);
    for (;;) {
      if (g_stop != 0) return false;
      if (step(until, fd, Mode::kBusy, busy_with)) return true;
      if (io::UdpEndpoint::now() >= until) return false;
    }
  }

  /// Before the server exits: up to 2 s for the refused peers to read their reason.
  void finish() {
    pending_.clear();
    while (!closing_.empty()) step(io::UdpEndpoint::now() + kLinger, -1, Mode::kNone, "");
  }

  std::uint64_t stray() const { return stray_; }

 private:
  enum class Mode { kRead, kBusy, kNone };  ///< what new connections get: a hello read, "busy", nothing
  struct Pending {
    io::OobChannel ch;
    std::string who;
    Time deadline = 0;
    io::OobFrameReader rd;
  };
  struct Closing {
    io::OobChannel ch;
    Time until = 0;
  };

  void turn_away_one(io::OobChannel ch, const std::string& who, const std::string& busy_with) {
    std::fprintf(stderr, "mrc perf server: turned away %s: busy with %s\n", who.c_str(), busy_with.c_str());
    close_with(std::move(ch),
               "server busy with another client (" + busy_with + "); try again when it is done");
  }

  /// One poll of the listener, `fd` (if >= 0), the pending and the closing connections, for up to
  /// `until` (100 ms at most, so a stop signal is seen); then serves what is ready. True if `fd` is
  /// readable.
  bool step(Time until, int fd, Mode mode, const std::string& busy_with) {
    Time now = io::UdpEndpoint::now();
    Time wake = until;
    for (const Pending& p : pending_) wake = std::min(wake, p.deadline);
    for (const Closing& c : closing_) wake = std::min(wake, c.until);
    std::vector<pollfd> fds;
    const bool listen = mode != Mode::kNone && now >= accept_pause_;
    fds.push_back({listen ? l_.fd() : -1, POLLIN, 0});
    fds.push_back({fd, POLLIN, 0});
    for (const Pending& p : pending_) fds.push_back({p.ch.fd(), POLLIN, 0});
    for (const Closing& c : closing_) fds.push_back({c.ch.fd(), POLLIN, 0});
    const int ms = wake <= now ? 0 : static_cast<int>(std::min<Duration>((wake - now) / 1'000'000 + 1, 100));
    if (::poll(fds.data(), fds.size(), ms) < 0) {
      for (pollfd& p : fds) p.revents = 0;
    }
    now = io::UdpEndpoint::now();
    const std::size_t np = pending_.size(), nc = closing_.size();
    // Refused connections: read what they send until they close (or their time is up).
    std::uint8_t sink[4096];
    std::vector<bool> gone(nc, false);
    for (std::size_t i = 0; i < nc; ++i) {
      if (fds[2 + np + i].revents != 0) {
        ssize_t r = 1;  // at most 64 KiB a step: a peer that keeps sending cannot hold the loop
        for (int k = 0; k < 16 && r > 0; ++k)
          r = ::recv(closing_[i].ch.fd(), sink, sizeof sink, MSG_DONTWAIT);
        gone[i] = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      }
      gone[i] = gone[i] || now >= closing_[i].until;
    }
    for (std::size_t i = nc; i-- > 0;)
      if (gone[i]) closing_.erase(closing_.begin() + static_cast<std::ptrdiff_t>(i));
    // Hellos: whatever has arrived; a bad frame or the end of its time ends a connection.
    std::vector<bool> dead(np, false);
    for (std::size_t i = 0; i < np; ++i) {
      Pending& p = pending_[i];
      std::string err;
      if (fds[2 + i].revents != 0 && p.rd.read_from(p.ch.fd(), err) == io::OobFrameReader::Status::kError) {
        drop(std::move(p.ch), p.who, err);
        dead[i] = true;
      } else if (p.rd.status() == io::OobFrameReader::Status::kMore && now >= p.deadline) {
        std::string got;
        if (p.rd.received() != 0)
          got = ": " + std::to_string(p.rd.received()) + " of " + std::to_string(p.rd.expected()) +
                (p.rd.have_header() ? " bytes of the message" : " header bytes") + " came";
        drop(std::move(p.ch), p.who,
             "no hello within " + CLI::detail::to_string(static_cast<double>(hello_timeout_) * 1e-9) +
                 " s (--hello-timeout)" + got);
        dead[i] = true;
      }
    }
    for (std::size_t i = np; i-- > 0;)
      if (dead[i]) pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    if (listen && fds[0].revents != 0) accept_all(mode, busy_with);
    return fd >= 0 && fds[1].revents != 0;
  }

  /// Every connection waiting in the listener's backlog.
  void accept_all(Mode mode, const std::string& busy_with) {
    for (std::size_t n = 0; n < kMaxPending; ++n) {
      std::string err;
      std::optional<io::OobChannel> ch = l_.accept(0, err);
      if (!ch) {
        if (err != "oob: no client connected in time" && err.find("Interrupted") == std::string::npos) {
          std::fprintf(stderr, "mrc perf server: %s\n", err.c_str());
          accept_pause_ = io::UdpEndpoint::now() + 100'000'000;  // e.g. out of descriptors: not a busy loop
        }
        return;
      }
      std::string who = peer_name(ch->fd());
      if (mode == Mode::kBusy) {
        turn_away_one(std::move(*ch), who, busy_with);
        continue;
      }
      if (pending_.size() >= kMaxPending) {  // the one that has had the longest makes room
        Pending old = std::move(pending_.front());
        pending_.erase(pending_.begin());
        const std::string why = std::to_string(kMaxPending) +
                                " connections were waiting for their hello and this one the longest";
        drop(std::move(old.ch), old.who, why,
             "server busy: " + why + " (a newer connection took its place); try again");
      }
      pending_.push_back({std::move(*ch), std::move(who), io::UdpEndpoint::now() + hello_timeout_, {}});
    }
  }

  io::OobListener& l_;
  Duration hello_timeout_;
  std::vector<Pending> pending_;
  std::vector<Closing> closing_;
  Time accept_pause_ = 0;
  std::uint64_t stray_ = 0;
};

std::uint64_t rx_datagrams(const Session& s) {
  std::uint64_t n = 0;
  s.stats([&](io::UdpEndpoint& ep) {
    for (const auto& c : ep.plane_counters()) n += c.rx_packets;
  });
  return n;
}

/// The endpoint's counters as JSON / Prometheus text (--metrics).
nlohmann::json metrics_json(const Session& s) {
  nlohmann::json j;
  s.stats([&](io::UdpEndpoint& ep) { j = io::metrics_json(ep); });
  return j;
}
std::string metrics_prometheus(const Session& s) {
  std::string t;
  s.stats([&](io::UdpEndpoint& ep) { t = io::metrics_prometheus(ep); });
  return t;
}

enum class SessionEnd { kCompleted, kFailed, kStray };

/// One client, from its hello (`vals`, the first message of `ch`) to its kDone (or the first
/// error, which the client is told). Others are turned away meanwhile (Lobby::turn_away).
SessionEnd serve_session(Lobby& lobby, io::OobChannel ch, const std::vector<std::uint64_t>& vals0,
                         const PerfOptions& o, const std::vector<io::IpAddr>& local,
                         const std::vector<io::IpAddr>& remote, const std::string& who) {
  std::string err;
  Params prm;
  bool hello = false;
  const auto refuse_params = [&](const std::string& why) {
    std::fprintf(stderr, "mrc perf server: refused the client at %s: %s\n", who.c_str(), why.c_str());
    lobby.close_with(std::move(ch), "refused the client's parameters: " + why);
    return SessionEnd::kFailed;
  };
  if (!prm.decode(vals0, hello, err)) {
    if (hello) return refuse_params(err);  // an mrc perf client whose parameters are refused: told why
    lobby.drop(std::move(ch), who, err);
    return SessionEnd::kStray;
  }
  // Nothing is allocated for a client before its request fits this server's limit.
  if (const std::uint64_t need = std::uint64_t{prm.qps} * prm.region; need > o.max_memory)
    return refuse_params("qps (-q) " + std::to_string(prm.qps) + " x region per QP (--window) " +
                         size_text(prm.region) + " = " + size_text(need) +
                         " of memory, more than this server's limit of " + size_text(o.max_memory) +
                         " (--max-memory); use fewer QPs or a smaller --window (or -s), or give the server a "
                         "larger --max-memory");
  const auto refuse = [&](const std::string& why) {
    std::fprintf(stderr, "mrc perf server: session with %s failed: %s\n", who.c_str(), why.c_str());
    lobby.close_with(std::move(ch), why);
    return SessionEnd::kFailed;
  };
  if (local.size() != prm.planes)
    return refuse("the client uses " + std::to_string(prm.planes) + " plane(s), this server has " +
                  std::to_string(local.size()) + " (its --local); give both sides the same number of planes");
  if (std::uint32_t pmtu = prm.pmtu; !choose_pmtu(local, pmtu, err))
    return refuse("the client's --pmtu " + std::to_string(prm.pmtu) + " does not fit here: " + err);
  lobby.turn_away(who);               // from now on, this client's session
  ch.set_send_timeout(kSessionSend);  // a client that reads nothing ends its session, not the server
  Session s;
  if (!open_session(s, o, prm, local, err)) return refuse(err);
  std::vector<io::ConnInfo> mine, theirs(prm.qps);
  for (std::uint32_t q = 0; q < prm.qps; ++q) mine.push_back(local_info(s, q, local));
  // The client's messages, read without blocking: others are answered while they trickle in.
  io::OobFrameReader rd;
  const Time setup_until = io::UdpEndpoint::now() + kOobTimeout;  // for the whole setup
  const auto recv_setup = [&](io::OobType want) {
    rd.reset();
    for (;;) {
      const io::OobFrameReader::Status st = rd.read_from(ch.fd(), err);
      if (st == io::OobFrameReader::Status::kError) return false;
      if (st == io::OobFrameReader::Status::kDone) return rd.is(want, err);
      if (!lobby.wait_readable(ch.fd(), setup_until, who)) {
        err = g_stop != 0 ? stop_text()
                          : "the client did not complete its setup within " +
                                std::to_string(kOobTimeout / 1'000'000'000) + " s";
        return false;
      }
    }
  };
  for (std::uint32_t q = 0; q < prm.qps; ++q) {
    if (!recv_setup(io::OobType::kConnInfo) || !io::decode_conn_info_body(rd.body(), theirs[q], err) ||
        ((theirs[q].auth || o.auth) && !add_auth_key(mine[q], err)) || !ch.send_conn_info(mine[q], err))
      return refuse(err);
  }
  if (!connect_qps(s, o, prm, mine, theirs, remote, static_cast<std::uint16_t>(prm.udp_port), err))
    return refuse(err);
  const std::uint64_t ready[] = {1, o.udp_port};
  if (!ch.send_values(ready, err)) return refuse(err);
  std::fprintf(stderr, "mrc perf server: serving the client at %s (%u QP(s), %u plane(s), wire ext %s)\n",
               who.c_str(), prm.qps, prm.planes, io::qp_wire_ext(mine[0], theirs[0]) ? "on" : "off");
  // With --progress-thread, libmrc's progress thread has run since the context was made; it stops
  // when the session's context goes (Session's destructor), whatever the way out.
  double cpu0 = cpu_seconds();
  std::uint64_t pongs = 0, recvs = 0, verified = 0;
  ibv_wc wc[kPollBatch];
  std::uint64_t rx_seen = 0;
  Time last_activity = io::UdpEndpoint::now();
  std::vector<std::uint64_t> vals;
  rd.reset();
  for (std::uint64_t spin = 0;; ++spin) {
    s.progress();
    // Pong send completions only need taking off their CQ: every 1024 rounds is enough, as the
    // client has one ping (so the server one pong) in flight at a time, and the CQ holds 4096.
    for (int n = (spin & 1023) == 0 ? kPollBatch : 0; n == kPollBatch;)
      if ((n = mrc_poll_cq(s.send_cq, kPollBatch, wc)) < 0) return refuse(cq_error(errno));
    for (int n = kPollBatch; n == kPollBatch;) {
      if ((n = mrc_poll_cq(s.recv_cq, kPollBatch, wc)) < 0) return refuse(cq_error(errno));
      for (int i = 0; i < n; ++i) {
        const ibv_wc& c = wc[i];
        const std::size_t q = s.qp_index(c.qp_num);
        ++recvs;
        (void)s.post_recv(q, c.wr_id);
        const std::uint32_t imm = ntohl(c.imm_data);
        if (c.status == IBV_WC_SUCCESS && (c.wc_flags & IBV_WC_WITH_IMM) && (imm & kPingBit) != 0 &&
            c.byte_len > 0) {
          // the pong returns the ping's bytes from where the ping wrote them
          const std::uint64_t off = ((imm & 0xFFFFFF) % (s.region / c.byte_len)) * c.byte_len;
          if (const int rc = s.post_write(q, 1ull << 40, off, c.byte_len, true, kPongBit | (imm & 0xFFFFFF));
              rc != 0)
            return refuse(std::string("pong refused: ") + std::strerror(rc));
          ++pongs;
        }
      }
    }
    if ((spin & 1023) != 0) continue;
    const Time now = io::UdpEndpoint::now();
    if (g_stop != 0) return refuse(stop_text());
    // Another client while this one runs: told to come back later, not queued in silence.
    lobby.turn_away(who);
    if (const std::uint64_t rx = rx_datagrams(s); rx != rx_seen) {
      rx_seen = rx;
      last_activity = now;
    }
    const std::size_t had = rd.received();
    const io::OobFrameReader::Status st = rd.read_from(ch.fd(), err);
    if (rd.received() != had) last_activity = now;
    if (st == io::OobFrameReader::Status::kMore) {
      if (now - last_activity > kSessionIdle)
        return refuse("nothing from the client for 60 s (no datagram, no control message)");
      continue;
    }
    if (st == io::OobFrameReader::Status::kError) {
      // A client killed mid-session shows up as an orderly close or as a reset, whichever the
      // kernel saw first; both mean it went away.
      const bool reset = err.find(std::strerror(ECONNRESET)) != std::string::npos;
      return refuse(err == "oob: peer closed the connection" ? "the client went away (closed its connection)"
                    : reset                                  ? "the client went away (connection reset)"
                                                             : err);
    }
    if (!rd.is(io::OobType::kValues, err) || !io::decode_values_body(rd.body(), vals, err))
      return refuse(err);
    rd.reset();
    const bool verify =
        vals.size() == 2 + prm.qps && vals[0] == kVerify &&
        std::all_of(vals.begin() + 2, vals.end(), [&](std::uint64_t b) { return b <= s.region; });
    if (!verify && !(vals.size() == 1 && vals[0] == kDone)) return refuse("unexpected control message");
    std::vector<std::uint64_t> reply;
    if (verify) {  // {kVerify, window, bytes written per QP}: mismatching bytes per QP
      const double cpu_before = cpu_seconds();
      for (std::uint32_t q = 0; q < prm.qps; ++q)
        reply.push_back(pattern_mismatches(s.region_of(q), vals[2 + q], pattern_key(prm.seed, q, vals[1])));
      verified += std::accumulate(vals.begin() + 2, vals.end(), std::uint64_t{0});
      cpu0 += cpu_seconds() - cpu_before;  // the reported CPU time is the data path's
    } else {
      reply.push_back(static_cast<std::uint64_t>((cpu_seconds() - cpu0) * 1e6));
    }
    if (!ch.send_values(reply, err)) return refuse(err);
    if (!verify) break;
  }
  if (o.json) {
    nlohmann::json j;
    j["role"] = "server";
    j["client"] = who;
    j["recv_completions"] = recvs;
    j["pongs"] = pongs;
    j["verified_bytes"] = verified;
    j["cpu_s"] = cpu_seconds() - cpu0;
    if (o.metrics) j["metrics"] = metrics_json(s);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "mrc perf server: done, %llu receive completions, %llu pongs, %llu bytes verified, CPU %.2f s\n",
        static_cast<unsigned long long>(recvs), static_cast<unsigned long long>(pongs),
        static_cast<unsigned long long>(verified), cpu_seconds() - cpu0);
    if (o.metrics) std::printf("%s", metrics_prometheus(s).c_str());
  }
  std::fflush(stdout);
  return SessionEnd::kCompleted;
}

extern "C" void perf_on_signal(int sig) {
  g_stop = sig;
}

/// Serves clients one after another (--once: one client) until SIGINT / SIGTERM, then prints the
/// summary. Connections that are not mrc perf clients are dropped and do not count.
int run_server(const PerfOptions& o, const std::vector<io::IpAddr>& local,
               const std::vector<io::IpAddr>& remote) {
  std::string err;
  io::OobListener l;
  if (!l.listen(o.bind, o.oob_port, err)) {
    std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = perf_on_signal;  // no SA_RESTART: a blocking poll returns at once
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // With --json, stdout carries only the JSON reports: the address goes to stderr, so a script can
  // still find a server started on a free port (-p 0).
  std::fprintf(o.json ? stderr : stdout, "mrc perf server: waiting on %s:%u (UDP port %u)%s\n",
               o.bind.c_str(), l.port(), o.udp_port, o.once ? ", one client" : "; Ctrl-C ends it");
  std::fflush(stdout);
  std::uint64_t done = 0, failed = 0;
  Lobby lobby(l, static_cast<Duration>(o.hello_timeout * 1e9));
  while (g_stop == 0) {
    std::optional<Lobby::Arrival> a = lobby.next(200'000'000);
    if (!a) continue;
    const SessionEnd end = serve_session(lobby, std::move(a->ch), a->values, o, local, remote, a->who);
    if (end == SessionEnd::kStray) continue;  // counted by the lobby
    ++(end == SessionEnd::kCompleted ? done : failed);
    if (o.once) {
      lobby.finish();
      return end == SessionEnd::kCompleted ? 0 : 1;
    }
    if (!o.json && g_stop == 0) std::printf("mrc perf server: waiting for the next client\n");
    std::fflush(stdout);
  }
  lobby.finish();
  const std::uint64_t stray = lobby.stray();
  const char* sig = g_stop == SIGTERM ? "SIGTERM" : "SIGINT";
  if (o.json) {
    nlohmann::json j;
    j["role"] = "server";
    j["summary"] = {{"stopped_by", sig},
                    {"sessions", done + failed},
                    {"completed", done},
                    {"failed", failed},
                    {"stray_connections", stray}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "mrc perf server: stopped by %s: %llu session(s), %llu completed, %llu failed; %llu stray "
        "connection(s) dropped\n",
        sig, static_cast<unsigned long long>(done + failed), static_cast<unsigned long long>(done),
        static_cast<unsigned long long>(failed), static_cast<unsigned long long>(stray));
  }
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}

// ------------------------------------------------------------------------------------------------
// Client

struct Interval {
  double t_s = 0;     ///< end, seconds since the size started (pauses included)
  double unix_s = 0;  ///< end, CLOCK_REALTIME (to line up with fault injection times)
  double ms = 0;      ///< length
  std::uint64_t bytes = 0, rtx = 0;
};

struct SizeResult {
  std::uint64_t bytes = 0, iterations = 0;
  double seconds = 0;    ///< elapsed minus the verification pauses: what the rates are over
  double elapsed_s = 0;  ///< real time from the first post to the last completion
  double gbps = 0, mpps = 0, pps = 0, cpu_s = 0;
  std::uint64_t packets = 0;    ///< data packets sent (first transmissions and retransmissions)
  std::uint64_t datagrams = 0;  ///< every UDP datagram sent (data, ACK/SACK/NACK, probes)
  std::uint64_t rtx = 0;
  std::vector<Interval> intervals;
};

double unix_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Sum of sent datagrams over planes.
std::uint64_t tx_packets(const Session& s) {
  std::uint64_t n = 0;
  s.stats([&](io::UdpEndpoint& ep) {
    for (const auto& c : ep.plane_counters()) n += c.tx_packets;
  });
  return n;
}

/// Data packets sent by the session's QPs (new data and retransmissions; no ACKs or probes).
std::uint64_t data_packets(const Session& s) {
  std::uint64_t n = 0;
  s.stats([&](io::UdpEndpoint& ep) {
    for (const std::uint32_t qpn : s.qpns) {
      const auto& c = ep.engine().qp(qpn)->counters();
      n += c.tx_data + c.tx_rtx;
    }
  });
  return n;
}

std::uint64_t rtx_total(const Session& s) {
  std::uint64_t n = 0;
  s.stats([&](io::UdpEndpoint& ep) {
    for (const std::uint32_t qpn : s.qpns) n += ep.engine().qp(qpn)->counters().tx_rtx;
  });
  return n;
}

/// The client's side of the byte-for-byte check (see the top of the file).
struct Verifier {
  io::OobChannel* ch = nullptr;
  std::uint64_t seed = 0;
  std::uint64_t window = 0;
  std::vector<std::uint64_t> ready;  ///< per QP: region bytes holding this window's pattern
  std::uint64_t checked = 0, bad = 0;
  Duration pause = 0;  ///< time spent filling and checking (left out of the measured rates)

  /// Makes region[0, bytes) of QP q hold the current window's pattern.
  void prepare(Session& s, std::size_t q, std::uint64_t bytes) {
    if (bytes <= ready[q]) return;
    const Time t0 = io::UdpEndpoint::now();
    const std::uint64_t from = ready[q] & ~std::uint64_t{7};  // the pattern is laid out in 8-byte words
    fill_pattern(s.region_of(q) + from, from, bytes - from, pattern_key(seed, q, window));
    ready[q] = bytes;
    pause += io::UdpEndpoint::now() - t0;
  }
  /// Has the server compare what this window wrote (all of it completed), then opens the next one.
  bool check(const std::vector<std::uint64_t>& written, std::string& err) {
    const Time t0 = io::UdpEndpoint::now();
    std::vector<std::uint64_t> req{kVerify, window};
    req.insert(req.end(), written.begin(), written.end());
    std::vector<std::uint64_t> rep;
    if (!ch->send_values(req, err) || !ch->recv_values(rep, kOobTimeout, err)) return false;
    if (rep.size() != written.size()) {
      err = "bad verification reply";
      return false;
    }
    checked += std::accumulate(written.begin(), written.end(), std::uint64_t{0});
    bad += std::accumulate(rep.begin(), rep.end(), std::uint64_t{0});
    ++window;
    std::fill(ready.begin(), ready.end(), 0);
    pause += io::UdpEndpoint::now() - t0;
    return true;
  }
};

bool run_bw(Session& s, const PerfOptions& o, std::uint64_t size, Verifier& v, SizeResult& r,
            std::string& err) {
  const std::size_t nq = s.qpns.size();
  const std::uint64_t slots = s.region / size;  // messages per QP and verification window
  const bool timed = o.duration > 0;
  const std::uint64_t per_qp = timed ? UINT64_MAX : o.iters;
  std::vector<std::uint64_t> posted(nq, 0), done(nq, 0), base(nq, 0), written(nq);
  const auto start_window = [&] {
    for (std::size_t q = 0; q < nq; ++q) {
      base[q] = posted[q];
      v.prepare(s, q, std::min(slots, per_qp - posted[q]) * size);
    }
  };
  const auto end_window = [&] {
    for (std::size_t q = 0; q < nq; ++q) written[q] = std::min(posted[q] - base[q], slots) * size;
    return v.check(written, err);
  };
  const std::uint64_t pk0 = data_packets(s), dg0 = tx_packets(s), rtx0 = rtx_total(s);
  start_window();
  const Duration pause0 = v.pause;
  double cpu0 = cpu_seconds();  // the reported CPU time leaves pattern work out
  const Time t0 = io::UdpEndpoint::now();
  const double unix0 = unix_now();
  // -D: posting stops at the deadline, pauses included; the drain of what is in flight follows.
  const Time stop_at = timed ? t0 + static_cast<Time>(o.duration * 1e9) : kNever;
  Time last_progress = t0;
  // --interval: bins on a fixed grid from t0 ([t0 + k*iv, t0 + (k+1)*iv)); the last one ends at the
  // last completion. A bin's rate is over its real length (a verification pause inside it counts).
  const Duration iv = static_cast<Duration>(o.interval_ms) * 1'000'000;
  Time iv_start = t0;
  std::uint64_t iv_bytes = 0, iv_rtx = rtx0;
  const auto close_interval = [&](Time end) {
    const std::uint64_t rtx = rtx_total(s);
    r.intervals.push_back(Interval{static_cast<double>(end - t0) * 1e-9,
                                   unix0 + static_cast<double>(end - t0) * 1e-9,
                                   static_cast<double>(end - iv_start) * 1e-6, iv_bytes, rtx - iv_rtx});
    const Interval& x = r.intervals.back();
    const double gbps = static_cast<double>(x.bytes) * 8e-6 / x.ms;
    if (!o.json) {
      std::printf("  %9.3f s  %9.3f Gb/s  rtx %llu\n", x.t_s, gbps, static_cast<unsigned long long>(x.rtx));
      std::fflush(stdout);
    } else {  // also as it happens, so a run that never finishes still leaves its time series
      std::fprintf(stderr,
                   "{\"interval\":{\"t_s\":%.6f,\"unix_s\":%.6f,\"ms\":%.3f,\"bytes\":%llu,\"gbps\":%.6f,"
                   "\"rtx\":%llu}}\n",
                   x.t_s, x.unix_s, x.ms, static_cast<unsigned long long>(x.bytes), gbps,
                   static_cast<unsigned long long>(x.rtx));
    }
    iv_start = end;
    iv_bytes = 0;
    iv_rtx = rtx;
  };
  const auto close_due = [&](Time t) {
    while (iv != 0 && t >= iv_start + iv) close_interval(iv_start + iv);
  };
  std::uint64_t loops = 0;
  bool posting = true;
  ibv_wc wc[kPollBatch];
  for (;;) {
    const Time t = io::UdpEndpoint::now();
    if (t >= stop_at) posting = false;
    bool outstanding = false, more = false;
    for (std::size_t q = 0; q < nq; ++q) {
      while (posting && posted[q] < per_qp && posted[q] - base[q] < slots &&
             posted[q] - done[q] < o.tx_depth) {
        const std::uint64_t off = (posted[q] - base[q]) * size;
        if (s.post_write(q, posted[q], off, static_cast<std::uint32_t>(size), o.imm,
                         static_cast<std::uint32_t>(posted[q] & 0xFFFFFF)) != 0)
          break;
        ++posted[q];
      }
      outstanding |= done[q] < posted[q];
      more |= posting && posted[q] < per_qp;
    }
    if (!outstanding) {
      if (!more) break;
      for (std::size_t q = 0; q < nq; ++q)
        if (posted[q] < per_qp && posted[q] - base[q] < slots) {
          err = "post_send refused with nothing outstanding";
          return false;
        }
      // Region used up: check it, refill it with the next window's pattern, go on.
      const Duration before = v.pause;
      const double cpu_before = cpu_seconds();
      if (!end_window()) return false;
      start_window();
      cpu0 += cpu_seconds() - cpu_before;
      last_progress += v.pause - before;
      continue;
    }
    // The server never speaks unasked: anything readable is its reason for ending the session.
    if ((++loops & 1023) == 0 && v.ch != nullptr) {
      pollfd pfd{v.ch->fd(), POLLIN, 0};
      std::vector<std::uint64_t> junk;
      if (::poll(&pfd, 1, 0) > 0 && !v.ch->recv_values(junk, kOobTimeout, err)) return false;
    }
    s.progress();
    // Nothing completes on the client's receive queue while it only writes: its CQ is looked at
    // with the out-of-band check, not on every round.
    for (int n = (loops & 1023) == 0 ? kPollBatch : 0; n == kPollBatch;) {
      if ((n = mrc_poll_cq(s.recv_cq, kPollBatch, wc)) < 0) return err = cq_error(errno), false;
      for (int i = 0; i < n; ++i) (void)s.post_recv(s.qp_index(wc[i].qp_num), wc[i].wr_id);
    }
    for (int n = kPollBatch; n == kPollBatch;) {
      if ((n = mrc_poll_cq(s.send_cq, kPollBatch, wc)) < 0) return err = cq_error(errno), false;
      for (int i = 0; i < n; ++i) {
        // Engine errors of a post (a QP in error, a bad key) arrive here too, as error completions.
        if (wc[i].status != IBV_WC_SUCCESS) {
          err = std::string("send completion error: ") + first_error(s.send_cq, wc, i, n);
          return false;
        }
        ++done[s.qp_index(wc[i].qp_num)];
        iv_bytes += size;
        last_progress = t;
      }
    }
    close_due(t);
    if (t - last_progress > kStallLimit) {
      err = "no completion for 10 s (is the server reachable on every plane?)";
      return false;
    }
  }
  const Time t1 = io::UdpEndpoint::now();
  close_due(t1);
  if (iv != 0 && t1 > iv_start) close_interval(t1);
  const Duration active = t1 - t0 - (v.pause - pause0);
  r.elapsed_s = static_cast<double>(t1 - t0) * 1e-9;
  r.cpu_s = cpu_seconds() - cpu0;
  if (!end_window()) return false;
  r.bytes = size;
  r.iterations = 0;
  for (std::size_t q = 0; q < nq; ++q) r.iterations += done[q];
  r.seconds = static_cast<double>(active) * 1e-9;
  r.gbps = static_cast<double>(r.iterations * size) * 8 / r.seconds * 1e-9;
  r.mpps = static_cast<double>(r.iterations) / r.seconds * 1e-6;
  r.packets = data_packets(s) - pk0;
  r.datagrams = tx_packets(s) - dg0;
  r.pps = static_cast<double>(r.packets) / r.seconds;
  r.rtx = rtx_total(s) - rtx0;
  return true;
}

/// WRITE_IMM ping-pong on QP 0; ping i writes its own slot of the region, so every ping's bytes are
/// checked afterwards (up to a region's worth).
bool run_latency(Session& s, const PerfOptions& o, Verifier& v, std::vector<double>& rtt_us,
                 std::string& err) {
  const std::uint64_t slots = s.region / o.lat_size;
  v.prepare(s, 0, std::min<std::uint64_t>(slots, o.lat_iters) * o.lat_size);
  ibv_wc wc[kPollBatch];
  for (std::uint32_t i = 0; i < o.lat_iters; ++i) {
    const std::uint32_t tag = i & 0xFFFFFF;
    const std::uint64_t off = (tag % slots) * o.lat_size;
    const Time t0 = io::UdpEndpoint::now();
    if (s.post_write(0, 1ull << 41, off, o.lat_size, true, kPingBit | tag) != 0) {
      err = "latency: post_send refused";
      return false;
    }
    bool got = false;
    while (!got) {
      s.progress();
      for (mrc_cq* cq : {s.send_cq, s.recv_cq}) {
        for (int n = kPollBatch; n == kPollBatch;) {
          if ((n = mrc_poll_cq(cq, kPollBatch, wc)) < 0) return err = cq_error(errno), false;
          for (int k = 0; k < n; ++k) {
            const ibv_wc& c = wc[k];
            if (c.status != IBV_WC_SUCCESS) {
              err = std::string("latency: completion error: ") + status_text(c.status);
              return false;
            }
            if (cq != s.recv_cq) continue;
            (void)s.post_recv(s.qp_index(c.qp_num), c.wr_id);
            if ((c.wc_flags & IBV_WC_WITH_IMM) && ntohl(c.imm_data) == (kPongBit | tag)) got = true;
          }
        }
      }
      if (io::UdpEndpoint::now() - t0 > kStallLimit) {
        err = "latency: no pong for 10 s";
        return false;
      }
    }
    rtt_us.push_back(static_cast<double>(io::UdpEndpoint::now() - t0) * 1e-3);
  }
  std::vector<std::uint64_t> written(s.qpns.size(), 0);
  written[0] = std::min<std::uint64_t>(slots, o.lat_iters) * o.lat_size;
  return v.check(written, err);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto idx = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()))) - 1;
  return v[std::min(idx, v.size() - 1)];
}

struct LatencyStats {
  double min = 0, avg = 0, p50 = 0, p99 = 0, max = 0, stdev = 0;  ///< microseconds
};

LatencyStats latency_stats(const std::vector<double>& v) {
  LatencyStats r;
  if (v.empty()) return r;
  r.min = *std::min_element(v.begin(), v.end());
  r.max = *std::max_element(v.begin(), v.end());
  r.avg = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double sq = 0;
  for (const double x : v) sq += (x - r.avg) * (x - r.avg);
  r.stdev = v.size() > 1 ? std::sqrt(sq / static_cast<double>(v.size() - 1)) : 0;  // sample stdev
  r.p50 = percentile(v, 50);
  r.p99 = percentile(v, 99);
  return r;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "mrc perf: %s\n", msg.c_str());
  return 1;
}

/// What the client runs, worked out (and checked) before it connects.
struct ClientPlan {
  std::vector<std::uint64_t> sizes;
  Params prm;
};

bool plan_client(const PerfOptions& o, const std::vector<io::IpAddr>& local, ClientPlan& pl,
                 std::string& err) {
  if (o.all_sizes) {
    for (std::uint64_t b = 2; b <= (8u << 20); b <<= 1) pl.sizes.push_back(b);
  } else {
    pl.sizes.push_back(o.size);
  }
  const std::uint64_t max_size = *std::max_element(pl.sizes.begin(), pl.sizes.end());
  Params& prm = pl.prm;
  prm.qps = o.qps;
  // Default region: a whole count-mode transfer (no verification pause), within the memory caps.
  std::uint64_t need = o.duration > 0 ? kTimedRegion : 0;
  for (const std::uint64_t sz : pl.sizes) need = std::max(need, o.duration > 0 ? 0 : sz * o.iters);
  prm.region = o.window != 0 ? o.window : std::min({need, kMaxRegion, kMaxRegionTotal / o.qps});
  prm.region = std::max({prm.region, max_size, std::uint64_t{o.lat_size}, std::uint64_t{4096}});
  if (prm.region * o.qps > kMaxRegionTotal) {
    // Name what the user gave: the per-QP region is at least one message (-s / -a) or --window.
    const std::string what = o.window != 0 && o.window >= max_size
                                 ? "--window " + size_text(o.window) + " per QP"
                                 : (o.all_sizes ? "-a (messages up to 8 MiB)" : "-s " + size_text(max_size)) +
                                       " (each QP's region holds at least one message)";
    err =
        what + " x -q " + std::to_string(o.qps) + " = " + size_text(prm.region * o.qps) +
        ", more than the 4 GiB limit over all QPs (allocated on both sides); use fewer QPs or a smaller size";
    return false;
  }
  prm.pmtu = o.pmtu;
  if (!choose_pmtu(local, prm.pmtu, err)) return false;
  prm.seed = o.seed;
  prm.cc = o.cc == "nscc" ? 1 : 0;
  prm.evs_per_plane = o.evs_per_plane;
  prm.backup_per_plane = o.backup_per_plane;
  prm.timeout = o.timeout;
  prm.ev_mode = o.ev_mode == "srv6" ? 2 : o.ev_mode == "stev" ? 1 : 0;
  prm.planes = static_cast<std::uint32_t>(local.size());
  prm.udp_port = o.udp_port;
  bool hello = false;
  return prm.decode(prm.encode(), hello, err);
}

/// A message from the server ("peer: ...") reads as the server's.
std::string from_server(const std::string& err) {
  return err.rfind("peer: ", 0) == 0 ? "the server ended the session: " + err.substr(6) : err;
}

int run_client(const PerfOptions& o, const std::vector<io::IpAddr>& local,
               const std::vector<io::IpAddr>& remote, const ClientPlan& pl) {
  std::string err;
  const std::vector<std::uint64_t>& sizes = pl.sizes;
  const Params& prm = pl.prm;
  const std::string where = o.client_host + ":" + std::to_string(o.oob_port);
  std::fprintf(stderr,
               "mrc perf: waiting for the mrc perf server at %s (up to %s s, --connect-timeout) ...\n",
               where.c_str(), CLI::detail::to_string(o.connect_timeout).c_str());
  auto ch =
      io::OobChannel::connect(o.client_host, o.oob_port, static_cast<Duration>(o.connect_timeout * 1e9), err);
  if (!ch) {
    const std::size_t colon = err.rfind(": ");
    const std::string why = colon == std::string::npos ? err : err.substr(colon + 2);
    return fail("no mrc perf server answered at " + where + " within " +
                CLI::detail::to_string(o.connect_timeout) + " s (" + why +
                "); start `mrc perf --server` there, check --client and -p/--port, or wait longer with "
                "--connect-timeout");
  }
  // A send the server's side refused (it closed): its reason may be waiting to be read.
  const auto reason = [&](const std::string& e) {
    std::vector<std::uint64_t> junk;
    std::string why;
    if (!ch->recv_values(junk, 1'000'000'000, why) && why.rfind("peer: ", 0) == 0) return from_server(why);
    return from_server(e);
  };
  const std::vector<std::uint64_t> hello = prm.encode();
  if (!ch->send_values(hello, err)) return fail(reason(err));
  Session s;
  if (!open_session(s, o, prm, local, err)) return fail(err);
  std::vector<io::ConnInfo> mine, theirs(prm.qps);
  for (std::uint32_t q = 0; q < prm.qps; ++q) mine.push_back(local_info(s, q, local));
  if (o.auth)
    for (io::ConnInfo& m : mine)
      if (!add_auth_key(m, err)) return fail(err);
  for (std::uint32_t q = 0; q < prm.qps; ++q) {
    if (!ch->send_conn_info(mine[q], err)) return fail(reason(err));
    if (!ch->recv_conn_info(theirs[q], kOobTimeout, err)) return fail(from_server(err));
  }
  for (std::uint32_t q = 0; q < prm.qps; ++q) {
    engine::QpAuth a;
    if (theirs[q].length < prm.region) return fail("server region smaller than requested");
    if (!io::qp_auth(mine[q], theirs[q], a, err)) return fail(err);
  }
  std::vector<std::uint64_t> vals;
  if (!ch->recv_values(vals, kOobTimeout, err)) return fail(from_server(err));
  if (vals.size() != 2 || vals[0] != 1 || vals[1] == 0 || vals[1] > 65535)
    return fail("bad ready message from the server");
  if (!connect_qps(s, o, prm, mine, theirs, remote, static_cast<std::uint16_t>(vals[1]), err))
    return fail(err);

  if (!o.json) {
    std::printf("mrc perf: %u QP(s), %zu planes, %s, pmtu %u, cc %s, EV mode %s, GSO %s, wire ext %s%s\n",
                o.qps, local.size(), o.imm ? "WRITE_IMM" : "WRITE", prm.pmtu, o.cc.c_str(), o.ev_mode.c_str(),
                o.gso ? std::to_string(o.gso).c_str() : "off",
                io::qp_wire_ext(mine[0], theirs[0]) ? "on" : "off",
                s.cfg.impair.enabled() ? (", impair " + io::to_string(s.cfg.impair)).c_str() : "");
    std::printf("%-12s %-12s %-12s %-14s %-12s %-10s %-10s %-8s\n", "#bytes", "#iterations", "BW[Gb/s]",
                "MsgRate[Mpps]", "DataPkt/s", "Time[s]", "CPU[s]", "rtx");
  }
  // A failed run still shows its counters (with --metrics): they say why it stalled.
  auto fail_run = [&](const std::string& msg) {
    if (o.metrics) std::fprintf(stderr, "%s\n", metrics_json(s).dump(2).c_str());
    return fail(msg);
  };
  std::vector<SizeResult> results;
  Verifier v;
  v.ch = &*ch;
  v.seed = o.seed;
  v.ready.assign(prm.qps, 0);
  for (const std::uint64_t size : sizes) {
    SizeResult r;
    if (!run_bw(s, o, size, v, r, err)) return fail_run(from_server(err));
    results.push_back(r);
    if (!o.json) {
      std::printf("%-12llu %-12llu %-12.3f %-14.6f %-12.0f %-10.3f %-10.3f %-8llu\n",
                  static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.iterations),
                  r.gbps, r.mpps, r.pps, r.elapsed_s, r.cpu_s, static_cast<unsigned long long>(r.rtx));
      std::fflush(stdout);
    }
  }
  std::vector<double> rtt;
  if (o.lat_iters > 0 && !run_latency(s, o, v, rtt, err)) return fail_run(from_server(err));
  const std::uint64_t done_msg[] = {kDone};
  if (!ch->send_values(done_msg, err) || !ch->recv_values(vals, kOobTimeout, err))
    return fail(from_server(err));
  if (vals.size() != 1) return fail("bad final reply");
  const double server_cpu = static_cast<double>(vals[0]) * 1e-6;
  std::uint64_t moved = 0;  // bandwidth phase + pings, every byte of which was checked
  for (const auto& r : results) moved += r.bytes * r.iterations;
  moved += std::min<std::uint64_t>(prm.region / o.lat_size, o.lat_iters) * o.lat_size;
  const bool verified = v.bad == 0 && v.checked == moved;
  const LatencyStats lat = latency_stats(rtt);
  if (o.json) {
    nlohmann::json j;
    j["role"] = "client";
    j["qps"] = o.qps;
    j["planes"] = local.size();
    j["op"] = o.imm ? "WRITE_IMM" : "WRITE";
    j["pmtu"] = prm.pmtu;
    j["gso"] = o.gso;
    j["wire_ext"] = io::qp_wire_ext(mine[0], theirs[0]);
    j["evs_per_plane"] = prm.evs_per_plane;
    j["region_bytes_per_qp"] = prm.region;
    j["cc"] = o.cc;
    j["impair"] = io::to_string(s.cfg.impair);
    nlohmann::json rs = nlohmann::json::array();
    for (const auto& r : results)
      rs.push_back({{"bytes", r.bytes},
                    {"iterations", r.iterations},
                    {"seconds", r.seconds},
                    {"bw_gbps", r.gbps},
                    {"msg_rate_mpps", r.mpps},
                    {"elapsed_s", r.elapsed_s},
                    {"packets", r.packets},
                    {"packets_per_s", r.pps},
                    {"datagrams", r.datagrams},
                    {"cpu_s", r.cpu_s},
                    {"retransmissions", r.rtx}});
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (o.interval_ms == 0) break;
      nlohmann::json iv = nlohmann::json::array();
      for (const Interval& x : results[i].intervals)
        iv.push_back({{"t_s", x.t_s},
                      {"unix_s", x.unix_s},
                      {"ms", x.ms},
                      {"bytes", x.bytes},
                      {"gbps", static_cast<double>(x.bytes) * 8e-6 / x.ms},
                      {"rtx", x.rtx}});
      rs[i]["intervals"] = iv;
    }
    j["results"] = rs;
    j["latency"] = {{"iterations", rtt.size()}, {"size", o.lat_size},   {"min_us", lat.min},
                    {"avg_us", lat.avg},        {"p50_us", lat.p50},    {"p99_us", lat.p99},
                    {"max_us", lat.max},        {"stdev_us", lat.stdev}};
    j["verified"] = verified;
    j["bytes_moved"] = moved;
    j["verified_bytes"] = v.checked;
    j["mismatched_bytes"] = v.bad;
    j["verification_windows"] = v.window;
    j["verify_pause_s"] = static_cast<double>(v.pause) * 1e-9;
    j["server_cpu_s"] = server_cpu;
    if (o.metrics) j["metrics"] = metrics_json(s);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    if (!rtt.empty())
      std::printf(
          "latency (WRITE_IMM ping-pong, %u B, %zu round trips): min %.1f us  avg %.1f us  p50 %.1f us  p99 "
          "%.1f us  max %.1f us  stdev %.1f us\n",
          o.lat_size, rtt.size(), lat.min, lat.avg, lat.p50, lat.p99, lat.max, lat.stdev);
    std::printf(
        "server CPU %.3f s; data %s: %llu of %llu bytes checked byte for byte in %llu window(s), %llu "
        "mismatched\n",
        server_cpu, verified ? "verified" : "MISMATCH", static_cast<unsigned long long>(v.checked),
        static_cast<unsigned long long>(moved), static_cast<unsigned long long>(v.window),
        static_cast<unsigned long long>(v.bad));
    if (o.metrics) std::printf("%s", metrics_prometheus(s).c_str());
  }
  if (s.pcap) s.pcap->close();
  return verified ? 0 : 1;
}

}  // namespace

namespace {
/// --pmtu: 0 (from the interface MTU) or a power of two in [256, 4096], the engine's path MTUs.
CLI::Validator pmtu_check() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const bool digits =
            !v.empty() && v.size() <= 5 && v.find_first_not_of("0123456789") == std::string::npos;
        const unsigned long x = digits ? std::stoul(v) : 1;
        if (digits && (x == 0 || (x >= 256 && x <= 4096 && (x & (x - 1)) == 0))) return {};
        return "'" + v +
               "' is not 0 (auto: from the interface MTU) or one of 256, 512, 1024, 2048, 4096 (a power "
               "of two in [256, 4096])";
      },
      "0|256|512|1024|2048|4096", "pmtu");
}
/// --gso: 0 (off) or 2..64 packets per burst.
CLI::Validator gso_check() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const bool digits =
            !v.empty() && v.size() <= 3 && v.find_first_not_of("0123456789") == std::string::npos;
        const unsigned long x = digits ? std::stoul(v) : 1;
        if (digits && (x == 0 || (x >= 2 && x <= 64))) return {};
        return "'" + v + "' is not 0 (off) or an integer in [2, 64]";
      },
      "0|2..64", "gso");
}
}  // namespace

CLI::App* add_perf_command(CLI::App& app) {
  PerfOptions& o = g_opt;
  CLI::App* c = app.add_subcommand("perf", "ib_write_bw-like benchmark over the UDP MRC endpoint");
  c->footer(
      "Start `mrc perf --server` on one host and `mrc perf --client HOST` on the other (or both on one\n"
      "host: the default planes are 127.0.{1..4}.1 for the server and 127.0.{1..4}.2 for the client).\n"
      "The server serves one client after another until SIGINT/SIGTERM (then prints a summary), or one\n"
      "client with --once. The server compares every byte written with the client's pattern (see --window).\n"
      "Exit status: 0 when every transfer completed and the server's data matched, 1 when the run failed\n"
      "(a mismatch, a refused or lost session), 2 on a bad option (found before connecting).");
  auto* role = c->add_option_group("role");
  role->add_flag("--server", o.server, "Run the server side (serves clients one after another)");
  role->add_option("--client", o.client_host, "Run the client side against this server (OOB host)");
  role->require_option(1);
  c->add_flag("--once", o.once, "Server: serve one client, then exit with its result");
  c->add_option("--bind", o.bind, "Server: address of the TCP out-of-band listener")->capture_default_str();
  c->add_option("-p,--port", o.oob_port, "TCP out-of-band port (server: 0 = any free port, printed)")
      ->check(uint_range(0, 65535))
      ->capture_default_str();
  c->add_option("--udp-port", o.udp_port,
                "UDP port this side's endpoint receives on (4791, the RoCEv2 port, by default); the peer "
                "learns it out of band, so the two sides may differ")
      ->check(uint_range(1, 65535))
      ->capture_default_str();
  c->add_option("--connect-timeout", o.connect_timeout,
                "Client: seconds to keep trying to reach the server's TCP port")
      ->check(real_range(0.1, 3600, "seconds"))
      ->capture_default_str();
  c->add_option("--hello-timeout", o.hello_timeout,
                "Server: seconds a new connection has to send its hello before it is dropped")
      ->check(real_range(0.1, 3600, "seconds"))
      ->capture_default_str();
  c->add_option("--max-memory", o.max_memory,
                "Server: most memory a client may have this server allocate for its data regions (QPs x "
                "region per QP), 1 MiB .. 4 GiB (suffixes KiB, MiB, GiB); larger requests are refused "
                "before anything is allocated")
      ->transform(CLI::AsSizeValue(false))
      ->check(uint_range(kMinMaxMemory, kMaxRegionTotal))
      ->capture_default_str();
  c->add_option("--local", o.local, "Local plane addresses, one per plane (comma separated)")->delimiter(',');
  c->add_option("--remote", o.remote, "Peer plane addresses (default: what the peer announces)")
      ->delimiter(',');
  c->add_flag("-a,--all", o.all_sizes, "Sweep message sizes 2 B .. 8 MiB");
  // CLI11 runs transforms before checks: "1GiB" becomes 1073741824, then the range applies.
  c->add_option("-s,--size", o.size, "Message size, 1 B .. 1 GiB (suffixes KiB, MiB, GiB)")
      ->transform(CLI::AsSizeValue(false))
      ->check(uint_range(1, kMaxRegion))
      ->capture_default_str();
  c->add_option("-n,--iters", o.iters, "Messages per QP and size")
      ->check(uint_range(1, kMaxIters))
      ->capture_default_str();
  c->add_option("-D,--duration", o.duration, "Seconds per size instead of a message count")
      ->check(real_range(0.001, kMaxDuration, "seconds"));
  c->add_option("-q,--qps", o.qps, "Number of QPs")->check(uint_range(1, kMaxQps))->capture_default_str();
  c->add_flag("--imm", o.imm, "Use RDMA WRITE_WITH_IMM for the bandwidth test");
  c->add_option("-t,--tx-depth", o.tx_depth, "Outstanding work requests per QP")
      ->check(uint_range(1, 4096))
      ->capture_default_str();
  c->add_option("--lat-iters", o.lat_iters, "WRITE_IMM ping-pong round trips (0 = skip)")
      ->check(uint_range(0, 10'000'000))
      ->capture_default_str();
  c->add_option("--lat-size", o.lat_size, "Ping-pong message size")
      ->check(uint_range(1, 1u << 20))
      ->capture_default_str();
  c->add_option(
       "-m,--pmtu,--mtu", o.pmtu,
       "Payload bytes per packet: 256, 512, 1024, 2048 or 4096 (default 0: the largest whose datagram "
       "fits every plane's interface MTU)")
      ->check(pmtu_check());
  c->add_option("--cc", o.cc, "Congestion control")
      ->check(CLI::IsMember({"none", "nscc"}))
      ->capture_default_str();
  c->add_option("--rate", o.rate_gbps, "Per-plane rate for NSCC, Gb/s")
      ->check(real_range(0.001, 1000, "Gb/s"))
      ->capture_default_str();
  c->add_option("--evs", o.evs_per_plane, "Active EVs per plane")
      ->check(uint_range(1, 256))
      ->capture_default_str();
  c->add_option("--interval", o.interval_ms,
                "Goodput every MS milliseconds (completed bytes): a column, or with --json \"intervals\" in "
                "the report and one JSON line per interval on stderr as it ends")
      ->check(uint_range(1, 60'000));
  c->add_option("--window", o.window,
                "Bytes per QP written between two verifications, 4 KiB .. 1 GiB (default: the whole transfer "
                "up to 1 GiB; 256 MiB with -D)")
      ->transform(CLI::AsSizeValue(false))
      ->check(uint_range(4096, kMaxRegion));
  c->add_option("--backup-evs", o.backup_per_plane, "Backup EVs per plane")
      ->check(uint_range(0, 256))
      ->capture_default_str();
  c->add_option("--timeout", o.timeout, "QP timeout exponent (RTO = 1.024 us * 2^t)")
      ->check(uint_range(0, 24))
      ->capture_default_str();
  c->add_option("--ev-mode", o.ev_mode,
                "EV placement: udp (source port), stev (IPv6 flow label) or srv6 (uSID carrier address; "
                "needs --srv6-paths and root)")
      ->check(CLI::IsMember({"udp", "stev", "srv6"}))
      ->capture_default_str();
  c->add_option("--srv6-paths", o.srv6_paths,
                "SRv6: this side's uSID paths, hex uSIDs joined by ':' (EV v takes path v mod count), "
                "e.g. 2001,2002 = via spine 1 / spine 2 of mrc-testbed")
      ->delimiter(',');
  c->add_flag("--auth", o.auth,
              "Authenticate every packet with a per-connection SipHash-2-4 MAC in place of the ICRC "
              "(client: use it; server: refuse clients that do not)");
  c->add_option("--wire-ext", o.wire_ext,
                "Offer the project's wire extensions (service times, CC flags, EV echo in bytes the public "
                "sources leave reserved, docs/wire-format.md W20): used only if the other side offers them "
                "too (decisions.md D45); off = spec packets only. on|off, default on")
      ->type_name("on|off");
  c->add_option("--gso", o.gso,
                "UDP segmentation offload: each QP sends N packets on one EV and they leave as one GSO send; "
                "GRO on receive (0 = off, 2..64)")
      ->check(gso_check())
      ->capture_default_str();
  c->add_option("--impair", o.impair,
                "Receive impairment, e.g. drop=1%,reorder=2%,dup=1%,trim=1%,delay=20us");
  c->add_option("--impair-file", o.impair_file, "Receive impairment from a key=value file");
  c->add_option("--pcap", o.pcap, "Write every sent and received packet of this side to a pcap file");
  c->add_flag("--progress-thread", o.progress_thread, "Server: drive the endpoint from a progress thread");
  c->add_flag("--metrics", o.metrics,
              "Print the endpoint's counters at the end (Prometheus text or JSON; as JSON on stderr when the "
              "run fails)");
  c->add_flag("--json", o.json, "Print the report as JSON");
  c->add_option("--seed", o.seed, "Seed of the data pattern and the endpoints")
      ->check(uint_range(0, UINT64_MAX))
      ->capture_default_str();
  return c;
}

namespace {
int usage(const std::string& msg) {
  std::fprintf(stderr, "mrc perf: %s\n", msg.c_str());
  return kExitUsage;
}
}  // namespace

int run_perf() {
  // Everything that can be checked on this side is, before any connection is made (exit 2).
  const PerfOptions& o = g_opt;
  io::ImpairConfig imp;
  std::string err;
  if (!o.impair_file.empty() && !io::load_impair_file(o.impair_file, imp, err)) return usage(err);
  if (!o.impair.empty() && !io::parse_impair(o.impair, imp, err)) return usage(err);
  if (!o.server && o.oob_port == 0)
    return usage(
        "-p/--port: 0 (any free port) is for the server; the client needs the server's port, an "
        "integer in [1, 65535]");
  std::vector<io::IpAddr> local, remote;
  if (!parse_addrs(o.local.empty() ? default_planes(o.server ? 1 : 2) : o.local, local, err))
    return usage("--local: " + err);
  if (!parse_addrs(o.remote, remote, err)) return usage("--remote: " + err);
  if (local.empty() || local.size() > engine::kMaxPorts)
    return usage("--local: " + std::to_string(local.size()) + " plane addresses; give 1 to " +
                 std::to_string(engine::kMaxPorts));
  if (!remote.empty() && remote.size() != local.size())
    return usage("--remote: " + std::to_string(remote.size()) + " addresses for " +
                 std::to_string(local.size()) + " local planes (--local); give one per plane");
  if (o.ev_mode == "srv6") {
    io::Srv6Config sc;
    if (!parse_srv6_paths(o.srv6_paths, sc, err)) return usage(err);
  }
  if (std::uint32_t pmtu = o.pmtu; !choose_pmtu(local, pmtu, err)) return usage(err);
  ClientPlan plan;
  if (!o.server && !plan_client(o, local, plan, err)) return usage(err);
  // The local endpoint as a session would open it (sockets bound, modes checked), then closed.
  {
    Params probe = plan.prm;
    probe.qps = 1;
    probe.region = 4096;
    probe.planes = static_cast<std::uint32_t>(local.size());
    probe.ev_mode = o.ev_mode == "srv6" ? 2 : o.ev_mode == "stev" ? 1 : 0;
    if (o.server) probe.pmtu = 1024;
    Session s;
    if (!open_session(s, o, probe, local, err)) {
      std::string planes;
      for (const io::IpAddr& a : local) planes += (planes.empty() ? "" : ",") + a.str();
      return usage(err + " (--local " + planes + ", --udp-port " + std::to_string(o.udp_port) + ")");
    }
  }
  if (!o.pcap.empty()) {
    g_pcap = std::make_unique<io::PcapWriter>();
    if (!g_pcap->open(o.pcap)) {
      const std::string& e = g_pcap->error();  // "pcap: cannot open ..."
      return usage("--pcap: " + (e.rfind("pcap: ", 0) == 0 ? e.substr(6) : e));
    }
  }
  return o.server ? run_server(o, local, remote) : run_client(o, local, remote, plan);
}

}  // namespace mrc::tools
