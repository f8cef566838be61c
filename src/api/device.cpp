// mrc.h: versions, software devices (opening one, MRC_PEERS), device query, contexts, progress and
// the routing of engine completions and events to CQs, channels and async events. The verbs calls
// on these devices (ibv_*) are in verbs.cpp.
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string_view>

#include "api/ctl.hpp"
#include "api/ctl_discovery.hpp"
#include "api/device_tuning.hpp"
#include "api/objects.hpp"
#include "api/verbs.hpp"

using mrc::api::fail;

namespace {

constexpr std::uint16_t kDefaultUdpPort = 4791;

ibv_wc_status to_wc_status(mrc::engine::WcStatus s) {
  using mrc::engine::WcStatus;
  switch (s) {
    case WcStatus::kSuccess:
      return IBV_WC_SUCCESS;
    case WcStatus::kRetryExceeded:
      return IBV_WC_RETRY_EXC_ERR;
    case WcStatus::kRemoteAccessError:
      return IBV_WC_REM_ACCESS_ERR;
    case WcStatus::kRemoteInvalidRequest:
      return IBV_WC_REM_INV_REQ_ERR;
    case WcStatus::kRemoteOpError:
      return IBV_WC_REM_OP_ERR;
    case WcStatus::kLocalProtectionError:
      return IBV_WC_LOC_PROT_ERR;
    case WcStatus::kFlushed:
      return IBV_WC_WR_FLUSH_ERR;
  }
  return IBV_WC_GENERAL_ERR;
}

ibv_wc_opcode to_wc_opcode(mrc::engine::WcOpcode op) {
  // Verbs reports a send-side WRITE_WITH_IMM as IBV_WC_RDMA_WRITE.
  return op == mrc::engine::WcOpcode::kRecvRdmaWithImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RDMA_WRITE;
}

void signal_fd(int fd) {
  const std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

void deliver(mrc_context& ctx, const mrc::engine::Completion& c) {
  const auto it = ctx.qps.find(c.qpn);
  if (it == ctx.qps.end()) return;  // its QP was destroyed meanwhile
  mrc_cq* cq = c.is_recv ? it->second->init.recv_cq : it->second->init.send_cq;
  if (cq->overrun.load(std::memory_order_relaxed)) return;
  if (cq->count.load(std::memory_order_acquire) >= cq->cqe) {
    // Verbs: a CQ overrun is a CQ error; the completion is lost and the application is told.
    cq->overrun.store(true, std::memory_order_release);
    cq->async_unacked.fetch_add(1);
    mrc_async_event ev{};
    ev.element.cq = cq;
    ev.event_type = IBV_EVENT_CQ_ERR;
    mrc::api::post_async_event(ctx, ev);
    return;
  }
  ibv_wc wc{};
  wc.wr_id = c.wr_id;
  wc.status = to_wc_status(c.status);
  wc.opcode = to_wc_opcode(c.opcode);
  wc.byte_len = c.byte_len;
  if (c.has_imm) {
    wc.imm_data = htonl(c.imm);
    wc.wc_flags = IBV_WC_WITH_IMM;
  }
  wc.qp_num = c.qpn;
  wc.src_qp = it->second->dest_qpn.load(std::memory_order_relaxed);
  cq->ring.push(wc);
  cq->count.fetch_add(1, std::memory_order_release);
  if (cq->channel != nullptr && cq->armed.exchange(false)) {
    {
      std::lock_guard<std::mutex> lk(cq->channel->mu);
      cq->channel->fired.push_back(cq);
    }
    signal_fd(cq->channel->fd);
  }
}

void deliver(mrc_context& ctx, const mrc::engine::Event& e) {
  if (e.type == mrc::engine::EventType::kQpError) {
    const auto it = ctx.qps.find(e.qpn);
    if (it == ctx.qps.end()) return;
    it->second->fatal.store(true);
    if (it->second->requested_error.load()) return;
    it->second->async_unacked.fetch_add(1);
    mrc_async_event ev{};
    ev.element.qp = it->second;
    ev.event_type = IBV_EVENT_QP_FATAL;
    mrc::api::post_async_event(ctx, ev);
    return;
  }
  if (ctx.device->ctl_event_sink) ctx.device->ctl_event_sink(e);
}

/// Splits "a,b,c@port".
bool parse_spec(std::string_view spec, std::vector<std::string>& addrs, std::uint16_t& port) {
  port = 0;
  const std::size_t at = spec.rfind('@');
  if (at != std::string_view::npos) {
    const std::string p(spec.substr(at + 1));
    char* end = nullptr;
    const unsigned long v = std::strtoul(p.c_str(), &end, 10);
    if (p.empty() || *end != '\0' || v == 0 || v > 65535) return false;
    port = static_cast<std::uint16_t>(v);
    spec = spec.substr(0, at);
  }
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    addrs.emplace_back(spec.substr(0, comma));
    if (comma == std::string_view::npos) break;
    spec = spec.substr(comma + 1);
  }
  return !addrs.empty() && addrs.size() <= MRC_MAX_PLANES;
}

/// MRC_PEERS: "ADDR[,ADDR...][@PORT][;...]"; entries that do not parse or do not match the
/// device (plane count, family) are skipped.
void load_env_peers(mrc_device& dev) {
  const char* env = std::getenv("MRC_PEERS");
  if (env == nullptr) return;
  std::string_view all(env);
  while (!all.empty()) {
    const std::size_t semi = all.find(';');
    const std::string_view one = all.substr(0, semi);
    std::vector<std::string> addrs;
    std::uint16_t port = 0;
    if (!one.empty() && parse_spec(one, addrs, port) && addrs.size() == dev.ue->num_planes()) {
      mrc_device::KnownPeer p;
      p.port = port;
      for (const auto& a : addrs) {
        mrc::io::IpAddr ip;
        if (!mrc::io::IpAddr::parse(a, ip) || ip.family != dev.ue->config().planes[0].family) break;
        p.addrs.push_back(ip);
      }
      if (p.addrs.size() == addrs.size()) dev.known_peers.push_back(std::move(p));
    }
    if (semi == std::string_view::npos) break;
    all = all.substr(semi + 1);
  }
}

bool version_ok(std::uint32_t v, std::uint32_t last, std::uint32_t current) {
  return v == 0 || v == static_cast<std::uint32_t>(MRC_API_VER_LATEST) || (v >= last && v <= current);
}

}  // namespace

