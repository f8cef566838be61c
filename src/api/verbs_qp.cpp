// The verbs CQ, QP and completion-event calls over libmrc's software devices (D52), so an
// unmodified libibverbs program (`mrc exec`, D53) runs over MRC: an ibv_cq wraps an mrc_cq, an
// RC ibv_qp an mrc_qp, and the context's ops (which the static inline ibv_poll_cq, ibv_post_send,
// ibv_post_recv and ibv_req_notify_cq of <infiniband/verbs.h> call) reach mrc_poll_cq and
// mrc_post_send. The mrc_context behind them is the application's own if it made one
// (mrc_create_context) or one made here at the first CQ. Objects of other devices go to the real
// libibverbs.
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "api/objects.hpp"
#include "api/verbs.hpp"

namespace {

using mrc::api::VerbsChannel;
using mrc::api::VerbsCq;
using mrc::api::VerbsQp;

/// RC attributes that mean nothing for an MRC QP, which does no RDMA READ or atomics and never
/// answers RNR: accepted and ignored, as a verbs provider without those features would.
constexpr int kIgnoredRcAttrs = IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

mrc_device* ours(ibv_context* c) {
  return mrc::api::device_of(c);
}

VerbsCq* cq_of(ibv_cq* cq) {
  return reinterpret_cast<VerbsCq*>(cq);
}
VerbsQp* qp_of(ibv_qp* qp) {
  return reinterpret_cast<VerbsQp*>(qp);
}

/// The device's mrc_context: the application's, or one made for the verbs calls.
mrc_context* context_for(mrc_device& d) {
  {
    std::lock_guard<std::mutex> lk(d.mu);
    if (d.ctx != nullptr) return d.ctx;
  }
  mrc_context* c = mrc_create_context(&d.vctx.ibv, nullptr);
  if (c != nullptr) {
    std::lock_guard<std::mutex> lk(d.mu);
    d.ctx_by_verbs = true;
  } else if (errno == EBUSY) {  // another thread made it first
    std::lock_guard<std::mutex> lk(d.mu);
    c = d.ctx;
  }
  return c;
}

// ---- the context ops ----
int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  const int r = mrc_poll_cq(cq_of(cq)->mrc, n, wc);
  // A verbs program busy-polls an empty CQ; the completions it waits for come from this
  // process's progress thread, which then shares a core with the poller.
  if (r == 0) sched_yield();
  return r >= 0 ? r : -errno;
}
int op_req_notify_cq(ibv_cq* cq, int solicited_only) {
  return mrc_req_notify_cq(cq_of(cq)->mrc, solicited_only) == 0 ? 0 : errno;
}
int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  // mrc_post_send refuses every opcode but RDMA WRITE [WITH_IMM] (EINVAL, *bad = that WR) and
  // IBV_SEND_INLINE (the QP offers no inline data: max_inline_data is 0).
  return mrc_post_send(qp_of(qp)->mrc, wr, bad) == 0 ? 0 : errno;
}
int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return mrc_post_recv(qp_of(qp)->mrc, wr, bad) == 0 ? 0 : errno;
}
int op_post_srq_recv(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (bad) *bad = wr;
  return EOPNOTSUPP;  // no SRQ is ever made (ibv_create_srq fails)
}
ibv_mw* op_alloc_mw(ibv_pd*, ibv_mw_type) {
  errno = EOPNOTSUPP;
  return nullptr;
}
int op_bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*) {
  return EOPNOTSUPP;
}
int op_dealloc_mw(ibv_mw*) {
  return EOPNOTSUPP;
}

/// The mrc channel behind a verbs channel, made on first use in `ctx`.
mrc_comp_channel* channel_for(VerbsChannel& ch, mrc_context& ctx) {
  std::lock_guard<std::mutex> lk(ctx.device->mu);
  if (ch.mrc == nullptr) {
    auto* m = new (std::nothrow) mrc_comp_channel;
    if (m == nullptr) return nullptr;
    m->ctx = &ctx;
    m->fd = ch.ibv.fd;  // an EFD_SEMAPHORE eventfd (ibv_create_comp_channel)
    ++ctx.channels;
    ch.mrc = m;
  }
  return ch.mrc->ctx == &ctx ? ch.mrc : nullptr;
}

