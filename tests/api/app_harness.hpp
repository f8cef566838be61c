// Helpers for the application-API conformance tests: a device + context + PD + CQ + QP "side",
// the attribute sets each transition requires, and connecting two sides on loopback.
// Every test uses its own 127.<plane>.<net>.<host> addresses so the tests can run in parallel.
#pragma once
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mrc/mrc.h"

namespace mrc_app_test {

/// "127.0.<net>.<host>,127.1.<net>.<host>,..." for `planes` planes.
inline std::string spec(int net, int host, int planes = 2) {
  std::string s;
  for (int p = 0; p < planes; ++p) {
    if (p) s += ",";
    s += "127." + std::to_string(p) + "." + std::to_string(net) + "." + std::to_string(host);
  }
  return s;
}

constexpr std::uint32_t kInitIb = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
constexpr std::uint32_t kInitMrc = MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID;
constexpr std::uint32_t kRtrIb = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
constexpr std::uint32_t kRtrMrc = MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP;
constexpr std::uint32_t kRtsIb = IBV_QP_STATE | IBV_QP_SQ_PSN;
constexpr std::uint32_t kRtsMrc = MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT;

/// Connection data one side gives the other out of band.
struct Remote {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::uint16_t port = 0;
  std::vector<ibv_gid> gids;
};

struct Side {
  ibv_context* dev = nullptr;
  mrc_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  mrc_comp_channel* ch = nullptr;
  mrc_cq* cq = nullptr;
  mrc_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<std::uint8_t> buf;
  std::uint32_t psn = 0;

