// MRC_QP_VENDOR_CFG in this implementation's layout (src/api/vendor_cfg.hpp, docs/api.md): per-QP
// MAC authentication and the wire-extension agreement at RTR, the active / backup EV split at INIT,
// and what is refused or ignored.
#include <arpa/inet.h>

#include <algorithm>
#include <tuple>

#include "api/app_harness.hpp"
#include "api/device_tuning.hpp"
#include "api/vendor_cfg.hpp"
#include "engine/qp.hpp"

using namespace mrc_app_test;

namespace {

mrc::engine::MacKey key(std::uint64_t k0, std::uint64_t k1) {
  mrc::engine::MacKey k;
  k.k0 = k0;
  k.k1 = k1;
  return k;
}

/// RESET -> RTS on both sides with `va` / `vb` as each side's vendor configuration at RTR; retries
/// short, so a connection whose packets are all dropped ends soon in RETRY_EXC_ERR.
void connect_with(Side& a, Side& b, const mrc::api::VendorCfg& va, const mrc::api::VendorCfg& vb) {
  a.psn = 0x10;
  b.psn = 0x20;
  const Remote ra = a.remote(), rb = b.remote();
  a.learn(rb);
  b.learn(ra);
  ASSERT_EQ(to_init(a.qp), 0);
  ASSERT_EQ(to_init(b.qp), 0);
  for (auto [s, r, vc] : {std::tuple{&a, rb, va}, std::tuple{&b, ra, vb}}) {
    Attrs rtr = rtr_attrs(r);
    mrc::api::encode_vendor_cfg(vc, rtr.m.vendor_cfg);
    ASSERT_EQ(mrc_modify_qp(s->qp, &rtr.v, kRtrIb, &rtr.m, kRtrMrc | MRC_QP_VENDOR_CFG), 0)
        << std::strerror(errno);
    Attrs rts = rts_attrs(s->psn, 12);  // 4 ms
    rts.m.retry.linear_cnt = 2;
    rts.m.retry.exp_cnt = 1;
    ASSERT_EQ(mrc_modify_qp(s->qp, &rts.v, kRtsIb, &rts.m, kRtsMrc), 0);
  }
}

std::uint64_t auth_failures(Side& s) {
  std::uint64_t n = 0;
  EXPECT_TRUE(mrc::api::with_endpoint(
      s.dev, [&](mrc::io::UdpEndpoint& ep) { n = ep.engine().counters().rx_auth_failed; }));
  return n;
}

/// One 64 KiB WRITE_IMM a -> b; the sender's completion status.
ibv_wc_status write_once(Side& a, Side& b) {
  for (std::size_t i = 0; i < 65536; ++i) a.buf[i] = static_cast<std::uint8_t>(i * 7 + 1);
  EXPECT_EQ(post_recv(b.qp, 1), 0);
  ibv_sge sge;
  ibv_send_wr wr = write_wr(sge, a, 0, 65536, b, 0, 5, true, 0x1234);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(mrc_post_send(a.qp, &wr, &bad), 0);
  const std::vector<ibv_wc> wa = poll_n(a, 1);
  return wa.empty() ? IBV_WC_GENERAL_ERR : wa[0].status;
}

/// The QP_FATAL event of a's QP after its retries ran out, acknowledged so it can be destroyed.
void ack_fatal(Side& a) {
  mrc_async_event ev{};
  ASSERT_EQ(mrc_get_async_event(a.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  mrc_ack_async_event(&ev);
}

}  // namespace

TEST(AppVendorCfg, AuthenticatedQpsTalkWithMatchingKeys) {
  Side a, b;
  a.open(spec(90, 1), 1 << 17);
  b.open(spec(90, 2), 1 << 17);
  mrc::api::VendorCfg va, vb;
  va.flags = vb.flags = mrc::api::kVcAuth | mrc::api::kVcWireExtSet;  // wire extensions off
  va.tx_key = vb.rx_key = key(0x0123456789abcdefull, 0x1111);
  vb.tx_key = va.rx_key = key(0xfedcba9876543210ull, 0x2222);
  connect_with(a, b, va, vb);
  ASSERT_EQ(write_once(a, b), IBV_WC_SUCCESS);
  const std::vector<ibv_wc> wb = poll_n(b, 1);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wb[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(ntohl(wb[0].imm_data), 0x1234u);
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + 65536, b.buf.begin()));
  EXPECT_EQ(auth_failures(b), 0u);
  a.close();
  b.close();
}

TEST(AppVendorCfg, WrongKeyIsDroppedAndTheSenderGivesUp) {
  Side a, b;
  a.open(spec(91, 1), 1 << 17);
  b.open(spec(91, 2), 1 << 17);
  mrc::api::VendorCfg va, vb;
  va.flags = vb.flags = mrc::api::kVcAuth;
  va.tx_key = key(1, 2);
  vb.rx_key = key(1, 3);  // not the key a tags its packets with
  vb.tx_key = va.rx_key = key(4, 5);
  connect_with(a, b, va, vb);
  EXPECT_EQ(write_once(a, b), IBV_WC_RETRY_EXC_ERR);
  EXPECT_GT(auth_failures(b), 0u);
  std::vector<std::uint8_t> zero(65536, 0);
  EXPECT_TRUE(std::equal(zero.begin(), zero.end(), b.buf.begin()));  // nothing was placed
  ack_fatal(a);
  a.close();
  b.close();
}

TEST(AppVendorCfg, OnlyOneSideAuthenticatingFails) {
  Side a, b;
  a.open(spec(92, 1), 1 << 17);
  b.open(spec(92, 2), 1 << 17);
  mrc::api::VendorCfg va, vb;
  va.flags = mrc::api::kVcAuth;
  va.tx_key = key(7, 8);
  va.rx_key = key(9, 10);
  connect_with(a, b, va, vb);  // b checks no MAC and sees a's tagged packets as bad ICRCs
  EXPECT_EQ(write_once(a, b), IBV_WC_RETRY_EXC_ERR);
  std::uint64_t bad = 0;
  EXPECT_TRUE(mrc::api::with_endpoint(
      b.dev, [&](mrc::io::UdpEndpoint& ep) { bad = ep.engine().counters().rx_bad_packet; }));
  EXPECT_GT(bad, 0u);
  ack_fatal(a);
  a.close();
  b.close();
}

TEST(AppVendorCfg, RefusedAndIgnoredBuffers) {
  Side a;
  a.open(spec(93, 1));
  Attrs init = init_attrs();
  // Ours with an unknown flag: refused, the QP stays in RESET.
  mrc::api::encode_vendor_cfg(mrc::api::VendorCfg{}, init.m.vendor_cfg);
  init.m.vendor_cfg[mrc::api::kVcOffFlags] = 0x80;
  EXPECT_EQ(mrc_modify_qp(a.qp, &init.v, kInitIb, &init.m, kInitMrc | MRC_QP_VENDOR_CFG), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_RESET);
  // More active EVs than the EV profile has: refused at INIT.
  mrc::api::VendorCfg vc;
  vc.flags = mrc::api::kVcActiveEvs;
  vc.active_evs = 100000;
  mrc::api::encode_vendor_cfg(vc, init.m.vendor_cfg);
  EXPECT_EQ(mrc_modify_qp(a.qp, &init.v, kInitIb, &init.m, kInitMrc | MRC_QP_VENDOR_CFG), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_RESET);
  // Another vendor's bytes (first byte not ours): ignored, as before the layout existed.
  std::fill(std::begin(init.m.vendor_cfg), std::end(init.m.vendor_cfg), 0x5A);
  EXPECT_EQ(mrc_modify_qp(a.qp, &init.v, kInitIb, &init.m, kInitMrc | MRC_QP_VENDOR_CFG), 0);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_INIT);
  a.close();
}