std::uint32_t interface_mtu(const mrc::io::IpAddr& a) {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return 0;
  std::uint32_t mtu = 0;
  for (ifaddrs* i = all; i != nullptr && mtu == 0; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != a.family) continue;
    const void* raw =
        a.family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    if (std::memcmp(raw, a.bytes.data(), a.family == AF_INET ? 4 : 16) != 0) continue;
    ifreq r{};
    std::snprintf(r.ifr_name, sizeof r.ifr_name, "%s", i->ifa_name);
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::ioctl(fd, SIOCGIFMTU, &r) == 0 && r.ifr_mtu > 0)
      mtu = static_cast<std::uint32_t>(r.ifr_mtu);
    if (fd >= 0) ::close(fd);
  }
  ::freeifaddrs(all);
  return mtu;
}

}  // namespace

void mrc::api::set_verbs_ops(ibv_context& c) {
  c.ops.poll_cq = op_poll_cq;
  c.ops.req_notify_cq = op_req_notify_cq;
  c.ops.post_send = op_post_send;
  c.ops.post_recv = op_post_recv;
  c.ops.post_srq_recv = op_post_srq_recv;
  c.ops.alloc_mw = op_alloc_mw;
  c.ops.bind_mw = op_bind_mw;
  c.ops.dealloc_mw = op_dealloc_mw;
}

void mrc::api::release_verbs_context(mrc_device& d) {
  mrc_context* c = nullptr;
  {
    std::lock_guard<std::mutex> lk(d.mu);
    if (!d.ctx_by_verbs) return;
    c = d.ctx;
  }
  if (c != nullptr && mrc_destroy_context(c) == 0) {
    std::lock_guard<std::mutex> lk(d.mu);
    d.ctx_by_verbs = false;
  }
}

ibv_mtu mrc::api::fitting_mtu(mrc_device& d) {
  // UDP endpoint datagrams carry IP + UDP + BTH and MRC extension headers + ICRC around the
  // payload; 128 bytes covers the largest (IPv6, SRv6-free) with room to spare.
  constexpr std::uint32_t kOverhead = 128;
  int mtu = IBV_MTU_4096;
  for (std::uint32_t p = 0; p < d.ue->num_planes(); ++p) {
    const std::uint32_t link = interface_mtu(d.ue->config().planes[p]);
    if (link == 0) continue;  // no interface holds it (a test double): no limit known
    while (mtu > IBV_MTU_256 && (128u << mtu) + kOverhead > link) --mtu;
  }
  return static_cast<ibv_mtu>(mtu);
}

void* mrc::api::real_verbs(const char* name, const char* version) {
  return ::dlvsym(RTLD_NEXT, name, version);
}

