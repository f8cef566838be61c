// Controller API conformance on an in-process handle (docs/protocol.md §7.1, §7.3-7.6): device
// attributes, every profile state transition allowed and refused, attribute masks, errnos,
// E2BIG sizing, EBUSY while a QP holds a profile, EPERM for unprivileged handles, event CQs.
#include <cmath>

#include "api/ctl_proto.hpp"
#include "ctl_harness.hpp"

namespace mrc::ctltest {
namespace {

TEST(CtlDevice, QueryReportsLimitsModesAlgorithmsPortsAndCapabilities) {
  Ctl t(3);
  mrc_ctl_device_attr a{};
  ASSERT_EQ(mrc_ctl_query_device(t.ctx, &a), 0);
  EXPECT_EQ(a.mrc_ctl_protocol_version, MRC_CTL_PROTOCOL_VERSION_1);
  EXPECT_EQ(a.phy_port_mask, 0b1110u) << "ports 1..3, bit N = port N";
  ASSERT_NE(a.cc.algorithms, nullptr);
  EXPECT_STREQ(a.cc.algorithms[0], "uet-1.0-nscc");
  EXPECT_EQ(a.cc.algorithms[1], nullptr);
  EXPECT_EQ(a.ev.ev_fmt_mode_mask,
            MRC_CTL_EV_FMT_MODE_STEV | MRC_CTL_EV_FMT_MODE_SRV6 | MRC_CTL_EV_FMT_MODE_UDP);
  EXPECT_EQ(a.ev.ev_mode_mask, MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN);
  EXPECT_EQ(a.ev.ev_max_width, 256u);
  EXPECT_EQ(a.opt_attr, MRC_CTL_OPT_CAP_EV_EVENT | MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT |
                            MRC_CTL_OPT_CAP_EP_OP_EV_PROBE);
  EXPECT_EQ(a.ev.ev_free_count, a.ev.ev_max_count);
  online_fmt(t.ctx, 13);
  explicit_profile(t.ctx, 1, 13, 8, 3);
  ASSERT_EQ(mrc_ctl_query_device(t.ctx, &a), 0);
  EXPECT_EQ(a.ev.ev_free_count, a.ev.ev_max_count - 8);
  std::uint32_t v[4];
  mrc_ctl_query_version(&v[0], &v[1], &v[2], &v[3]);
  EXPECT_EQ(v[0], static_cast<std::uint32_t>(MRC_CTL_API_VER(1, 0, 1)));
  EXPECT_EQ(v[1], static_cast<std::uint32_t>(MRC_CTL_API_LAST_SUPPORTED_VERSION));
  EXPECT_EQ(v[2], static_cast<std::uint32_t>(MRC_CTL_VENDOR_API_CURRENT_VERSION));
  EXPECT_EQ(mrc_ctl_query_device(static_cast<mrc_ctl_context*>(nullptr), &a), EINVAL);
  EXPECT_EQ(mrc_ctl_query_device(t.ctx, nullptr), EINVAL);
}

TEST(CtlEvFmt, StateMachineAllowedAndRefused) {
  Ctl t;
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_ONLINE, MRC_CTL_EV_FMT_PROFILE_MODE), EINVAL)
      << "INIT -> ONLINE";
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE), EINVAL) << "to OFFLINE needs MODE";
  mrc_ctl_ev_fmt_profile_attr q{};
  EXPECT_EQ(mrc_ctl_query_ev_fmt_profile(t.ctx, 13, &q, MRC_CTL_EV_FMT_PROFILE_CUR_STATE), ENOENT)
      << "a refused first modify creates nothing";
  ASSERT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_MODE), 0);
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_ONLINE), EINVAL) << "to ONLINE needs MODIFY_FIELDS";
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_OP, MRC_CTL_EV_FMT_MODE_STEV,
                   {16, 17}),
            E2BIG)
      << "33 bits do not fit STEV";
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_OP, MRC_CTL_EV_FMT_MODE_STEV,
                   {0, 16}),
            EINVAL);
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_MODE,
                   static_cast<mrc_ctl_ev_fmt_mode>(3)),
            EINVAL);
  ASSERT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_ONLINE, MRC_CTL_EV_FMT_PROFILE_OP), 0);
  // ONLINE: STATE(->OFFLINE) only.
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_MODE), EINVAL);
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_INIT), EINVAL);
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_ONLINE, MRC_CTL_EV_FMT_PROFILE_CUR_STATE), EINVAL)
      << "CUR_STATE is not modifiable";
  // E2BIG sizing of QUERY_FIELDS.
  mrc_ctl_ev_fmt_field f[2];
  q = {};
  q.ev_fmt_op.fmt_fields = f;
  q.ev_fmt_op.fmt_field_count = 1;
  EXPECT_EQ(mrc_ctl_query_ev_fmt_profile(t.ctx, 13, &q, MRC_CTL_EV_FMT_PROFILE_OP), EINVAL)
      << "a query takes QUERY_FIELDS only";
  q.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
  EXPECT_EQ(mrc_ctl_query_ev_fmt_profile(t.ctx, 13, &q, MRC_CTL_EV_FMT_PROFILE_OP), E2BIG);
  EXPECT_EQ(q.ev_fmt_op.fmt_field_count, 2) << "needed count";
  ASSERT_EQ(mrc_ctl_query_ev_fmt_profile(
                t.ctx, 13, &q,
                MRC_CTL_EV_FMT_PROFILE_OP | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE),
            0);
  EXPECT_EQ(q.cur_profile_state, MRC_CTL_PROFILE_ONLINE);
  EXPECT_EQ(q.ev_fmt_mode, MRC_CTL_EV_FMT_MODE_STEV);
  EXPECT_EQ(f[0].width, 16u);
  EXPECT_EQ(f[1].width, 16u);
  ASSERT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE), 0);
  ASSERT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_INIT), 0);
  ASSERT_EQ(mrc_ctl_query_ev_fmt_profile(t.ctx, 13, &q, MRC_CTL_EV_FMT_PROFILE_CUR_STATE), 0);
  EXPECT_EQ(q.cur_profile_state, MRC_CTL_PROFILE_INIT);
  EXPECT_EQ(fmt_to(t.ctx, 0, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_MODE), EINVAL)
      << "ID 0 is built in";
}

