// mrc_ctl.h's C functions: each resolves its mrc_context's controller handle (ctl.hpp) and calls
// the handle's overload, turning its errno value into OCP's -1 + errno.
#include <cerrno>

#include "api/ctl.hpp"
#include "api/objects.hpp"

using mrc::api::fail;

namespace {

int ret(int rc) {
  return rc == 0 ? 0 : fail(rc);
}

/// A handle on the device of an ibv_context: its context's, or a short-lived one (*temp).
mrc_ctl_context* handle_of_device(ibv_context* c, mrc_context* mctx, mrc_ctl_context** temp) {
  *temp = nullptr;
  if (mctx != nullptr) return mrc::api::ctl_handle(mctx);
  mrc_device* d = mrc::api::device_of(c);
  if (d == nullptr) {
    errno = c == nullptr ? EINVAL : EOPNOTSUPP;
    return nullptr;
  }
  if (d->ctx != nullptr) return mrc::api::ctl_handle(d->ctx);
  mrc::api::CtlService* svc = d->ctl ? &d->ctl->service() : d->own_service.get();
  *temp = mrc::api::ctl_open_embedded(*svc, mrc::api::process_privileged());
  return *temp;
}

}  // namespace

mrc_context* mrc::api::ctl_context_from(mrc_ctl_context* h) {
  if (h == nullptr) return nullptr;
  auto* ctx = new mrc_context;
  ctx->ctl = h;
  return ctx;
}

mrc_ctl_context* mrc::api::ctl_handle(mrc_context* ctx) {
  if (ctx == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (ctx->ctl != nullptr) return ctx->ctl;
  mrc_device* d = ctx->device;
  std::lock_guard<std::mutex> lk(d->mu);
  if (ctx->ctl == nullptr) {
    CtlService* svc = d->ctl ? &d->ctl->service() : d->own_service.get();
    ctx->ctl = ctl_open_embedded(*svc, d->owner_controls || process_privileged());
  }
  return ctx->ctl;
}

extern "C" {

void mrc_ctl_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                           uint32_t* vendor_version, uint32_t* last_supported_vendor_version) {
  if (current_version) *current_version = MRC_CTL_API_CURRENT_VERSION;
  if (last_supported_version) *last_supported_version = MRC_CTL_API_LAST_SUPPORTED_VERSION;
  if (vendor_version) *vendor_version = MRC_CTL_VENDOR_API_CURRENT_VERSION;
  if (last_supported_vendor_version)
    *last_supported_vendor_version = MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION;
}

mrc_context* mrc_ctl_open_context(const char* socket_path) {
  return mrc::api::ctl_context_from(mrc_ctl_open(socket_path));
}

mrc_context* mrc_ctl_open_local_context(const mrc_ctl_local_attr* attr) {
  return mrc::api::ctl_context_from(mrc_ctl_open_local(attr));
}

const char* mrc_ctl_last_error(const mrc_context* mrc_ctx) {
  return mrc_ctx != nullptr && mrc_ctx->ctl != nullptr ? mrc_ctl_last_error(mrc_ctx->ctl) : "";
}

int mrc_ctl_query_device_ex(ibv_context* context, mrc_context* mcontext, mrc_ctl_device_attr* ctl_attr,
                            int* supported) {
  if (context != nullptr && mrc::api::device_of(context) == nullptr) {  // not an MRC device
    if (supported) *supported = 0;
    return fail(EOPNOTSUPP);
  }
  mrc_ctl_context* temp = nullptr;
  mrc_ctl_context* h = handle_of_device(context, mcontext, &temp);
  if (h == nullptr) return -1;
  const int rc = mrc_ctl_query_device(h, ctl_attr);
  if (temp != nullptr) (void)mrc_ctl_close(temp);
  if (supported) *supported = rc == 0 ? 1 : 0;
  return ret(rc);
}

int mrc_ctl_query_device(ibv_context* context, mrc_ctl_device_attr* ctl_attr) {
  return mrc_ctl_query_device_ex(context, nullptr, ctl_attr, nullptr);
}

int mrc_ctl_query_port(mrc_context* context, uint8_t port_num, mrc_ctl_port_attr* attr, int attr_mask) {
  mrc_ctl_context* h = mrc::api::ctl_handle(context);
  return h ? ret(mrc_ctl_query_port(h, port_num, attr, static_cast<std::uint32_t>(attr_mask))) : -1;
}

int mrc_ctl_modify_port(mrc_context* context, uint8_t port_num, mrc_ctl_port_attr* attr, int attr_mask) {
  mrc_ctl_context* h = mrc::api::ctl_handle(context);
  return h ? ret(mrc_ctl_modify_port(h, port_num, attr, static_cast<std::uint32_t>(attr_mask))) : -1;
}

int mrc_ctl_modify_ev_fmt_profile(mrc_context* mrc_ctx, uint64_t id, mrc_ctl_ev_fmt_profile_attr* attr,
                                  int attr_mask) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  return h ? ret(mrc_ctl_modify_ev_fmt_profile(h, id, attr, static_cast<std::uint32_t>(attr_mask))) : -1;
}

