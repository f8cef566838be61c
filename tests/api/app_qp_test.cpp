// Application API: QP creation, the RESET -> INIT -> RTR -> RTS -> ERR state machine with the
// attributes each transition requires (OCP mrc.h table), every refused transition, every mask bit,
// value ranges, queries, work requests refused by state or opcode, and flushed in ERR.
#include "api/app_harness.hpp"

using namespace mrc_app_test;

namespace {

/// A QP in RESET whose peer is a second device (so AVs resolve), plus that peer's Remote.
struct QpFixture : ::testing::Test {
  Side s, peer;
  Remote r;
  void open(int net) {
    s.open(spec(net, 1));
    peer.open(spec(net, 2));
    r = peer.remote();
    s.learn(r);
  }
  void TearDown() override {
    s.close();
    peer.close();
  }
  /// Takes s.qp to `st` along the allowed path.
  void reach(ibv_qp_state st) {
    if (st >= IBV_QPS_INIT) {
      ASSERT_EQ(to_init(s.qp), 0);
    }
    if (st >= IBV_QPS_RTR) {
      ASSERT_EQ(to_rtr(s.qp, r), 0);
    }
    if (st >= IBV_QPS_RTS) {
      ASSERT_EQ(to_rts(s.qp, 0), 0);
    }
  }
};

std::vector<std::uint32_t> bits_of(std::uint32_t mask) {
  std::vector<std::uint32_t> v;
  for (int i = 0; i < 32; ++i)
    if (mask & (1u << i)) v.push_back(1u << i);
  return v;
}

// IBV_QP_PORT, _TIMEOUT, _RETRY_CNT and _RNR_RETRY are accepted and ignored where verbs takes them
// (OCP's benchmark passes them); these are refused everywhere.
constexpr std::uint32_t kIbUnsupported[] = {IBV_QP_MIN_RNR_TIMER,       IBV_QP_MAX_QP_RD_ATOMIC,
                                            IBV_QP_MAX_DEST_RD_ATOMIC,  IBV_QP_ALT_PATH,
                                            IBV_QP_PATH_MIG_STATE,      IBV_QP_QKEY,
                                            IBV_QP_EN_SQD_ASYNC_NOTIFY, IBV_QP_CAP,
                                            IBV_QP_RATE_LIMIT};
constexpr std::uint32_t kVendorCfg = static_cast<std::uint32_t>(MRC_QP_VENDOR_CFG);
constexpr std::uint32_t kAllMrc = MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR | MRC_QP_MPR_DEST |
                                  MRC_QP_TIMEOUT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | MRC_QP_HINT |
                                  MRC_QP_RETRY_CNT | MRC_QP_CAP | kVendorCfg;

/// For one transition: the full set works only after every refused variant left the QP alone.
/// `ib_required`: the IB bits it cannot do without (every MRC attribute is optional, as OCP's own
/// programs use them); `mrc_allowed`: the MRC bits it takes.
void check_transition(mrc_qp* qp, Attrs a, std::uint32_t ib, std::uint32_t mrc, ibv_qp_state from,
                      std::uint32_t ib_required, std::uint32_t mrc_allowed) {
  for (std::uint32_t bit : bits_of(ib_required & ~IBV_QP_STATE)) {
    EXPECT_EQ(mrc_modify_qp(qp, &a.v, ib & ~bit, &a.m, mrc), -1) << "IB bit " << bit << " missing";
    EXPECT_EQ(errno, EINVAL);
  }
  for (std::uint32_t bit : kIbUnsupported) {
    EXPECT_EQ(mrc_modify_qp(qp, &a.v, ib | bit, &a.m, mrc), -1) << "unsupported IB bit " << bit;
    EXPECT_EQ(errno, EINVAL);
  }
  // MRC attributes that belong to another transition.
  for (std::uint32_t bit : bits_of(kAllMrc & ~mrc_allowed)) {
    EXPECT_EQ(mrc_modify_qp(qp, &a.v, ib, &a.m, mrc | bit), -1) << "MRC bit " << bit << " not allowed here";
    EXPECT_EQ(errno, EINVAL);
  }
  EXPECT_EQ(mrc_modify_qp(qp, &a.v, ib, &a.m, mrc | (1u << 20)), -1);  // no such MRC bit
  EXPECT_EQ(mrc_modify_qp(qp, &a.v, ib | (1u << 30), &a.m, mrc), -1);  // no such IB bit
  EXPECT_EQ(mrc_modify_qp(qp, &a.v, ib, nullptr, mrc), -1);            // mask without struct
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, ib, &a.m, mrc), -1);
  ibv_qp_attr cur = a.v;
  cur.cur_qp_state = from == IBV_QPS_RESET ? IBV_QPS_INIT : IBV_QPS_RESET;  // wrong current state
  EXPECT_EQ(mrc_modify_qp(qp, &cur, ib | IBV_QP_CUR_STATE, &a.m, mrc), -1);
  EXPECT_EQ(state_of(qp), from);
  cur.cur_qp_state = from;
  EXPECT_EQ(mrc_modify_qp(qp, &cur, ib | IBV_QP_CUR_STATE, &a.m, mrc | MRC_QP_VENDOR_CFG), 0)
      << std::strerror(errno);
}

}  // namespace

