// mrc.h: completion channels, CQs and QP hints.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "api/ctl.hpp"
#include "api/objects.hpp"

using mrc::api::fail;

namespace {
constexpr std::uint32_t kMaxCqe = 1u << 20;
constexpr std::uint32_t kMaxQpHints = 1024;
constexpr std::uint32_t kHintMask = MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
                                    MRC_QP_HINT_NUM_REMOTE_RECV_PEERS |
                                    static_cast<std::uint32_t>(MRC_QP_HINT_VENDOR_CFG);

void copy_hint(mrc_qp_hint_attr& to, const mrc_qp_hint_attr& from, std::uint32_t mask) {
  if (mask & MRC_QP_HINT_NUM_QPS_PER_PEER) to.num_qps_per_peer = from.num_qps_per_peer;
  if (mask & MRC_QP_HINT_NUM_SEND_PEERS) to.num_send_peers = from.num_send_peers;
  if (mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS) to.num_remote_recv_peers = from.num_remote_recv_peers;
  if (mask & MRC_QP_HINT_VENDOR_CFG) std::memcpy(to.vendor_cfg, from.vendor_cfg, sizeof to.vendor_cfg);
}
}  // namespace

extern "C" {

int mrc_create_comp_channel(mrc_context* ctx, mrc_comp_channel** channel) {
  if (ctx == nullptr || channel == nullptr) return fail(EINVAL);
  auto ch = std::make_unique<mrc_comp_channel>();
  ch->ctx = ctx;
  ch->fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ch->fd < 0) return -1;
  if (ctx->device == nullptr) {
    ::close(ch->fd);
    return fail(EINVAL);
  }
  std::lock_guard<std::mutex> lk(ctx->device->mu);
  ++ctx->channels;
  *channel = ch.release();
  return 0;
}

int mrc_get_comp_channel_fd(mrc_comp_channel* channel, int* fd) {
  if (channel == nullptr || fd == nullptr) return fail(EINVAL);
  *fd = channel->fd;
  return 0;
}

int mrc_destroy_comp_channel(mrc_comp_channel* channel) {
  if (channel == nullptr) return fail(EINVAL);
  mrc_context* ctx = channel->ctx;
  std::lock_guard<std::mutex> lk(ctx->device->mu);
  if (channel->cqs != 0) return fail(EBUSY);
  --ctx->channels;
  ::close(channel->fd);
  delete channel;
  return 0;
}

