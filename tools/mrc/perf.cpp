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
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "io/impair.hpp"
#include "io/metrics.hpp"
#include "io/oob.hpp"
#include "io/pcap.hpp"
#include "io/udp_endpoint.hpp"
#include "wire/packet.hpp"

namespace mrc::tools {
namespace {

constexpr std::uint64_t kHello = 0x4D52435045524631ull;  // "MRCPERF1"
constexpr std::uint64_t kVerify = 0x5645524946590000ull;
constexpr std::uint64_t kDone = 0x444F4E4500000000ull;
constexpr std::uint32_t kPingBit = 0x80000000u;
constexpr std::uint32_t kPongBit = 0x40000000u;
constexpr std::uint32_t kRecvsPerQp = 512;
constexpr Duration kOobTimeout = 30'000'000'000ull;
constexpr Duration kStallLimit = 10'000'000'000ull;  // no completion for this long = give up
constexpr std::uint32_t kMaxQps = 256;
constexpr std::uint64_t kMaxRegion = 1ull << 30;       ///< per QP
constexpr std::uint64_t kMaxRegionTotal = 4ull << 30;  ///< over all QPs, allocated on both sides
constexpr std::uint64_t kTimedRegion = 256ull << 20;   ///< default per-QP region of a timed run

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
};

PerfOptions g_opt;

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

/// Session state shared by both roles.
struct Session {
  std::unique_ptr<io::UdpEndpoint> ep;
  std::unique_ptr<io::PcapWriter> pcap;
  std::vector<std::uint8_t> buf;  ///< qps x region
  std::uint64_t region = 0;
  const engine::MemoryRegion* mr = nullptr;
  std::vector<std::uint32_t> qpns;
  std::vector<io::ConnInfo> remote;
  std::uint32_t peer = 0;