TEST(CtlEvFmt, OfflineIsBusyWhileAnOnlineEvProfileUsesIt) {
  Ctl t;
  online_fmt(t.ctx, 13);
  explicit_profile(t.ctx, 1, 13, 4, 2);
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE), EBUSY);
  ASSERT_EQ(ev_state(t.ctx, 1, MRC_CTL_PROFILE_OFFLINE), 0);
  EXPECT_EQ(fmt_to(t.ctx, 13, MRC_CTL_PROFILE_OFFLINE), 0);
  EXPECT_EQ(ev_online(t.ctx, 1), EINVAL) << "its format is not ONLINE";
}

TEST(CtlEvProfile, ExplicitLifecycleOpsAndErrnos) {
  Ctl t(2);
  online_fmt(t.ctx, 13);
  EXPECT_EQ(ev_state(t.ctx, 1, MRC_CTL_PROFILE_ONLINE), EINVAL) << "INIT -> ONLINE";
  {
    mrc_ctl_ev_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_mode = MRC_CTL_EV_MODE_EXP;
    EXPECT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 1, &a, MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE),
              EINVAL)
        << "EXP to OFFLINE needs FMT_ID, COUNT and MODIFY_FIELDS";
  }
  EXPECT_EQ(ev_offline(t.ctx, 1, MRC_CTL_EV_MODE_EXP, 99, 4, full16x2()), EINVAL) << "unknown format";
  EXPECT_EQ(ev_offline(t.ctx, 1, MRC_CTL_EV_MODE_EXP, 13, 0, full16x2()), EINVAL) << "count 0";
  EXPECT_EQ(ev_offline(t.ctx, 1, MRC_CTL_EV_MODE_EXP, 13, 4, {{17, 0, 0, 1, 1}}), EINVAL) << "Q-EV-4";
  ASSERT_EQ(ev_offline(t.ctx, 1, MRC_CTL_EV_MODE_EXP, 13, 4, full16x2()), 0) << mrc_ctl_last_error(t.ctx);

  EXPECT_EQ(ev_online(t.ctx, 1), EINVAL) << "unpopulated entries left";
  EXPECT_EQ(ev_state(t.ctx, 1, MRC_CTL_PROFILE_ONLINE), EINVAL) << "ONLINE needs MIN_ACTIVE and EVENT_MASK";

  // REPLACE_EV: validation, batch semantics, ALL_COPIES.
  std::vector<mrc_ctl_ev_op_entry> e(1);
  e[0].ev_new = ev16(1, 1, 3);
  e[0].state = MRC_CTL_EV_GOOD;
  EXPECT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, e), EINVAL) << "port 3 of 2";
  e[0].ev_new = ev16(1, 1, 1);
  e[0].ev_new.val[4] = 1;
  EXPECT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, e), EINVAL) << "raw bits beyond the fields";
  e[0].ev_new = ev16(1, 1, 1);
  e[0].state = MRC_CTL_EV_ASSUMED_BAD;
  EXPECT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, e), EINVAL) << "only GOOD/DENIED can be set";
  e[0].state = MRC_CTL_EV_GOOD;
  e[0].ev = ev16(7, 7, 1);
  EXPECT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, e), ENOENT);
  // A batch stops at its first failing entry; earlier entries stay done.
  std::vector<mrc_ctl_ev_op_entry> b(3);
  b[0].ev_new = ev16(0x10, 0x10, 1);
  b[0].state = MRC_CTL_EV_GOOD;
  b[1] = b[0];
  b[1].ev = ev16(9, 9, 2);  // not present
  b[2] = b[0];
  std::uint32_t done = 99;
  EXPECT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, b, &done), ENOENT);
  EXPECT_EQ(done, 1u);
  // ALL_COPIES fills every remaining unpopulated entry with one value.
  e[0] = mrc_ctl_ev_op_entry{};
  e[0].ev_new = ev16(0x20, 0x20, 2);
  e[0].state = MRC_CTL_EV_GOOD;
  e[0].flags = MRC_CTL_EV_OP_F_ALL_COPIES;
  ASSERT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, e), 0);

  // EV_OP and EV_FIELDS_OP together: EINVAL.
  {
    mrc_ctl_ev_profile_attr a{};
    a.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
    a.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS;
    EXPECT_EQ(
        mrc_ctl_query_ev_profile(t.ctx, 1, &a, MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP),
        EINVAL);
  }
  ASSERT_EQ(ev_online(t.ctx, 1, 5), EINVAL) << "min_active above count";
  ASSERT_EQ(ev_online(t.ctx, 1, 2, MRC_CTL_EV_DENIED), EINVAL) << "event mask takes GOOD/ASSUMED_BAD only";
  ASSERT_EQ(ev_online(t.ctx, 1, 2), 0) << mrc_ctl_last_error(t.ctx);

  // QUERY_EV_ARRAY with E2BIG sizing.
  std::vector<mrc_ctl_ev_op_entry> arr(2);
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  q.ev_op.entries = arr.data();
  q.ev_op.entry_count = 2;
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &q, MRC_CTL_EV_PROFILE_EV_OP), E2BIG);
  EXPECT_EQ(q.ev_op.entry_count, 4u);
  arr.resize(q.ev_op.entry_count);
  q.ev_op.entries = arr.data();
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &q,
                                     MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_CUR_STATE |
                                         MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MODE |
                                         MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_FMT_ID |
                                         MRC_CTL_EV_PROFILE_EVENT_MASK),
            0);
  EXPECT_EQ(q.cur_profile_state, MRC_CTL_PROFILE_ONLINE);
  EXPECT_EQ(q.ev_mode, MRC_CTL_EV_MODE_EXP);
  EXPECT_EQ(q.ev_count, 4u);
  EXPECT_EQ(q.ev_min_active, 2u);
  EXPECT_EQ(q.ev_fmt_profile_id, 13u);
  EXPECT_EQ(q.ev_event_mask, MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD);
  EXPECT_EQ(std::memcmp(arr[0].ev.val, ev16(0x10, 0x10, 1).val, MRC_CTL_EV_MAX_BYTES), 0);
  EXPECT_EQ(arr[0].ev.port, 1);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(std::memcmp(arr[i].ev.val, ev16(0x20, 0x20, 2).val, MRC_CTL_EV_MAX_BYTES), 0);
    EXPECT_EQ(arr[i].ev.port, 2);
  }

  // ONLINE: MODIFY_EV_STATE and queries yes; REPLACE_EV, COUNT, fields no.
  e[0] = mrc_ctl_ev_op_entry{};
  e[0].ev = ev16(0x20, 0x20, 2);
  e[0].state = MRC_CTL_EV_DENIED;
  ASSERT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), 0);
  std::vector<mrc_ctl_ev_op_entry> s(1);
  s[0].ev = ev16(0x20, 0x20, 2);
  q = {};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
  q.ev_op.entries = s.data();
  q.ev_op.entry_count = 1;
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(s[0].state, MRC_CTL_EV_DENIED) << "one copy (no ALL_COPIES): the first";
  s[0].ev = ev16(0x30, 0x30, 2);
  EXPECT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &q, MRC_CTL_EV_PROFILE_EV_OP), ENOENT);
  e[0].ev_new = ev16(0x21, 0x21, 1);
  e[0].state = MRC_CTL_EV_GOOD;
  EXPECT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, e), EINVAL) << "no EV_PROFILE_MODIFY_ONLINE";
  {
    mrc_ctl_ev_profile_attr a{};
    a.ev_count = 8;
    EXPECT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 1, &a, MRC_CTL_EV_PROFILE_COUNT), EINVAL);
    a.ev_event_mask = MRC_CTL_EV_GOOD;
    EXPECT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 1, &a, MRC_CTL_EV_PROFILE_EVENT_MASK), EINVAL);
    EXPECT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 1, &a, MRC_CTL_EV_PROFILE_VENDOR_CFG), 0)
        << "vendor configuration: none here, accepted and ignored";
    EXPECT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 1, &a, MRC_CTL_EV_PROFILE_CUR_STATE), EINVAL);
  }
  // FIELDS_OP QUERY with E2BIG sizing (allowed ONLINE).
  std::vector<mrc_ctl_ev_field> fl(1);
  q = {};
  q.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS;
  q.ev_fields_op.fields = fl.data();
  q.ev_fields_op.field_count = 1;
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), E2BIG);
  EXPECT_EQ(q.ev_fields_op.field_count, 2u);
  fl.resize(2);
  q.ev_fields_op.fields = fl.data();
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), 0);
  EXPECT_EQ(fl[1].mask, 0xFFFFu);

  // The QP side: DENIED EVs are left out; values are the first 4 bytes big-endian, ports 0-based.
  api::QpProfiles qp;
  ASSERT_EQ(t.store.acquire(1, 0, 2, qp), 0);
  ASSERT_EQ(qp.evs.size(), 3u);
  EXPECT_EQ(qp.evs[0], (engine::Ev{0x00100010u, 0}));
  EXPECT_EQ(qp.evs[1], (engine::Ev{0x00200020u, 1}));
  EXPECT_EQ(qp.ev_min_active, 2u);
  EXPECT_EQ(ev_state(t.ctx, 1, MRC_CTL_PROFILE_OFFLINE), EBUSY) << "a QP holds the profile";
  t.store.release(1, 0);
  EXPECT_EQ(ev_state(t.ctx, 1, MRC_CTL_PROFILE_OFFLINE), 0);
  EXPECT_EQ(t.store.acquire(1, 0, 2, qp), EINVAL) << "profile not ONLINE";
  EXPECT_EQ(t.store.acquire(42, 0, 2, qp), ENOENT);
  EXPECT_EQ(ev_state(t.ctx, 1, MRC_CTL_PROFILE_INIT), 0);
  mrc_ctl_ev_profile_attr z{};
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &z, MRC_CTL_EV_PROFILE_CUR_STATE), 0);
  EXPECT_EQ(z.cur_profile_state, MRC_CTL_PROFILE_INIT);
}