mrc_cq* mrc_create_cq(mrc_context* ctx, int cqe, void* cq_context, mrc_comp_channel* channel,
                      int comp_vector) {
  if (ctx == nullptr || ctx->device == nullptr || cqe <= 0 || static_cast<std::uint32_t>(cqe) > kMaxCqe ||
      comp_vector != 0 || (channel != nullptr && channel->ctx != ctx)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* cq = new (std::nothrow) mrc_cq(static_cast<std::uint32_t>(cqe));
  if (cq == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  cq->ctx = ctx;
  cq->cq_context = cq_context;
  cq->channel = channel;
  std::lock_guard<std::mutex> lk(ctx->device->mu);
  ++ctx->cqs;
  if (channel) ++channel->cqs;
  return cq;
}

int mrc_destroy_cq(mrc_cq* cq) {
  if (cq == nullptr) return fail(EINVAL);
  mrc_context* ctx = cq->ctx;
  if (cq->ev_cq != nullptr) {  // an EV event CQ of the controller API
    if (const int rc = mrc_ctl_destroy_ev_event_cq(cq->ev_cq); rc != 0) return fail(rc);
    --ctx->cqs;
    delete cq;
    return 0;
  }
  std::lock_guard<std::mutex> lk(ctx->device->mu);
  if (cq->qps != 0 || cq->unacked.load() != 0 || cq->async_unacked.load() != 0) return fail(EBUSY);
  if (cq->channel) {
    std::lock_guard<std::mutex> clk(cq->channel->mu);
    // A fired event not yet fetched must not hand out a dangling CQ.
    std::erase(cq->channel->fired, cq);
    --cq->channel->cqs;
  }
  --ctx->cqs;
  delete cq;
  return 0;
}

int mrc_poll_cq(mrc_cq* cq, int num_entries, ibv_wc* wc) {
  if (cq == nullptr || cq->ev_cq != nullptr || num_entries < 0 || (num_entries > 0 && wc == nullptr))
    return fail(EINVAL);
  std::lock_guard<std::mutex> lk(cq->poll_mu);
  int n = 0;
  while (n < num_entries && cq->ring.pop(wc[n])) {
    cq->count.fetch_sub(1, std::memory_order_release);
    ++n;
  }
  if (n == 0 && cq->overrun.load(std::memory_order_acquire)) return fail(EOVERFLOW);
  return n;
}

int mrc_req_notify_cq(mrc_cq* cq, int solicited_only) {
  (void)solicited_only;
  if (cq == nullptr || cq->ev_cq != nullptr || cq->channel == nullptr) return fail(EINVAL);
  cq->armed.store(true);
  return 0;
}

int mrc_get_cq_event(mrc_comp_channel* channel, mrc_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) return fail(EINVAL);
  for (;;) {
    std::uint64_t v = 0;
    if (::read(channel->fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return -1;  // errno from read
    std::lock_guard<std::mutex> lk(channel->mu);
    // Empty only when the fired CQ was destroyed before its event was fetched.
    if (channel->fired.empty()) continue;
    mrc_cq* c = channel->fired.front();
    channel->fired.pop_front();
    c->unacked.fetch_add(1);
    *cq = c;
    *cq_context = c->cq_context;
    return 0;
  }
}

void mrc_ack_cq_events(mrc_cq* cq, unsigned int nevents) {
  if (cq != nullptr) mrc::api::ack(cq->unacked, nevents);
}

mrc_qp_hint* mrc_create_qp_hint(mrc_context* ctx, mrc_qp_hint_init_attr* init_attr) {
  if (ctx == nullptr || ctx->device == nullptr || init_attr == nullptr ||
      init_attr->attr.num_qps_per_peer < 0 || init_attr->attr.num_send_peers < 0 ||
      init_attr->attr.num_remote_recv_peers < 0) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(ctx->device->mu);
  if (ctx->hints >= kMaxQpHints) {
    errno = ENOMEM;
    return nullptr;
  }
  auto* h = new mrc_qp_hint;
  h->ctx = ctx;
  h->attr = init_attr->attr;
  ++ctx->hints;
  return h;
}

int mrc_query_qp_hint(mrc_qp_hint* hint, mrc_qp_hint_attr* attr, int qp_hint_attr_mask) {
  const auto attr_mask = static_cast<std::uint32_t>(qp_hint_attr_mask);
  if (hint == nullptr || attr == nullptr || (attr_mask & ~kHintMask) != 0) return fail(EINVAL);
  std::lock_guard<std::mutex> lk(hint->ctx->device->mu);
  copy_hint(*attr, hint->attr, attr_mask);
  return 0;
}

int mrc_modify_qp_hint(mrc_qp_hint* hint, mrc_qp_hint_attr* attr, int qp_hint_attr_mask) {
  const auto attr_mask = static_cast<std::uint32_t>(qp_hint_attr_mask);
  if (hint == nullptr || attr == nullptr || attr_mask == 0 || (attr_mask & ~kHintMask) != 0 ||
      attr->num_qps_per_peer < 0 || attr->num_send_peers < 0 || attr->num_remote_recv_peers < 0)
    return fail(EINVAL);
  std::lock_guard<std::mutex> lk(hint->ctx->device->mu);
  copy_hint(hint->attr, *attr, attr_mask);
  return 0;
}

int mrc_destroy_qp_hint(mrc_qp_hint* hint) {
  if (hint == nullptr) return fail(EINVAL);
  mrc_context* ctx = hint->ctx;
  std::lock_guard<std::mutex> lk(ctx->device->mu);
  if (hint->qps != 0) return fail(EBUSY);
  --ctx->hints;
  delete hint;
  return 0;
}

}  // extern "C"
