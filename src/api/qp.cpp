// mrc.h: QPs (create / query / modify with the docs/protocol.md §6.2 state machine / destroy) and work
// requests.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "api/objects.hpp"
#include "api/vendor_cfg.hpp"

using mrc::api::fail;

namespace {

namespace eng = mrc::engine;

constexpr std::uint32_t kVendorCfg = static_cast<std::uint32_t>(MRC_QP_VENDOR_CFG);
constexpr std::uint32_t kMaxWr = 1u << 20;
constexpr std::uint32_t kPsnMax = 0xFFFFFF;

constexpr std::uint32_t kIbKnown =
    IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
    IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
    IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_MIN_RNR_TIMER |
    IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MIG_STATE | IBV_QP_CAP | IBV_QP_DEST_QPN |
    IBV_QP_RATE_LIMIT;
/// IB attributes mrc_modify_qp refuses whatever the transition (OCP mrc.h lists PORT .. PATH_MIG_STATE
/// as unsupported; the rest have no meaning for an MRC QP). PORT, TIMEOUT, RETRY_CNT and RNR_RETRY,
/// which OCP's own benchmark passes, are accepted where verbs takes them and ignored (docs/api.md):
/// MRC_QP_TIMEOUT and MRC_QP_RETRY_CNT set the QP's timers, and an MRC QP uses every port.
constexpr std::uint32_t kIbIgnored = IBV_QP_PORT | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
constexpr std::uint32_t kIbUnsupported =
    IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
    IBV_QP_PATH_MIG_STATE | IBV_QP_QKEY | IBV_QP_EN_SQD_ASYNC_NOTIFY | IBV_QP_CAP | IBV_QP_RATE_LIMIT;
constexpr std::uint32_t kMrcKnown = MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR | MRC_QP_MPR_DEST |
                                    MRC_QP_TIMEOUT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID |
                                    MRC_QP_HINT | MRC_QP_RETRY_CNT | MRC_QP_CAP | kVendorCfg;
constexpr std::uint32_t kQpCaps =
    MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED | MRC_QP_CAP_DYNAMIC_MPR | MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED;
constexpr unsigned kQpAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

/// Required and allowed attributes of one transition (OCP mrc.h header table, docs/protocol.md §6.2).
struct Transition {
  ibv_qp_state from, to;
  std::uint32_t ib_required, ib_optional, mrc_required, mrc_optional;
};

/// OCP's header names the MRC attributes of each transition; its benchmark (mrc_example.c) passes
/// none of them and examples/mrc_qp.md passes others, so every MRC attribute is optional with the
/// engine's defaults (MPR 8, MAX_WIMM 128, timeout 8, retries 7 + 25, built-in profiles, no hint).
/// The IB attributes a connection cannot do without (an address vector and the peer's QPN) are
/// required at RTR; PSNs default to 0 and the path MTU to 4096.
constexpr std::uint32_t kMrcAtInit = MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | kVendorCfg;
constexpr std::uint32_t kMrcAtRtr =
    MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP | MRC_QP_MAX_WIMM | MRC_QP_MPR | kVendorCfg;
constexpr std::uint32_t kMrcAtRts =
    MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT | MRC_QP_CAP | kVendorCfg;
constexpr Transition kTransitions[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_STATE, IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT, 0,
     kMrcAtInit},
    {IBV_QPS_INIT, IBV_QPS_INIT, IBV_QP_STATE, IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT, 0,
     kVendorCfg},
    {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN,
     IBV_QP_PATH_MTU | IBV_QP_RQ_PSN | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, 0, kMrcAtRtr},
    {IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_STATE,
     IBV_QP_SQ_PSN | IBV_QP_ACCESS_FLAGS | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY, 0,
     kMrcAtRts},
    {IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_STATE, IBV_QP_ACCESS_FLAGS, 0, kVendorCfg},
};

ibv_qp_state current_state(mrc_qp& qp) {
  return qp.fatal.load() ? IBV_QPS_ERR : qp.state.load();
}