TEST(CtlEvProfile, GeneratedProfileEnumeratesSkipsDeniedAndAdjustsCount) {
  Ctl t(2);
  online_fmt(t.ctx, 14, MRC_CTL_EV_FMT_MODE_STEV, {8, 4, 4});
  // 4 * 2 * 2 = 16 tuples; ask for 20: the count is adjusted to 16.
  ASSERT_EQ(ev_offline(t.ctx, 2, MRC_CTL_EV_MODE_GEN, 14, 20,
                       {{8, 0, 0, 3, 0xFF}, {4, 0, 1, 2, 0xF}, {4, 0xC, 0, 1, 0x3}}),
            0)
      << mrc_ctl_last_error(t.ctx);
  mrc_ctl_ev_profile_attr q{};
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 2, &q, MRC_CTL_EV_PROFILE_COUNT), 0);
  EXPECT_EQ(q.ev_count, 16u);
  std::vector<mrc_ctl_ev_op_entry> arr(16);
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  q.ev_op.entries = arr.data();
  q.ev_op.entry_count = 16;
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 2, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  // Raw tuple 1: (0, 1, 1) -> 8 + 4 + 2 bits = 00000000 0001 01 -> bytes 00 14 (MSB-first).
  EXPECT_EQ(arr[1].ev.val[0], 0x00);
  EXPECT_EQ(arr[1].ev.val[1], 0x14);
  EXPECT_EQ(arr[0].ev.port, 1);
  EXPECT_EQ(arr[1].ev.port, 2);
  EXPECT_EQ(arr[2].ev.port, 1);
  // Deny raw tuple 1 while OFFLINE: regenerated without it.
  std::vector<mrc_ctl_ev_op_entry> e(1);
  e[0].ev = arr[1].ev;
  e[0].state = MRC_CTL_EV_DENIED;
  ASSERT_EQ(ev_op(t.ctx, 2, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), 0);
  mrc_ctl_ev_profile_attr c{};
  c.ev_count = 20;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 2, &c, MRC_CTL_EV_PROFILE_COUNT), 0);
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 2, &c, MRC_CTL_EV_PROFILE_COUNT), 0);
  EXPECT_EQ(c.ev_count, 15u);
  ASSERT_EQ(ev_online(t.ctx, 2), 0) << mrc_ctl_last_error(t.ctx);
  api::QpProfiles qp;
  ASSERT_EQ(t.store.acquire(2, 0, 2, qp), 0);
  EXPECT_EQ(qp.evs.size(), 15u);
  // f2 has init 0xC under mask 0x3: tuple (0,1,0) expands to 00 1C, (0,2,0) to 00 2C.
  EXPECT_EQ(qp.evs[0], (engine::Ev{0x001C0000u, 0}));
  EXPECT_EQ(qp.evs[1], (engine::Ev{0x002C0000u, 1})) << "tuple (0,1,1) denied: skipped, ports go on";
  t.store.release(2, 0);
}

