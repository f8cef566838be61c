// Controller test helpers: an in-process controller on a profile store, and short builders for
// the attr structs of mrc_ctl.h.
#pragma once
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "api/ctl.hpp"

namespace mrc::ctltest {

struct Ctl {
  api::ProfileStore store;
  std::unique_ptr<api::CtlService> svc;
  mrc_ctl_context* ctx = nullptr;
  mrc_ctl_context* app = nullptr;  ///< unprivileged handle on the same service
  explicit Ctl(std::uint32_t ports = 2, io::UdpEndpoint* udp = nullptr, bool poll = false) {
    store.set_num_ports(ports);
    svc = std::make_unique<api::CtlService>(store, udp, poll);
    ctx = api::ctl_open_embedded(*svc, true);
    app = api::ctl_open_embedded(*svc, false);
  }
  ~Ctl() {
    mrc_ctl_close(ctx);
    mrc_ctl_close(app);
  }
};

inline int fmt_to(mrc_ctl_context* c, std::uint64_t id, mrc_ctl_profile_state s, std::uint32_t extra_mask = 0,
                  mrc_ctl_ev_fmt_mode mode = MRC_CTL_EV_FMT_MODE_STEV,
                  std::vector<std::uint32_t> widths = {16, 16}) {
  std::vector<mrc_ctl_ev_fmt_field> f;
  for (auto w : widths) f.push_back({static_cast<std::uint8_t>(w)});
  mrc_ctl_ev_fmt_profile_attr a{};
  a.profile_state = s;
  a.ev_fmt_mode = mode;
  a.ev_fmt_op.fmt_fields = f.data();
  a.ev_fmt_op.fmt_field_count = static_cast<int>(f.size());
  return mrc_ctl_modify_ev_fmt_profile(c, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE | extra_mask);
}

/// An ONLINE format profile.
inline void online_fmt(mrc_ctl_context* c, std::uint64_t id,
                       mrc_ctl_ev_fmt_mode mode = MRC_CTL_EV_FMT_MODE_STEV,
                       std::vector<std::uint32_t> widths = {16, 16}) {
  ASSERT_EQ(fmt_to(c, id, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_MODE, mode, widths), 0)
      << mrc_ctl_last_error(c);
  ASSERT_EQ(fmt_to(c, id, MRC_CTL_PROFILE_ONLINE, MRC_CTL_EV_FMT_PROFILE_OP, mode, widths), 0)
      << mrc_ctl_last_error(c);
}

inline mrc_ctl_ev ev16(std::uint16_t hi, std::uint16_t lo, std::uint8_t port) {
  mrc_ctl_ev e{};
  e.val[0] = static_cast<std::uint8_t>(hi >> 8);
  e.val[1] = static_cast<std::uint8_t>(hi);
  e.val[2] = static_cast<std::uint8_t>(lo >> 8);
  e.val[3] = static_cast<std::uint8_t>(lo);
  e.port = port;
  return e;
}

inline std::vector<mrc_ctl_ev_field> full16x2() {
  return {{16, 0, 0, 0xFFFF, 0xFFFF}, {16, 0, 0, 0xFFFF, 0xFFFF}};
}

/// EV profile moved to OFFLINE with mode, format, count and fields.
inline int ev_offline(mrc_ctl_context* c, std::uint64_t id, mrc_ctl_ev_mode mode, std::uint64_t fmt,
                      std::uint32_t count, std::vector<mrc_ctl_ev_field> fields) {
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  a.ev_mode = mode;
  a.ev_fmt_profile_id = fmt;
  a.ev_count = count;
  a.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  a.ev_fields_op.fields = fields.data();
  a.ev_fields_op.field_count = static_cast<int>(fields.size());
  return mrc_ctl_modify_ev_profile(c, id, &a,
                                   MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                       MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                       MRC_CTL_EV_PROFILE_EV_FIELDS_OP);
}

inline int ev_op(mrc_ctl_context* c, std::uint64_t id, mrc_ctl_ev_op op, std::vector<mrc_ctl_ev_op_entry>& e,
                 std::uint32_t* done = nullptr) {
  mrc_ctl_ev_profile_attr a{};
  a.ev_op.op = op;
  a.ev_op.entries = e.data();
  a.ev_op.entry_count = static_cast<int>(e.size());
  return mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP, done);
}

inline int ev_online(mrc_ctl_context* c, std::uint64_t id, std::uint32_t min_active = 1,
                     std::uint32_t event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD) {
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  a.ev_min_active = min_active;
  a.ev_event_mask = event_mask;
  return mrc_ctl_modify_ev_profile(
      c, id, &a, MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK);
}

inline int ev_state(mrc_ctl_context* c, std::uint64_t id, mrc_ctl_profile_state s) {
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = s;
  return mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_STATE);
}

/// An ONLINE explicit STEV profile on format `fmt` with EVs (i, i) on ports alternating 1..ports.
inline void explicit_profile(mrc_ctl_context* c, std::uint64_t id, std::uint64_t fmt, std::uint32_t count,
                             std::uint32_t ports,
                             std::uint32_t event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD) {
  ASSERT_EQ(ev_offline(c, id, MRC_CTL_EV_MODE_EXP, fmt, count, full16x2()), 0) << mrc_ctl_last_error(c);
  std::vector<mrc_ctl_ev_op_entry> e(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    e[i].ev = mrc_ctl_ev{};  // unpopulated
    e[i].ev_new = ev16(static_cast<std::uint16_t>(i + 1), static_cast<std::uint16_t>(i + 1),
                       static_cast<std::uint8_t>(1 + i % ports));
    e[i].state = MRC_CTL_EV_GOOD;
  }
  ASSERT_EQ(ev_op(c, id, MRC_CTL_EV_OP_REPLACE_EV, e), 0) << mrc_ctl_last_error(c);
  ASSERT_EQ(ev_online(c, id, 1, event_mask), 0) << mrc_ctl_last_error(c);
}

inline mrc_ctl_cc_nscc_cfg nscc_defaults() {
  return api::ProfileStore::nscc_to_ctl(cc::NsccConfig{});
}

}  // namespace mrc::ctltest