extern "C" {

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  mrc_device* d = ours(context);
  if (d == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_create_cq, "IBVERBS_1.1");
    if (real == nullptr) {
      errno = context == nullptr ? EINVAL : ENODEV;
      return nullptr;
    }
    return real(context, cqe, cq_context, channel, comp_vector);
  }
  if (channel != nullptr && channel->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  mrc_context* ctx = context_for(*d);
  if (ctx == nullptr) return nullptr;
  mrc_comp_channel* mch = nullptr;
  if (channel != nullptr && (mch = channel_for(*reinterpret_cast<VerbsChannel*>(channel), *ctx)) == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto* v = new (std::nothrow) VerbsCq{};
  if (v == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  // The mrc CQ's context is the verbs CQ: ibv_get_cq_event hands that back.
  v->mrc = mrc_create_cq(ctx, cqe, v, mch, comp_vector);
  if (v->mrc == nullptr) {
    delete v;
    return nullptr;
  }
  v->ibv.context = context;
  v->ibv.channel = channel;
  v->ibv.cq_context = cq_context;
  v->ibv.cqe = cqe;
  pthread_mutex_init(&v->ibv.mutex, nullptr);
  pthread_cond_init(&v->ibv.cond, nullptr);
  if (channel != nullptr) ++channel->refcnt;
  return &v->ibv;
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (cq == nullptr) return EINVAL;
  if (ours(cq->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_destroy_cq, "IBVERBS_1.1");
    return real != nullptr ? real(cq) : EINVAL;
  }
  VerbsCq* v = cq_of(cq);
  if (mrc_destroy_cq(v->mrc) != 0) return errno;
  if (cq->channel != nullptr) --cq->channel->refcnt;
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete v;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) {
    errno = EINVAL;
    return -1;
  }
  if (ours(channel->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_get_cq_event, "IBVERBS_1.1");
    if (real == nullptr) {
      errno = EINVAL;
      return -1;
    }
    return real(channel, cq, cq_context);
  }
  auto* ch = reinterpret_cast<VerbsChannel*>(channel);
  if (ch->mrc == nullptr) {  // no CQ uses it yet: wait on the eventfd like any other
    errno = EINVAL;
    return -1;
  }
  mrc_cq* m = nullptr;
  void* v = nullptr;
  if (mrc_get_cq_event(ch->mrc, &m, &v) != 0) return -1;
  *cq = &static_cast<VerbsCq*>(v)->ibv;
  *cq_context = (*cq)->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (cq == nullptr) return;
  if (ours(cq->context) == nullptr) {
    if (auto* real = MRC_REAL_VERBS(ibv_ack_cq_events, "IBVERBS_1.1")) real(cq, nevents);
    return;
  }
  mrc_ack_cq_events(cq_of(cq)->mrc, nevents);
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (pd == nullptr || attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (ours(pd->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_create_qp, "IBVERBS_1.1");
    if (real == nullptr) {
      errno = ENODEV;
      return nullptr;
    }
    return real(pd, attr);
  }
  // An MRC QP is reliable-connected; UD, UC, XRC and SRQs have no MRC counterpart.
  if (attr->qp_type != IBV_QPT_RC || attr->srq != nullptr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (attr->send_cq == nullptr || attr->recv_cq == nullptr || attr->send_cq->context != pd->context ||
      attr->recv_cq->context != pd->context) {
    errno = EINVAL;
    return nullptr;
  }
  mrc_device* d = ours(pd->context);
  mrc_context* ctx = context_for(*d);
  if (ctx == nullptr) return nullptr;
  mrc_qp_init_attr m{};
  m.qp_context = attr->qp_context;
  m.send_cq = cq_of(attr->send_cq)->mrc;
  m.recv_cq = cq_of(attr->recv_cq)->mrc;
  m.cap = attr->cap;
  m.sq_sig_all = attr->sq_sig_all;
  m.pd = pd;
  m.protocol_version = MRC_PROTOCOL_VERSION_1;
  auto* v = new (std::nothrow) VerbsQp{};
  if (v == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  // EINVAL for caps beyond one SGE, or any inline data (ibv_query_device says max_sge = 1).
  v->mrc = mrc_create_qp(ctx, &m);
  if (v->mrc == nullptr) {
    delete v;
    return nullptr;
  }
  v->ibv.context = pd->context;
  v->ibv.qp_context = attr->qp_context;
  v->ibv.pd = pd;
  v->ibv.send_cq = attr->send_cq;
  v->ibv.recv_cq = attr->recv_cq;
  v->ibv.handle = v->mrc->qpn;
  v->ibv.qp_num = v->mrc->qpn;
  v->ibv.state = IBV_QPS_RESET;
  v->ibv.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&v->ibv.mutex, nullptr);
  pthread_cond_init(&v->ibv.cond, nullptr);
  return &v->ibv;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  if (qp == nullptr) return EINVAL;
  mrc_device* d = ours(qp->context);
  if (d == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_modify_qp, "IBVERBS_1.1");
    return real != nullptr ? real(qp, attr, attr_mask) : EINVAL;
  }
  if (attr == nullptr) return EINVAL;
  ibv_qp_attr a = *attr;
  int mask = attr_mask & ~kIgnoredRcAttrs;
  // The path MTU the program picked from ibv_query_port, or the QP's default, capped to what the
  // planes' links carry: MRC datagrams are never fragmented.
  if ((mask & IBV_QP_STATE) && a.qp_state == IBV_QPS_RTR) {
    const ibv_mtu fit = mrc::api::fitting_mtu(*d);
    if (!(mask & IBV_QP_PATH_MTU) || a.path_mtu > fit) a.path_mtu = fit;
    mask |= IBV_QP_PATH_MTU;
  }
  if (mrc_modify_qp(qp_of(qp)->mrc, &a, mask, nullptr, 0) != 0) return errno;
  if (mask & IBV_QP_STATE) qp->state = a.qp_state;
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  if (qp == nullptr) return EINVAL;
  if (ours(qp->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_query_qp, "IBVERBS_1.1");
    return real != nullptr ? real(qp, attr, attr_mask, init_attr) : EINVAL;
  }
  if (attr == nullptr) return EINVAL;
  mrc_qp_init_attr m{};
  if (mrc_query_qp(qp_of(qp)->mrc, attr, attr_mask & ~kIgnoredRcAttrs, nullptr, 0, &m) != 0) return errno;
  if (init_attr != nullptr) {
    std::memset(init_attr, 0, sizeof *init_attr);
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->cap = m.cap;
    init_attr->qp_type = IBV_QPT_RC;
    init_attr->sq_sig_all = m.sq_sig_all;
  }
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  if (qp == nullptr) return EINVAL;
  if (ours(qp->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_destroy_qp, "IBVERBS_1.1");
    return real != nullptr ? real(qp) : EINVAL;
  }
  VerbsQp* v = qp_of(qp);
  if (mrc_destroy_qp(v->mrc) != 0) return errno;
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete v;
  return 0;
}

/// The extended-QP API (ibv_wr_*) needs an extended context, which the software device does not
/// have: NULL for its QPs.
ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  if (qp != nullptr && ours(qp->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_qp_to_qp_ex, "IBVERBS_1.6");
    if (real != nullptr) return real(qp);
  }
  errno = EOPNOTSUPP;
  return nullptr;
}

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (pd != nullptr && ours(pd->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_create_srq, "IBVERBS_1.1");
    if (real != nullptr) return real(pd, attr);
  }
  errno = pd == nullptr ? EINVAL : EOPNOTSUPP;
  return nullptr;
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (srq != nullptr && ours(srq->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_destroy_srq, "IBVERBS_1.1");
    if (real != nullptr) return real(srq);
  }
  return EINVAL;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (pd != nullptr && ours(pd->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_create_ah, "IBVERBS_1.1");
    if (real != nullptr) return real(pd, attr);
  }
  errno = pd == nullptr ? EINVAL : EOPNOTSUPP;  // address handles serve UD QPs only
  return nullptr;
}