namespace mrc::api {

bool parse_device_spec(std::string_view spec, std::vector<std::string>& addrs, std::uint16_t& port) {
  return parse_spec(spec, addrs, port);
}

void route_engine(mrc_context& ctx, engine::Endpoint& ep) {
  engine::Completion c;
  while (ep.poll_completion(c)) deliver(ctx, c);
  engine::Event e;
  while (ep.poll_event(e)) deliver(ctx, e);
}

void post_async_event(mrc_context& ctx, const mrc_async_event& ev) {
  {
    std::lock_guard<std::mutex> lk(ctx.async_mu);
    ctx.async_events.push_back(ev);
  }
  signal_fd(ctx.async_fd);
}

void post_port_event(mrc_context& ctx, std::uint8_t port_num, bool up) {
  mrc_async_event ev{};
  ev.element.port_num = port_num;
  ev.event_type = up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
  post_async_event(ctx, ev);
}

}  // namespace mrc::api

extern "C" {

void mrc_query_version(uint32_t* current, uint32_t* last_supported, uint32_t* vendor_current,
                       uint32_t* vendor_last_supported) {
  if (current) *current = MRC_API_CURRENT_VERSION;
  if (last_supported) *last_supported = MRC_API_LAST_SUPPORTED_VERSION;
  if (vendor_current) *vendor_current = MRC_VENDOR_API_CURRENT_VERSION;
  if (vendor_last_supported) *vendor_last_supported = MRC_VENDOR_API_LAST_SUPPORTED_VERSION;
}

}  // extern "C"

