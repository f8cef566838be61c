// Application API: versions, devices, GIDs, device attributes, PDs, MRs, contexts, async events,
// and the NULL / bad-argument cases of every one of them.
#include <fcntl.h>

#include <cstdlib>

#include "api/app_harness.hpp"
#include "mrc/mrc_ctl.h"

using namespace mrc_app_test;

TEST(AppVersion, ReportsTheSupportedRanges) {
  std::uint32_t cur = 0, last = 1, vcur = 0, vlast = 0;
  mrc_query_version(&cur, &last, &vcur, &vlast);
  EXPECT_EQ(cur, MRC_API_VER(1, 0, 1));
  EXPECT_EQ(last, MRC_API_VER(0, 0, 0));
  EXPECT_EQ(vcur, MRC_VENDOR_API_CURRENT_VERSION);
  EXPECT_EQ(vlast, MRC_VENDOR_API_LAST_SUPPORTED_VERSION);
  mrc_query_version(nullptr, nullptr, nullptr, nullptr);  // any pointer may be NULL
  EXPECT_EQ(cur, 0x01000001u);
  EXPECT_EQ(MRC_API_VER_USED, MRC_API_CURRENT_VERSION) << "the default is the current API";
  EXPECT_EQ(MRC_API_VER_LATEST, 0xFFFFFFFFu);
}