TEST(AppVendorCfg, ActiveEvSplitReachesTheEngine) {
  Side a;
  a.open(spec(94, 1));
  Attrs init = init_attrs();
  mrc::api::VendorCfg vc;
  vc.flags = mrc::api::kVcActiveEvs;
  vc.active_evs = 2;  // of profile 0's AUTO set (32 active + 8 backup per plane, 2 planes)
  mrc::api::encode_vendor_cfg(vc, init.m.vendor_cfg);
  ASSERT_EQ(mrc_modify_qp(a.qp, &init.v, kInitIb, &init.m, kInitMrc | MRC_QP_VENDOR_CFG), 0);
  std::uint32_t qpn = 0, active = 0, total = 0;
  ASSERT_EQ(mrc_get_qpn(a.qp, &qpn), 0);
  EXPECT_TRUE(mrc::api::with_endpoint(a.dev, [&](mrc::io::UdpEndpoint& ep) {
    const mrc::engine::EvManager& m = ep.engine().qp(qpn)->evs();
    for (std::uint16_t s = 0; s < m.size(); ++s) {
      ++total;
      active += m.is_active(s) ? 1 : 0;
    }
  }));
  EXPECT_EQ(total, 80u);
  EXPECT_EQ(active, 2u);
  a.close();
}