TEST(CtlEvProfile, AutoProfileNeedsOnlyModeAndGivesTheDefaultSet) {
  Ctl t(2);
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  a.ev_mode = MRC_CTL_EV_MODE_AUTO;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 3, &a, MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE), 0);
  std::vector<mrc_ctl_ev_op_entry> e(1);
  e[0].state = MRC_CTL_EV_DENIED;
  EXPECT_EQ(ev_op(t.ctx, 3, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), EINVAL) << "AUTO has no EV array";
  a.ev_mode = static_cast<mrc_ctl_ev_mode>(3);
  EXPECT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 3, &a, MRC_CTL_EV_PROFILE_MODE), EINVAL);
  ASSERT_EQ(ev_online(t.ctx, 3), 0) << mrc_ctl_last_error(t.ctx);
  api::QpProfiles qp;
  ASSERT_EQ(t.store.acquire(3, 0, 2, qp), 0);
  EXPECT_EQ(qp.active_count, 64u);
  t.store.release(3, 0);
}

TEST(CtlCcProfile, StateMachineConfigValidationAndBusy) {
  Ctl t;
  mrc_ctl_cc_nscc_cfg cfg = nscc_defaults();
  mrc_ctl_cc_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_STATE), EINVAL) << "needs ALGORITHM";
  a.algorithm = "reno";
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            EINVAL);
  a.algorithm = "uet-1.0-nscc";
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            EINVAL)
      << "INIT -> ONLINE";
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            0);
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_STATE), EINVAL)
      << "to ONLINE needs CONFIG";
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_CONFIG), EINVAL) << "no config";
  a.cc_config = &cfg;
  cfg.gamma = 2.0f;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_CONFIG), EINVAL);
  cfg.gamma = NAN;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_CONFIG), EINVAL);
  cfg = nscc_defaults();
  cfg.base_rtt = 0;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_CONFIG), EINVAL);
  cfg = nscc_defaults();
  cfg.max_cwnd = 123456;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG), 0)
      << mrc_ctl_last_error(t.ctx);
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_CONFIG), EINVAL)
      << "no CC_PROFILE_MODIFY_ONLINE";
  mrc_ctl_cc_nscc_cfg got{};
  mrc_ctl_cc_profile_attr q{};
  q.cc_config = &got;
  ASSERT_EQ(mrc_ctl_query_cc_profile(
                t.ctx, 5, &q,
                MRC_CTL_CC_PROFILE_CUR_STATE | MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG),
            0);
  EXPECT_EQ(q.cur_profile_state, MRC_CTL_PROFILE_ONLINE);
  EXPECT_STREQ(q.algorithm, "uet-1.0-nscc");
  EXPECT_EQ(got.max_cwnd, 123456u);
  api::QpProfiles qp;
  ASSERT_EQ(t.store.acquire(0, 5, 1, qp), 0);
  EXPECT_EQ(qp.cc.nscc.max_cwnd, 123456u);
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_STATE), EBUSY);
  t.store.release(0, 5);
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 5, &a, MRC_CTL_CC_PROFILE_STATE), 0);
  // NULL algorithm: no CC, ONLINE without CONFIG.
  a.algorithm = nullptr;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 6, &a, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            0);
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(t.ctx, 6, &a, MRC_CTL_CC_PROFILE_STATE), 0);
  ASSERT_EQ(t.store.acquire(0, 6, 1, qp), 0);
  EXPECT_EQ(qp.cc.algorithm, cc::Algorithm::kNone);
  t.store.release(0, 6);
  EXPECT_EQ(mrc_ctl_query_cc_profile(t.ctx, 77, &q, MRC_CTL_CC_PROFILE_CUR_STATE), ENOENT);
}

