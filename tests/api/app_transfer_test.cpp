// Application API end to end: two contexts on loopback planes move data with WRITE and
// WRITE_WITH_IMM (byte-exact, immediates in order), error completions and QP_FATAL events, the
// application-driven progress mode, and the C++ layer (mrc.hpp).
#include <numeric>

#include "api/app_harness.hpp"
#include "mrc/mrc.hpp"

using namespace mrc_app_test;

namespace {

void fill(std::vector<std::uint8_t>& v, std::uint32_t seed) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>((i * 2654435761u + seed) >> 13);
}

/// `n` WRITE_IMMs of `chunk` bytes a -> b with immediates 1000+i; checks order, lengths, data.
void transfer(Side& a, Side& b, std::size_t n, std::uint32_t chunk, mrc_context* drive_a = nullptr,
              mrc_context* drive_b = nullptr) {
  ASSERT_LE(n * chunk, a.buf.size());
  fill(a.buf, 7);
  std::fill(b.buf.begin(), b.buf.end(), 0);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(post_recv(b.qp, 500 + i), 0);
  std::vector<ibv_sge> sges(n);
  for (std::size_t i = 0; i < n; ++i) {
    ibv_send_wr wr =
        write_wr(sges[i], a, i * chunk, chunk, b, i * chunk, i, true, static_cast<std::uint32_t>(1000 + i));
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(mrc_post_send(a.qp, &wr, &bad), 0) << std::strerror(errno);
  }
  std::uint32_t aqpn = 0, bqpn = 0;
  ASSERT_EQ(mrc_get_qpn(a.qp, &aqpn), 0);
  ASSERT_EQ(mrc_get_qpn(b.qp, &bqpn), 0);
  std::vector<ibv_wc> recvs;
  while (recvs.size() < n) {
    if (drive_a) mrc_progress(drive_a, 0);
    const auto got = poll_n(b, 1, drive_b);
    if (got.empty()) return;
    recvs.insert(recvs.end(), got.begin(), got.end());
  }
  for (std::size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(recvs[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(recvs[i].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_TRUE(recvs[i].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(recvs[i].imm_data), 1000 + i);  // WRITE_IMM order is preserved
    EXPECT_EQ(recvs[i].wr_id, 500 + i);             // receives are consumed in posting order
    EXPECT_EQ(recvs[i].byte_len, chunk);
    EXPECT_EQ(recvs[i].qp_num, bqpn);
    EXPECT_EQ(recvs[i].src_qp, aqpn);
  }
  const auto sends = poll_n(a, n, drive_a);
  for (std::size_t i = 0; i < sends.size(); ++i) {
    EXPECT_EQ(sends[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(sends[i].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(sends[i].wr_id, i);
  }
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + static_cast<long>(n * chunk), b.buf.begin()));
}

}  // namespace

TEST(AppTransfer, WriteImmBetweenTwoContextsIsByteExactAndInOrder) {
  Side a, b;
  a.open(spec(70, 1), 1 << 20);
  b.open(spec(70, 2), 1 << 20);
  connect(a, b);
  transfer(a, b, 64, 16384);
  // And back the other way on the same QP pair, with plain WRITEs followed by one WRITE_IMM.
  fill(b.buf, 3);
  ibv_sge sge[3];
  ibv_send_wr w0 = write_wr(sge[0], b, 0, 100000, a, 0, 10, false);
  ibv_send_wr w1 = write_wr(sge[1], b, 100000, 200000, a, 100000, 11, false);
  ibv_send_wr w2 = write_wr(sge[2], b, 300000, 0, a, 300000, 12, true, 0xDEADBEEF);  // zero-length
  w0.next = &w1;
  w1.next = &w2;
  w1.send_flags = 0;  // unsignaled: no completion
  ASSERT_EQ(post_recv(a.qp, 99), 0);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(b.qp, &w0, &bad), 0);
  std::vector<ibv_wc> wa = poll_n(a, 1);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(ntohl(wa[0].imm_data), 0xDEADBEEFu);
  EXPECT_EQ(wa[0].byte_len, 0u);
  std::vector<ibv_wc> wb = poll_n(b, 2);
  ASSERT_EQ(wb.size(), 2u);
  EXPECT_EQ(wb[0].wr_id, 10u);
  EXPECT_EQ(wb[1].wr_id, 12u);
  // The immediate arrives after the data before it.
  EXPECT_TRUE(std::equal(b.buf.begin(), b.buf.begin() + 300000, a.buf.begin()));
  a.close();
  b.close();
}

TEST(AppTransfer, WrongRkeyCompletesWithRemoteAccessErrorAndQpFatal) {
  Side a, b;
  a.open(spec(71, 1));
  b.open(spec(71, 2));
  connect(a, b);
  ibv_sge sge;
  ibv_send_wr wr = write_wr(sge, a, 0, 512, b, 0, 5, false);
  wr.wr.rdma.rkey = b.mr->rkey ^ 0x5A5A5A5Au;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a.qp, &wr, &bad), 0);
  const auto wc = poll_n(a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 5u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(std::all_of(b.buf.begin(), b.buf.end(), [](std::uint8_t x) { return x == 0; }));

  mrc_async_event ev{};
  ASSERT_EQ(mrc_get_async_event(a.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(ev.element.qp, a.qp);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_ERR);
  ibv_send_wr again = write_wr(sge, a, 0, 16, b, 0, 6, false);
  EXPECT_EQ(mrc_post_send(a.qp, &again, &bad), 0);  // ERR: taken and flushed (verbs)
  const auto flushed = poll_n(a, 1);
  ASSERT_EQ(flushed.size(), 1u);
  EXPECT_EQ(flushed[0].wr_id, 6u);
  EXPECT_EQ(flushed[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(mrc_destroy_qp(a.qp), -1);  // its event is not acked
  EXPECT_EQ(errno, EBUSY);
  mrc_ack_async_event(&ev);
  a.close();
  b.close();
}

TEST(AppTransfer, SilentPeerEndsInRetryExceeded) {
  Side a, b;
  a.open(spec(72, 1));
  b.open(spec(72, 2));
  // b's QP stays in RESET: it answers nothing, so a's retries run out.
  const Remote rb = b.remote();
  a.learn(rb);
  ASSERT_EQ(to_init(a.qp), 0);
  ASSERT_EQ(to_rtr(a.qp, rb), 0);
  Attrs r = rts_attrs(0, 1);  // 2 us RTO
  r.m.retry.linear_cnt = 1;
  r.m.retry.exp_cnt = 2;
  ASSERT_EQ(mrc_modify_qp(a.qp, &r.v, kRtsIb, &r.m, kRtsMrc), 0);
  ibv_sge sge;
  ibv_send_wr wr = write_wr(sge, a, 0, 64, b, 0, 9, false);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a.qp, &wr, &bad), 0);
  const auto wc = poll_n(a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  mrc_async_event ev{};
  ASSERT_EQ(mrc_get_async_event(a.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  mrc_ack_async_event(&ev);
  a.close();
  b.close();
}

TEST(AppTransfer, ApplicationDrivenProgress) {
  Side a, b;
  a.open(spec(73, 1, 3), 1 << 18, 256, false, MRC_CONTEXT_APP_PROGRESS);
  b.open(spec(73, 2, 3), 1 << 18, 256, false, MRC_CONTEXT_APP_PROGRESS);
  connect(a, b);
  transfer(a, b, 16, 8192, a.ctx, b.ctx);
  a.close();
  b.close();
}

TEST(AppCpp, RaiiHandlesAndExceptions) {
  try {
    mrc::Device::open("not an address");
    ADD_FAILURE() << "no exception";
  } catch (const mrc::Error& e) {
    EXPECT_EQ(e.code().value(), EINVAL);
  }
  mrc::Device dev = mrc::Device::open(spec(74, 1).c_str());
  EXPECT_EQ(dev.num_ports(), 2u);
  EXPECT_EQ(dev.query().mrc_protocol_version, static_cast<std::uint32_t>(MRC_PROTOCOL_VERSION_1));
  EXPECT_EQ(dev.gid(1).raw[12], 127);
  mrc::Context ctx = mrc::Context::create(dev);
  mrc::Pd pd = dev.alloc_pd();
  std::vector<std::uint8_t> buf(4096);
  mrc::Mr mr = mrc::reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_NE(mr.get()->lkey, 0u);
  mrc::CompChannel ch = ctx.create_comp_channel();
  mrc::Cq cq = ctx.create_cq(16, nullptr, &ch);
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq.get();
  ia.pd = pd.get();
  ia.cap.max_send_wr = 4;
  mrc::Qp qp = ctx.create_qp(ia);
  EXPECT_EQ(qp.state(), IBV_QPS_RESET);
  EXPECT_NE(qp.qpn(), 0u);
  ibv_qp_attr v{};
  v.qp_state = IBV_QPS_RTS;
  EXPECT_THROW(qp.modify(&v, IBV_QP_STATE, nullptr, 0), mrc::Error);
  ibv_wc wc[4];
  EXPECT_EQ(cq.poll(wc), 0u);
  cq.req_notify();
  EXPECT_THROW(cq.destroy(), mrc::Error);  // the QP uses it: the handle keeps owning
  EXPECT_TRUE(cq);
  EXPECT_THROW(ctx.progress(), mrc::Error);  // threaded context
  // Handles destroy in reverse order of declaration.
}
