// The objects behind the handles of mrc.h (and the verbs objects libmrc provides: ibv_context,
// ibv_pd, ibv_mr of its software devices), shared by the application API (src/api/*.cpp)
// and the controller API (ctl*.cpp), which reaches a device's endpoint and profiles through them.
//
// Threading: control calls of one device serialise on mrc_device::mu and touch the engine only
// inside UdpEndpoint::execute(). Completions and events are routed by route_engine() (the
// endpoint's export hook) by whoever holds the engine — a progress round (the device's thread, or
// mrc_progress) or a control call — one at a time. Each CQ is a ring with one producer at a time
// that mrc_poll_cq drains: past the engine's own queue, the only one a completion crosses.
#pragma once
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/ctl_server.hpp"
#include "api/profile_store.hpp"
#include "io/ring.hpp"
#include "io/udp_endpoint.hpp"
#include "mrc/mrc.h"
#include "mrc/mrc_ctl.h"

struct mrc_device;
struct mrc_ctl_context;
struct mrc_ctl_ev_event_cq;

namespace mrc::api {
/// The ibv_context of a software device. Standard layout with ibv_context first, so the
/// application's ibv_context* converts back; `magic` tells ours from anything else.
struct VerbsContext {
  ibv_context ibv;
  std::uint64_t magic;
  mrc_device* device;
};
inline constexpr std::uint64_t kVerbsMagic = 0x6D72632D73772D31ull;  // "mrc-sw-1"
/// The device of an ibv_context, or nullptr when it is not one of ours.
inline mrc_device* device_of(ibv_context* c) {
  // A real device's context has its uverbs command fd: only ours is read past ibv_context.
  if (c == nullptr || c->cmd_fd != -1) return nullptr;
  auto* v = reinterpret_cast<VerbsContext*>(c);
  return v->magic == kVerbsMagic ? v->device : nullptr;
}
}  // namespace mrc::api

struct mrc_device {
  mrc::api::VerbsContext vctx{};
  ibv_device ibdev{};  ///< for devices opened by mrc_open_device (not listed in MRC_DEVICES)
  std::unique_ptr<mrc::io::UdpEndpoint> ue;
  mrc::api::ProfileStore profiles;
  std::string ctl_socket;
  std::mutex mu;  ///< control path of this device and its context
  mrc_context* ctx = nullptr;
  bool ctx_by_verbs = false;  ///< ctx was made by ibv_create_cq / ibv_create_qp (verbs_qp.cpp)
  /// Opened by a tool that is its own controller (DeviceTuning::owner_controls): the in-process
  /// controller handle may modify profiles whatever the process's privileges.
  bool owner_controls = false;
  std::uint32_t pds = 0;
  std::uint32_t comp_channels = 0;  ///< ibv_create_comp_channel
  struct KnownPeer {                ///< mrc_add_peer / MRC_PEERS
    std::vector<mrc::io::IpAddr> addrs;
    std::uint16_t port = 0;
  };
  std::vector<KnownPeer> known_peers;
  struct PeerKey {
    std::vector<mrc::io::IpAddr> addrs;
    std::uint16_t port = 0;
    std::uint32_t handle = 0;
  };
  std::vector<PeerKey> peers;  ///< endpoint peer handles, reused per (addresses, port)
  /// Engine events the application API does not turn into async events (EV state changes, EV
  /// probe answers, peer port status): handed to the controller API when it listens. Runs on the
  /// producer thread.
  std::function<void(const mrc::engine::Event&)> ctl_event_sink;
  /// The controller service of this device when it serves no control socket (the socket server
  /// has its own); mrc_ctl.h calls on the application's context go to it.
  std::unique_ptr<mrc::api::CtlService> own_service;
  /// Control socket server when the config names a ctl_socket (mrc_ctl.h); declared last so it
  /// stops before the endpoint and the profiles go.
  std::unique_ptr<mrc::api::CtlServer> ctl;
};

/// ibv_pd first (standard layout): the application's ibv_pd* converts back.
struct mrc_pd {
  ibv_pd ibv;
  mrc_device* device;
  std::uint32_t users;  ///< MRs and QPs
};
namespace mrc::api {
inline mrc_pd* pd_of(ibv_pd* p) {
  return reinterpret_cast<mrc_pd*>(p);
}
}  // namespace mrc::api

struct MrcMrImpl {
  ibv_mr ibv;
  mrc_pd* pd;
};