// mrc ctl points at the TOML key a refusal is about by the message's first word: each NSCC
// setting is refused on its own, by name.
TEST(CtlCcProfile, NsccRefusalNamesTheOneSettingAtFault) {
  const auto why = [](void (*bad)(mrc_ctl_cc_nscc_cfg&)) {
    mrc_ctl_cc_nscc_cfg c = api::ProfileStore::nscc_to_ctl(cc::NsccConfig{});
    bad(c);
    cc::NsccConfig out;
    return api::ProfileStore::nscc_from_ctl(c, out);
  };
  EXPECT_EQ(why([](mrc_ctl_cc_nscc_cfg&) {}), "");
  EXPECT_EQ(why([](mrc_ctl_cc_nscc_cfg& c) { c.fi = -1.0f; }), "fi must be a finite number >= 0");
  EXPECT_EQ(why([](mrc_ctl_cc_nscc_cfg& c) { c.fi_scale = NAN; }), "fi_scale must be a finite number >= 0");
  EXPECT_EQ(why([](mrc_ctl_cc_nscc_cfg& c) { c.eta = INFINITY; }), "eta must be a finite number >= 0");
  EXPECT_EQ(why([](mrc_ctl_cc_nscc_cfg& c) { c.adjust_bytes_threshold = 0; }),
            "adjust_bytes_threshold must be > 0");
  EXPECT_EQ(why([](mrc_ctl_cc_nscc_cfg& c) { c.adjust_period_threshold = 0; }),
            "adjust_period_threshold must be > 0");
  EXPECT_EQ(why([](mrc_ctl_cc_nscc_cfg& c) { c.gamma = 2.0f; }), "gamma must be in (0, 1]");
}

