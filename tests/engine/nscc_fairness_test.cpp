// N senders into one receiver through a shared last-hop queue: NSCC running inside the engine must
// converge to a fair share, keep the link busy and keep the queue bounded.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "harness.hpp"

namespace mrc::test {
namespace {

struct Incast {
  static constexpr std::uint32_t kPlanes = 2;
  static constexpr std::uint32_t kMsg = 24u << 20;

  explicit Incast(std::uint32_t senders, std::uint64_t seed) : net(config(seed)) {
    const Duration rtt = net.base_rtt();
    const double bdp = 100e9 / 8 * static_cast<double>(rtt) / 1e9;  // per plane
    engine::EndpointConfig ec;
    ec.num_ports = kPlanes;
    ec.seed = seed;
    rx = std::make_unique<engine::Endpoint>(ec);
    rx_node = net.add_node(*rx);
    for (std::uint32_t p = 0; p < kPlanes; ++p) {
      sim::LastHopSpec& lh = net.last_hop(rx_node, p);
      lh.rate_bps = 100e9;
      lh.ecn_kmin = static_cast<std::uint64_t>(0.2 * bdp);
      lh.ecn_kmax = static_cast<std::uint64_t>(0.8 * bdp);
      lh.trim_bytes = static_cast<std::uint64_t>(1.5 * bdp);
      lh.buffer_bytes = 8u << 20;
    }
    dst.resize(static_cast<std::size_t>(kMsg) * senders);
    const engine::MemoryRegion* mr =
        rx->memory().register_region(dst.data(), dst.size(), engine::access::kAll);
    PairOptions o;
    o.planes = kPlanes;
    o.paths = 8;
    for (std::uint32_t i = 0; i < senders; ++i) {
      Sender s;
      ec.seed = seed * 100 + i + 1;
      s.ep = std::make_unique<engine::Endpoint>(ec);
      s.node = net.add_node(*s.ep);
      s.src.assign(kMsg, static_cast<std::uint8_t>(i + 1));
      s.mr = s.ep->memory().register_region(s.src.data(), s.src.size(), engine::access::kAll);
      s.qpn = s.ep->create_qp(make_qp_config(o, rtt, seed * 31 + i));
      const std::uint32_t rq = rx->create_qp(make_qp_config(o, rtt, seed * 37 + i));
      s.ep->connect_qp(s.qpn, engine::QpRemote{rx_node, rq, 100 * i, 7, o.mpr, o.max_wimm_dest, {}, true}, 0);
      rx->connect_qp(rq, engine::QpRemote{s.node, s.qpn, 7, 100 * i, o.mpr, o.max_wimm_dest, {}, true}, 0);
      engine::SendWr wr;
      wr.wr_id = i;
      wr.local_addr = reinterpret_cast<std::uintptr_t>(s.src.data());
      wr.length = kMsg;
      wr.lkey = s.mr->lkey;
      wr.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + static_cast<std::size_t>(kMsg) * i);
      wr.rkey = mr->rkey;
      EXPECT_EQ(s.ep->post_send(s.qpn, wr, 0), 0);
      net.kick(s.node);
      tx.push_back(std::move(s));
    }
  }

  static sim::PathNetConfig config(std::uint64_t seed) {
    sim::PathNetConfig c;
    c.planes = kPlanes;
    c.paths_per_plane = 8;
    c.path.delay = 2_us;
    c.delay_spread = 500;
    c.seed = seed;
    return c;
  }

  std::uint64_t acked(std::uint32_t i) { return tx[i].ep->qp(tx[i].qpn)->counters().bytes_acked; }
  bool any_done() {
    engine::Completion c;
    for (auto& s : tx)
      if (s.ep->poll_completion(c)) return true;
    return false;
  }

  struct Sender {
    std::unique_ptr<engine::Endpoint> ep;
    std::uint32_t node = 0, qpn = 0;
    std::vector<std::uint8_t> src;
    const engine::MemoryRegion* mr = nullptr;
  };
  sim::PathNet net;
  std::unique_ptr<engine::Endpoint> rx;
  std::uint32_t rx_node = 0;
  std::vector<std::uint8_t> dst;
  std::vector<Sender> tx;
};

double jain(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return s * s / (static_cast<double>(x.size()) * s2);
}

TEST(NsccFairness, SendersIntoOneReceiverShareFairlyWithABoundedQueue) {
  for (std::uint32_t n : {2u, 4u, 8u}) {
    Incast in(n, n);
    const Duration rtt = in.net.base_rtt();
    // Let NSCC settle, then measure until the first sender finishes.
    const Time warm = 60 * rtt;
    in.net.run_until(warm);
    std::vector<std::uint64_t> start(n);
    for (std::uint32_t i = 0; i < n; ++i) start[i] = in.acked(i);
    const std::uint64_t lh0 =
        in.net.last_hop_stats(in.rx_node, 0).packets + in.net.last_hop_stats(in.rx_node, 1).packets;
    const std::uint64_t trims0 = in.net.stats().trimmed;
    Time t = warm;
    bool done = false;
    while (!done && t < 100_ms) {
      t += 10 * rtt;
      in.net.run_until(t);
      done = in.any_done();
    }
    ASSERT_TRUE(done);
    std::vector<double> rate(n);
    double total = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      rate[i] = static_cast<double>(in.acked(i) - start[i]) * 8 / static_cast<double>(t - warm);
      total += rate[i];
    }
    const std::uint64_t packets =
        in.net.last_hop_stats(in.rx_node, 0).packets + in.net.last_hop_stats(in.rx_node, 1).packets - lh0;
    const std::uint64_t trims = in.net.stats().trimmed - trims0;
    const std::uint64_t peak = std::max(in.net.last_hop_stats(in.rx_node, 0).peak_bytes,
                                        in.net.last_hop_stats(in.rx_node, 1).peak_bytes);
    const double bdp = 100e9 / 8 * static_cast<double>(rtt) / 1e9;
    std::printf("%u senders: Jain %.4f, goodput %.1f Gb/s of 200, trims %.2f%%, peak queue %.2f BDP\n", n,
                jain(rate), total, 100.0 * static_cast<double>(trims) / static_cast<double>(packets),
                static_cast<double>(peak) / bdp);
    EXPECT_GE(jain(rate), 0.95) << n << " senders";
    EXPECT_GT(total, 0.85 * 200);  // the bottleneck stays busy (payload goodput, headers excluded)
    EXPECT_LT(static_cast<double>(trims), 0.05 * static_cast<double>(packets));  // CC, not trimming
    EXPECT_LE(peak, static_cast<std::uint64_t>(1.6 * bdp));
  }
}

}  // namespace
}  // namespace mrc::test