int mrc_ctl_query_ev_fmt_profile(mrc_context* mrc_ctx, uint64_t id, mrc_ctl_ev_fmt_profile_attr* attr,
                                 int attr_mask) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  return h ? ret(mrc_ctl_query_ev_fmt_profile(h, id, attr, static_cast<std::uint32_t>(attr_mask))) : -1;
}

int mrc_ctl_modify_ev_profile(mrc_context* mrc_ctx, uint64_t id, mrc_ctl_ev_profile_attr* attr,
                              int attr_mask) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  return h ? ret(mrc_ctl_modify_ev_profile(h, id, attr, static_cast<std::uint32_t>(attr_mask))) : -1;
}

int mrc_ctl_query_ev_profile(mrc_context* mrc_ctx, uint64_t id, mrc_ctl_ev_profile_attr* attr,
                             int attr_mask) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  return h ? ret(mrc_ctl_query_ev_profile(h, id, attr, static_cast<std::uint32_t>(attr_mask))) : -1;
}

int mrc_ctl_modify_cc_profile(mrc_context* mrc_ctx, uint64_t id, mrc_ctl_cc_profile_attr* attr,
                              int attr_mask) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  return h ? ret(mrc_ctl_modify_cc_profile(h, id, attr, static_cast<std::uint32_t>(attr_mask))) : -1;
}

int mrc_ctl_query_cc_profile(mrc_context* mrc_ctx, uint64_t id, mrc_ctl_cc_profile_attr* attr,
                             int attr_mask) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  if (h == nullptr) return -1;
  // OCP's cc_config is const void*: with none given, point it at the context's copy.
  if (attr != nullptr && (attr_mask & MRC_CTL_CC_PROFILE_CONFIG) && attr->cc_config == nullptr) {
    mrc_ctx->cc_scratch = mrc_ctl_cc_nscc_cfg{};
    attr->cc_config = &mrc_ctx->cc_scratch;
  }
  return ret(mrc_ctl_query_cc_profile(h, id, attr, static_cast<std::uint32_t>(attr_mask)));
}

mrc_cq* mrc_ctl_create_ev_event_cq(mrc_context* mrc_ctx, int cqe, void* cq_context, mrc_comp_channel* channel,
                                   int comp_vector) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  if (h == nullptr) return nullptr;
  mrc_ctl_ev_event_cq* e = mrc_ctl_create_ev_event_cq(h, cqe, cq_context, channel, comp_vector);
  if (e == nullptr) return nullptr;
  auto* cq = new mrc_cq(1);
  cq->ctx = mrc_ctx;
  cq->cq_context = cq_context;
  cq->ev_cq = e;
  ++mrc_ctx->cqs;
  return cq;
}

int mrc_ctl_poll_ev_event(mrc_cq* ev_cq, int num_entries, mrc_ctl_ev_event* ev_event) {
  if (ev_cq == nullptr || ev_cq->ev_cq == nullptr) return -EINVAL;
  return mrc_ctl_poll_ev_event(ev_cq->ev_cq, num_entries, ev_event);
}

int mrc_ctl_ep_batch_send_wait(mrc_context* mrc_ctx, uint8_t req_tc, mrc_ctl_ep_op_type op_type,
                               mrc_ctl_ep_req* req, int num_req, uint32_t rsp_timeout, mrc_ctl_ep_rsp* rsp,
                               int* num_rsp) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  if (h == nullptr) return -1;
  if (num_req < 0 || num_rsp == nullptr) return fail(EINVAL);
  std::uint32_t n = 0;
  const int rc = mrc_ctl_ep_batch_send_wait(h, req_tc, op_type, req, static_cast<std::uint32_t>(num_req),
                                            rsp_timeout, rsp, &n);
  *num_rsp = static_cast<int>(n);
  return ret(rc);
}

int mrc_ctl_list_profiles(mrc_context* mrc_ctx, mrc_ctl_profile_kind kind, uint64_t* ids, uint32_t* count) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  return h ? ret(mrc_ctl_list_profiles(h, kind, ids, count)) : -1;
}

int mrc_ctl_query_port_counters(mrc_context* mrc_ctx, uint8_t port_num, mrc_ctl_port_counters* out) {
  mrc_ctl_context* h = mrc::api::ctl_handle(mrc_ctx);
  return h ? ret(mrc_ctl_query_port_counters(h, port_num, out)) : -1;
}

}  // extern "C"