  /// Opens everything up to a QP in RESET. `cqe` sizes the one CQ (send and receive).
  void open(const std::string& device, std::size_t bytes = 1 << 16, int cqe = 256, bool channel = false,
            std::uint32_t ctx_flags = 0) {
    dev = mrc_open_device_str(device.c_str());
    ASSERT_NE(dev, nullptr) << device << ": " << std::strerror(errno);
    mrc_context_attr ca{};
    ctx = mrc_create_context_ex(dev, &ca, ctx_flags);
    ASSERT_NE(ctx, nullptr);
    pd = ibv_alloc_pd(dev);
    ASSERT_NE(pd, nullptr);
    buf.assign(bytes, 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr);
    if (channel) {
      ASSERT_EQ(mrc_create_comp_channel(ctx, &ch), 0);
    }
    cq = mrc_create_cq(ctx, cqe, this, ch, 0);
    ASSERT_NE(cq, nullptr);
    qp = mrc_create_qp(ctx, init_attr());
    ASSERT_NE(qp, nullptr);
  }
  mrc_qp_init_attr* init_attr() {
    static thread_local mrc_qp_init_attr a;
    a = mrc_qp_init_attr{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.pd = pd;
    a.cap.max_send_wr = 64;
    a.cap.max_recv_wr = 64;
    a.cap.max_send_sge = 1;
    a.protocol_version = MRC_PROTOCOL_VERSION_1;
    return &a;
  }
  Remote remote() const {
    Remote r;
    EXPECT_EQ(mrc_get_qpn(qp, &r.qpn), 0);
    r.psn = psn;
    EXPECT_EQ(mrc_query_udp_port(dev, &r.port), 0);
    ibv_device_attr da{};
    EXPECT_EQ(ibv_query_device(dev, &da), 0);
    r.gids.resize(da.phys_port_cnt);
    for (std::uint32_t p = 0; p < da.phys_port_cnt; ++p)
      EXPECT_EQ(ibv_query_gid(dev, static_cast<std::uint8_t>(p + 1), 0, &r.gids[p]), 0);
    return r;
  }
  /// Makes a peer's planes known to this device (an address vector names it by one GID).
  void learn(const Remote& r) const {
    mrc_peer_attr p{};
    p.num_planes = static_cast<std::uint32_t>(r.gids.size());
    for (std::size_t i = 0; i < r.gids.size(); ++i) p.plane_gid[i] = r.gids[i];
    p.udp_port = r.port;
    EXPECT_EQ(mrc_add_peer(dev, &p), 0) << std::strerror(errno);
  }
  void close() {
    if (qp) {
      EXPECT_EQ(mrc_destroy_qp(qp), 0) << std::strerror(errno);
    }
    if (cq) {
      EXPECT_EQ(mrc_destroy_cq(cq), 0) << std::strerror(errno);
    }
    if (ch) {
      EXPECT_EQ(mrc_destroy_comp_channel(ch), 0);
    }
    if (mr) {
      EXPECT_EQ(ibv_dereg_mr(mr), 0);
    }
    if (pd) {
      EXPECT_EQ(ibv_dealloc_pd(pd), 0);
    }
    if (ctx) {
      EXPECT_EQ(mrc_destroy_context(ctx), 0) << std::strerror(errno);
    }
    if (dev) {
      EXPECT_EQ(ibv_close_device(dev), 0);
    }
    *this = Side{};
  }
};

/// The attributes of each transition (everything required, valid values).
struct Attrs {
  ibv_qp_attr v{};
  mrc_qp_attr m{};
};

inline Attrs init_attrs() {
  Attrs a;
  a.v.qp_state = IBV_QPS_INIT;
  a.v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  return a;
}

inline Attrs rtr_attrs(const Remote& r) {
  Attrs a;
  a.v.qp_state = IBV_QPS_RTR;
  a.v.path_mtu = IBV_MTU_4096;
  a.v.dest_qp_num = r.qpn;
  a.v.rq_psn = r.psn;
  a.v.ah_attr.is_global = 1;
  a.v.ah_attr.port_num = 1;
  if (!r.gids.empty()) a.v.ah_attr.grh.dgid = r.gids[0];
  a.m.mpr.mpr_dest = 8;
  a.m.wimm.max_wimm_dest = 64;
  return a;
}

/// RTO 1.024 us * 2^18 = 268 ms by default: sanitizer builds on a loaded machine stall for tens of
/// ms, and spurious timeouts would only make the tests slower and noisier.
inline Attrs rts_attrs(std::uint32_t sq_psn, std::uint8_t timeout = 18) {
  Attrs a;
  a.v.qp_state = IBV_QPS_RTS;
  a.v.sq_psn = sq_psn;
  a.m.mpr.mpr = 8;
  a.m.wimm.max_wimm = 64;
  a.m.retry.linear_cnt = 7;
  a.m.retry.exp_cnt = 8;  // finite: a lost peer ends in RETRY_EXC_ERR, never a hung test
  a.m.timeout = timeout;
  return a;
}

inline int to_init(mrc_qp* qp) {
  Attrs a = init_attrs();
  return mrc_modify_qp(qp, &a.v, kInitIb, &a.m, kInitMrc);
}
inline int to_rtr(mrc_qp* qp, const Remote& r) {
  Attrs a = rtr_attrs(r);
  return mrc_modify_qp(qp, &a.v, kRtrIb, &a.m, kRtrMrc);
}
inline int to_rts(mrc_qp* qp, std::uint32_t sq_psn, std::uint8_t timeout = 18) {
  Attrs a = rts_attrs(sq_psn, timeout);
  return mrc_modify_qp(qp, &a.v, kRtsIb, &a.m, kRtsMrc);
}

inline ibv_qp_state state_of(mrc_qp* qp) {
  ibv_qp_attr v{};
  EXPECT_EQ(mrc_query_qp(qp, &v, IBV_QP_STATE, nullptr, 0, nullptr), 0);
  return v.qp_state;
}

/// Connects a <-> b (RESET -> RTS on both).
inline void connect(Side& a, Side& b) {
  a.psn = 0x1000;
  b.psn = 0xFFFF00;  // wraps the 24-bit PSN space early
  const Remote ra = a.remote(), rb = b.remote();
  a.learn(rb);
  b.learn(ra);
  ASSERT_EQ(to_init(a.qp), 0) << std::strerror(errno);
  ASSERT_EQ(to_init(b.qp), 0);
  ASSERT_EQ(to_rtr(a.qp, rb), 0) << std::strerror(errno);
  ASSERT_EQ(to_rtr(b.qp, ra), 0);
  ASSERT_EQ(to_rts(a.qp, a.psn), 0) << std::strerror(errno);
  ASSERT_EQ(to_rts(b.qp, b.psn), 0);
}

inline ibv_send_wr write_wr(ibv_sge& sge, const Side& from, std::size_t off, std::uint32_t len,
                            const Side& to, std::size_t remote_off, std::uint64_t id, bool imm,
                            std::uint32_t imm_host = 0) {
  sge.addr = reinterpret_cast<std::uint64_t>(from.buf.data() + off);
  sge.length = len;
  sge.lkey = from.mr->lkey;
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm_host);
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uint64_t>(to.buf.data() + remote_off);
  wr.wr.rdma.rkey = to.mr->rkey;
  return wr;
}

inline int post_recv(mrc_qp* qp, std::uint64_t id) {
  ibv_recv_wr wr{};
  wr.wr_id = id;
  ibv_recv_wr* bad = nullptr;
  return mrc_post_recv(qp, &wr, &bad);
}

/// Polls until `n` completions arrived, for at most 30 s: a completion that never comes is a
/// failure the test reports, not a hang of the whole run.
inline std::vector<ibv_wc> poll_n(Side& s, std::size_t n, mrc_context* drive = nullptr) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<ibv_wc> out;
  while (out.size() < n) {
    if (std::chrono::steady_clock::now() > limit) {
      ADD_FAILURE() << "poll_n: " << out.size() << " of " << n << " completions after 30 s";
      break;
    }
    ibv_wc wc[16];
    if (drive) mrc_progress(drive, 1);
    const int k = mrc_poll_cq(s.cq, 16, wc);
    if (k < 0) {
      ADD_FAILURE() << "poll_cq: " << std::strerror(errno);
      break;
    }
    out.insert(out.end(), wc, wc + k);
  }
  return out;
}

inline bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

}  // namespace mrc_app_test