int ibv_destroy_ah(ibv_ah* ah) {
  if (ah != nullptr && ours(ah->context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_destroy_ah, "IBVERBS_1.1");
    if (real != nullptr) return real(ah);
  }
  return EINVAL;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_size) {
  if (ours(context) == nullptr) {
    auto* real = MRC_REAL_VERBS(_ibv_query_gid_ex, "IBVERBS_1.11");
    return real != nullptr ? real(context, port_num, gid_index, entry, flags, entry_size) : EINVAL;
  }
  if (entry == nullptr || flags != 0 || entry_size < sizeof *entry || port_num > 0xFF ||
      gid_index > 0x7FFFFFFF)
    return EINVAL;
  ibv_gid gid{};
  if (ibv_query_gid(context, static_cast<std::uint8_t>(port_num), static_cast<int>(gid_index), &gid) != 0)
    return errno;
  static constexpr std::uint8_t kZero[16] = {};
  if (std::memcmp(gid.raw, kZero, sizeof kZero) == 0) return ENODATA;  // an empty table slot
  std::memset(entry, 0, sizeof *entry);
  entry->gid = gid;
  entry->gid_index = gid_index;
  entry->port_num = port_num;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries, uint32_t flags,
                             size_t entry_size) {
  if (ours(context) == nullptr) {
    auto* real = MRC_REAL_VERBS(_ibv_query_gid_table, "IBVERBS_1.11");
    return real != nullptr ? real(context, entries, max_entries, flags, entry_size) : -EINVAL;
  }
  if (flags != 0 || entry_size < sizeof(ibv_gid_entry) || (entries == nullptr && max_entries != 0))
    return -EINVAL;
  ibv_device_attr da{};
  if (ibv_query_device(context, &da) != 0) return -EINVAL;
  ibv_port_attr pa{};
  std::size_t n = 0;
  for (std::uint32_t port = 1; port <= da.phys_port_cnt; ++port) {
    if (ibv_query_port(context, static_cast<std::uint8_t>(port), &pa) != 0) return -EINVAL;
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
      ibv_gid_entry e{};
      if (_ibv_query_gid_ex(context, port, static_cast<std::uint32_t>(i), &e, 0, sizeof e) != 0) continue;
      if (n == max_entries) return -EINVAL;
      std::memcpy(reinterpret_cast<char*>(entries) + n * entry_size, &e, sizeof e);
      ++n;
    }
  }
  return static_cast<ssize_t>(n);
}

}  // extern "C"

extern "C" {

// libibverbs' private (provider) ABI, which ibv_devinfo calls for a RoCE port's GID types; the
// version is the one Debian's rdma-core 44 exports. `type` is enum ibv_gid_type_sysfs: 0 = IB /
// RoCE v1, 1 = RoCE v2.
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  if (ours(context) == nullptr) {
    auto* real = MRC_REAL_VERBS(ibv_query_gid_type, "IBVERBS_PRIVATE_34");
    return real != nullptr ? real(context, port_num, index, type) : EINVAL;
  }
  ibv_gid_entry e{};
  if (type == nullptr || index > 0x7FFFFFFF ||
      _ibv_query_gid_ex(context, port_num, index, &e, 0, sizeof e) != 0) {
    errno = EINVAL;
    return -1;
  }
  *type = 1;
  return 0;
}

}  // extern "C"