api::EvBytes sport_ev(std::uint16_t sport) {
  api::EvBytes x{};
  x[0] = static_cast<std::uint8_t>(sport >> 8);
  x[1] = static_cast<std::uint8_t>(sport);
  x[3] = 7;  // a flow label does not matter
  return x;
}

TEST(CtlEvProfile, LowSourcePortWarningCountsAndNamesThePortsBelow1024) {
  using api::ProfileStore;
  const std::vector<api::EvBytes> fine{sport_ev(1024), sport_ev(16384), sport_ev(65535)};
  EXPECT_EQ(ProfileStore::low_sport_warning(MRC_CTL_EV_FMT_MODE_STEV, fine), "");
  EXPECT_EQ(ProfileStore::low_sport_warning(MRC_CTL_EV_FMT_MODE_UDP, fine), "");
  EXPECT_EQ(ProfileStore::low_sport_warning(MRC_CTL_EV_FMT_MODE_UDP, {}), "");
  const std::vector<api::EvBytes> low{sport_ev(40001), sport_ev(5), sport_ev(1023), sport_ev(80)};
  const std::string w = ProfileStore::low_sport_warning(MRC_CTL_EV_FMT_MODE_UDP, low);
  EXPECT_EQ(w.rfind("3 of its 4 EVs are on UDP source ports below 1024 (5..1023): ", 0), 0u) << w;
  EXPECT_NE(w.find("CAP_NET_BIND_SERVICE"), std::string::npos) << w;
  EXPECT_EQ(w.find("port 0"), std::string::npos) << "no EV on port 0: " << w;
  EXPECT_EQ(ProfileStore::low_sport_warning(MRC_CTL_EV_FMT_MODE_STEV, low), w) << "STEV: same bytes 0-1";
  const std::vector<api::EvBytes> zero{sport_ev(0)};
  const std::string z = ProfileStore::low_sport_warning(MRC_CTL_EV_FMT_MODE_STEV, zero);
  EXPECT_EQ(z.rfind("1 of its 1 EVs are on UDP source ports below 1024 (0): ", 0), 0u) << z;
  EXPECT_NE(z.find("source port 0 cannot be sent"), std::string::npos) << z;
  EXPECT_EQ(ProfileStore::low_sport_warning(MRC_CTL_EV_FMT_MODE_SRV6, low), "")
      << "SRv6 EVs are addresses, not ports";
}

