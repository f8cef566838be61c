// Application API: completion channels, CQs (notification through the channel fd, acks, overrun)
// and QP hints.
#include <fcntl.h>

#include "api/app_harness.hpp"

using namespace mrc_app_test;

TEST(AppCq, ChannelAndCqArgumentChecks) {
  Side s;
  s.open(spec(50, 1));
  mrc_comp_channel* ch = nullptr;
  EXPECT_EQ(mrc_create_comp_channel(nullptr, &ch), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_create_comp_channel(s.ctx, nullptr), -1);
  ASSERT_EQ(mrc_create_comp_channel(s.ctx, &ch), 0);
  int fd = -1;
  EXPECT_EQ(mrc_get_comp_channel_fd(ch, &fd), 0);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(mrc_get_comp_channel_fd(nullptr, &fd), -1);
  EXPECT_EQ(mrc_get_comp_channel_fd(ch, nullptr), -1);

  EXPECT_EQ(mrc_create_cq(nullptr, 4, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_create_cq(s.ctx, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(mrc_create_cq(s.ctx, -3, nullptr, nullptr, 0), nullptr);
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(s.dev, &da), 0);
  EXPECT_EQ(mrc_create_cq(s.ctx, da.max_cqe + 1, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(mrc_create_cq(s.ctx, 4, nullptr, nullptr, 1), nullptr);  // one completion vector
  EXPECT_EQ(errno, EINVAL);

  Side other;
  other.open(spec(50, 2));
  EXPECT_EQ(mrc_create_cq(other.ctx, 4, nullptr, ch, 0), nullptr);  // channel of another context
  EXPECT_EQ(errno, EINVAL);

  mrc_cq* cq = mrc_create_cq(s.ctx, 4, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(mrc_destroy_comp_channel(ch), -1);  // a CQ uses it
  EXPECT_EQ(errno, EBUSY);
  ibv_wc wc[2];
  EXPECT_EQ(mrc_poll_cq(cq, 2, wc), 0);
  EXPECT_EQ(mrc_poll_cq(cq, 0, nullptr), 0);
  EXPECT_EQ(mrc_poll_cq(cq, -1, wc), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_poll_cq(cq, 2, nullptr), -1);
  EXPECT_EQ(mrc_poll_cq(nullptr, 2, wc), -1);
  EXPECT_EQ(mrc_req_notify_cq(nullptr, 0), -1);
  EXPECT_EQ(mrc_req_notify_cq(s.cq, 0), -1);  // s.cq has no channel
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_req_notify_cq(cq, 1), 0);
  mrc_cq* got = nullptr;
  void* gctx = nullptr;
  EXPECT_EQ(mrc_get_cq_event(nullptr, &got, &gctx), -1);
  EXPECT_EQ(mrc_get_cq_event(ch, nullptr, &gctx), -1);
  EXPECT_EQ(mrc_get_cq_event(ch, &got, nullptr), -1);
  ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  EXPECT_EQ(mrc_get_cq_event(ch, &got, &gctx), -1);  // nothing fired
  EXPECT_EQ(errno, EAGAIN);
  mrc_ack_cq_events(nullptr, 1);
  mrc_ack_cq_events(cq, 5);  // more than fetched: clamps, no crash
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
  EXPECT_EQ(mrc_destroy_cq(nullptr), -1);
  EXPECT_EQ(mrc_destroy_comp_channel(ch), 0);
  EXPECT_EQ(mrc_destroy_comp_channel(nullptr), -1);
  other.close();
  s.close();
}

TEST(AppCq, ChannelFdBecomesReadableAfterReqNotifyAndCompletion) {
  Side a, b;
  a.open(spec(51, 1), 1 << 16, 64, true);
  b.open(spec(51, 2));
  connect(a, b);
  int fd = -1;
  ASSERT_EQ(mrc_get_comp_channel_fd(a.ch, &fd), 0);

  // Not armed: a completion does not signal the channel.
  ibv_sge sge;
  ibv_send_wr wr = write_wr(sge, a, 0, 1000, b, 0, 1, false);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a.qp, &wr, &bad), 0);
  auto wc = poll_n(a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_FALSE(readable(fd, 0));

  // Armed: the next completion makes the fd readable, once.
  ASSERT_EQ(mrc_req_notify_cq(a.cq, 0), 0);
  EXPECT_FALSE(readable(fd, 0));
  wr = write_wr(sge, a, 0, 1000, b, 0, 2, false);
  ASSERT_EQ(mrc_post_send(a.qp, &wr, &bad), 0);
  EXPECT_TRUE(readable(fd, -1));
  mrc_cq* got = nullptr;
  void* gctx = nullptr;
  ASSERT_EQ(mrc_get_cq_event(a.ch, &got, &gctx), 0);
  EXPECT_EQ(got, a.cq);
  EXPECT_EQ(gctx, &a);  // the cq_context given at creation
  EXPECT_FALSE(readable(fd, 0));
  wc = poll_n(a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);

  // An unacked event keeps the CQ alive.
  ASSERT_EQ(mrc_destroy_qp(a.qp), 0);
  a.qp = nullptr;
  EXPECT_EQ(mrc_destroy_cq(a.cq), -1);
  EXPECT_EQ(errno, EBUSY);
  mrc_ack_cq_events(a.cq, 1);
  a.close();
  b.close();
}

TEST(AppCq, DestroyCqRefusedWhileAQpUsesIt) {
  Side s;
  s.open(spec(52, 1));
  EXPECT_EQ(mrc_destroy_cq(s.cq), -1);
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(ibv_dealloc_pd(s.pd), EBUSY);  // the QP and the MR use it (verbs returns the errno)
  EXPECT_EQ(mrc_destroy_context(s.ctx), -1);
  EXPECT_EQ(errno, EBUSY);
  s.close();
}

TEST(AppCq, OverrunIsACqErrorReportedAsAsyncEvent) {
  Side a, b;
  a.open(spec(53, 1), 1 << 16, 2);  // room for two completions
  b.open(spec(53, 2));
  connect(a, b);
  ibv_sge sge[4];
  for (std::uint64_t i = 0; i < 4; ++i) {
    ibv_send_wr wr = write_wr(sge[i], a, 0, 100, b, 0, i, false);
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(mrc_post_send(a.qp, &wr, &bad), 0);
  }
  // The third completion finds the CQ full: CQ error, reported once as IBV_EVENT_CQ_ERR.
  mrc_async_event ev{};
  ASSERT_EQ(mrc_get_async_event(a.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, a.cq);
  // What fit is still there; then the CQ reports the overrun.
  ibv_wc wc[4];
  EXPECT_EQ(mrc_poll_cq(a.cq, 4, wc), 2);
  EXPECT_EQ(wc[0].wr_id, 0u);
  EXPECT_EQ(wc[1].wr_id, 1u);
  EXPECT_EQ(mrc_poll_cq(a.cq, 4, wc), -1);
  EXPECT_EQ(errno, EOVERFLOW);
  ASSERT_EQ(mrc_destroy_qp(a.qp), 0);
  a.qp = nullptr;
  EXPECT_EQ(mrc_destroy_cq(a.cq), -1);  // its async event is not acked yet
  EXPECT_EQ(errno, EBUSY);
  mrc_ack_async_event(&ev);
  a.close();
  b.close();
}

TEST(AppQpHint, CreateQueryModifyDestroy) {
  Side s;
  s.open(spec(54, 1));
  mrc_qp_hint_attr h{};
  h.num_qps_per_peer = 4;
  h.num_send_peers = 16;
  h.num_remote_recv_peers = 8;
  h.vendor_cfg[0] = 0xAB;
  mrc_qp_hint_init_attr hi{h};
  EXPECT_EQ(mrc_create_qp_hint(nullptr, &hi), nullptr);
  EXPECT_EQ(mrc_create_qp_hint(s.ctx, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  mrc_qp_hint* hint = mrc_create_qp_hint(s.ctx, &hi);
  ASSERT_NE(hint, nullptr);

  mrc_qp_hint_attr q{};
  ASSERT_EQ(mrc_query_qp_hint(hint, &q,
                              MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
                                  MRC_QP_HINT_NUM_REMOTE_RECV_PEERS | MRC_QP_HINT_VENDOR_CFG),
            0);
  EXPECT_EQ(q.num_qps_per_peer, 4);
  EXPECT_EQ(q.num_send_peers, 16);
  EXPECT_EQ(q.num_remote_recv_peers, 8);
  EXPECT_EQ(q.vendor_cfg[0], 0xAB);
  // Each mask bit moves exactly its field.
  const std::uint32_t bits[] = {MRC_QP_HINT_NUM_QPS_PER_PEER, MRC_QP_HINT_NUM_SEND_PEERS,
                                MRC_QP_HINT_NUM_REMOTE_RECV_PEERS,
                                static_cast<std::uint32_t>(MRC_QP_HINT_VENDOR_CFG)};
  for (std::uint32_t bit : bits) {
    mrc_qp_hint_attr m{};
    m.num_qps_per_peer = m.num_send_peers = m.num_remote_recv_peers = 99;
    m.vendor_cfg[0] = 99;
    ASSERT_EQ(mrc_modify_qp_hint(hint, &m, bit), 0);
    mrc_qp_hint_attr r{};
    ASSERT_EQ(mrc_query_qp_hint(hint, &r, bits[0] | bits[1] | bits[2] | bits[3]), 0);
    EXPECT_EQ(r.num_qps_per_peer, bit == bits[0] ? 99u : 4u);
    EXPECT_EQ(r.num_send_peers, bit == bits[1] ? 99u : 16u);
    EXPECT_EQ(r.num_remote_recv_peers, bit == bits[2] ? 99u : 8u);
    EXPECT_EQ(r.vendor_cfg[0], bit == bits[3] ? 99 : 0xAB);
    ASSERT_EQ(mrc_modify_qp_hint(hint, &h, bit), 0);  // back
  }
  EXPECT_EQ(mrc_modify_qp_hint(hint, &h, 1u << 3), -1);  // unknown bit
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_modify_qp_hint(hint, &h, 0), -1);
  EXPECT_EQ(mrc_query_qp_hint(hint, &q, 1u << 30), -1);
  EXPECT_EQ(mrc_modify_qp_hint(nullptr, &h, MRC_QP_HINT_NUM_SEND_PEERS), -1);
  EXPECT_EQ(mrc_query_qp_hint(hint, nullptr, MRC_QP_HINT_NUM_SEND_PEERS), -1);

  // A QP that names the hint at INIT keeps it alive.
  Attrs a = init_attrs();
  a.m.qp_hint = hint;
  ASSERT_EQ(mrc_modify_qp(s.qp, &a.v, kInitIb, &a.m, kInitMrc), 0);
  mrc_qp_attr m{};
  ASSERT_EQ(mrc_query_qp(s.qp, nullptr, 0, &m, MRC_QP_HINT, nullptr), 0);
  EXPECT_EQ(m.qp_hint, hint);
  EXPECT_EQ(mrc_destroy_context(s.ctx), -1);
  EXPECT_EQ(mrc_destroy_qp_hint(hint), -1);
  EXPECT_EQ(errno, EBUSY);
  ASSERT_EQ(mrc_destroy_qp(s.qp), 0);
  s.qp = nullptr;
  EXPECT_EQ(mrc_destroy_qp_hint(hint), 0);
  EXPECT_EQ(mrc_destroy_qp_hint(nullptr), -1);
  s.close();
}