/// The endpoint peer handle of an address vector (registered on first use). 0 if invalid.
/// grh.dgid names the peer: one of the addresses of a known peer (mrc_add_peer, MRC_PEERS), or on
/// a single-plane device any address, on this device's UDP port.
std::uint32_t resolve_peer(mrc_device& dev, const ibv_ah_attr& ah) {
  const std::uint32_t planes = dev.ue->num_planes();
  const int family = dev.ue->config().planes[0].family;
  mrc::io::IpAddr dgid;
  if (!ah.is_global || !mrc::io::IpAddr::from_gid(ah.grh.dgid.raw, family, dgid)) return 0;
  std::vector<mrc::io::IpAddr> addrs;
  std::uint16_t port = 0;
  for (const auto& k : dev.known_peers)
    if (std::find(k.addrs.begin(), k.addrs.end(), dgid) != k.addrs.end()) {
      addrs = k.addrs;
      port = k.port;
      break;
    }
  if (addrs.empty()) {
    if (planes != 1) return 0;
    addrs.push_back(dgid);
  }
  if (port == 0) port = dev.ue->config().port;
  for (const auto& p : dev.peers)
    if (p.port == port && p.addrs == addrs) return p.handle;
  std::uint32_t handle = 0;
  dev.ue->execute([&](eng::Endpoint&) { handle = dev.ue->add_peer(addrs, port); });
  if (handle != 0) dev.peers.push_back(mrc_device::PeerKey{addrs, port, handle});
  return handle;
}

/// Checks the values the transition brings and applies them to qp.cfg / qp.ib / qp.mrc.
int apply_values(mrc_qp& qp, const ibv_qp_attr* v, std::uint32_t vmask, const mrc_qp_attr* m,
                 std::uint32_t mmask) {
  if ((vmask & IBV_QP_PKEY_INDEX) && v->pkey_index != 0) return EINVAL;  // one P_Key: the default
  if ((vmask & IBV_QP_ACCESS_FLAGS) && (v->qp_access_flags & ~kQpAccess) != 0) return EINVAL;
  if ((vmask & IBV_QP_PATH_MTU) && (v->path_mtu < IBV_MTU_256 || v->path_mtu > IBV_MTU_4096)) return EINVAL;
  if ((vmask & IBV_QP_PORT) && (v->port_num == 0 || v->port_num > qp.ctx->device->ue->num_planes()))
    return EINVAL;
  if ((vmask & IBV_QP_DEST_QPN) && v->dest_qp_num > kPsnMax) return EINVAL;
  if ((vmask & IBV_QP_RQ_PSN) && v->rq_psn > kPsnMax) return EINVAL;
  if ((vmask & IBV_QP_SQ_PSN) && v->sq_psn > kPsnMax) return EINVAL;
  if ((mmask & MRC_QP_HINT) && m->qp_hint != nullptr && m->qp_hint->ctx != qp.ctx) return EINVAL;
  if ((mmask & MRC_QP_MPR) && m->mpr.mpr == 0) return EINVAL;
  if ((mmask & MRC_QP_MPR_DEST) && m->mpr.mpr_dest == 0) return EINVAL;
  if ((mmask & MRC_QP_MAX_WIMM) && m->wimm.max_wimm == 0) return EINVAL;
  if ((mmask & MRC_QP_MAX_WIMM_DEST) && m->wimm.max_wimm_dest == 0) return EINVAL;
  if ((mmask & MRC_QP_TIMEOUT) && m->timeout > 24) return EINVAL;
  if ((mmask & MRC_QP_RETRY_CNT) && (m->retry.linear_cnt > 7 || m->retry.exp_cnt > 25)) return EINVAL;
  if ((mmask & MRC_QP_CAP) && (m->cap & ~kQpCaps) != 0) return EINVAL;
  if (mmask & kVendorCfg) {
    mrc::api::VendorCfg vc;
    if (mrc::api::decode_vendor_cfg(m->vendor_cfg, vc) == mrc::api::VendorCfgParse::kInvalid) return EINVAL;
  }

  if (vmask & IBV_QP_PKEY_INDEX) qp.ib.pkey_index = v->pkey_index;
  if (vmask & IBV_QP_ACCESS_FLAGS) qp.ib.qp_access_flags = v->qp_access_flags;
  if (vmask & IBV_QP_PATH_MTU) {
    qp.ib.path_mtu = v->path_mtu;
    qp.cfg.pmtu = 128u << static_cast<unsigned>(v->path_mtu);
  }
  if (vmask & IBV_QP_DEST_QPN) qp.ib.dest_qp_num = v->dest_qp_num;
  if (vmask & IBV_QP_RQ_PSN) qp.ib.rq_psn = v->rq_psn;
  if (vmask & IBV_QP_SQ_PSN) qp.ib.sq_psn = v->sq_psn;
  if (vmask & IBV_QP_AV) qp.ib.ah_attr = v->ah_attr;
  if (vmask & IBV_QP_PORT) qp.ib.port_num = v->port_num;
  if (vmask & IBV_QP_TIMEOUT) qp.ib.timeout = v->timeout;
  if (vmask & IBV_QP_RETRY_CNT) qp.ib.retry_cnt = v->retry_cnt;
  if (vmask & IBV_QP_RNR_RETRY) qp.ib.rnr_retry = v->rnr_retry;
  if (mmask & MRC_QP_MPR) qp.cfg.mpr = qp.mrc.mpr.mpr = m->mpr.mpr;
  if (mmask & MRC_QP_MPR_DEST) qp.cfg.mpr_dest = qp.mrc.mpr.mpr_dest = m->mpr.mpr_dest;
  if (mmask & MRC_QP_MAX_WIMM) qp.cfg.max_wimm = qp.mrc.wimm.max_wimm = m->wimm.max_wimm;
  if (mmask & MRC_QP_MAX_WIMM_DEST) qp.cfg.max_wimm_dest = qp.mrc.wimm.max_wimm_dest = m->wimm.max_wimm_dest;
  if (mmask & MRC_QP_TIMEOUT) qp.cfg.timeout = qp.mrc.timeout = m->timeout;
  if (mmask & MRC_QP_RETRY_CNT) {
    qp.mrc.retry = m->retry;
    qp.cfg.retry_linear = m->retry.linear_cnt;
    qp.cfg.retry_exp = m->retry.exp_cnt;
  }
  if (mmask & MRC_QP_CAP) {
    qp.mrc.cap = m->cap;
    qp.cfg.trim_nack_dest_supported = !(m->cap & MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED);
  }
  if (mmask & kVendorCfg) std::memcpy(qp.mrc.vendor_cfg, m->vendor_cfg, sizeof qp.mrc.vendor_cfg);
  return 0;
}