mrc_device* mrc::api::open_device(const mrc_device_config* config, ibv_device* listed,
                                  const DeviceTuning* tuning, std::string* err_out) {
  if (config == nullptr || config->num_planes == 0 || config->num_planes > MRC_MAX_PLANES) {
    errno = EINVAL;
    return nullptr;
  }
  mrc::io::UdpConfig uc = tuning != nullptr ? tuning->udp : mrc::io::UdpConfig{};
  uc.planes.clear();
  for (std::uint32_t i = 0; i < config->num_planes; ++i) {
    mrc::io::IpAddr a;
    if (config->plane_addr[i] == nullptr || !mrc::io::IpAddr::parse(config->plane_addr[i], a) ||
        (i > 0 && a.family != uc.planes[0].family)) {
      errno = EINVAL;
      return nullptr;
    }
    uc.planes.push_back(a);
  }
  uc.port = config->udp_port != 0 ? config->udp_port : kDefaultUdpPort;
  // A verbs application exchanges QPN, PSN and GID itself, with no room for a capability, so a peer
  // is any RoCE/MRC device: the wire extensions only when MRC_WIRE_EXT=1 says (on both sides) that the
  // peers are this implementation too (D45).
  const char* ext = std::getenv("MRC_WIRE_EXT");
  if (tuning == nullptr) uc.engine.wire_ext = ext != nullptr && std::string_view(ext) == "1";
  uc.engine.seed = config->seed != 0 ? config->seed
                                     : (std::uint64_t{std::random_device{}()} << 32 | std::random_device{}());
  auto dev = std::make_unique<mrc_device>();
  if (config->ctl_socket != nullptr) dev->ctl_socket = config->ctl_socket;
  std::string err;
  errno = 0;
  dev->ue = mrc::io::UdpEndpoint::create(uc, err);
  if (!dev->ue) {
    if (errno == 0) errno = EINVAL;
    if (err_out != nullptr) *err_out = err;
    return nullptr;
  }
  dev->owner_controls = tuning != nullptr && tuning->owner_controls;
  const char* dev_name = listed != nullptr ? listed->name : config->name != nullptr ? config->name : "mrc_sw";
  const auto port_hooks = [d = dev.get()] {
    mrc::api::CtlHooks hooks;
    hooks.port_changed = [d](std::uint8_t port, bool up) {
      std::lock_guard<std::mutex> lk(d->mu);
      if (d->ctx != nullptr) mrc::api::post_port_event(*d->ctx, port, up);
    };
    return hooks;
  };
  if (!dev->ctl_socket.empty()) {
    // The controller API's server; engine events reach it through ctl_event_sink.
    errno = 0;
    dev->ctl = mrc::api::start_ctl_server(*dev->ue, dev->profiles, dev->ctl_socket, err, false, port_hooks());
    if (!dev->ctl) {
      if (errno == 0) errno = EINVAL;
      return nullptr;
    }
  } else {
    // Otherwise at its discovery path (D46), unless MRC_CTL_DIR=none. A device that cannot serve
    // one still works; the controller then only reaches it from inside the process.
    dev->ctl = mrc::api::serve_ctl(*dev->ue, dev->profiles, dev_name, err, false, port_hooks());
    if (!dev->ctl && !err.empty()) {
      const std::string who = tuning != nullptr && !tuning->warn_prefix.empty()
                                  ? tuning->warn_prefix
                                  : std::string("libmrc: ") + dev_name;
      std::fprintf(stderr, "%s: no control socket: %s\n", who.c_str(), err.c_str());
    }
  }
  if (dev->ctl) {
    dev->ctl_socket = dev->ctl->path();
    dev->ctl_event_sink = [s = dev->ctl.get()](const mrc::engine::Event& e) { s->on_engine_event(e); };
  } else {
    dev->own_service =
        std::make_unique<mrc::api::CtlService>(dev->profiles, dev->ue.get(), false, port_hooks());
    dev->ctl_event_sink = [s = dev->own_service.get()](const mrc::engine::Event& e) {
      s->on_engine_event(e);
    };
  }
  load_env_peers(*dev);
  // The verbs face of the device.
  if (listed == nullptr) {
    dev->ibdev.node_type = IBV_NODE_CA;
    dev->ibdev.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(dev->ibdev.name, sizeof dev->ibdev.name, "%s", dev_name);
    std::snprintf(dev->ibdev.dev_name, sizeof dev->ibdev.dev_name, "%s", dev_name);
    listed = &dev->ibdev;
  }
  mrc::api::init_verbs_context(dev->vctx, listed);
  dev->vctx.device = dev.get();
  return dev.release();
}