TEST(CtlPrivilege, UnprivilegedHandleGetsEpermForEveryModifyAndMayQuery) {
  Ctl t;
  online_fmt(t.ctx, 13);
  explicit_profile(t.ctx, 1, 13, 2, 2);
  EXPECT_EQ(fmt_to(t.app, 14, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_MODE), EPERM);
  EXPECT_EQ(ev_state(t.app, 1, MRC_CTL_PROFILE_OFFLINE), EPERM);
  std::vector<mrc_ctl_ev_op_entry> e(1);
  e[0].ev = ev16(1, 1, 1);
  e[0].state = MRC_CTL_EV_DENIED;
  EXPECT_EQ(ev_op(t.app, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), EPERM);
  mrc_ctl_cc_profile_attr c{};
  c.profile_state = MRC_CTL_PROFILE_OFFLINE;
  c.algorithm = "uet-1.0-nscc";
  EXPECT_EQ(mrc_ctl_modify_cc_profile(t.app, 5, &c, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            EPERM);
  mrc_ctl_port_attr p{MRC_CTL_PORT_ADMIN_DISABLED};
  EXPECT_EQ(mrc_ctl_modify_port(t.app, 1, &p, MRC_CTL_PORT_ADMIN_STATE), EPERM);
  errno = 0;
  EXPECT_EQ(mrc_ctl_create_ev_event_cq(t.app, 4, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EPERM);
  std::uint32_t n = 0;
  mrc_ctl_ep_req r{};
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.app, 0, MRC_CTL_EP_OP_EV_PROBE, &r, 1, 1000, nullptr, &n), EINVAL);
  mrc_ctl_ep_rsp rsp{};
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.app, 0, MRC_CTL_EP_OP_EV_PROBE, &r, 1, 1000, &rsp, &n), EPERM);
  // Queries work and show nothing changed.
  mrc_ctl_ev_profile_attr q{};
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.app, 1, &q, MRC_CTL_EV_PROFILE_CUR_STATE), 0);
  EXPECT_EQ(q.cur_profile_state, MRC_CTL_PROFILE_ONLINE);
  mrc_ctl_device_attr d{};
  EXPECT_EQ(mrc_ctl_query_device(t.app, &d), 0);
  EXPECT_NE(std::string(mrc_ctl_last_error(t.app)), "x");
}

TEST(CtlEvents, CqNeverOverrunsAndCountsDropsPrecisely) {
  Ctl t(2);
  online_fmt(t.ctx, 13);
  explicit_profile(t.ctx, 1, 13, 8, 2, MRC_CTL_EV_GOOD);
  EXPECT_EQ(mrc_ctl_create_ev_event_cq(t.ctx, 0, nullptr, nullptr, 0), nullptr);
  int chan = 0;
  EXPECT_EQ(mrc_ctl_create_ev_event_cq(t.ctx, 2, nullptr, &chan, 0), nullptr) << "no completion channels";
  int tag = 0;
  mrc_ctl_ev_event_cq* cq = mrc_ctl_create_ev_event_cq(t.ctx, 2, &tag, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(mrc_ctl_ev_event_cq_context(cq), &tag);
  // Deny all 8 (DENIED is not in the mask: no events), then allow them: 8 GOOD events into 2 slots.
  std::vector<mrc_ctl_ev_op_entry> e(8);
  for (std::uint32_t i = 0; i < 8; ++i) {
    e[i].ev = ev16(static_cast<std::uint16_t>(i + 1), static_cast<std::uint16_t>(i + 1),
                   static_cast<std::uint8_t>(1 + i % 2));
    e[i].state = MRC_CTL_EV_DENIED;
  }
  ASSERT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), 0);
  mrc_ctl_ev_event ev[8];
  EXPECT_EQ(mrc_ctl_poll_ev_event(cq, 8, ev), 0);
  for (auto& x : e) x.state = MRC_CTL_EV_GOOD;
  ASSERT_EQ(ev_op(t.ctx, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), 0);
  ASSERT_EQ(mrc_ctl_poll_ev_event(cq, 8, ev), 2);
  EXPECT_EQ(ev[0].profile_id, 1u);
  EXPECT_EQ(ev[0].state, MRC_CTL_EV_GOOD);
  EXPECT_EQ(std::memcmp(ev[0].ev.val, e[0].ev.val, MRC_CTL_EV_MAX_BYTES), 0);
  EXPECT_EQ(ev[0].ev.port, 1);
  EXPECT_EQ(ev[0].drop_count, 0u);
  EXPECT_EQ(ev[1].drop_count, 0u);
  EXPECT_EQ(mrc_ctl_poll_ev_event(cq, 8, ev), 0);
  // The next event carries the 6 lost ones. An engine report (a QP found the path bad) is not
  // in the mask; its recovery to GOOD is.
  t.svc->on_engine_event(engine::Event{engine::EventType::kEvState, 0x10, engine::Ev{0x00030003u, 0},
                                       engine::EvState::kGood, engine::EvState::kAssumedBad});
  EXPECT_EQ(mrc_ctl_poll_ev_event(cq, 8, ev), 0);
  t.svc->on_engine_event(engine::Event{engine::EventType::kEvState, 0x10, engine::Ev{0x00030003u, 0},
                                       engine::EvState::kAssumedBad, engine::EvState::kGood});
  ASSERT_EQ(mrc_ctl_poll_ev_event(cq, 8, ev), 1);
  EXPECT_EQ(ev[0].drop_count, 6u);
  EXPECT_EQ(ev[0].ev.val[1], 3);
  EXPECT_EQ(mrc_ctl_poll_ev_event(cq, -1, ev), -EINVAL);
  EXPECT_EQ(mrc_ctl_poll_ev_event(static_cast<mrc_ctl_ev_event_cq*>(nullptr), 1, ev), -EINVAL);
  EXPECT_EQ(mrc_ctl_destroy_ev_event_cq(cq), 0);
}