/// RESET -> INIT: the QP takes its EV set and CC configuration from its profiles.
int to_init(mrc_qp& qp, const mrc_qp_attr* mattr, std::uint32_t mmask) {
  // Absent attributes: built-in profiles, no hint.
  mrc_qp_attr m{};
  if (mmask & MRC_QP_EV_PROFILE_ID) m.profile.ev_profile_id = mattr->profile.ev_profile_id;
  if (mmask & MRC_QP_CC_PROFILE_ID) m.profile.cc_profile_id = mattr->profile.cc_profile_id;
  if (mmask & MRC_QP_HINT) m.qp_hint = mattr->qp_hint;
  mrc_device& dev = *qp.ctx->device;
  mrc::api::QpProfiles prof;
  const int rc =
      dev.profiles.acquire(m.profile.ev_profile_id, m.profile.cc_profile_id, dev.ue->num_planes(), prof);
  if (rc != 0) return rc;
  qp.cfg.evs = std::move(prof.evs);
  qp.cfg.active_count = prof.active_count;
  qp.cfg.ev_min_active = prof.ev_min_active;
  qp.cfg.cc = prof.cc;
  // This implementation's vendor settings (vendor_cfg.hpp): what OCP's profiles cannot say.
  mrc::api::VendorCfg vc;
  if (mrc::api::decode_vendor_cfg(qp.mrc.vendor_cfg, vc) == mrc::api::VendorCfgParse::kOk) {
    if (vc.flags & mrc::api::kVcActiveEvs) {
      if (vc.active_evs > qp.cfg.evs.size()) {
        dev.profiles.release(m.profile.ev_profile_id, m.profile.cc_profile_id);
        return EINVAL;
      }
      qp.cfg.active_count = vc.active_evs;
    }
    if (vc.flags & mrc::api::kVcCcLineRate) qp.cfg.cc.nscc.linkspeed_bps = vc.line_rate_bps;
  }
  int erc = 0;
  dev.ue->execute([&](eng::Endpoint& ep) {
    erc = ep.reconfigure_qp(qp.qpn, qp.cfg);
    if (erc == 0) erc = ep.modify_to_init(qp.qpn);
  });
  if (erc != 0) {
    dev.profiles.release(m.profile.ev_profile_id, m.profile.cc_profile_id);
    return erc;
  }
  qp.profiles_held = true;
  qp.mrc.profile = m.profile;
  qp.mrc.qp_hint = m.qp_hint;
  if (m.qp_hint) ++m.qp_hint->qps;
  return 0;
}

