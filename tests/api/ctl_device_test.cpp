// The controller against a device of the application API: mrc_open_device starts the control
// socket named in its config; a QP that names an EV and a CC profile at INIT holds them (EBUSY),
// and a controller deny reaches the QP's live EV set.
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "api/objects.hpp"
#include "ctl_harness.hpp"
#include "engine/qp.hpp"
#include "mrc/mrc.h"

namespace mrc::ctltest {
namespace {

/// A 2-plane device on 127.<net>.{1,2}.1 serving the controller API on `path`.
ibv_context* open_ctl_device(const std::string& path, int net) {
  const std::string a = "127." + std::to_string(net) + ".1.1", b = "127." + std::to_string(net) + ".2.1";
  mrc_device_config cfg{};
  cfg.num_planes = 2;
  cfg.plane_addr[0] = a.c_str();
  cfg.plane_addr[1] = b.c_str();
  cfg.ctl_socket = path.c_str();
  return mrc_open_device(&cfg);
}

TEST(CtlDevice, DeviceServesItsControlSocketAndQpsHoldProfiles) {
  const std::string path = "/tmp/mrc-ctl-dev-" + std::to_string(::getpid());
  ibv_context* dev = open_ctl_device(path, 76);
  ASSERT_NE(dev, nullptr) << std::strerror(errno);
  mrc_ctl_context* c = mrc_ctl_open(path.c_str());
  ASSERT_NE(c, nullptr) << std::strerror(errno);
  online_fmt(c, 13);
  explicit_profile(c, 1, 13, 4, 2);
  mrc_ctl_cc_profile_attr cc{};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  cc.algorithm = nullptr;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(c, 6, &cc, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM), 0);
  cc.profile_state = MRC_CTL_PROFILE_ONLINE;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(c, 6, &cc, MRC_CTL_CC_PROFILE_STATE), 0);

  mrc_context_attr ca{};
  mrc_context* ctx = mrc_create_context(dev, &ca);
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(dev);
  ASSERT_NE(pd, nullptr);
  mrc_cq* cq = mrc_create_cq(ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.pd = pd;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = 1;
  ia.protocol_version = MRC_PROTOCOL_VERSION_1;
  mrc_qp* qp = mrc_create_qp(ctx, &ia);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr ib{};
  ib.qp_state = IBV_QPS_INIT;
  ib.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  mrc_qp_attr ma{};
  ma.profile.ev_profile_id = 1;
  ma.profile.cc_profile_id = 6;
  ASSERT_EQ(mrc_modify_qp(qp, &ib, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, &ma,
                          MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID),
            0)
      << std::strerror(errno);
  EXPECT_EQ(ev_state(c, 1, MRC_CTL_PROFILE_OFFLINE), EBUSY);
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(c, 6, &cc, MRC_CTL_CC_PROFILE_STATE), EBUSY);
  mrc_ctl_ev_profile_attr q{};
  ASSERT_EQ(mrc_ctl_query_ev_profile(c, 1, &q, MRC_CTL_EV_PROFILE_CUR_STATE), 0);
  EXPECT_EQ(q.cur_profile_state, MRC_CTL_PROFILE_ONLINE);
  // A deny reaches the QP's EV manager at once.
  std::vector<mrc_ctl_ev_op_entry> e(1);
  e[0].ev = ev16(2, 2, 2);
  e[0].state = MRC_CTL_EV_DENIED;
  ASSERT_EQ(ev_op(c, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), 0);
  std::uint32_t qpn = 0;
  ASSERT_EQ(mrc_get_qpn(qp, &qpn), 0);
  // The device is a UDP-mode endpoint: the STEV EV (2, 2) leaves from source port 2 and carries no
  // flow label, so its engine value is 0x00020000 (D37 canonical form).
  engine::EvState st = engine::EvState::kGood;
  bool found = false;
  mrc::api::device_of(dev)->ue->execute([&](engine::Endpoint& ep) {
    const engine::EvManager& evm = ep.qp(qpn)->evs();
    const std::uint16_t slot = evm.find(0x00020000u, 1);
    found = slot != engine::EvManager::kNone;
    if (found) st = evm.state(slot);
  });
  ASSERT_TRUE(found);
  EXPECT_EQ(st, engine::EvState::kDenied);

  ASSERT_EQ(mrc_destroy_qp(qp), 0);
  EXPECT_EQ(ev_state(c, 1, MRC_CTL_PROFILE_OFFLINE), 0) << "the QP let go";
  EXPECT_EQ(mrc_ctl_modify_cc_profile(c, 6, &cc, MRC_CTL_CC_PROFILE_STATE), 0);
  EXPECT_EQ(mrc_ctl_close(c), 0);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(mrc_destroy_context(ctx), 0);
  EXPECT_EQ(ibv_close_device(dev), 0);
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the socket file goes with the device";
}

// Without a progress thread the application's thread and the controller socket's thread both
// enter the engine: the endpoint serialises them (UdpEndpoint::direct_mu_). The controller flips a
// port's admin state and reads counters while the application registers memory and progresses.
TEST(CtlDevice, ControllerSocketAndApplicationDrivenProgressTakeTurnsInTheEngine) {
  const std::string path = "/tmp/mrc-ctl-app-" + std::to_string(::getpid());
  ibv_context* dev = open_ctl_device(path, 77);
  ASSERT_NE(dev, nullptr) << std::strerror(errno);
  mrc_context_attr ca{};
  mrc_context* ctx = mrc_create_context_ex(dev, &ca, MRC_CONTEXT_APP_PROGRESS);
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(dev);
  ASSERT_NE(pd, nullptr);
  mrc_ctl_context* c = mrc_ctl_open(path.c_str());
  ASSERT_NE(c, nullptr) << std::strerror(errno);

  std::atomic<bool> done{false};
  std::atomic<int> ctl_failures{0}, ctl_calls{0};
  std::thread controller([&] {
    for (int i = 0; i < 200; ++i) {
      mrc_ctl_port_attr pa{};
      pa.port_admin_state = i % 2 ? MRC_CTL_PORT_ADMIN_ENABLED : MRC_CTL_PORT_ADMIN_DISABLED;
      mrc_ctl_port_counters pc{};
      if (mrc_ctl_modify_port(c, 2, &pa, MRC_CTL_PORT_ADMIN_STATE) != 0 ||
          mrc_ctl_query_port_counters(c, 1, &pc) != 0)
        ++ctl_failures;
      ++ctl_calls;
    }
    done = true;
  });
  std::vector<std::uint8_t> buf(1 << 16);
  int app_failures = 0, rounds = 0;
  while (!done) {
    ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr || ibv_dereg_mr(mr) != 0) ++app_failures;
    if (mrc_progress(ctx, 1) < 0) ++app_failures;
    ++rounds;
  }
  controller.join();
  EXPECT_EQ(ctl_calls, 200);
  EXPECT_EQ(ctl_failures, 0);
  EXPECT_EQ(app_failures, 0);
  EXPECT_GT(rounds, 0);
  // The last modify enabled the port: both planes are usable again.
  mrc_ctl_port_attr pa{};
  ASSERT_EQ(mrc_ctl_query_port(c, 2, &pa, MRC_CTL_PORT_ADMIN_STATE), 0);
  EXPECT_EQ(pa.port_admin_state, MRC_CTL_PORT_ADMIN_ENABLED);
  EXPECT_EQ(mrc_ctl_close(c), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(mrc_destroy_context(ctx), 0);
  EXPECT_EQ(ibv_close_device(dev), 0);
}

}  // namespace
}  // namespace mrc::ctltest
