// EndpointConfig::wire_ext = false: the engine sends exactly the bytes a peer following the public
// sources sends (no cc_flags, no service times, no EETH port mask) and still moves data correctly.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace mrc::test {
namespace {

TEST(WireExt, SpecOnlyPacketsMoveDataWithLoss) {
  PairOptions o;
  o.wire_ext = false;
  o.path.loss = 0.01;
  Pair p(o);
  ASSERT_EQ(p.write(1, 0, 1 << 20, 0), 0);
  ASSERT_TRUE(p.run_until_completions(1, 0, 50_ms));
  ASSERT_EQ(p.send_done().size(), 1u);
  EXPECT_EQ(p.send_done()[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(p.same(0, 1 << 20, 0));
  // Without the duplicate echo no retransmission can be recognised as spurious (D44).
  EXPECT_EQ(p.qpa().counters().rtx_spurious, 0u);
}

TEST(WireExt, SpecOnlyPacketsWithoutLoss) {
  PairOptions o;
  o.wire_ext = false;
  Pair p(o);
  ASSERT_EQ(p.write(1, 0, 1 << 20, 0), 0);
  ASSERT_TRUE(p.run_until_completions(1, 0, 10_ms));
  EXPECT_TRUE(p.same(0, 1 << 20, 0));
  EXPECT_EQ(p.qpa().counters().tx_rtx, 0u);
}

}  // namespace
}  // namespace mrc::test