struct mrc_comp_channel {
  mrc_context* ctx = nullptr;
  int fd = -1;  ///< eventfd (semaphore): one count per fired CQ
  std::mutex mu;
  std::deque<mrc_cq*> fired;
  std::uint32_t cqs = 0;
};

struct mrc_cq {
  mrc_context* ctx = nullptr;
  void* cq_context = nullptr;
  mrc_comp_channel* channel = nullptr;
  std::uint32_t cqe = 0;
  mrc::io::SpscRing<ibv_wc> ring;
  std::atomic<std::uint32_t> count{0};  ///< entries in ring (the producer refuses beyond cqe)
  std::atomic<bool> armed{false};
  std::atomic<bool> overrun{false};
  std::mutex poll_mu;                     ///< one poller at a time (ring consumer)
  std::atomic<std::uint32_t> unacked{0};  ///< mrc_get_cq_event results not yet acked
  std::atomic<std::uint32_t> async_unacked{0};
  std::uint32_t qps = 0;
  mrc_ctl_ev_event_cq* ev_cq = nullptr;  ///< an EV event CQ (mrc_ctl_create_ev_event_cq)
  explicit mrc_cq(std::uint32_t n) : cqe(n), ring(n) {}
};

struct mrc_qp_hint {
  mrc_context* ctx = nullptr;
  mrc_qp_hint_attr attr{};
  std::uint32_t qps = 0;
};

struct mrc_qp {
  mrc_context* ctx = nullptr;
  std::uint32_t qpn = 0;
  mrc_qp_init_attr init{};
  std::atomic<ibv_qp_state> state{IBV_QPS_RESET};  ///< as the API last set it; `fatal` overrides
  ibv_qp_attr ib{};                                ///< IB attributes as last set
  mrc_qp_attr mrc{};                               ///< MRC attributes as last set
  mrc::engine::QpConfig cfg;                       ///< what the engine QP is built from
  bool profiles_held = false;
  std::atomic<std::uint32_t> async_unacked{0};
  std::atomic<std::uint32_t> dest_qpn{0};  ///< set at RTR; read by route_engine() for mrc_wc.src_qp
  std::atomic<bool> fatal{false};          ///< the engine moved it to ERROR
  /// The application moved it to ERR: the engine's QP-error event that follows is no async event
  /// (verbs raises none for a requested transition).
  std::atomic<bool> requested_error{false};
};

struct mrc_context {
  mrc_device* device = nullptr;  ///< nullptr for a controller-only context (mrc_ctl_open_context)
  mrc_context_attr attr{};
  /// Controller handle (mrc_ctl.h): a controller context's own, or one on the device's service,
  /// made on first use.
  mrc_ctl_context* ctl = nullptr;
  mrc_ctl_cc_nscc_cfg cc_scratch{};  ///< what a CC query with cc_config = NULL points at
  bool app_progress = false;
  std::uint32_t channels = 0, cqs = 0, hints = 0;
  /// qpn -> QP; written inside execute(), read by route_engine() (which runs holding the engine too).
  std::unordered_map<std::uint32_t, mrc_qp*> qps;
  // Asynchronous events: an eventfd (semaphore) counts the queued ones.
  int async_fd = -1;
  std::mutex async_mu;
  std::deque<mrc_async_event> async_events;
};

namespace mrc::api {

/// Takes the engine's completions and events into CQs, channels and async events: the endpoint's
/// export hook, run by whoever holds the engine (a progress round or a control call).
void route_engine(mrc_context& ctx, engine::Endpoint& ep);
/// Queues an asynchronous event (any thread).
void post_async_event(mrc_context& ctx, const mrc_async_event& ev);
/// A local plane (port_num 1-based) went up or down: MRC_EVENT_PORT_ACTIVE / _ERR. For the
/// controller API's port admin.
void post_port_event(mrc_context& ctx, std::uint8_t port_num, bool up);
/// Takes n off an acknowledgement count, never below zero: acking more than was delivered is an
/// application bug, not a crash.
inline void ack(std::atomic<std::uint32_t>& count, std::uint32_t n) {
  std::uint32_t cur = count.load();
  while (!count.compare_exchange_weak(cur, cur >= n ? cur - n : 0)) {
  }
}
/// Sets errno and returns -1 (the C API's error convention).
inline int fail(int e) {
  errno = e;
  return -1;
}

}  // namespace mrc::api
