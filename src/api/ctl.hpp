// The controller handle behind mrc_ctl.h, for libmrc and C++ callers (tests, `mrc ctl`).
//
// An mrc_ctl_context talks to one endpoint's controller service: through a control socket, an
// in-process CtlService, or an endpoint it owns. Every public mrc_ctl_* function (on an
// mrc_context, -1 + errno) resolves its context's handle and calls the overload of the same name
// declared here, which takes the handle and returns 0 or a positive errno value.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "api/ctl_service.hpp"
#include "mrc/mrc_ctl.h"

struct mrc_ctl_context;
struct mrc_ctl_ev_event_cq;

namespace mrc::api {

/// `privileged` = false makes an application-like handle (EPERM on every modify). The service
/// must outlive the handle (mrc_ctl_close).
mrc_ctl_context* ctl_open_embedded(CtlService& service, bool privileged);
/// A controller-only mrc_context that owns `h` (mrc_destroy_context closes it).
mrc_context* ctl_context_from(mrc_ctl_context* h);
/// The handle of a context (a controller context's own, or the one on an application context's
/// device); nullptr + errno when it has none.
mrc_ctl_context* ctl_handle(mrc_context* ctx);

/// Keeps the named profiles as they are now on the endpoint, for this handle (one saved set at a
/// time; a new save replaces it). 0 or a positive errno.
int ctl_save_profiles(mrc_ctl_context* h, const std::vector<std::uint64_t>& ev_fmt_ids,
                      const std::vector<std::uint64_t>& ev_ids, const std::vector<std::uint64_t>& cc_ids);
/// Puts the saved profiles back (restore = true) or drops them.
int ctl_restore_profiles(mrc_ctl_context* h, bool restore);

/// The time a control call waits for the endpoint's answer: $MRC_CTL_TIMEOUT seconds (a number in
/// 0.001-86400) or, unset or empty, 10 s. Any other value gives false and says why in `err`:
/// mrc_ctl_open then fails with EINVAL rather than quietly keeping the default.
bool ctl_reply_timeout(std::chrono::milliseconds& out, std::string& err);

}  // namespace mrc::api

// C++ overloads on the handle: 0 or a positive errno.
mrc_ctl_context* mrc_ctl_open(const char* socket_path);
mrc_ctl_context* mrc_ctl_open_local(const mrc_ctl_local_attr* attr);
int mrc_ctl_close(mrc_ctl_context* ctx);
const char* mrc_ctl_last_error(const mrc_ctl_context* ctx);
int mrc_ctl_query_device(mrc_ctl_context* ctx, mrc_ctl_device_attr* attr);
int mrc_ctl_query_port(mrc_ctl_context* ctx, std::uint8_t port, mrc_ctl_port_attr* attr,
                       std::uint32_t attr_mask);
int mrc_ctl_modify_port(mrc_ctl_context* ctx, std::uint8_t port, const mrc_ctl_port_attr* attr,
                        std::uint32_t attr_mask);
int mrc_ctl_query_port_counters(mrc_ctl_context* ctx, std::uint8_t port, mrc_ctl_port_counters* out);
int mrc_ctl_list_profiles(mrc_ctl_context* ctx, mrc_ctl_profile_kind kind, std::uint64_t* ids,
                          std::uint32_t* count);
int mrc_ctl_modify_ev_fmt_profile(mrc_ctl_context* ctx, std::uint64_t id, mrc_ctl_ev_fmt_profile_attr* attr,
                                  std::uint32_t attr_mask);
int mrc_ctl_query_ev_fmt_profile(mrc_ctl_context* ctx, std::uint64_t id, mrc_ctl_ev_fmt_profile_attr* attr,
                                 std::uint32_t attr_mask);
/// `done` (optional): entries processed by an EV op (a batch stops at the first failure).
int mrc_ctl_modify_ev_profile(mrc_ctl_context* ctx, std::uint64_t id, mrc_ctl_ev_profile_attr* attr,
                              std::uint32_t attr_mask, std::uint32_t* done = nullptr);
int mrc_ctl_query_ev_profile(mrc_ctl_context* ctx, std::uint64_t id, mrc_ctl_ev_profile_attr* attr,
                             std::uint32_t attr_mask);
int mrc_ctl_modify_cc_profile(mrc_ctl_context* ctx, std::uint64_t id, mrc_ctl_cc_profile_attr* attr,
                              std::uint32_t attr_mask);
/// CONFIG: attr->cc_config must point to a struct mrc_ctl_cc_nscc_cfg to fill (left untouched when
/// the profile has no configuration).
int mrc_ctl_query_cc_profile(mrc_ctl_context* ctx, std::uint64_t id, mrc_ctl_cc_profile_attr* attr,
                             std::uint32_t attr_mask);
int mrc_ctl_ep_batch_send_wait(mrc_ctl_context* ctx, std::uint8_t req_tc, mrc_ctl_ep_op_type op_type,
                               const mrc_ctl_ep_req* req, std::uint32_t num_req, std::uint64_t rsp_timeout_ns,
                               mrc_ctl_ep_rsp* rsp, std::uint32_t* num_rsp);
/// NULL + errno. channel must be NULL and comp_vector 0.
mrc_ctl_ev_event_cq* mrc_ctl_create_ev_event_cq(mrc_ctl_context* ctx, int cqe, void* cq_context,
                                                void* channel, int comp_vector);
int mrc_ctl_destroy_ev_event_cq(mrc_ctl_ev_event_cq* cq);
void* mrc_ctl_ev_event_cq_context(const mrc_ctl_ev_event_cq* cq);
/// The number of events written or a NEGATIVE errno.
int mrc_ctl_poll_ev_event(mrc_ctl_ev_event_cq* cq, int num_entries, mrc_ctl_ev_event* ev);
