// Two UdpEndpoints on loopback (distinct 127.x.y.z addresses per plane), one connected QP pair,
// and helpers to move a buffer with RDMA WRITEs and check it arrived byte-exact.
#pragma once
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "io/udp_endpoint.hpp"
#include "wire/packet.hpp"

namespace mrc::iotest {

inline std::vector<io::IpAddr> plane_addrs(const std::string& prefix, std::uint32_t planes, int host) {
  std::vector<io::IpAddr> v;
  for (std::uint32_t i = 0; i < planes; ++i) {
    io::IpAddr a;
    const std::string s = prefix + std::to_string(i + 1) + "." + std::to_string(host);
    EXPECT_TRUE(io::IpAddr::parse(s, a)) << s;
    v.push_back(a);
  }
  return v;
}

inline engine::QpConfig qp_config(std::uint32_t planes, std::uint64_t seed) {
  engine::QpConfig c;
  c.pmtu = 4096;
  c.evs = engine::make_ev_set(planes, 8, 2);
  c.active_count = planes * 8;
  c.timeout = 12;  // 4.2 ms: real loopback RTTs include scheduling delays
  c.seed = seed;
  c.cc.algorithm = cc::Algorithm::kNone;
  return c;
}

struct IoPair {
  std::unique_ptr<io::UdpEndpoint> a, b;
  std::uint32_t qa = 0, qb = 0, peer_b = 0, peer_a = 0;
  std::vector<std::uint8_t> src, dst;
  const engine::MemoryRegion* mra = nullptr;
  const engine::MemoryRegion* mrb = nullptr;
  /// Set before open(): a's QP sends with key_ab and checks key_ba, b's the other way round.
  bool auth = false;
  std::uint32_t gso = 0;  ///< set before open(): UdpConfig::gso_burst of both sides
  bool wire_ext = true;   ///< set before open(): the connection agreed to the wire extensions (D45)
  engine::MacKey key_ab{0x0123456789abcdefull, 0x1122334455667788ull};
  engine::MacKey key_ba{0x99aabbccddeeff00ull, 0x0f1e2d3c4b5a6978ull};

  /// Addresses 127.<net>.<plane>.1 (a) and .2 (b); `impair` applies to b's receive path.
  bool open(std::uint32_t planes, std::size_t bytes, int net, const io::ImpairConfig& impair_b = {},
            const io::ImpairConfig& impair_a = {}) {
    const std::string prefix = "127." + std::to_string(net) + ".";
    io::UdpConfig ca;
    ca.planes = plane_addrs(prefix, planes, 1);
    ca.impair = impair_a;
    ca.engine.seed = 11;
    ca.gso_burst = gso;
    io::UdpConfig cb = ca;
    cb.planes = plane_addrs(prefix, planes, 2);
    cb.impair = impair_b;
    cb.engine.seed = 12;
    std::string err;
    a = io::UdpEndpoint::create(ca, err);
    EXPECT_TRUE(a) << err;
    b = io::UdpEndpoint::create(cb, err);
    EXPECT_TRUE(b) << err;
    if (!a || !b) return false;
    peer_b = a->add_peer(cb.planes);
    peer_a = b->add_peer(ca.planes);
    src.resize(bytes);
    dst.assign(bytes, 0);
    Rng r(99);
    for (auto& x : src) x = static_cast<std::uint8_t>(r.next());
    mra = a->engine().memory().register_region(src.data(), src.size(), engine::access::kAll);
    mrb = b->engine().memory().register_region(dst.data(), dst.size(), engine::access::kAll);
    qa = a->engine().create_qp(qp_config(planes, 1));
    qb = b->engine().create_qp(qp_config(planes, 2));
    const std::uint32_t psn_ab = 0x123456, psn_ba = 0xABCDE;
    const Time t = io::UdpEndpoint::now();
    const engine::QpRemote ra{peer_b, qb, psn_ab, psn_ba, 8, 128, {auth, key_ab, key_ba}, wire_ext};
    const engine::QpRemote rb{peer_a, qa, psn_ba, psn_ab, 8, 128, {auth, key_ba, key_ab}, wire_ext};
    EXPECT_EQ(a->engine().connect_qp(qa, ra, t), 0);
    EXPECT_EQ(b->engine().connect_qp(qb, rb, t), 0);
    return mra && mrb && qa && qb && peer_a && peer_b;
  }

  /// A WRITE_ONLY of `len` 0xEE bytes to the start of b's region with the PSN b expects first and
  /// b's rkey, encoded with its ICRC: what a forger or a stray sender puts on the wire.
  std::vector<std::uint8_t> forged_write(std::uint32_t len) const {
    wire::Packet pk;
    pk.bth.opcode = wire::Opcode::kWriteOnly;
    pk.bth.dest_qp = qb;
    pk.bth.psn = 0x123456;
    pk.reth.va = reinterpret_cast<std::uintptr_t>(dst.data());
    pk.reth.rkey = mrb->rkey;
    const std::vector<std::uint8_t> payload(len, 0xEE);
    pk.reth.dma_len = len;
    pk.payload = payload;
    std::vector<std::uint8_t> buf(len + 256);
    buf.resize(wire::encode(pk, buf));
    EXPECT_FALSE(buf.empty());
    return buf;
  }

  /// An IPv4 socket address.
  static sockaddr_in udp4(const char* addr, std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, addr, &a.sin_addr);
    return a;
  }
  /// A UDP socket bound to addr:port, a forger's (-1 on failure).
  static int bound_udp4(const char* addr, std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    const sockaddr_in self = udp4(addr, port);
    if (fd >= 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&self), sizeof self) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  /// Folds RoCEv2's IPv4/UDP prefix (W22) into the ICRC of `pkt`, a packet from src:sport to dst:dport.
  static void fold_rocev2(std::vector<std::uint8_t>& pkt, const char* src, std::uint16_t sport,
                          const char* dst, std::uint16_t dport) {
    in_addr s{}, d{};
    ::inet_pton(AF_INET, src, &s);
    ::inet_pton(AF_INET, dst, &d);
    std::uint8_t pre[wire::kMaskedIpv4UdpSize];
    wire::masked_ipv4_udp(pre, reinterpret_cast<const std::uint8_t*>(&s),
                          reinterpret_cast<const std::uint8_t*>(&d), sport, dport, pkt.size());
    const std::uint32_t x = wire::icrc_prefix_xor(pre, pkt.size() - wire::kIcrcSize);
    for (std::size_t i = 0; i < wire::kIcrcSize; ++i)
      pkt[pkt.size() - wire::kIcrcSize + i] ^= static_cast<std::uint8_t>(x >> (8 * i));
  }

  engine::SendWr wr(std::uint64_t id, std::size_t off, std::uint32_t len, bool imm = false) const {
    engine::SendWr w;
    w.wr_id = id;
    w.with_imm = imm;
    w.imm = static_cast<std::uint32_t>(id);
    w.local_addr = reinterpret_cast<std::uintptr_t>(src.data() + off);
    w.length = len;
    w.lkey = mra->lkey;
    w.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + off);
    w.rkey = mrb->rkey;
    return w;
  }
};

}  // namespace mrc::iotest