ibv_context* mrc::api::open_tuned_device(const mrc_device_config& config, const DeviceTuning* tuning,
                                         std::string* err) {
  mrc_device* d = mrc::api::open_device(&config, nullptr, tuning, err);
  return d != nullptr ? &d->vctx.ibv : nullptr;
}

bool mrc::api::with_endpoint(ibv_context* c, const std::function<void(io::UdpEndpoint&)>& fn) {
  mrc_device* d = device_of(c);
  if (d == nullptr) return false;
  d->ue->execute([&](engine::Endpoint&) { fn(*d->ue); });
  return true;
}

extern "C" {

ibv_context* mrc_open_device(const mrc_device_config* config) {
  mrc_device* d = mrc::api::open_device(config, nullptr);
  return d != nullptr ? &d->vctx.ibv : nullptr;
}

ibv_context* mrc_open_device_str(const char* spec) {
  if (spec == nullptr) spec = std::getenv("MRC_DEVICE");
  std::vector<std::string> addrs;
  mrc_device_config cfg{};
  if (spec == nullptr || !parse_spec(spec, addrs, cfg.udp_port)) {
    errno = EINVAL;
    return nullptr;
  }
  cfg.num_planes = static_cast<std::uint32_t>(addrs.size());
  for (std::size_t i = 0; i < addrs.size(); ++i) cfg.plane_addr[i] = addrs[i].c_str();
  return mrc_open_device(&cfg);
}

int mrc_add_peer(ibv_context* context, const mrc_peer_attr* peer) {
  mrc_device* device = mrc::api::device_of(context);
  if (device == nullptr || peer == nullptr || peer->num_planes != device->ue->num_planes())
    return fail(EINVAL);
  mrc_device::KnownPeer p;
  p.port = peer->udp_port;
  const int family = device->ue->config().planes[0].family;
  for (std::uint32_t i = 0; i < peer->num_planes; ++i) {
    mrc::io::IpAddr a;
    if (!mrc::io::IpAddr::from_gid(peer->plane_gid[i].raw, family, a)) return fail(EINVAL);
    p.addrs.push_back(a);
  }
  std::lock_guard<std::mutex> lk(device->mu);
  device->known_peers.push_back(std::move(p));
  return 0;
}

int mrc_query_udp_port(ibv_context* context, uint16_t* port) {
  mrc_device* device = mrc::api::device_of(context);
  if (device == nullptr || port == nullptr) return fail(EINVAL);
  *port = device->ue->config().port;
  return 0;
}

int mrc_query_device_ex(ibv_context* context, mrc_context* ctx, mrc_device_attr* attr, int* supported) {
  if (attr == nullptr || (context == nullptr && ctx == nullptr)) return fail(EINVAL);
  mrc_device* device = context != nullptr ? mrc::api::device_of(context) : ctx->device;
  if (device == nullptr) {  // a verbs device that is no MRC device (or a controller context)
    *attr = mrc_device_attr{};
    if (supported) *supported = 0;
    return 0;
  }
  if (ctx != nullptr && ctx->device != device) return fail(EINVAL);
  *attr = mrc_device_attr{};
  attr->mrc_protocol_version = MRC_PROTOCOL_VERSION_1;
  attr->wimm_attr.max_wimm = 0xFFFF;
  attr->wimm_attr.max_wimm_dest = 0xFFFF;
  attr->mpr_attr.max_mpr = 0xFF;
  attr->mpr_attr.mpr_resolution = 1;
  attr->qp_attr.max_qp_hint = 1024;
  attr->cap = MRC_DEVICE_CAP_TRIM_NACK | MRC_DEVICE_CAP_DYNAMIC_MPR | MRC_DEVICE_CAP_SVC_TIME;
  if (supported) *supported = 1;
  return 0;
}

int mrc_query_device(ibv_context* context, mrc_device_attr* attr, int* supported) {
  return mrc_query_device_ex(context, nullptr, attr, supported);
}

mrc_context* mrc_create_context(ibv_context* vcontext, mrc_context_attr* attr) {
  return mrc_create_context_ex(vcontext, attr, 0);
}

mrc_context* mrc_create_context_ex(ibv_context* vcontext, mrc_context_attr* attr, uint32_t flags) {
  mrc_device* device = mrc::api::device_of(vcontext);
  if (device == nullptr || (flags & ~static_cast<std::uint32_t>(MRC_CONTEXT_APP_PROGRESS)) != 0) {
    errno = vcontext != nullptr && device == nullptr ? EOPNOTSUPP : EINVAL;
    return nullptr;
  }
  // 0 or MRC_API_VER_LATEST = latest; otherwise the version must lie in the supported range.
  if (attr &&
      (!version_ok(attr->mrc_api_version_used, MRC_API_LAST_SUPPORTED_VERSION, MRC_API_CURRENT_VERSION) ||
       !version_ok(attr->mrc_vendor_api_version_used, MRC_VENDOR_API_LAST_SUPPORTED_VERSION,
                   MRC_VENDOR_API_CURRENT_VERSION))) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(device->mu);
  if (device->ctx != nullptr) {
    errno = EBUSY;
    return nullptr;
  }
  auto ctx = std::make_unique<mrc_context>();
  ctx->device = device;
  if (attr) ctx->attr = *attr;
  ctx->app_progress = (flags & MRC_CONTEXT_APP_PROGRESS) != 0;
  ctx->async_fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ctx->async_fd < 0) return nullptr;
  mrc_context* c = ctx.get();
  // At the end of each progress round (the device's thread, or mrc_progress) and control call,
  // straight from the engine into the CQs: a completion crosses one queue (its CQ) on its way to
  // mrc_poll_cq.
  device->ue->set_export_hook([c](mrc::engine::Endpoint& ep) { mrc::api::route_engine(*c, ep); });
  if (!ctx->app_progress) device->ue->start();
  device->ctx = ctx.release();
  return c;
}