TEST(CtlEvents, AssumedBadFromTheEngineReachesProfilesThatAskForIt) {
  Ctl t(2);
  online_fmt(t.ctx, 13);
  explicit_profile(t.ctx, 1, 13, 4, 2, MRC_CTL_EV_ASSUMED_BAD);
  mrc_ctl_ev_event_cq* cq = mrc_ctl_create_ev_event_cq(t.ctx, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  // SKIP is internal: GOOD -> SKIP is no change for the controller.
  t.svc->on_engine_event(engine::Event{engine::EventType::kEvState, 0x10, engine::Ev{0x00020002u, 1},
                                       engine::EvState::kGood, engine::EvState::kSkip});
  mrc_ctl_ev_event ev[4];
  EXPECT_EQ(mrc_ctl_poll_ev_event(cq, 4, ev), 0);
  t.svc->on_engine_event(engine::Event{engine::EventType::kEvState, 0x10, engine::Ev{0x00020002u, 1},
                                       engine::EvState::kSkip, engine::EvState::kAssumedBad});
  ASSERT_EQ(mrc_ctl_poll_ev_event(cq, 4, ev), 1);
  EXPECT_EQ(ev[0].state, MRC_CTL_EV_ASSUMED_BAD);
  EXPECT_EQ(ev[0].ev.port, 2);
  std::vector<mrc_ctl_ev_op_entry> s(1);
  s[0].ev = ev16(2, 2, 2);
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
  q.ev_op.entries = s.data();
  q.ev_op.entry_count = 1;
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(s[0].state, MRC_CTL_EV_ASSUMED_BAD);
  EXPECT_EQ(mrc_ctl_destroy_ev_event_cq(cq), 0);
}

TEST(CtlProtocol, MalformedRequestsAreEinvalNeverACrash) {
  Ctl t;
  api::CtlSession s{true, {}, {}};
  for (const char* bad : {"", "{", "[]", "{\"op\":5}", "{\"op\":\"nope\"}", "{\"op\":\"modify_ev\"}",
                          "{\"op\":\"modify_ev_fmt\",\"id\":1,\"mask\":\"x\"}",
                          "{\"op\":\"poll_cq\",\"cq\":1,\"n\":1}", "{\"op\":\"query_port\",\"port\":1}"}) {
    const auto rsp = nlohmann::json::parse(t.svc->dispatch(s, bad));
    EXPECT_NE(rsp.at("rc").get<int>(), 0) << bad;
    EXPECT_FALSE(rsp.at("why").get<std::string>().empty()) << bad;
  }
  EXPECT_THROW(api::ev_from_hex("xyz"), std::invalid_argument);
  EXPECT_THROW(api::ev_from_hex(std::string(65, '0')), std::invalid_argument);
}

}  // namespace
}  // namespace mrc::ctltest