int modify(mrc_qp& qp, const ibv_qp_attr* v, std::uint32_t vmask, const mrc_qp_attr* m, std::uint32_t mmask) {
  (void)kIbIgnored;
  if ((vmask & ~kIbKnown) || (mmask & ~kMrcKnown) || (vmask & kIbUnsupported)) return EINVAL;
  if ((vmask != 0 && v == nullptr) || (mmask != 0 && m == nullptr)) return EINVAL;
  const ibv_qp_state cur = current_state(qp);
  if ((vmask & IBV_QP_CUR_STATE) && v->cur_qp_state != cur) return EINVAL;
  const ibv_qp_state next = (vmask & IBV_QP_STATE) ? v->qp_state : cur;
  const std::uint32_t vm = vmask & ~static_cast<std::uint32_t>(IBV_QP_CUR_STATE);
  mrc_device& dev = *qp.ctx->device;

  if (next == IBV_QPS_ERR) {  // any state -> ERR, nothing else with it
    if (vm != IBV_QP_STATE || mmask != 0) return EINVAL;
    int rc = 0;
    qp.requested_error.store(true);
    dev.ue->execute([&](eng::Endpoint& ep) { rc = ep.modify_to_error(qp.qpn, mrc::io::UdpEndpoint::now()); });
    if (rc == 0) qp.state.store(IBV_QPS_ERR);
    return rc;
  }
  if (!(vmask & IBV_QP_STATE)) {  // attribute change without a transition
    if (vm & ~static_cast<std::uint32_t>(IBV_QP_ACCESS_FLAGS) || (mmask & ~kVendorCfg)) return EINVAL;
    if (vm != 0 && (cur == IBV_QPS_RESET || cur == IBV_QPS_ERR)) return EINVAL;
    return apply_values(qp, v, vm, m, mmask);
  }
  const Transition* t = nullptr;
  for (const Transition& x : kTransitions)
    if (x.from == cur && x.to == next) t = &x;
  if (t == nullptr) return EINVAL;
  if ((vm & t->ib_required) != t->ib_required || (vm & ~(t->ib_required | t->ib_optional)) != 0)
    return EINVAL;
  if ((mmask & t->mrc_required) != t->mrc_required || (mmask & ~(t->mrc_required | t->mrc_optional)) != 0)
    return EINVAL;

  std::uint32_t peer = 0;
  if (vm & IBV_QP_AV) {
    peer = resolve_peer(dev, v->ah_attr);
    if (peer == 0) return EINVAL;
  }
  // Validate and stage on a copy: a refused modify leaves the QP as it was.
  mrc_qp_attr saved_mrc = qp.mrc;
  ibv_qp_attr saved_ib = qp.ib;
  eng::QpConfig saved_cfg = qp.cfg;
  auto restore = [&](int rc) {
    qp.mrc = saved_mrc;
    qp.ib = saved_ib;
    qp.cfg = std::move(saved_cfg);
    return rc;
  };
  int rc = apply_values(qp, v, vm, m, mmask);
  if (rc != 0) return restore(rc);
  const mrc::Time now = mrc::io::UdpEndpoint::now();
  if (cur == IBV_QPS_RESET) {
    rc = to_init(qp, m, mmask);
  } else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    // The peer's windows are not exchanged by the API: our own MPR / MAX_WIMM (set at RTS) bound
    // the requester, the peer's dynamic-MPR SACKs shrink it.
    eng::QpRemote remote;
    remote.peer = peer;
    remote.qpn = qp.ib.dest_qp_num;
    remote.rq_psn = qp.ib.rq_psn;
    remote.peer_mpr_dest = 0xFF;
    remote.peer_max_wimm_dest = 0xFFFF;
    remote.wire_ext = dev.ue->config().engine.wire_ext;  // MRC_WIRE_EXT (D45)
    // A connection set up out of band by this implementation on both sides (vendor_cfg.hpp):
    // authentication keys and the wire-extension agreement of the two sides' announcements.
    mrc::api::VendorCfg vc;
    if (mrc::api::decode_vendor_cfg(qp.mrc.vendor_cfg, vc) == mrc::api::VendorCfgParse::kOk) {
      if (vc.flags & mrc::api::kVcAuth) {
        remote.auth.on = true;
        remote.auth.tx = vc.tx_key;
        remote.auth.rx = vc.rx_key;
      }
      if (vc.flags & mrc::api::kVcWireExtSet) remote.wire_ext = (vc.flags & mrc::api::kVcWireExtOn) != 0;
    }
    dev.ue->execute([&](eng::Endpoint& ep) {
      rc = ep.reconfigure_qp(qp.qpn, qp.cfg);
      if (rc == 0) rc = ep.modify_to_rtr(qp.qpn, remote, now);
    });
    if (rc == 0) qp.dest_qpn.store(qp.ib.dest_qp_num);
  } else if (cur == IBV_QPS_RTR) {
    dev.ue->execute([&](eng::Endpoint& ep) {
      rc = ep.reconfigure_qp(qp.qpn, qp.cfg);
      if (rc == 0) rc = ep.modify_to_rts(qp.qpn, qp.ib.sq_psn, now);
    });
  }
  if (rc != 0) return restore(rc);
  qp.state.store(next);
  return 0;
}