int mrc_destroy_context(mrc_context* ctx) {
  if (ctx == nullptr) return fail(EINVAL);
  mrc_device* dev = ctx->device;
  if (dev == nullptr) {  // a controller context
    if (ctx->cqs != 0) return fail(EBUSY);
    if (ctx->ctl != nullptr) (void)mrc_ctl_close(ctx->ctl);
    delete ctx;
    return 0;
  }
  std::lock_guard<std::mutex> lk(dev->mu);
  if (!ctx->qps.empty() || ctx->cqs != 0 || ctx->channels != 0 || ctx->hints != 0) return fail(EBUSY);
  if (ctx->ctl != nullptr) (void)mrc_ctl_close(ctx->ctl);
  dev->ue->stop();
  dev->ue->set_export_hook(nullptr);
  // Whatever the engine still holds belongs to no QP now.
  mrc::engine::Completion c;
  while (dev->ue->poll_completion(c)) {
  }
  mrc::engine::Event e;
  while (dev->ue->poll_event(e)) {
  }
  ::close(ctx->async_fd);
  dev->ctx = nullptr;
  delete ctx;
  return 0;
}

int mrc_progress(mrc_context* ctx, int timeout_ms) {
  if (ctx == nullptr || ctx->device == nullptr || !ctx->app_progress || timeout_ms < 0) return fail(EINVAL);
  const std::size_t n = ctx->device->ue->progress(static_cast<mrc::Duration>(timeout_ms) * 1'000'000ull);
  return static_cast<int>(std::min<std::size_t>(n, 0x7FFFFFFF));
}

int mrc_get_async_event(mrc_context* ctx, mrc_async_event* event) {
  if (ctx == nullptr || event == nullptr) return fail(EINVAL);
  std::uint64_t v = 0;
  if (::read(ctx->async_fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return -1;  // errno from read
  std::lock_guard<std::mutex> lk(ctx->async_mu);
  *event = ctx->async_events.front();
  ctx->async_events.pop_front();
  return 0;
}

void mrc_ack_async_event(mrc_async_event* event) {
  if (event == nullptr) return;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      if (event->element.cq) mrc::api::ack(event->element.cq->async_unacked, 1);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
      if (event->element.qp) mrc::api::ack(event->element.qp->async_unacked, 1);
      break;
    default:
      break;
  }
}

int mrc_get_async_fd(mrc_context* ctx, int* fd) {
  if (ctx == nullptr || fd == nullptr) return fail(EINVAL);
  *fd = ctx->async_fd;
  return 0;
}

}  // extern "C"
