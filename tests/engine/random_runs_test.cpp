// 1000+ seeded random runs: message sizes from 1 B to 64 MiB, loss 0-30%, reordering,
// duplication and trimming. Every byte must land exactly and WRITE_IMM completions must come in
// send order.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness.hpp"

namespace mrc::test {
namespace {

struct RunSpec {
  PairOptions opt;
  std::vector<std::uint32_t> sizes;
  std::vector<bool> imm;
};

RunSpec draw(std::uint64_t seed) {
  Rng r(seed * 0x2545F4914F6CDD1DULL + 17);
  RunSpec s;
  PairOptions& o = s.opt;
  o.seed = seed;
  o.planes = 1 + r.below(4);
  o.paths = 1 + r.below(16);
  o.active_per_port = 1 + r.below(16);
  o.backup_per_port = r.below(4);
  o.path.delay = 1_us + r.below(3000);
  o.path.jitter = r.chance(0.5) ? r.below(4000) : 0;
  o.delay_spread = r.below(2000);
  o.path.loss = r.chance(0.3) ? 0.0 : r.uniform() * 0.30;
  o.path.dup = r.chance(0.5) ? r.uniform() * 0.05 : 0.0;
  o.path.trim = r.chance(0.5) ? r.uniform() * 0.10 : 0.0;
  o.pmtu = 256u << r.below(5);
  o.mpr = static_cast<std::uint8_t>(1 + r.below(8));
  o.max_wimm = o.max_wimm_dest = static_cast<std::uint16_t>(1 + r.below(16));
  o.nscc = r.chance(0.8);
  o.timeout = 8;  // 262 us: the RTO is the last resort under heavy loss
  const std::uint32_t n = 1 + r.below(6);
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    // Mostly small messages; about 1% of runs include one between 1 MiB and 64 MiB.
    const std::uint32_t exp = r.chance(0.01) ? 20 + r.below(7) : r.below(18);
    std::uint32_t size = (1u << exp) + r.below(1u << exp);
    size = std::clamp<std::uint32_t>(size, 1, 64u << 20);
    s.sizes.push_back(size);
    s.imm.push_back(r.chance(0.5));
    total += size;
  }
  o.buf_size = total;
  return s;
}

void run_one(std::uint64_t seed) {
  RunSpec s = draw(seed);
  Pair p(s.opt);
  std::size_t recvs = 0;
  for (bool b : s.imm) recvs += b;
  for (std::size_t i = 0; i < recvs; ++i) ASSERT_EQ(p.b().post_recv(p.qpn_b(), 500 + i), 0);
  std::size_t off = 0;
  for (std::size_t i = 0; i < s.sizes.size(); ++i) {
    ASSERT_EQ(p.write(i, off, s.sizes[i], off, s.imm[i], static_cast<std::uint32_t>(seed * 100 + i)), 0);
    off += s.sizes[i];
  }
  ASSERT_TRUE(p.run_until_completions(s.sizes.size(), recvs, 20'000_ms))
      << "seed " << seed << " stalled: sent " << p.send_done().size() << "/" << s.sizes.size() << " recv "
      << p.recv_done().size() << "/" << recvs << " loss " << s.opt.path.loss << " outstanding "
      << p.qpa().outstanding_psns() << " deadline " << p.a().next_deadline() << " wants "
      << p.qpa().wants_tx() << " now " << p.net().now() << " txdata " << p.qpa().counters().tx_data << " rtx "
      << p.qpa().counters().tx_rtx << " b.rxdata " << p.qpb().counters().rx_data << " b.dup "
      << p.qpb().counters().rx_dup << " b.sack " << p.qpb().counters().tx_sack << " a.rxsack "
      << p.qpa().counters().rx_sack << " state " << engine::to_string(p.qpa().state()) << " bad "
      << p.a().counters().rx_bad_packet << "/" << p.b().counters().rx_bad_packet << " inflight "
      << p.net().packets_in_flight();
  for (std::size_t i = 0; i < s.sizes.size(); ++i) {
    EXPECT_EQ(p.send_done()[i].status, engine::WcStatus::kSuccess) << "seed " << seed;
    EXPECT_EQ(p.send_done()[i].wr_id, i) << "seed " << seed;
  }
  ASSERT_TRUE(p.same(0, off, 0)) << "seed " << seed << ": destination differs";
  std::size_t k = 0;
  for (std::size_t i = 0; i < s.sizes.size(); ++i) {
    if (!s.imm[i]) continue;
    const auto& rc = p.recv_done()[k];
    EXPECT_EQ(rc.wr_id, 500 + k) << "seed " << seed;
    EXPECT_EQ(rc.imm, static_cast<std::uint32_t>(seed * 100 + i)) << "seed " << seed;
    EXPECT_EQ(rc.byte_len, s.sizes[i]) << "seed " << seed;
    ++k;
  }
}

class RandomRuns : public ::testing::TestWithParam<int> {};

TEST_P(RandomRuns, ByteExactAndOrdered) {
  // Each parameter covers 100 seeds so failures name a small block.
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t seed = static_cast<std::uint64_t>(GetParam()) * 100 + i + 1;
    run_one(seed);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomRuns, ::testing::Range(0, 11));

}  // namespace
}  // namespace mrc::test