TEST_F(QpFixture, CreateRefusesBadInitAttrs) {
  open(60);
  auto refused = [&](auto edit) {
    mrc_qp_init_attr a = *s.init_attr();
    edit(a);
    errno = 0;
    EXPECT_EQ(mrc_create_qp(s.ctx, &a), nullptr);
    EXPECT_EQ(errno, EINVAL);
  };
  refused([](mrc_qp_init_attr& a) { a.send_cq = nullptr; });
  refused([](mrc_qp_init_attr& a) { a.recv_cq = nullptr; });
  refused([](mrc_qp_init_attr& a) { a.pd = nullptr; });
  refused([&](mrc_qp_init_attr& a) { a.send_cq = peer.cq; });  // CQ of another context
  refused([&](mrc_qp_init_attr& a) { a.pd = peer.pd; });       // PD of another device
  refused([](mrc_qp_init_attr& a) { a.cap.max_send_sge = 2; });
  refused([](mrc_qp_init_attr& a) { a.cap.max_recv_sge = 2; });
  refused([](mrc_qp_init_attr& a) { a.cap.max_inline_data = 64; });
  refused([](mrc_qp_init_attr& a) { a.cap.max_send_wr = (1u << 20) + 1; });
  refused([](mrc_qp_init_attr& a) { a.send_ops_flags = 1u << 2; });  // e.g. IBV_QP_EX_WITH_SEND
  // A bit this library does not know (written through memory: the enum has no such value).
  refused([](mrc_qp_init_attr& a) {
    const int v = 2;
    std::memcpy(&a.protocol_version, &v, sizeof v);
  });
  EXPECT_EQ(mrc_create_qp(nullptr, s.init_attr()), nullptr);
  EXPECT_EQ(mrc_create_qp(s.ctx, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(QpFixture, StartsInResetAndQueryReturnsInitAttrs) {
  open(61);
  mrc_qp_init_attr ia{};
  ibv_qp_attr v{};
  mrc_qp_attr m{};
  ASSERT_EQ(mrc_query_qp(s.qp, &v, IBV_QP_STATE | IBV_QP_CAP, &m, MRC_QP_MPR, &ia), 0);
  EXPECT_EQ(v.qp_state, IBV_QPS_RESET);
  EXPECT_EQ(ia.send_cq, s.cq);
  EXPECT_EQ(ia.pd, s.pd);
  EXPECT_EQ(ia.cap.max_send_wr, 64u);
  EXPECT_EQ(v.cap.max_recv_wr, 64u);
  EXPECT_EQ(ia.protocol_version, static_cast<std::uint32_t>(MRC_PROTOCOL_VERSION_1));
  std::uint32_t qpn = 0, qpn2 = 0;
  EXPECT_EQ(mrc_get_qpn(s.qp, &qpn), 0);
  EXPECT_EQ(mrc_get_qpn(peer.qp, &qpn2), 0);
  EXPECT_NE(qpn, 0u);
  EXPECT_LE(qpn, 0xFFFFFFu);
  EXPECT_EQ(mrc_get_qpn(nullptr, &qpn), -1);
  EXPECT_EQ(mrc_get_qpn(s.qp, nullptr), -1);
  EXPECT_EQ(mrc_query_qp(nullptr, &v, 0, &m, 0, nullptr), -1);
  EXPECT_EQ(mrc_query_qp(s.qp, &v, 1u << 30, &m, 0, nullptr), -1);  // unknown IB bit
  EXPECT_EQ(mrc_query_qp(s.qp, &v, 0, &m, 1u << 20, nullptr), -1);  // unknown MRC bit
  EXPECT_EQ(mrc_query_qp(s.qp, nullptr, IBV_QP_STATE, &m, 0, nullptr), -1);
  EXPECT_EQ(mrc_query_qp(s.qp, &v, 0, nullptr, MRC_QP_MPR, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_query_qp(s.qp, nullptr, 0, nullptr, 0, nullptr), 0);
  EXPECT_EQ(mrc_modify_qp(nullptr, &v, 0, &m, 0), -1);
  EXPECT_EQ(mrc_modify_qp(s.qp, nullptr, 0, nullptr, 0), 0);  // nothing to do
}

TEST_F(QpFixture, EachTransitionRequiresItsAttributes) {
  open(62);
  check_transition(s.qp, init_attrs(), kInitIb, kInitMrc, IBV_QPS_RESET, IBV_QP_STATE, kInitMrc | kVendorCfg);
  EXPECT_EQ(state_of(s.qp), IBV_QPS_INIT);
  check_transition(s.qp, rtr_attrs(r), kRtrIb, kRtrMrc, IBV_QPS_INIT,
                   IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN,
                   kRtrMrc | MRC_QP_MPR | MRC_QP_MAX_WIMM | kVendorCfg);
  EXPECT_EQ(state_of(s.qp), IBV_QPS_RTR);
  check_transition(s.qp, rts_attrs(0x77), kRtsIb, kRtsMrc, IBV_QPS_RTR, IBV_QP_STATE,
                   kRtsMrc | MRC_QP_CAP | kVendorCfg);
  EXPECT_EQ(state_of(s.qp), IBV_QPS_RTS);

  // What went in comes back out.
  ibv_qp_attr v{};
  mrc_qp_attr m{};
  ASSERT_EQ(mrc_query_qp(s.qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m, kAllMrc, nullptr), 0);
  EXPECT_EQ(v.sq_psn, 0x77u);
  EXPECT_EQ(v.rq_psn, r.psn);
  EXPECT_EQ(v.dest_qp_num, r.qpn);
  EXPECT_EQ(v.path_mtu, IBV_MTU_4096);
  EXPECT_EQ(v.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(std::memcmp(&v.ah_attr.grh.dgid, &r.gids[0], sizeof(ibv_gid)), 0);
  EXPECT_EQ(m.mpr.mpr, 8);
  EXPECT_EQ(m.mpr.mpr_dest, 8);
  EXPECT_EQ(m.wimm.max_wimm, 64);
  EXPECT_EQ(m.wimm.max_wimm_dest, 64);
  EXPECT_EQ(m.timeout, 18);
  EXPECT_EQ(m.retry.linear_cnt, 7);
  EXPECT_EQ(m.retry.exp_cnt, 8);
  EXPECT_EQ(m.profile.ev_profile_id, 0u);
  EXPECT_EQ(m.qp_hint, nullptr);

  // RTS -> RTS and attribute-only modifies take ACCESS_FLAGS (and the vendor blob) only.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
  EXPECT_EQ(mrc_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, nullptr, 0), 0);
  EXPECT_EQ(mrc_modify_qp(s.qp, &a, IBV_QP_ACCESS_FLAGS, nullptr, 0), 0);
  mrc_qp_attr mm{};
  mm.vendor_cfg[3] = 7;
  EXPECT_EQ(mrc_modify_qp(s.qp, nullptr, 0, &mm, MRC_QP_VENDOR_CFG), 0);
  EXPECT_EQ(mrc_modify_qp(s.qp, &a, IBV_QP_SQ_PSN, nullptr, 0), -1);
  EXPECT_EQ(mrc_modify_qp(s.qp, nullptr, 0, &mm, MRC_QP_MPR), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(mrc_query_qp(s.qp, &v, IBV_QP_ACCESS_FLAGS, &m, MRC_QP_VENDOR_CFG, nullptr), 0);
  EXPECT_EQ(v.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE));
  EXPECT_EQ(m.vendor_cfg[3], 7);
}

TEST_F(QpFixture, RefusedTransitions) {
  open(63);
  struct Case {
    ibv_qp_state from, to;
  };
  // Every pair that is not on the RESET -> INIT -> RTR -> RTS path, ERR, or X -> X where allowed.
  const Case refused[] = {
      {IBV_QPS_RESET, IBV_QPS_RESET}, {IBV_QPS_RESET, IBV_QPS_RTR},  {IBV_QPS_RESET, IBV_QPS_RTS},
      {IBV_QPS_RESET, IBV_QPS_SQD},   {IBV_QPS_INIT, IBV_QPS_RESET}, {IBV_QPS_INIT, IBV_QPS_RTS},
      {IBV_QPS_INIT, IBV_QPS_SQE},    {IBV_QPS_RTR, IBV_QPS_RESET},  {IBV_QPS_RTR, IBV_QPS_INIT},
      {IBV_QPS_RTR, IBV_QPS_RTR},     {IBV_QPS_RTS, IBV_QPS_RESET},  {IBV_QPS_RTS, IBV_QPS_INIT},
      {IBV_QPS_RTS, IBV_QPS_RTR},     {IBV_QPS_RTS, IBV_QPS_SQD},    {IBV_QPS_ERR, IBV_QPS_RESET},
      {IBV_QPS_ERR, IBV_QPS_INIT},    {IBV_QPS_ERR, IBV_QPS_RTS},    {IBV_QPS_RTS, IBV_QPS_UNKNOWN},
  };
  for (const Case& c : refused) {
    SCOPED_TRACE(std::to_string(c.from) + " -> " + std::to_string(c.to));
    mrc_qp* qp = mrc_create_qp(s.ctx, s.init_attr());
    ASSERT_NE(qp, nullptr);
    std::swap(qp, s.qp);
    if (c.from == IBV_QPS_ERR) {
      ibv_qp_attr e{};
      e.qp_state = IBV_QPS_ERR;
      ASSERT_EQ(mrc_modify_qp(s.qp, &e, IBV_QP_STATE, nullptr, 0), 0);
    } else {
      reach(c.from);
    }
    // The target's full attribute set (where it has one) does not make a refused pair allowed.
    Attrs a = c.to == IBV_QPS_INIT ? init_attrs() : c.to == IBV_QPS_RTR ? rtr_attrs(r) : rts_attrs(1);
    a.v.qp_state = c.to;
    const std::uint32_t ib = c.to == IBV_QPS_INIT ? kInitIb : c.to == IBV_QPS_RTR ? kRtrIb : kRtsIb;
    const std::uint32_t mm = c.to == IBV_QPS_INIT ? kInitMrc : c.to == IBV_QPS_RTR ? kRtrMrc : kRtsMrc;
    EXPECT_EQ(mrc_modify_qp(s.qp, &a.v, ib, &a.m, mm), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(mrc_modify_qp(s.qp, &a.v, IBV_QP_STATE, nullptr, 0), -1);
    EXPECT_EQ(state_of(s.qp), c.from);
    std::swap(qp, s.qp);
    ASSERT_EQ(mrc_destroy_qp(qp), 0);
  }
}

TEST_F(QpFixture, AnyStateMovesToErr) {
  open(64);
  for (ibv_qp_state from : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
    mrc_qp* qp = mrc_create_qp(s.ctx, s.init_attr());
    ASSERT_NE(qp, nullptr);
    std::swap(qp, s.qp);
    reach(from);
    ibv_qp_attr e{};
    e.qp_state = IBV_QPS_ERR;
    mrc_qp_attr m{};
    EXPECT_EQ(mrc_modify_qp(s.qp, &e, IBV_QP_STATE, &m, MRC_QP_MPR), -1);  // ERR takes nothing else
    EXPECT_EQ(mrc_modify_qp(s.qp, &e, IBV_QP_STATE | IBV_QP_SQ_PSN, nullptr, 0), -1);
    EXPECT_EQ(mrc_modify_qp(s.qp, &e, IBV_QP_STATE, nullptr, 0), 0) << from;
    EXPECT_EQ(state_of(s.qp), IBV_QPS_ERR);
    // A requested ERR is no QP_FATAL (the query above ran on the progress thread after the
    // engine's error event was routed).
    int afd = -1;
    ASSERT_EQ(mrc_get_async_fd(s.ctx, &afd), 0);
    EXPECT_FALSE(readable(afd, 0));
    EXPECT_EQ(mrc_modify_qp(s.qp, &e, IBV_QP_STATE, nullptr, 0), 0);  // ERR -> ERR
    std::swap(qp, s.qp);
    ASSERT_EQ(mrc_destroy_qp(qp), 0);
  }
}

TEST_F(QpFixture, ValuesOutOfRangeAreRefusedAndLeaveTheQpAlone) {
  open(65);
  auto init_refused = [&](auto edit, int want = EINVAL) {
    Attrs a = init_attrs();
    edit(a);
    EXPECT_EQ(mrc_modify_qp(s.qp, &a.v, kInitIb, &a.m, kInitMrc), -1);
    EXPECT_EQ(errno, want);
    EXPECT_EQ(state_of(s.qp), IBV_QPS_RESET);
  };
  init_refused([](Attrs& a) { a.v.pkey_index = 1; });  // one P_Key
  init_refused([](Attrs& a) { a.v.qp_access_flags = IBV_ACCESS_REMOTE_READ; });
  init_refused([](Attrs& a) { a.m.profile.ev_profile_id = 777; }, ENOENT);
  init_refused([](Attrs& a) { a.m.profile.cc_profile_id = 777; }, ENOENT);
  {
    mrc_qp_hint_init_attr ha{};
    mrc_qp_hint* foreign = mrc_create_qp_hint(peer.ctx, &ha);  // hint of another context
    ASSERT_NE(foreign, nullptr);
    init_refused([&](Attrs& a) { a.m.qp_hint = foreign; });
    EXPECT_EQ(mrc_destroy_qp_hint(foreign), 0);
  }
  ASSERT_EQ(to_init(s.qp), 0);

  auto rtr_refused = [&](auto edit) {
    Attrs a = rtr_attrs(r);
    edit(a);
    EXPECT_EQ(mrc_modify_qp(s.qp, &a.v, kRtrIb, &a.m, kRtrMrc), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(state_of(s.qp), IBV_QPS_INIT);
  };
  rtr_refused([](Attrs& a) { a.v.path_mtu = static_cast<ibv_mtu>(0); });
  rtr_refused([](Attrs& a) { a.v.path_mtu = static_cast<ibv_mtu>(6); });
  rtr_refused([](Attrs& a) { a.v.dest_qp_num = 1u << 24; });
  rtr_refused([](Attrs& a) { a.v.rq_psn = 1u << 24; });
  rtr_refused([](Attrs& a) { a.m.mpr.mpr_dest = 0; });
  rtr_refused([](Attrs& a) { a.m.wimm.max_wimm_dest = 0; });
  rtr_refused([](Attrs& a) { a.m.cap = 1u << 3; });
  rtr_refused([](Attrs& a) { a.v.ah_attr.grh.dgid.raw[15] ^= 0x40; });  // no known peer (two planes)
  rtr_refused([](Attrs& a) { a.v.ah_attr.grh.dgid.raw[10] = 0; });      // not IPv4-mapped
  rtr_refused([](Attrs& a) { a.v.ah_attr.is_global = 0; });             // RoCE: a GRH is needed
  ASSERT_EQ(to_rtr(s.qp, r), 0);

  auto rts_refused = [&](auto edit) {
    Attrs a = rts_attrs(0);
    edit(a);
    EXPECT_EQ(mrc_modify_qp(s.qp, &a.v, kRtsIb, &a.m, kRtsMrc), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(state_of(s.qp), IBV_QPS_RTR);
  };
  rts_refused([](Attrs& a) { a.v.sq_psn = 1u << 24; });
  rts_refused([](Attrs& a) { a.m.mpr.mpr = 0; });
  rts_refused([](Attrs& a) { a.m.wimm.max_wimm = 0; });
  rts_refused([](Attrs& a) { a.m.timeout = 25; });
  rts_refused([](Attrs& a) { a.m.retry.linear_cnt = 8; });
  rts_refused([](Attrs& a) { a.m.retry.exp_cnt = 26; });
  // The refused modifies changed nothing.
  mrc_qp_attr m{};
  ASSERT_EQ(mrc_query_qp(s.qp, nullptr, 0, &m, MRC_QP_MPR | MRC_QP_TIMEOUT, nullptr), 0);
  EXPECT_EQ(m.mpr.mpr, 0);
  EXPECT_EQ(m.timeout, 0);
  Attrs a = rts_attrs(0);
  a.m.cap = MRC_QP_CAP_DYNAMIC_MPR;
  EXPECT_EQ(mrc_modify_qp(s.qp, &a.v, kRtsIb | IBV_QP_AV, &a.m, kRtsMrc), -1);  // AV belongs to RTR
  ASSERT_EQ(to_rts(s.qp, 0), 0);
}

TEST_F(QpFixture, PostRefusedByStateOpcodeAndShape) {
  open(66);
  ibv_sge sge;
  ibv_send_wr wr = write_wr(sge, s, 0, 16, peer, 0, 1, false);
  ibv_send_wr* bad = nullptr;
  // Not yet RTS.
  for (ibv_qp_state st : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR}) {
    if (st == IBV_QPS_INIT) {
      ASSERT_EQ(to_init(s.qp), 0);
    }
    if (st == IBV_QPS_RTR) {
      ASSERT_EQ(to_rtr(s.qp, r), 0);
    }
    bad = nullptr;
    EXPECT_EQ(mrc_post_send(s.qp, &wr, &bad), -1) << st;
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(bad, &wr);
  }
  ibv_recv_wr rwr{};
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(to_rts(s.qp, 0), 0);

  // Every opcode but the two WRITEs.
  for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
                           IBV_WR_ATOMIC_FETCH_AND_ADD, static_cast<ibv_wr_opcode>(7)}) {
    ibv_send_wr w = wr;
    w.opcode = op;
    bad = nullptr;
    EXPECT_EQ(mrc_post_send(s.qp, &w, &bad), -1) << op;
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(bad, &w);
  }
  // Shape: SGE count, inline, unknown flags, NULL.
  ibv_send_wr w = wr;
  w.num_sge = 2;
  EXPECT_EQ(mrc_post_send(s.qp, &w, &bad), -1);
  w = wr;
  w.sg_list = nullptr;
  EXPECT_EQ(mrc_post_send(s.qp, &w, &bad), -1);
  w = wr;
  w.send_flags |= IBV_SEND_INLINE;
  EXPECT_EQ(mrc_post_send(s.qp, &w, &bad), -1);
  w = wr;
  w.send_flags = 1u << 9;
  EXPECT_EQ(mrc_post_send(s.qp, &w, &bad), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_post_send(nullptr, &wr, &bad), -1);
  EXPECT_EQ(mrc_post_send(s.qp, nullptr, &bad), -1);
  EXPECT_EQ(mrc_post_recv(nullptr, &rwr, &rbad), -1);
  EXPECT_EQ(mrc_post_recv(s.qp, nullptr, &rbad), -1);
  rwr.num_sge = 3;
  EXPECT_EQ(mrc_post_recv(s.qp, &rwr, &rbad), -1);
  EXPECT_EQ(rbad, &rwr);

  // A bad WR in a chain: the ones before it are posted, *bad_wr names it.
  ibv_sge sge2;
  ibv_send_wr second = write_wr(sge2, s, 0, 16, peer, 0, 2, false);
  second.opcode = IBV_WR_SEND;
  wr.next = &second;
  bad = nullptr;
  EXPECT_EQ(mrc_post_send(s.qp, &wr, &bad), -1);
  EXPECT_EQ(bad, &second);
  // The peer's QP is in RESET, so the posted first WR is never acknowledged; the QP is torn down.
}

TEST_F(QpFixture, SendOpsFlagsLimitTheOpcodes) {
  open(67);
  mrc_qp_init_attr ia = *s.init_attr();
  ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
  mrc_qp* qp = mrc_create_qp(s.ctx, &ia);
  ASSERT_NE(qp, nullptr);
  std::swap(qp, s.qp);
  reach(IBV_QPS_RTS);
  ibv_sge sge;
  ibv_send_wr wr = write_wr(sge, s, 0, 16, peer, 0, 1, true);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(mrc_post_send(s.qp, &wr, &bad), -1);  // WRITE_WITH_IMM not enabled on this QP
  EXPECT_EQ(errno, EINVAL);
  std::swap(qp, s.qp);
  ASSERT_EQ(mrc_destroy_qp(qp), 0);
}

TEST_F(QpFixture, PostRecvFromInitOn) {
  open(68);
  EXPECT_EQ(post_recv(s.qp, 1), -1);  // RESET
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(to_init(s.qp), 0);
  EXPECT_EQ(post_recv(s.qp, 1), 0);
  ibv_qp_attr e{};
  e.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(mrc_modify_qp(s.qp, &e, IBV_QP_STATE, nullptr, 0), 0);
  EXPECT_EQ(post_recv(s.qp, 2), 0);  // ERR: taken, completes flushed
  const auto wc = poll_n(s, 2);
  ASSERT_EQ(wc.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(wc[i].wr_id, i + 1);
    EXPECT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wc[i].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  }
}

TEST_F(QpFixture, PostInErrCompletesFlushedAfterTheOutstandingWrs) {
  open(69);
  reach(IBV_QPS_RTS);  // the peer's QP stays in RESET: nothing is ever acknowledged
  ibv_sge sge[3];
  ibv_send_wr w1 = write_wr(sge[0], s, 0, 16, peer, 0, 11, false);
  ibv_send_wr w2 = write_wr(sge[1], s, 16, 16, peer, 16, 12, true);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(s.qp, &w1, &bad), 0);
  ASSERT_EQ(mrc_post_send(s.qp, &w2, &bad), 0);
  ASSERT_EQ(post_recv(s.qp, 21), 0);
  ibv_qp_attr e{};
  e.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(mrc_modify_qp(s.qp, &e, IBV_QP_STATE, nullptr, 0), 0);
  // Verbs: a WR posted to a QP in ERR is accepted and completes with a flush error, after the
  // flushes of what the QP held when it entered ERR.
  ibv_send_wr w3 = write_wr(sge[2], s, 32, 16, peer, 32, 13, false);
  ASSERT_EQ(mrc_post_send(s.qp, &w3, &bad), 0) << std::strerror(errno);
  ASSERT_EQ(post_recv(s.qp, 22), 0);
  // A malformed WR is still refused.
  ibv_send_wr w4 = w3;
  w4.opcode = IBV_WR_SEND;
  EXPECT_EQ(mrc_post_send(s.qp, &w4, &bad), -1);
  EXPECT_EQ(errno, EINVAL);
  const auto wc = poll_n(s, 5);
  ASSERT_EQ(wc.size(), 5u);
  const std::uint64_t ids[5] = {11, 12, 21, 13, 22};
  std::uint32_t qpn = 0;
  ASSERT_EQ(mrc_get_qpn(s.qp, &qpn), 0);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(wc[i].wr_id, ids[i]) << i;
    EXPECT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR) << i;
    EXPECT_EQ(wc[i].opcode, ids[i] > 20 ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RDMA_WRITE) << i;
    EXPECT_EQ(wc[i].qp_num, qpn);
  }
  ibv_wc more;
  EXPECT_EQ(mrc_poll_cq(s.cq, 1, &more), 0) << "nothing else";
}
