// The verbs CQ / QP calls of the software device (src/api/verbs_qp.cpp, D52), as an unmodified
// verbs program makes them: ibv_create_cq / ibv_create_qp / ibv_modify_qp with the RC masks
// perftest passes, the inline data-path verbs through the context's ops, completion events, and
// every verb an MRC QP does not have refused with an errno (never posted, never a hang).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mrc/mrc.h"

namespace {

struct VSide {
  ibv_context* dev = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(1 << 16);
  int cookie = 0;

  void open(const char* addr) {
    dev = mrc_open_device_str(addr);
    ASSERT_NE(dev, nullptr) << addr << ": " << std::strerror(errno);
    pd = ibv_alloc_pd(dev);
    ASSERT_NE(pd, nullptr);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr);
    ch = ibv_create_comp_channel(dev);
    ASSERT_NE(ch, nullptr);
    cq = ibv_create_cq(dev, 64, &cookie, ch, 0);
    ASSERT_NE(cq, nullptr) << std::strerror(errno);
    ibv_qp_init_attr a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.qp_type = IBV_QPT_RC;
    qp = ibv_create_qp(pd, &a);
    ASSERT_NE(qp, nullptr) << std::strerror(errno);
    EXPECT_EQ(qp->state, IBV_QPS_RESET);
  }
  ibv_gid gid() const {
    ibv_gid g{};
    EXPECT_EQ(ibv_query_gid(dev, 1, 0, &g), 0);
    return g;
  }
  /// RESET -> INIT -> RTR -> RTS with the masks (and the RC attributes) perftest uses.
  void connect(const VSide& peer) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer.qp->qp_num;
    a.rq_psn = 0x123;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer.gid();
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    ASSERT_EQ(ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              0);
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0x123;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    ASSERT_EQ(ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
              0);
    EXPECT_EQ(qp->state, IBV_QPS_RTS);
  }
  /// Polls the CQ (through the context's ops) for one completion, up to 5 s.
  bool poll(ibv_wc& wc) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      const int n = ibv_poll_cq(cq, 1, &wc);
      if (n < 0) return false;
      if (n == 1) return true;
      std::this_thread::yield();
    }
    return false;
  }
  void close() {
    if (qp) {
      EXPECT_EQ(ibv_destroy_qp(qp), 0);
    }
    if (cq) {
      EXPECT_EQ(ibv_destroy_cq(cq), 0);
    }
    if (ch) {
      EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
    }
    if (mr) {
      EXPECT_EQ(ibv_dereg_mr(mr), 0);
    }
    if (pd) {
      EXPECT_EQ(ibv_dealloc_pd(pd), 0);
    }
    // The mrc_context the verbs calls made goes with the device.
    if (dev) {
      EXPECT_EQ(ibv_close_device(dev), 0) << std::strerror(errno);
    }
  }
};

