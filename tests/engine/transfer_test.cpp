// End-to-end transfers over the in-memory multi-plane network.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace mrc::test {
namespace {

TEST(Transfer, OneMegabyteNoLossIsByteExactAndUsesEveryPlane) {
  PairOptions o;
  Pair p(o);
  ASSERT_EQ(p.write(1, 0, 1 << 20, 0), 0);
  ASSERT_TRUE(p.run_until_completions(1, 0, 10_ms));
  ASSERT_EQ(p.send_done().size(), 1u);
  EXPECT_EQ(p.send_done()[0].status, engine::WcStatus::kSuccess);
  EXPECT_EQ(p.send_done()[0].wr_id, 1u);
  EXPECT_TRUE(p.same(0, 1 << 20, 0));
  const auto& c = p.qpa().counters();
  EXPECT_EQ(c.tx_data, 256u);
  EXPECT_EQ(c.tx_rtx, 0u);
  for (std::uint32_t plane = 0; plane < o.planes; ++plane)
    EXPECT_GT(p.net().port_stats(p.node_a(), plane).tx_packets, 256u / o.planes / 2) << plane;
}

TEST(Transfer, WriteImmCompletionsArriveInSendOrderWithTheirImmediates) {
  PairOptions o;
  o.path.jitter = 3_us;  // heavy reordering across paths
  o.buf_size = 4 << 20;
  Pair p(o);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(p.b().post_recv(p.qpn_b(), 1000 + i), 0);
  std::size_t off = 0;
  for (std::uint32_t i = 0; i < 20; ++i) {
    const std::uint32_t len = 1 + i * 7919;
    ASSERT_EQ(p.write(i, off, len, off, true, 0xA000 + i), 0);
    off += len;
  }
  ASSERT_TRUE(p.run_until_completions(20, 20, 50_ms));
  ASSERT_EQ(p.recv_done().size(), 20u);
  std::size_t roff = 0;
  for (std::uint32_t i = 0; i < 20; ++i) {
    const auto& rc = p.recv_done()[i];
    EXPECT_EQ(rc.status, engine::WcStatus::kSuccess);
    EXPECT_EQ(rc.wr_id, 1000u + i);
    EXPECT_EQ(rc.imm, 0xA000u + i);
    EXPECT_EQ(rc.byte_len, 1 + i * 7919);
    roff += rc.byte_len;
    EXPECT_EQ(p.send_done()[i].wr_id, i);
  }
  EXPECT_TRUE(p.same(0, roff, 0));
}

}  // namespace
}  // namespace mrc::test