TEST(AppDevice, RefusesBadConfigs) {
  mrc_device_config c{};
  errno = 0;
  EXPECT_EQ(mrc_open_device(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_open_device(&c), nullptr);  // no planes
  EXPECT_EQ(errno, EINVAL);
  c.num_planes = MRC_MAX_PLANES + 1;
  EXPECT_EQ(mrc_open_device(&c), nullptr);
  c.num_planes = 1;
  EXPECT_EQ(mrc_open_device(&c), nullptr);  // NULL address
  c.plane_addr[0] = "not-an-address";
  EXPECT_EQ(mrc_open_device(&c), nullptr);
  EXPECT_EQ(errno, EINVAL);
  c.num_planes = 2;
  c.plane_addr[0] = "127.0.40.1";
  c.plane_addr[1] = "::1";  // mixed families
  EXPECT_EQ(mrc_open_device(&c), nullptr);
  EXPECT_EQ(errno, EINVAL);
  for (const char* s :
       {"", "@4791", "127.0.40.1@", "127.0.40.1@0", "127.0.40.1@70000", "127.0.40.1,,127.1.40.1"}) {
    EXPECT_EQ(mrc_open_device_str(s), nullptr) << s;
    EXPECT_EQ(errno, EINVAL) << s;
  }
  ::unsetenv("MRC_DEVICE");
  EXPECT_EQ(mrc_open_device_str(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(AppDevice, OpensFromConfigStringAndEnvironment) {
  mrc_device_config c{};
  c.num_planes = 2;
  c.plane_addr[0] = "127.0.40.2";
  c.plane_addr[1] = "127.1.40.2";
  c.udp_port = 24800;
  ibv_context* d = mrc_open_device(&c);
  ASSERT_NE(d, nullptr) << std::strerror(errno);
  std::uint16_t port = 0;
  EXPECT_EQ(mrc_query_udp_port(d, &port), 0);
  EXPECT_EQ(port, 24800);
  // The same address and port again cannot bind.
  errno = 0;
  EXPECT_EQ(mrc_open_device_str("127.0.40.2,127.1.40.2@24800"), nullptr);
  EXPECT_EQ(errno, EADDRINUSE);
  EXPECT_EQ(ibv_close_device(d), 0);

  d = mrc_open_device_str("127.0.40.2,127.1.40.2@24800");  // free again after close
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(ibv_close_device(d), 0);

  ::setenv("MRC_DEVICE", "127.0.40.3", 1);
  d = mrc_open_device_str(nullptr);
  ::unsetenv("MRC_DEVICE");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(mrc_query_udp_port(d, &port), 0);
  EXPECT_EQ(port, 4791);  // RoCEv2 port by default
  ibv_device_attr a{};
  EXPECT_EQ(ibv_query_device(d, &a), 0);
  EXPECT_EQ(a.phys_port_cnt, 1u);
  EXPECT_EQ(ibv_close_device(d), 0);

  d = mrc_open_device_str("::1@24801");
  ASSERT_NE(d, nullptr);
  ibv_gid g{};
  EXPECT_EQ(ibv_query_gid(d, 1, 0, &g), 0);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(g.raw[i], 0) << i;
  EXPECT_EQ(g.raw[15], 1);
  EXPECT_EQ(ibv_close_device(d), 0);
  EXPECT_EQ(ibv_close_device(nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(AppDevice, QueryDeviceAndGid) {
  ibv_context* d = mrc_open_device_str(spec(41, 1, 3).c_str());
  ASSERT_NE(d, nullptr);
  mrc_device_attr a{};
  int supported = 0;
  ASSERT_EQ(mrc_query_device(d, &a, &supported), 0);
  EXPECT_EQ(supported, 1);
  EXPECT_EQ(a.mrc_protocol_version, static_cast<std::uint32_t>(MRC_PROTOCOL_VERSION_1));
  EXPECT_EQ(a.mpr_attr.mpr_resolution, 1) << "128 PSNs";
  EXPECT_GE(a.mpr_attr.max_mpr, 8);
  EXPECT_GE(a.wimm_attr.max_wimm, 1);
  EXPECT_GE(a.wimm_attr.max_wimm_dest, 1);
  EXPECT_GE(a.qp_attr.max_qp_hint, 1u);
  EXPECT_TRUE(a.cap & MRC_DEVICE_CAP_TRIM_NACK);
  EXPECT_TRUE(a.cap & MRC_DEVICE_CAP_DYNAMIC_MPR);
  ibv_device_attr va{};
  ASSERT_EQ(ibv_query_device(d, &va), 0);
  EXPECT_EQ(va.phys_port_cnt, 3u);
  EXPECT_EQ(va.max_sge, 1);

  mrc_context* ctx = mrc_create_context(d, nullptr);
  ASSERT_NE(ctx, nullptr);
  mrc_device_attr b{};
  EXPECT_EQ(mrc_query_device_ex(d, ctx, &b, nullptr), 0);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  ibv_context* other = mrc_open_device_str(spec(41, 2, 1).c_str());
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(mrc_query_device_ex(other, ctx, &b, nullptr), -1);  // context of another device
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_query_device(nullptr, &a, nullptr), -1);
  EXPECT_EQ(mrc_query_device(d, nullptr, nullptr), -1);

  // Plane 2's GID: 127.1.41.1 IPv4-mapped.
  ibv_gid g{};
  ASSERT_EQ(ibv_query_gid(d, 2, 0, &g), 0);
  const std::uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 1, 41, 1};
  EXPECT_EQ(std::memcmp(g.raw, want, 16), 0);
  EXPECT_EQ(ibv_query_gid(d, 0, 0, &g), -1);  // ports are 1-based
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_query_gid(d, 4, 0, &g), -1);
  // The GID table: index 0 and 3 (OCP's benchmark default) are the plane's address, 1 and 2 empty.
  ibv_gid g3{};
  ASSERT_EQ(ibv_query_gid(d, 2, 3, &g3), 0);
  EXPECT_EQ(std::memcmp(g3.raw, want, 16), 0);
  ASSERT_EQ(ibv_query_gid(d, 2, 1, &g3), 0);
  EXPECT_EQ(g3.global.interface_id, 0u);
  EXPECT_EQ(ibv_query_gid(d, 1, 4, &g), -1);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(d, 2, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.phys_state, 5);  // LinkUp
  // A port a controller disables is reported down, and active again once enabled.
  mrc_ctl_port_attr admin{};
  admin.port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED;
  ASSERT_EQ(mrc_ctl_modify_port(ctx, 2, &admin, MRC_CTL_PORT_ADMIN_STATE), 0) << mrc_ctl_last_error(ctx);
  ASSERT_EQ(ibv_query_port(d, 2, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_DOWN);
  EXPECT_EQ(pa.phys_state, 3);  // Disabled
  ASSERT_EQ(ibv_query_port(d, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);  // the other plane is untouched
  admin.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
  ASSERT_EQ(mrc_ctl_modify_port(ctx, 2, &admin, MRC_CTL_PORT_ADMIN_STATE), 0) << mrc_ctl_last_error(ctx);
  ASSERT_EQ(ibv_query_port(d, 2, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.gid_tbl_len, 4);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_NE(ibv_query_port(d, 4, &pa), 0);
  EXPECT_EQ(ibv_query_gid(d, 1, 0, nullptr), -1);
  EXPECT_EQ(mrc_query_udp_port(nullptr, nullptr), -1);

  EXPECT_EQ(ibv_close_device(d), -1);  // its context is alive
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(mrc_destroy_context(ctx), 0);
  EXPECT_EQ(ibv_close_device(d), 0);
  EXPECT_EQ(ibv_close_device(other), 0);
}

TEST(AppMemory, PdAndMrLifecycle) {
  ibv_context* d = mrc_open_device_str(spec(42, 1).c_str());
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(ibv_alloc_pd(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_pd* pd = ibv_alloc_pd(d);
  ASSERT_NE(pd, nullptr);
  std::vector<std::uint8_t> buf(4096);
  // Refused: NULL PD / buffer, empty, READ / ATOMIC (no such MRC operations), unknown bits,
  // REMOTE_WRITE without LOCAL_WRITE (as in verbs).
  EXPECT_EQ(ibv_reg_mr(nullptr, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(ibv_reg_mr(pd, nullptr, buf.size(), IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), 0, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), nullptr);
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC),
            nullptr);
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), buf.size(), 1 << 10), nullptr);
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);

  ibv_mr* a = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_mr* b = ibv_reg_mr(pd, buf.data(), 100, 0);  // read-only source of writes
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->addr, buf.data());
  EXPECT_EQ(a->length, buf.size());
  EXPECT_EQ(a->pd, pd);
  EXPECT_EQ(a->context, d);
  EXPECT_NE(a->lkey, 0u);
  EXPECT_NE(a->rkey, 0u);
  EXPECT_NE(a->lkey, b->lkey);
  EXPECT_NE(a->rkey, b->rkey);

  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // MRs use it (verbs returns the errno)
  EXPECT_EQ(ibv_close_device(d), -1);    // a PD is alive
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(ibv_dereg_mr(a), 0);
  EXPECT_EQ(ibv_dereg_mr(b), 0);
  EXPECT_EQ(ibv_dereg_mr(nullptr), EINVAL);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_dealloc_pd(nullptr), EINVAL);
  EXPECT_EQ(ibv_close_device(d), 0);
}

TEST(AppContext, OnePerDeviceVersionsAndFlags) {
  ibv_context* d = mrc_open_device_str(spec(43, 1).c_str());
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(mrc_create_context(nullptr, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  mrc_context_attr attr{};
  EXPECT_EQ(mrc_create_context_ex(d, &attr, 1u << 5), nullptr);  // unknown flag
  EXPECT_EQ(errno, EINVAL);
  attr = {};
  attr.mrc_api_version_used = MRC_API_VER(1, 1, 0);  // newer than the library
  EXPECT_EQ(mrc_create_context(d, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  attr = {};
  attr.mrc_vendor_api_version_used = MRC_API_VER(9, 0, 0);
  EXPECT_EQ(mrc_create_context(d, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);

  attr = {};
  attr.mrc_api_version_used = MRC_API_VER(1, 0, 0);
  mrc_context* c = mrc_create_context(d, &attr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(mrc_create_context(d, nullptr), nullptr);  // one context per device
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(mrc_progress(c, 0), -1);  // it has a progress thread
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_progress(nullptr, 0), -1);

  mrc_cq* cq = mrc_create_cq(c, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(mrc_destroy_context(c), -1);  // a CQ is alive
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
  EXPECT_EQ(mrc_destroy_context(c), 0);
  EXPECT_EQ(mrc_destroy_context(nullptr), -1);

  attr = {};
  c = mrc_create_context_ex(d, &attr, MRC_CONTEXT_APP_PROGRESS);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(mrc_progress(c, 0), 0);  // nothing to move
  EXPECT_EQ(mrc_progress(c, -1), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_destroy_context(c), 0);
  EXPECT_EQ(ibv_close_device(d), 0);
}

TEST(AppAsync, FdAndNonBlockingGet) {
  ibv_context* d = mrc_open_device_str(spec(44, 1).c_str());
  ASSERT_NE(d, nullptr);
  mrc_context* c = mrc_create_context(d, nullptr);
  ASSERT_NE(c, nullptr);
  int fd = -1;
  ASSERT_EQ(mrc_get_async_fd(c, &fd), 0);
  EXPECT_GE(fd, 0);
  EXPECT_FALSE(readable(fd, 0));
  // Made non-blocking like ibv's async_fd, an empty queue is EAGAIN.
  ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  mrc_async_event ev{};
  EXPECT_EQ(mrc_get_async_event(c, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(mrc_get_async_event(nullptr, &ev), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_get_async_event(c, nullptr), -1);
  EXPECT_EQ(mrc_get_async_fd(c, nullptr), -1);
  mrc_ack_async_event(nullptr);  // harmless
  EXPECT_STREQ(ibv_event_type_str(IBV_EVENT_QP_FATAL), "local work queue catastrophic error");
  EXPECT_STREQ(ibv_event_type_str(static_cast<ibv_event_type>(25)), "unknown");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
  EXPECT_STREQ(ibv_wc_status_str(static_cast<ibv_wc_status>(31)), "unknown");
  EXPECT_EQ(mrc_destroy_context(c), 0);
  EXPECT_EQ(ibv_close_device(d), 0);
}