void release_refs(mrc_qp& qp) {
  if (qp.profiles_held)
    qp.ctx->device->profiles.release(qp.mrc.profile.ev_profile_id, qp.mrc.profile.cc_profile_id);
  if (qp.mrc.qp_hint) --qp.mrc.qp_hint->qps;
  --qp.init.send_cq->qps;
  --qp.init.recv_cq->qps;
  --mrc::api::pd_of(qp.init.pd)->users;
}

}  // namespace

extern "C" {

mrc_qp* mrc_create_qp(mrc_context* ctx, mrc_qp_init_attr* a) {
  auto refuse = [](int e) -> mrc_qp* {
    errno = e;
    return nullptr;
  };
  if (ctx == nullptr || a == nullptr || a->send_cq == nullptr || a->recv_cq == nullptr || a->pd == nullptr)
    return refuse(EINVAL);
  if (ctx->device == nullptr || a->send_cq->ev_cq != nullptr || a->recv_cq->ev_cq != nullptr)
    return refuse(EINVAL);
  if (a->send_cq->ctx != ctx || a->recv_cq->ctx != ctx || mrc::api::device_of(a->pd->context) != ctx->device)
    return refuse(EINVAL);
  if (a->cap.max_send_wr > kMaxWr || a->cap.max_recv_wr > kMaxWr || a->cap.max_send_sge > 1 ||
      a->cap.max_recv_sge > 1 || a->cap.max_inline_data != 0)
    return refuse(EINVAL);
  if ((a->send_ops_flags & ~(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)) != 0)
    return refuse(EINVAL);
  // Read as the integer it is: a C caller can store any value in the enum, and loading one outside
  // its enumerators through the C++ enum type is undefined (UBSan: "invalid value for type").
  std::underlying_type_t<mrc_protocol_version> version;
  std::memcpy(&version, &a->protocol_version, sizeof version);
  if (version != MRC_PROTOCOL_VERSION_0 && version != MRC_PROTOCOL_VERSION_1) return refuse(EINVAL);
  auto qp = std::make_unique<mrc_qp>();
  qp->ctx = ctx;
  qp->init = *a;
  qp->ib.cap = a->cap;
  qp->ib.path_mtu = IBV_MTU_4096;
  qp->ib.port_num = 1;
  mrc_device& dev = *ctx->device;
  qp->cfg.sq_depth = std::max<std::uint32_t>(1, a->cap.max_send_wr);
  qp->cfg.rq_depth = std::max<std::uint32_t>(1, a->cap.max_recv_wr);
  qp->cfg.seed = dev.ue->config().engine.seed;
  // Placeholder EV set until INIT brings the QP's EV profile.
  qp->cfg.evs = {eng::Ev{0, 0}};
  std::lock_guard<std::mutex> lk(dev.mu);
  int err = 0;
  dev.ue->execute([&](eng::Endpoint& ep) {
    qp->qpn = ep.create_qp(qp->cfg, &err);
    if (qp->qpn != 0) ctx->qps.emplace(qp->qpn, qp.get());
  });
  if (qp->qpn == 0) return refuse(err != 0 ? err : ENOMEM);
  ++a->send_cq->qps;
  ++a->recv_cq->qps;
  ++mrc::api::pd_of(a->pd)->users;
  return qp.release();
}

int mrc_destroy_qp(mrc_qp* qp) {
  if (qp == nullptr) return fail(EINVAL);
  mrc_device& dev = *qp->ctx->device;
  std::lock_guard<std::mutex> lk(dev.mu);
  if (qp->async_unacked.load() != 0) return fail(EBUSY);
  dev.ue->execute([&](eng::Endpoint& ep) {
    ep.destroy_qp(qp->qpn);
    qp->ctx->qps.erase(qp->qpn);
  });
  release_refs(*qp);
  delete qp;
  return 0;
}

int mrc_query_qp(mrc_qp* qp, ibv_qp_attr* vattr, int vattr_mask, mrc_qp_attr* mattr, int mrc_attr_mask,
                 mrc_qp_init_attr* init_attr) {
  const auto vmask = static_cast<std::uint32_t>(vattr_mask);
  const auto mmask = static_cast<std::uint32_t>(mrc_attr_mask);
  if (qp == nullptr || (vmask & ~kIbKnown) || (mmask & ~kMrcKnown) || (vmask != 0 && vattr == nullptr) ||
      (mmask != 0 && mattr == nullptr))
    return fail(EINVAL);
  mrc_device& dev = *qp->ctx->device;
  std::lock_guard<std::mutex> lk(dev.mu);
  bool engine_error = false;
  dev.ue->execute([&](eng::Endpoint& ep) { engine_error = ep.qp_state(qp->qpn) == eng::QpState::kError; });
  if (vattr) {
    *vattr = qp->ib;
    vattr->qp_state = engine_error ? IBV_QPS_ERR : current_state(*qp);
    vattr->cur_qp_state = vattr->qp_state;
  }
  if (mattr) *mattr = qp->mrc;
  if (init_attr) *init_attr = qp->init;
  return 0;
}

int mrc_modify_qp(mrc_qp* qp, ibv_qp_attr* vattr, int vattr_mask, mrc_qp_attr* mattr, int mrc_attr_mask) {
  if (qp == nullptr) return fail(EINVAL);
  std::lock_guard<std::mutex> lk(qp->ctx->device->mu);
  const int rc = modify(*qp, vattr, static_cast<std::uint32_t>(vattr_mask), mattr,
                        static_cast<std::uint32_t>(mrc_attr_mask));
  return rc == 0 ? 0 : fail(rc);
}

int mrc_get_qpn(mrc_qp* qp, uint32_t* qpn) {
  if (qp == nullptr || qpn == nullptr) return fail(EINVAL);
  *qpn = qp->qpn;
  return 0;
}

int mrc_post_send(mrc_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  constexpr unsigned kFlags = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
  for (ibv_send_wr* w = wr;; w = w->next) {
    auto refuse = [&](int e) {
      if (bad_wr) *bad_wr = w;
      return fail(e);
    };
    if (qp == nullptr || w == nullptr) return w == wr ? refuse(EINVAL) : 0;
    // In ERR the WR is taken and completes with MRC_WC_WR_FLUSH_ERR (verbs; UdpEndpoint::post_send).
    const ibv_qp_state st = current_state(*qp);
    if (st != IBV_QPS_RTS && st != IBV_QPS_ERR) return refuse(EINVAL);
    const bool imm = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (w->opcode != IBV_WR_RDMA_WRITE && !imm) return refuse(EINVAL);
    const std::uint64_t ops = qp->init.send_ops_flags;
    if (ops != 0 && !(ops & (imm ? IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM : IBV_QP_EX_WITH_RDMA_WRITE)))
      return refuse(EINVAL);
    if (w->num_sge < 0 || w->num_sge > 1 || (w->num_sge == 1 && w->sg_list == nullptr) ||
        (w->send_flags & ~kFlags) != 0)
      return refuse(EINVAL);
    eng::SendWr s;
    s.wr_id = w->wr_id;
    s.with_imm = imm;
    s.imm = ntohl(w->imm_data);
    s.signaled = qp->init.sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED);
    if (w->num_sge == 1) {
      s.local_addr = w->sg_list[0].addr;
      s.length = w->sg_list[0].length;
      s.lkey = w->sg_list[0].lkey;
    }
    s.remote_addr = w->wr.rdma.remote_addr;
    s.rkey = w->wr.rdma.rkey;
    const int rc = qp->ctx->device->ue->post_send(qp->qpn, s);
    if (rc != 0) return refuse(rc == EAGAIN ? ENOMEM : rc);
  }
}

int mrc_post_recv(mrc_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  for (ibv_recv_wr* w = wr;; w = w->next) {
    auto refuse = [&](int e) {
      if (bad_wr) *bad_wr = w;
      return fail(e);
    };
    if (qp == nullptr || w == nullptr) return w == wr ? refuse(EINVAL) : 0;
    if (current_state(*qp) == IBV_QPS_RESET) return refuse(EINVAL);  // in ERR: completes flushed
    if (w->num_sge < 0 || w->num_sge > 1) return refuse(EINVAL);
    const int rc = qp->ctx->device->ue->post_recv(qp->qpn, w->wr_id);
    if (rc != 0) return refuse(rc == EAGAIN ? ENOMEM : rc);
  }
}

}  // extern "C"