ibv_send_wr write_wr(VSide& from, const VSide& to, ibv_sge& sge, std::uint32_t len) {
  sge = ibv_sge{reinterpret_cast<std::uintptr_t>(from.buf.data()), len, from.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 42;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(to.buf.data());
  wr.wr.rdma.rkey = to.mr->rkey;
  return wr;
}

TEST(VerbsQp, WriteWithImmThroughTheInlineVerbsAndACompletionEvent) {
  VSide a, b;
  a.open("127.0.86.1");
  b.open("127.0.86.2");
  ASSERT_FALSE(HasFatalFailure());
  a.connect(b);
  b.connect(a);
  ASSERT_FALSE(HasFatalFailure());

  ibv_recv_wr rwr{};
  rwr.wr_id = 77;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b.qp, &rwr, &bad_r), 0);
  ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);

  for (std::size_t i = 0; i < 20000; ++i) a.buf[i] = static_cast<std::uint8_t>(i * 7 + 1);
  ibv_sge sge{};
  ibv_send_wr wr = write_wr(a, b, sge, 20000);
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(0xC0FFEE);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);

  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), 0) << std::strerror(errno);
  EXPECT_EQ(ev_cq, b.cq);
  EXPECT_EQ(ev_ctx, &b.cookie);
  ibv_wc wc{};
  ASSERT_TRUE(b.poll(wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(ntohl(wc.imm_data), 0xC0FFEEu);
  EXPECT_EQ(wc.qp_num, b.qp->qp_num);
  ibv_ack_cq_events(ev_cq, 1);
  EXPECT_EQ(std::memcmp(a.buf.data(), b.buf.data(), 20000), 0);

  ASSERT_TRUE(a.poll(wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc.wr_id, 42u);

  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a.qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(qa.dest_qp_num, b.qp->qp_num);
  EXPECT_EQ(qi.send_cq, a.cq);
  EXPECT_EQ(qi.qp_type, IBV_QPT_RC);
  a.close();
  b.close();
}

TEST(VerbsQp, VerbsAnMrcQpDoesNotHaveAreRefusedNeverPosted) {
  VSide a, b;
  a.open("127.0.87.1");
  b.open("127.0.87.2");
  ASSERT_FALSE(HasFatalFailure());

  // Objects the device does not have.
  ibv_qp_init_attr ud{};
  ud.send_cq = a.cq;
  ud.recv_cq = a.cq;
  ud.cap = {4, 4, 1, 1, 0};
  ud.qp_type = IBV_QPT_UD;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a.pd, &ud), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_qp_init_attr inl = ud;
  inl.qp_type = IBV_QPT_RC;
  inl.cap.max_inline_data = 64;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a.pd, &inl), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_srq(a.pd, &sa), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_ah_attr ah{};
  errno = 0;
  EXPECT_EQ(ibv_create_ah(a.pd, &ah), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(ibv_qp_to_qp_ex(a.qp), nullptr);
  ibv_cq_init_attr_ex cqa{};
  cqa.cqe = 8;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(a.dev, &cqa), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  std::vector<std::uint8_t> other(4096);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(a.pd, other.data(), other.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
            nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_attr rd{};
  rd.qp_state = IBV_QPS_INIT;
  rd.port_num = 1;
  rd.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  EXPECT_EQ(ibv_modify_qp(a.qp, &rd, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), EINVAL);
  EXPECT_EQ(a.qp->state, IBV_QPS_RESET);

  // GID table: 0 and 3 are the plane's RoCE v2 address, 1 and 2 empty.
  ibv_gid_entry e{};
  ASSERT_EQ(ibv_query_gid_ex(a.dev, 1, 0, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  const ibv_gid g = a.gid();
  EXPECT_EQ(std::memcmp(e.gid.raw, g.raw, 16), 0);
  EXPECT_EQ(ibv_query_gid_ex(a.dev, 1, 1, &e, 0), ENODATA);
  ibv_gid_entry table[8];
  EXPECT_EQ(ibv_query_gid_table(a.dev, table, 8, 0), 2);

  // Work requests on a connected QP: every opcode but WRITE [WITH_IMM], inline data and a second
  // SGE are refused at post with *bad_wr naming the WR; a chain posts up to the bad one.
  a.connect(b);
  b.connect(a);
  ASSERT_FALSE(HasFatalFailure());
  ibv_sge sge{};
  for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_FETCH_AND_ADD,
                           IBV_WR_ATOMIC_CMP_AND_SWP}) {
    ibv_send_wr w = write_wr(a, b, sge, 64);
    w.opcode = op;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL) << "opcode " << op;
    EXPECT_EQ(bad, &w);
  }
  ibv_send_wr w = write_wr(a, b, sge, 64);
  w.send_flags |= IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL);
  ibv_sge two[2] = {sge, sge};
  w = write_wr(a, b, sge, 64);
  w.sg_list = two;
  w.num_sge = 2;
  EXPECT_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL);

  ibv_send_wr good = write_wr(a, b, sge, 64);
  ibv_send_wr send = write_wr(a, b, sge, 64);
  send.opcode = IBV_WR_SEND;
  good.next = &send;
  bad = nullptr;
  EXPECT_EQ(ibv_post_send(a.qp, &good, &bad), EINVAL);
  EXPECT_EQ(bad, &send);
  ibv_wc wc{};
  ASSERT_TRUE(a.poll(wc));  // the one posted: only the good WR completes
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(ibv_poll_cq(a.cq, 1, &wc), 0);
  a.close();
  b.close();
}

}  // namespace