  std::size_t qp_index(std::uint32_t qpn) const {
    return static_cast<std::size_t>(std::find(qpns.begin(), qpns.end(), qpn) - qpns.begin());
  }
  std::uint8_t* region_of(std::size_t q) { return buf.data() + q * region; }
  engine::SendWr write_wr(std::size_t q, std::uint64_t wr_id, std::uint64_t off, std::uint32_t len, bool imm,
                          std::uint32_t imm_data) const {
    engine::SendWr w;
    w.wr_id = wr_id;
    w.with_imm = imm;
    w.imm = imm_data;
    w.local_addr = reinterpret_cast<std::uintptr_t>(buf.data() + q * region + off);
    w.length = len;
    w.lkey = mr->lkey;
    w.remote_addr = remote[q].va + off;
    w.rkey = remote[q].rkey;
    return w;
  }
  void progress() { ep->progress(0); }
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
  std::vector<std::uint64_t> encode() const {
    return {kHello, qps, region, pmtu, cc, evs_per_plane, backup_per_plane, timeout, ev_mode, planes, seed};
  }
  bool decode(const std::vector<std::uint64_t>& v, std::string& err) {
    if (v.size() != 11 || v[0] != kHello) {
      err = "client parameters: not an mrc perf hello";
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
    if (qps == 0 || qps > kMaxQps || region == 0 || region > kMaxRegion || region * qps > kMaxRegionTotal ||
        pmtu < 256 || pmtu > 4096 || evs_per_plane == 0 || evs_per_plane > 256 || backup_per_plane > 256 ||
        timeout > 24 || ev_mode > 2 || planes == 0 || planes > engine::kMaxPorts) {
      err = "client parameters out of range";
      return false;
    }
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

bool open_session(Session& s, const PerfOptions& o, const Params& prm, const std::vector<io::IpAddr>& local,
                  std::string& err) {
  io::UdpConfig uc;
  uc.planes = local;
  uc.ev_mode = prm.ev_mode == 2 ? io::EvMode::kSrv6 : prm.ev_mode == 1 ? io::EvMode::kStev : io::EvMode::kUdp;
  if (uc.ev_mode == io::EvMode::kSrv6 && !parse_srv6_paths(o.srv6_paths, uc.srv6, err)) return false;
  uc.engine.seed = o.seed * 2 + (o.server ? 1 : 2);
  uc.max_packet = prm.pmtu + 256;
  uc.gso_burst = o.gso;
  if (!o.impair_file.empty() && !io::load_impair_file(o.impair_file, uc.impair, err)) return false;
  if (!o.impair.empty() && !io::parse_impair(o.impair, uc.impair, err)) return false;
  s.ep = io::UdpEndpoint::create(uc, err);
  if (!s.ep) return false;
  if (!o.pcap.empty()) {
    s.pcap = std::make_unique<io::PcapWriter>();
    if (!s.pcap->open(o.pcap)) {
      err = "pcap: " + s.pcap->error();
      return false;
    }
    s.ep->set_pcap(s.pcap.get());
  }
  s.region = prm.region;
  s.buf.assign(prm.qps * prm.region, 0);
  s.mr = s.ep->engine().memory().register_region(s.buf.data(), s.buf.size(), engine::access::kAll);
  if (s.mr == nullptr) {
    err = "memory registration failed";
    return false;
  }
  for (std::uint32_t q = 0; q < prm.qps; ++q) {
    engine::QpConfig c;
    c.pmtu = prm.pmtu;
    c.timeout = static_cast<std::uint8_t>(prm.timeout);
    c.evs = engine::make_ev_set(prm.planes, prm.evs_per_plane, prm.backup_per_plane);
    c.active_count = prm.planes * prm.evs_per_plane;
    c.seed = o.seed * 1000 + q;
    c.cc.algorithm = prm.cc == 1 ? cc::Algorithm::kNscc : cc::Algorithm::kNone;
    if (prm.cc == 1)
      c.cc.nscc = cc::NsccConfig::derive(static_cast<std::uint64_t>(o.rate_gbps * 1e9 * prm.planes), 20'000,
                                         prm.pmtu + 64, false);
    int e = 0;
    const std::uint32_t qpn = s.ep->engine().create_qp(c, &e);
    if (qpn == 0) {
      err = "create_qp failed: " + std::string(std::strerror(e));
      return false;
    }
    s.qpns.push_back(qpn);
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
  return c;
}

bool connect_qps(Session& s, const std::vector<io::ConnInfo>& mine, const std::vector<io::ConnInfo>& theirs,
                 const std::vector<io::IpAddr>& remote_override, std::string& err) {
  const std::vector<io::IpAddr>& peer_addrs = remote_override.empty() ? theirs[0].planes : remote_override;
  s.peer = s.ep->add_peer(peer_addrs);
  if (s.peer == 0) {
    err = "peer plane addresses do not match the local planes (count or family)";
    return false;
  }
  s.remote = theirs;
  for (std::size_t q = 0; q < s.qpns.size(); ++q) {
    engine::QpRemote r;
    r.peer = s.peer;
    r.qpn = theirs[q].qpn;
    r.sq_psn = mine[q].psn;
    r.rq_psn = theirs[q].psn;
    r.peer_mpr_dest = theirs[q].mpr_dest;
    r.peer_max_wimm_dest = theirs[q].max_wimm_dest;
    if (!io::qp_auth(mine[q], theirs[q], r.auth, err)) return false;
    const int rc = s.ep->engine().connect_qp(s.qpns[q], r, io::UdpEndpoint::now());
    if (rc != 0) {
      err = "connect_qp failed: " + std::string(std::strerror(rc));
      return false;
    }
    for (std::uint32_t i = 0; i < kRecvsPerQp; ++i) s.ep->engine().post_recv(s.qpns[q], i);
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

int run_server(const PerfOptions& o) {
  std::string err;
  io::OobListener l;
  if (!l.listen(o.bind, o.oob_port, err)) {
    std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
    return 1;
  }
  if (!o.json) std::printf("mrc perf server: waiting on %s:%u\n", o.bind.c_str(), l.port());
  std::fflush(stdout);
  auto ch = l.accept(3600ull * 1'000'000'000ull, err);
  if (!ch) {
    std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
    return 1;
  }
  std::vector<std::uint64_t> vals;
  Params prm;
  if (!ch->recv_values(vals, kOobTimeout, err) || !prm.decode(vals, err)) {
    std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
    return 1;
  }
  std::vector<io::IpAddr> local, remote;
  if (!parse_addrs(o.local.empty() ? default_planes(1) : o.local, local, err) ||
      !parse_addrs(o.remote, remote, err)) {
    std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
    return 1;
  }
  if (local.size() != prm.planes) {
    std::fprintf(stderr, "mrc perf: client uses %u planes, server has %zu\n", prm.planes, local.size());
    return 1;
  }
  if (std::uint32_t pmtu = prm.pmtu; !choose_pmtu(local, pmtu, err)) {
    std::fprintf(stderr, "mrc perf: client's %s\n", err.c_str());
    return 1;
  }
  Session s;
  if (!open_session(s, o, prm, local, err)) {
    std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
    return 1;
  }
  std::vector<io::ConnInfo> mine, theirs(prm.qps);
  for (std::uint32_t q = 0; q < prm.qps; ++q) mine.push_back(local_info(s, q, local));
  for (std::uint32_t q = 0; q < prm.qps; ++q) {
    if (!ch->recv_conn_info(theirs[q], kOobTimeout, err) ||
        ((theirs[q].auth || o.auth) && !add_auth_key(mine[q], err)) || !ch->send_conn_info(mine[q], err)) {
      std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
      return 1;
    }
  }
  if (!connect_qps(s, mine, theirs, remote, err)) {
    std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
    return 1;
  }
  const std::uint64_t ready[] = {1};
  if (!ch->send_values(ready, err)) {
    std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
    return 1;
  }
  double cpu0 = cpu_seconds();
  if (o.progress_thread) s.ep->start();
  std::uint64_t pongs = 0, recvs = 0, verified = 0;
  for (std::uint64_t spin = 0;; ++spin) {
    if (!o.progress_thread) s.progress();
    engine::Completion c;
    while (s.ep->poll_completion(c)) {
      if (!c.is_recv) continue;
      ++recvs;
      s.ep->post_recv(c.qpn, c.wr_id);
      if (c.status == engine::WcStatus::kSuccess && c.has_imm && (c.imm & kPingBit) != 0 && c.byte_len > 0) {
        // the pong returns the ping's bytes from where the ping wrote them
        const std::size_t q = s.qp_index(c.qpn);
        const std::uint64_t off = ((c.imm & 0xFFFFFF) % (s.region / c.byte_len)) * c.byte_len;
        if (const int rc = s.ep->post_send(
                c.qpn, s.write_wr(q, 1ull << 40, off, c.byte_len, true, kPongBit | (c.imm & 0xFFFFFF)));
            rc != 0) {
          std::fprintf(stderr, "mrc perf: pong refused: %s\n", std::strerror(rc));
          return 1;
        }
        ++pongs;
      }
    }
    if ((spin & 1023) != 0) continue;
    pollfd pfd{ch->fd(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0) continue;
    if (!ch->recv_values(vals, kOobTimeout, err)) {
      std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
      return 1;
    }
    const bool verify =
        vals.size() == 2 + prm.qps && vals[0] == kVerify &&
        std::all_of(vals.begin() + 2, vals.end(), [&](std::uint64_t b) { return b <= s.region; });
    if (!verify && !(vals.size() == 1 && vals[0] == kDone)) {
      std::fprintf(stderr, "mrc perf: unexpected control message\n");
      return 1;
    }
    std::vector<std::uint64_t> reply;
    if (verify) {  // {kVerify, window, bytes written per QP}: mismatching bytes per QP
      const double cpu_before = cpu_seconds();
      for (std::uint32_t q = 0; q < prm.qps; ++q)
        reply.push_back(pattern_mismatches(s.region_of(q), vals[2 + q], pattern_key(prm.seed, q, vals[1])));
      verified += std::accumulate(vals.begin() + 2, vals.end(), std::uint64_t{0});
      cpu0 += cpu_seconds() - cpu_before;  // the reported CPU time is the data path's
    } else {
      if (o.progress_thread) s.ep->stop();
      reply.push_back(static_cast<std::uint64_t>((cpu_seconds() - cpu0) * 1e6));
    }
    if (!ch->send_values(reply, err)) {
      std::fprintf(stderr, "mrc perf: %s\n", err.c_str());
      return 1;
    }
    if (!verify) break;
  }
  if (o.json) {
    nlohmann::json j;
    j["role"] = "server";
    j["recv_completions"] = recvs;
    j["pongs"] = pongs;
    j["verified_bytes"] = verified;
    j["cpu_s"] = cpu_seconds() - cpu0;
    if (o.metrics) j["metrics"] = io::metrics_json(*s.ep);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "mrc perf server: done, %llu receive completions, %llu pongs, %llu bytes verified, CPU %.2f s\n",
        static_cast<unsigned long long>(recvs), static_cast<unsigned long long>(pongs),
        static_cast<unsigned long long>(verified), cpu_seconds() - cpu0);
    if (o.metrics) std::printf("%s", io::metrics_prometheus(*s.ep).c_str());
  }
  return 0;
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
  double seconds = 0, gbps = 0, mpps = 0, pps = 0, cpu_s = 0;
  std::uint64_t packets = 0, rtx = 0;
  std::vector<Interval> intervals;
};

double unix_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Sum of sent datagrams over planes.
std::uint64_t tx_packets(const io::UdpEndpoint& ep) {
  std::uint64_t n = 0;
  for (const auto& c : ep.plane_counters()) n += c.tx_packets;
  return n;
}

std::uint64_t rtx_total(const Session& s) {
  std::uint64_t n = 0;
  for (const std::uint32_t qpn : s.qpns) n += s.ep->engine().qp(qpn)->counters().tx_rtx;
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
  const std::uint64_t pk0 = tx_packets(*s.ep), rtx0 = rtx_total(s);
  start_window();
  const Duration pause0 = v.pause;
  double cpu0 = cpu_seconds();  // the reported CPU time leaves pattern work out
  const Time t0 = io::UdpEndpoint::now();
  Time stop_at = timed ? t0 + static_cast<Time>(o.duration * 1e9) : kNever;
  Time last_progress = t0;
  const Duration iv = static_cast<Duration>(o.interval_ms) * 1'000'000;
  Time iv_start = t0;
  std::uint64_t iv_bytes = 0, iv_rtx = rtx0;
  const auto close_interval = [&](Time t) {
    const std::uint64_t rtx = rtx_total(s);
    r.intervals.push_back(Interval{static_cast<double>(t - t0) * 1e-9, unix_now(),
                                   static_cast<double>(t - iv_start) * 1e-6, iv_bytes, rtx - iv_rtx});
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
    iv_start = t;
    iv_bytes = 0;
    iv_rtx = rtx;
  };
  bool posting = true;
  for (;;) {
    const Time t = io::UdpEndpoint::now();
    if (t >= stop_at) posting = false;
    bool outstanding = false, more = false;
    for (std::size_t q = 0; q < nq; ++q) {
      while (posting && posted[q] < per_qp && posted[q] - base[q] < slots &&
             posted[q] - done[q] < o.tx_depth) {
        const std::uint64_t off = (posted[q] - base[q]) * size;
        const engine::SendWr w = s.write_wr(q, posted[q], off, static_cast<std::uint32_t>(size), o.imm,
                                            static_cast<std::uint32_t>(posted[q] & 0xFFFFFF));
        if (s.ep->post_send(s.qpns[q], w) != 0) break;
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
      if (iv != 0) close_interval(t);
      if (!end_window()) return false;
      start_window();
      cpu0 += cpu_seconds() - cpu_before;
      const Duration paused = v.pause - before;
      if (stop_at != kNever) stop_at += paused;
      iv_start += paused;
      last_progress += paused;
      continue;
    }
    s.progress();
    engine::Completion c;
    while (s.ep->poll_completion(c)) {
      if (c.is_recv) {
        s.ep->post_recv(c.qpn, c.wr_id);
        continue;
      }
      if (c.status != engine::WcStatus::kSuccess) {
        err = std::string("send completion error: ") + engine::to_string(c.status);
        return false;
      }
      ++done[s.qp_index(c.qpn)];
      iv_bytes += size;
      last_progress = t;
    }
    if (iv != 0 && t - iv_start >= iv) close_interval(t);
    if (t - last_progress > kStallLimit) {
      err = "no completion for 10 s (is the server reachable on every plane?)";
      return false;
    }
  }
  const Time t1 = io::UdpEndpoint::now();
  if (iv != 0 && iv_bytes != 0) close_interval(t1);
  const Duration active = t1 - t0 - (v.pause - pause0);
  r.cpu_s = cpu_seconds() - cpu0;
  if (!end_window()) return false;
  r.bytes = size;
  r.iterations = 0;
  for (std::size_t q = 0; q < nq; ++q) r.iterations += done[q];
  r.seconds = static_cast<double>(active) * 1e-9;
  r.gbps = static_cast<double>(r.iterations * size) * 8 / r.seconds * 1e-9;
  r.mpps = static_cast<double>(r.iterations) / r.seconds * 1e-6;
  r.packets = tx_packets(*s.ep) - pk0;
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
  for (std::uint32_t i = 0; i < o.lat_iters; ++i) {
    const std::uint32_t tag = i & 0xFFFFFF;
    const std::uint64_t off = (tag % slots) * o.lat_size;
    const Time t0 = io::UdpEndpoint::now();
    if (s.ep->post_send(s.qpns[0], s.write_wr(0, 1ull << 41, off, o.lat_size, true, kPingBit | tag)) != 0) {
      err = "latency: post_send refused";
      return false;
    }
    bool got = false;
    while (!got) {
      s.progress();
      engine::Completion c;
      while (s.ep->poll_completion(c)) {
        if (c.status != engine::WcStatus::kSuccess) {
          err = std::string("latency: completion error: ") + engine::to_string(c.status);
          return false;
        }
        if (!c.is_recv) continue;
        s.ep->post_recv(c.qpn, c.wr_id);
        if (c.has_imm && c.imm == (kPongBit | tag)) got = true;
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

int fail(const std::string& msg) {
  std::fprintf(stderr, "mrc perf: %s\n", msg.c_str());
  return 1;
}

int run_client(const PerfOptions& o) {
  std::string err;
  std::vector<io::IpAddr> local, remote;
  if (!parse_addrs(o.local.empty() ? default_planes(2) : o.local, local, err) ||
      !parse_addrs(o.remote, remote, err))
    return fail(err);
  std::vector<std::uint64_t> sizes;
  if (o.all_sizes) {
    for (std::uint64_t b = 2; b <= (8u << 20); b <<= 1) sizes.push_back(b);
  } else {
    sizes.push_back(o.size);
  }
  const std::uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  if (max_size == 0 || max_size > kMaxRegion) return fail("message size must be 1 B .. 1 GiB");
  if (o.pmtu != 0 && o.pmtu < 256) return fail("--pmtu must be 256 .. 4096 (0 = from the interface MTU)");
  Params prm;
  prm.qps = o.qps;
  // Default region: a whole count-mode transfer (no verification pause), within the memory caps.
  std::uint64_t need = o.duration > 0 ? kTimedRegion : 0;
  for (const std::uint64_t sz : sizes) need = std::max(need, o.duration > 0 ? 0 : sz * o.iters);
  prm.region = o.window != 0 ? o.window : std::min({need, kMaxRegion, kMaxRegionTotal / o.qps});
  prm.region = std::max({prm.region, max_size, std::uint64_t{o.lat_size}, std::uint64_t{4096}});
  if (prm.region > kMaxRegion || prm.region * o.qps > kMaxRegionTotal)
    return fail("--window: at most 1 GiB per QP and 4 GiB over all QPs");
  prm.pmtu = o.pmtu;
  if (!choose_pmtu(local, prm.pmtu, err)) return fail(err);
  prm.seed = o.seed;
  prm.cc = o.cc == "nscc" ? 1 : 0;
  prm.evs_per_plane = o.evs_per_plane;
  prm.backup_per_plane = o.backup_per_plane;
  prm.timeout = o.timeout;
  prm.ev_mode = o.ev_mode == "srv6" ? 2 : o.ev_mode == "stev" ? 1 : 0;
  prm.planes = static_cast<std::uint32_t>(local.size());
  if (!prm.decode(prm.encode(), err)) return fail(err);

  auto ch = io::OobChannel::connect(o.client_host, o.oob_port, kOobTimeout, err);
  if (!ch) return fail(err);
  const std::vector<std::uint64_t> hello = prm.encode();
  if (!ch->send_values(hello, err)) return fail(err);
  Session s;
  if (!open_session(s, o, prm, local, err)) return fail(err);
  std::vector<io::ConnInfo> mine, theirs(prm.qps);
  for (std::uint32_t q = 0; q < prm.qps; ++q) mine.push_back(local_info(s, q, local));
  if (o.auth)
    for (io::ConnInfo& m : mine)
      if (!add_auth_key(m, err)) return fail(err);
  for (std::uint32_t q = 0; q < prm.qps; ++q)
    if (!ch->send_conn_info(mine[q], err) || !ch->recv_conn_info(theirs[q], kOobTimeout, err))
      return fail(err);
  for (const auto& t : theirs)
    if (t.length < prm.region) return fail("server region smaller than requested");
  if (!connect_qps(s, mine, theirs, remote, err)) return fail(err);
  std::vector<std::uint64_t> vals;
  if (!ch->recv_values(vals, kOobTimeout, err)) return fail(err);

  if (!o.json) {
    std::printf(
        "mrc perf: %u QP(s), %zu planes, %s, pmtu %u, cc %s, EV mode %s, GSO %s%s\n", o.qps, local.size(),
        o.imm ? "WRITE_IMM" : "WRITE", prm.pmtu, o.cc.c_str(), o.ev_mode.c_str(),
        o.gso ? std::to_string(o.gso).c_str() : "off",
        s.ep->config().impair.enabled() ? (", impair " + io::to_string(s.ep->config().impair)).c_str() : "");
    std::printf("%-12s %-12s %-12s %-14s %-12s %-10s %-8s\n", "#bytes", "#iterations", "BW[Gb/s]",
                "MsgRate[Mpps]", "Pkt/s", "CPU[s]", "rtx");
  }
  // A failed run still shows its counters (with --metrics): they say why it stalled.
  auto fail_run = [&](const std::string& msg) {
    if (o.metrics) std::fprintf(stderr, "%s\n", io::metrics_json(*s.ep).dump(2).c_str());
    return fail(msg);
  };
  std::vector<SizeResult> results;
  Verifier v;
  v.ch = &*ch;
  v.seed = o.seed;
  v.ready.assign(prm.qps, 0);
  for (const std::uint64_t size : sizes) {
    SizeResult r;
    if (!run_bw(s, o, size, v, r, err)) return fail_run(err);
    results.push_back(r);
    if (!o.json) {
      std::printf("%-12llu %-12llu %-12.3f %-14.6f %-12.0f %-10.3f %-8llu\n",
                  static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.iterations),
                  r.gbps, r.mpps, r.pps, r.cpu_s, static_cast<unsigned long long>(r.rtx));
      std::fflush(stdout);
    }
  }
  std::vector<double> rtt;
  if (o.lat_iters > 0 && !run_latency(s, o, v, rtt, err)) return fail_run(err);
  const std::uint64_t done_msg[] = {kDone};
  if (!ch->send_values(done_msg, err) || !ch->recv_values(vals, kOobTimeout, err)) return fail(err);
  if (vals.size() != 1) return fail("bad final reply");
  const double server_cpu = static_cast<double>(vals[0]) * 1e-6;
  std::uint64_t moved = 0;  // bandwidth phase + pings, every byte of which was checked
  for (const auto& r : results) moved += r.bytes * r.iterations;
  moved += std::min<std::uint64_t>(prm.region / o.lat_size, o.lat_iters) * o.lat_size;
  const bool verified = v.bad == 0 && v.checked == moved;
  const double p50 = percentile(rtt, 50), p99 = percentile(rtt, 99);
  if (o.json) {
    nlohmann::json j;
    j["role"] = "client";
    j["qps"] = o.qps;
    j["planes"] = local.size();
    j["op"] = o.imm ? "WRITE_IMM" : "WRITE";
    j["pmtu"] = prm.pmtu;
    j["gso"] = o.gso;
    j["evs_per_plane"] = prm.evs_per_plane;
    j["region_bytes_per_qp"] = prm.region;
    j["cc"] = o.cc;
    j["impair"] = io::to_string(s.ep->config().impair);
    nlohmann::json rs = nlohmann::json::array();
    for (const auto& r : results)
      rs.push_back({{"bytes", r.bytes},
                    {"iterations", r.iterations},
                    {"seconds", r.seconds},
                    {"bw_gbps", r.gbps},
                    {"msg_rate_mpps", r.mpps},
                    {"packets", r.packets},
                    {"packets_per_s", r.pps},
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
    j["latency"] = {{"iterations", rtt.size()}, {"size", o.lat_size}, {"p50_us", p50}, {"p99_us", p99}};
    j["verified"] = verified;
    j["bytes_moved"] = moved;
    j["verified_bytes"] = v.checked;
    j["mismatched_bytes"] = v.bad;
    j["verification_windows"] = v.window;
    j["verify_pause_s"] = static_cast<double>(v.pause) * 1e-9;
    j["server_cpu_s"] = server_cpu;
    if (o.metrics) j["metrics"] = io::metrics_json(*s.ep);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    if (!rtt.empty())
      std::printf("latency (WRITE_IMM ping-pong, %u B, %zu round trips): p50 %.1f us  p99 %.1f us\n",
                  o.lat_size, rtt.size(), p50, p99);
    std::printf(
        "server CPU %.3f s; data %s: %llu of %llu bytes checked byte for byte in %llu window(s), %llu "
        "mismatched\n",
        server_cpu, verified ? "verified" : "MISMATCH", static_cast<unsigned long long>(v.checked),
        static_cast<unsigned long long>(moved), static_cast<unsigned long long>(v.window),
        static_cast<unsigned long long>(v.bad));
    if (o.metrics) std::printf("%s", io::metrics_prometheus(*s.ep).c_str());
  }
  if (s.pcap) s.pcap->close();
  return verified ? 0 : 2;
}

}  // namespace

CLI::App* add_perf_command(CLI::App& app) {
  PerfOptions& o = g_opt;
  CLI::App* c = app.add_subcommand("perf", "ib_write_bw-like benchmark over the UDP MRC endpoint");
  c->footer(
      "Start `mrc perf --server` on one host and `mrc perf --client HOST` on the other (or both on one\n"
      "host: the default planes are 127.0.{1..4}.1 for the server and 127.0.{1..4}.2 for the client).\n"
      "The server compares every byte written with the client's pattern (see --window).\n"
      "Exit status: 0 when every transfer completed and the server's data matched, 2 on a mismatch,\n"
      "1 on errors.");
  auto* role = c->add_option_group("role");
  role->add_flag("--server", o.server, "Run the server side (waits for one client)");
  role->add_option("--client", o.client_host, "Run the client side against this server (OOB host)");
  role->require_option(1);
  c->add_option("--bind", o.bind, "Server: address of the TCP out-of-band listener")->capture_default_str();
  c->add_option("-p,--port", o.oob_port, "TCP out-of-band port")->capture_default_str();
  c->add_option("--local", o.local, "Local plane addresses, one per plane (comma separated)")->delimiter(',');
  c->add_option("--remote", o.remote, "Peer plane addresses (default: what the peer announces)")
      ->delimiter(',');
  c->add_flag("-a,--all", o.all_sizes, "Sweep message sizes 2 B .. 8 MiB");
  c->add_option("-s,--size", o.size, "Message size (suffixes KiB, MiB)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  c->add_option("-n,--iters", o.iters, "Messages per QP and size")->capture_default_str();
  c->add_option("-D,--duration", o.duration, "Seconds per size instead of a message count");
  c->add_option("-q,--qps", o.qps, "Number of QPs")->check(CLI::Range(1u, kMaxQps))->capture_default_str();
  c->add_flag("--imm", o.imm, "Use RDMA WRITE_WITH_IMM for the bandwidth test");
  c->add_option("-t,--tx-depth", o.tx_depth, "Outstanding work requests per QP")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  c->add_option("--lat-iters", o.lat_iters, "WRITE_IMM ping-pong round trips (0 = skip)")
      ->capture_default_str();
  c->add_option("--lat-size", o.lat_size, "Ping-pong message size")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  c->add_option("-m,--mtu,--pmtu", o.pmtu,
                "Payload bytes per packet (256..4096; default: the largest power of two whose datagram fits "
                "every plane's interface MTU)")
      ->check(CLI::Range(0u, 4096u));
  c->add_option("--cc", o.cc, "Congestion control")
      ->check(CLI::IsMember({"none", "nscc"}))
      ->capture_default_str();
  c->add_option("--rate", o.rate_gbps, "Per-plane rate for NSCC, Gb/s")->capture_default_str();
  c->add_option("--evs", o.evs_per_plane, "Active EVs per plane")->capture_default_str();
  c->add_option("--interval", o.interval_ms,
                "Goodput every MS milliseconds (completed bytes): a column, or with --json \"intervals\" in "
                "the report and one JSON line per interval on stderr as it ends")
      ->check(CLI::Range(1u, 60'000u));
  c->add_option("--window", o.window,
                "Bytes per QP written between two verifications (default: the whole transfer up to 1 GiB; "
                "256 MiB with -D)")
      ->transform(CLI::AsSizeValue(false));
  c->add_option("--backup-evs", o.backup_per_plane, "Backup EVs per plane")->capture_default_str();
  c->add_option("--timeout", o.timeout, "QP timeout exponent (RTO = 1.024 us * 2^t)")->capture_default_str();
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
  c->add_option("--gso", o.gso,
                "UDP segmentation offload: each QP sends N packets on one EV and they leave as one GSO send; "
                "GRO on receive (0 = off, 2..64)")
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
  c->add_option("--seed", o.seed, "Seed of the data pattern and the endpoints")->capture_default_str();
  return c;
}

int run_perf() {
  // Reject a bad impairment before any connection is made.
  io::ImpairConfig imp;
  std::string err;
  if (!g_opt.impair_file.empty() && !io::load_impair_file(g_opt.impair_file, imp, err)) return fail(err);
  if (!g_opt.impair.empty() && !io::parse_impair(g_opt.impair, imp, err)) return fail(err);
  return g_opt.server ? run_server(g_opt) : run_client(g_opt);
}

}  // namespace mrc::tools
