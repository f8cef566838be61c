// EndpointConfig::wire_ext = false: the engine sends exactly the bytes a peer following the public
// sources sends (no cc_flags, no service times, no EETH port mask) and still moves data correctly.
#include <gtest/gtest.h>

#include <vector>

#include "harness.hpp"
#include "wire/packet.hpp"

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

/// Two endpoints back to back, driven by hand so the test sees every byte each one sends: `agree_a` and
/// `agree_b` are what each side's connection concluded (QpRemote::wire_ext), both configs offer them.
/// Returns the packets carrying any extension field, and checks the data arrived.
struct BackToBack {
  std::uint32_t sent_with_ext[2] = {0, 0};  ///< by a, by b
  std::uint32_t sacks = 0;
  bool data_ok = false;
};

BackToBack run_back_to_back(bool agree_a, bool agree_b) {
  engine::EndpointConfig ec;
  ec.num_ports = 1;
  engine::Endpoint a(ec), b(ec);
  PairOptions o;
  o.planes = 1;
  o.nscc = false;
  std::vector<std::uint8_t> src(64 << 10), dst(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 1);
  const auto* mra = a.memory().register_region(src.data(), src.size(), engine::access::kAll);
  const auto* mrb = b.memory().register_region(dst.data(), dst.size(), engine::access::kAll);
  const std::uint32_t qa = a.create_qp(make_qp_config(o, 10'000, 1)),
                      qb = b.create_qp(make_qp_config(o, 10'000, 2));
  engine::QpRemote ra{2, qb, 100, 200, 8, 128, {}, agree_a}, rb{1, qa, 200, 100, 8, 128, {}, agree_b};
  EXPECT_EQ(a.connect_qp(qa, ra, 0), 0);
  EXPECT_EQ(b.connect_qp(qb, rb, 0), 0);
  engine::SendWr wr;
  wr.wr_id = 1;
  wr.local_addr = reinterpret_cast<std::uintptr_t>(src.data());
  wr.length = static_cast<std::uint32_t>(src.size());
  wr.lkey = mra->lkey;
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  wr.rkey = mrb->rkey;
  EXPECT_EQ(a.post_send(qa, wr, 0), 0);
  BackToBack r;
  engine::Endpoint* ep[2] = {&a, &b};
  std::vector<std::uint8_t> bytes;
  bool done = false;
  for (Time t = 1000; t < 50'000'000 && !done; t += 1000) {
    for (int side = 0; side < 2; ++side) {
      ep[side]->on_timer(t);
      engine::TxPacket out;
      while (ep[side]->poll_tx(out, t, ~0u)) {
        bytes.assign(out.header, out.header + out.header_len);
        bytes.insert(bytes.end(), out.payload, out.payload + out.payload_len);
        bytes.insert(bytes.end(), out.trailer, out.trailer + out.trailer_len);
        wire::Packet p;
        wire::DecodeOptions d;
        d.ext = true;  // read every extension field, whether or not it should be there
        EXPECT_EQ(wire::decode(bytes, p, d), wire::Error::kOk);
        const bool ext = p.seth.svc_time != 0 || p.seth.cc_flags != 0 || p.neth.cc_flags != 0 ||
                         p.erth.entropy != 0 || p.eeth.svc_time_valid || p.eeth.port_status_valid;
        if (ext) ++r.sent_with_ext[side];
        if (p.bth.opcode == wire::Opcode::kSack) ++r.sacks;
        engine::RxMeta m;
        m.peer = side == 0 ? 1 : 2;
        m.ev = out.ev.value;
        ep[1 - side]->receive(bytes, m, t + 500);
      }
    }
    engine::Completion c;
    while (a.poll_completion(c)) done = c.wr_id == 1 && c.status == engine::WcStatus::kSuccess;
  }
  r.data_ok = done && src == dst;
  return r;
}

TEST(WireExt, UsedOnlyWhereTheConnectionAgreed) {
  // D45: both sides' configurations offer the extensions; only the connection's agreement
  // (QpRemote::wire_ext) puts them on the wire, per direction of each side.
  const BackToBack both = run_back_to_back(true, true);
  EXPECT_TRUE(both.data_ok);
  EXPECT_GT(both.sacks, 0u);
  EXPECT_GT(both.sent_with_ext[1], 0u);  // b's SACKs carry service times: the check can fail
  const BackToBack none = run_back_to_back(false, false);
  EXPECT_TRUE(none.data_ok);
  EXPECT_GT(none.sacks, 0u);
  EXPECT_EQ(none.sent_with_ext[0], 0u);
  EXPECT_EQ(none.sent_with_ext[1], 0u);
  // A peer that puts our fields in reserved bytes although this side did not agree (a spec peer
  // with non-zero reserved bytes looks the same): not read, and nothing breaks.
  const BackToBack one = run_back_to_back(false, true);
  EXPECT_TRUE(one.data_ok);
  EXPECT_EQ(one.sent_with_ext[0], 0u);
  EXPECT_GT(one.sent_with_ext[1], 0u);
}

}  // namespace
}  // namespace mrc::test
