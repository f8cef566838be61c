// The C functions of mrc_ctl.h: each one encodes its request, sends it through the handle's
// transport (control socket or in-process service) and decodes the response into the caller's
// structs.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "api/ctl.hpp"
#include "api/ctl_proto.hpp"

using mrc::api::CtlService;
using mrc::api::CtlSession;
using nlohmann::json;

struct mrc_ctl_context {
  int fd = -1;  ///< control socket, or -1 for an in-process service
  CtlService* service = nullptr;
  CtlSession session;
  // mrc_ctl_open_local owns its endpoint.
  std::unique_ptr<mrc::io::UdpEndpoint> udp;
  std::unique_ptr<mrc::api::ProfileStore> store;
  std::unique_ptr<CtlService> own_service;
  std::string last_error;
  /// Set when a call found the socket closed, silent or speaking something else: the connection
  /// may be out of step (a late answer would be read as the next call's), so every later call fails.
  std::string lost;
  std::chrono::milliseconds reply_timeout{10000};
  std::uint32_t cqs = 0;  ///< open event CQs (close is EBUSY until they are destroyed)
  ~mrc_ctl_context() {
    if (service) service->end_session(session);
    own_service.reset();
    if (udp) udp->stop();
    if (fd >= 0) ::close(fd);
  }
};

struct mrc_ctl_ev_event_cq {
  mrc_ctl_context* ctx = nullptr;
  std::uint64_t id = 0;
  void* cq_context = nullptr;
};

namespace {

/// Sends `req`, fills `rsp`; returns the response's errno, or the transport's failure: EIO (the
/// socket closed or failed), ETIMEDOUT (no answer within the reply timeout plus `server_wait_ns`,
/// what the call asks the endpoint to wait itself), EPROTO (an answer over the protocol's limit:
/// not an MRC control socket). After one of those the connection is given up (`lost`).
int call(mrc_ctl_context* ctx, const json& req, json& rsp, std::uint64_t server_wait_ns = 0) {
  std::string out;
  if (ctx->service != nullptr) {
    out = ctx->service->dispatch(ctx->session, req.dump());
  } else {
    if (!ctx->lost.empty()) {
      ctx->last_error = "control connection lost (" + ctx->lost + "): open it again";
      return EIO;
    }
    const std::string msg = req.dump();
    if (msg.size() > mrc::api::kCtlMaxMessage) {
      ctx->last_error = "request of " + std::to_string(msg.size()) +
                        " bytes is over the control socket's limit of " +
                        std::to_string(mrc::api::kCtlMaxMessage);
      return EMSGSIZE;
    }
    // A send the server cut short may still have its answer waiting (a refusal: too many
    // connections, message too long): read it before calling the socket closed.
    const bool sent = mrc::api::send_msg(ctx->fd, msg, ctx->reply_timeout);
    mrc::api::CtlRecvLimits wait;
    // (Capped at ten days: a wait that long is a wait for ever, and the deadline must not overflow.)
    const std::uint64_t extra_ms = std::min<std::uint64_t>(server_wait_ns / 1000000 + 1, 864000000);
    wait.idle_timeout = sent ? ctx->reply_timeout + std::chrono::milliseconds(extra_ms)
                             : std::chrono::milliseconds(1000);  // only what is already there
    wait.message_timeout = ctx->reply_timeout;
    std::uint32_t announced = 0;
    const mrc::api::CtlRecv got = mrc::api::recv_msg(ctx->fd, out, wait, &announced);
    if (got != mrc::api::CtlRecv::kMessage) {
      int e = EIO;
      if (got == mrc::api::CtlRecv::kTimeout && sent) {
        e = ETIMEDOUT;
        ctx->lost = "no answer from the endpoint within " + std::to_string(wait.idle_timeout.count()) +
                    " ms: is it stopped or stuck?";
      } else if (got == mrc::api::CtlRecv::kTooBig) {
        e = EPROTO;
        ctx->lost = "an answer of " + std::to_string(announced) +
                    " bytes, over the control protocol's limit: not an MRC control socket?";
      } else if (got == mrc::api::CtlRecv::kError) {
        ctx->lost = "the socket failed or closed inside an answer";
      } else {
        ctx->lost = "control socket closed";
      }
      ctx->last_error = ctx->lost;
      return e;
    }
  }
  try {
    rsp = json::parse(out);
    const int rc = rsp.at("rc").get<int>();
    ctx->last_error = rsp.at("why").get<std::string>();
    return rc;
  } catch (const std::exception& e) {
    ctx->last_error = std::string("bad response: ") + e.what();
    return EIO;
  }
}

void copy_ev(const std::string& hex, mrc_ctl_ev_t out) {
  const mrc::api::EvBytes b = mrc::api::ev_from_hex(hex);
  std::memcpy(out, b.data(), b.size());
}

mrc::api::EvBytes ev_bytes(const mrc_ctl_ev_t v) {
  mrc::api::EvBytes b{};
  std::memcpy(b.data(), v, b.size());
  return b;
}

const char* kAlgorithms[] = {"uet-1.0-nscc", nullptr};

/// A C enum member as the integer the caller stored (a value outside the enum must not be loaded
/// through the enum type).
template <class E>
std::uint32_t raw_enum(const E& e) {
  static_assert(sizeof(E) == sizeof(std::uint32_t));
  std::uint32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// The request of an EV-profile call from the caller's attr; EINVAL (and why) for what cannot be
/// decoded.
int ev_request(mrc_ctl_context* ctx, const mrc_ctl_ev_profile_attr* a, std::uint32_t mask,
               mrc::api::EvModify& m) {
  m.mask = mask;
  const std::uint32_t state = raw_enum(a->profile_state), ev_op = raw_enum(a->ev_op.op),
                      fields_op = raw_enum(a->ev_fields_op.op);
  if ((mask & MRC_CTL_EV_PROFILE_STATE) && state > MRC_CTL_PROFILE_ONLINE) {
    ctx->last_error = "unknown profile state";
    return EINVAL;
  }
  if ((mask & MRC_CTL_EV_PROFILE_EV_OP) && ev_op > MRC_CTL_EV_OP_QUERY_EV_ARRAY) {
    ctx->last_error = "unknown EV op";
    return EINVAL;
  }
  if ((mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) && fields_op > MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS) {
    ctx->last_error = "unknown EV fields op";
    return EINVAL;
  }
  m.state =
      (mask & MRC_CTL_EV_PROFILE_STATE) ? static_cast<mrc_ctl_profile_state>(state) : MRC_CTL_PROFILE_INIT;
  m.mode = raw_enum(a->ev_mode);
  m.fmt_id = a->ev_fmt_profile_id;
  m.count = a->ev_count;
  m.min_active = a->ev_min_active;
  m.event_mask = static_cast<std::uint32_t>(a->ev_event_mask);
  m.op = (mask & MRC_CTL_EV_PROFILE_EV_OP) ? static_cast<mrc_ctl_ev_op>(ev_op) : MRC_CTL_EV_OP_REPLACE_EV;
  m.fields_op = (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) ? static_cast<mrc_ctl_ev_fields_op>(fields_op)
                                                         : MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  if (mask & MRC_CTL_EV_PROFILE_EV_OP) {
    if (a->ev_op.entry_count > 0 && a->ev_op.entries == nullptr) return EINVAL;
    if (m.op == MRC_CTL_EV_OP_QUERY_EV_ARRAY) {
      m.query_capacity = static_cast<std::uint32_t>(a->ev_op.entry_count);
    } else {
      m.entries.reserve(static_cast<std::size_t>(a->ev_op.entry_count));
      for (int i = 0; i < a->ev_op.entry_count; ++i) {
        const mrc_ctl_ev_op_entry& e = a->ev_op.entries[i];
        mrc::api::EvOpEntry o;
        o.ev = ev_bytes(e.ev.val);
        o.port = e.ev.port;
        o.ev_new = ev_bytes(e.ev_new.val);
        o.port_new = e.ev_new.port;
        o.state = raw_enum(e.state);
        o.flags = e.flags;
        m.entries.push_back(o);
      }
    }
  }
  if (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
    if (a->ev_fields_op.field_count > 0 && a->ev_fields_op.fields == nullptr) return EINVAL;
    if (m.fields_op == MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS) {
      for (int i = 0; i < a->ev_fields_op.field_count; ++i) {
        const mrc_ctl_ev_field& f = a->ev_fields_op.fields[i];
        m.fields.push_back(mrc::api::EvField{f.width, f.init_val, f.min_val, f.max_val, f.mask});
      }
    } else {
      m.fields_capacity = static_cast<std::uint32_t>(a->ev_fields_op.field_count);
    }
  }
  return 0;
}

/// The same request through the control socket: JSON there, the typed answer back.
int ev_profile_json(mrc_ctl_context* ctx, bool modify, std::uint64_t id, const mrc::api::EvModify& m,
                    mrc::api::EvProfileInfo& p, mrc::api::EvResult& r) {
  json req{{"op", modify ? "modify_ev" : "query_ev"},
           {"id", id},
           {"mask", m.mask},
           {"state", static_cast<std::uint32_t>(m.state)},
           {"mode", m.mode},
           {"fmt_id", m.fmt_id},
           {"count", m.count},
           {"min_active", m.min_active},
           {"event_mask", m.event_mask},
           {"ev_op", static_cast<std::uint32_t>(m.op)},
           {"entries", json::array()},
           {"capacity", m.query_capacity},
           {"fields_op", static_cast<std::uint32_t>(m.fields_op)},
           {"fields", json::array()},
           {"fields_capacity", m.fields_capacity}};
  for (const mrc::api::EvOpEntry& o : m.entries) req["entries"].push_back(mrc::api::to_json(o));
  for (const mrc::api::EvField& f : m.fields) req["fields"].push_back(mrc::api::to_json(f));
  json rsp;
  const int rc = call(ctx, req, rsp);
  if (!rsp.is_object()) return rc;
  try {
    if (!modify && rc == 0) {
      p.state = static_cast<mrc_ctl_profile_state>(rsp.at("state").get<std::uint32_t>());
      p.mode = rsp.at("mode").get<std::uint32_t>();
      p.fmt_id = rsp.at("fmt_id").get<std::uint64_t>();
      p.count = rsp.at("count").get<std::uint32_t>();
      p.min_active = rsp.at("min_active").get<std::uint32_t>();
      p.event_mask = rsp.at("event_mask").get<std::uint32_t>();
    }
    r.done = rsp.value("done", 0u);
    r.needed = rsp.value("needed", 0u);
    if (rsp.contains("entries"))
      for (const json& e : rsp.at("entries")) r.entries.push_back(mrc::api::entry_from_json(e));
    if (rsp.contains("fields"))
      for (const json& f : rsp.at("fields")) r.fields.push_back(mrc::api::field_from_json(f));
  } catch (const std::exception& e) {
    ctx->last_error = std::string("bad response: ") + e.what();
    return EIO;
  }
  return rc;
}

int ev_profile_call(mrc_ctl_context* ctx, bool modify, std::uint64_t id, mrc_ctl_ev_profile_attr* a,
                    std::uint32_t mask, std::uint32_t* done) {
  if (ctx == nullptr || a == nullptr || a->ev_op.entry_count < 0 || a->ev_fields_op.field_count < 0)
    return EINVAL;
  mask &= ~static_cast<std::uint32_t>(MRC_CTL_EV_PROFILE_VENDOR_CFG);  // no vendor configuration here
  mrc::api::EvModify m;
  if (const int rc = ev_request(ctx, a, mask, m); rc != 0) return rc;
  mrc::api::EvProfileInfo p;
  mrc::api::EvResult r;
  int rc;
  if (ctx->service != nullptr) {
    // In process: the service's own handler, no encoding (dispatch() decodes into the same call).
    ctx->last_error.clear();
    rc = ctx->service->ev_profile(ctx->session, modify, id, m, p, r, ctx->last_error);
    if (rc == 0) ctx->last_error.clear();
  } else {
    rc = ev_profile_json(ctx, modify, id, m, p, r);  // a transport failure leaves p and r empty
  }
  if (!modify && rc == 0) {
    a->cur_profile_state = p.state;
    if (mask & MRC_CTL_EV_PROFILE_STATE) a->profile_state = p.state;
    if (mask & MRC_CTL_EV_PROFILE_MODE) a->ev_mode = static_cast<mrc_ctl_ev_mode>(p.mode);
    if (mask & MRC_CTL_EV_PROFILE_FMT_ID) a->ev_fmt_profile_id = p.fmt_id;
    if (mask & MRC_CTL_EV_PROFILE_COUNT) a->ev_count = p.count;
    if (mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) a->ev_min_active = p.min_active;
    if (mask & MRC_CTL_EV_PROFILE_EVENT_MASK) a->ev_event_mask = static_cast<int>(p.event_mask);
  }
  if (mask & MRC_CTL_EV_PROFILE_EV_OP) {
    if (done != nullptr) *done = r.done;
    if (rc == E2BIG) a->ev_op.entry_count = static_cast<int>(r.needed);
    const std::size_t room = static_cast<std::size_t>(a->ev_op.entry_count);
    if (m.op == MRC_CTL_EV_OP_QUERY_EV_ARRAY) {
      if (rc == 0) a->ev_op.entry_count = static_cast<int>(r.entries.size());
      for (std::size_t i = 0; i < r.entries.size() && i < room; ++i) {
        mrc_ctl_ev_op_entry& e = a->ev_op.entries[i];
        std::memcpy(e.ev.val, r.entries[i].ev.data(), MRC_CTL_EV_MAX_BYTES);
        e.ev.port = r.entries[i].port;
        e.state = static_cast<mrc_ctl_ev_state>(r.entries[i].state);
      }
    } else if (m.op == MRC_CTL_EV_OP_QUERY_EV_STATE) {
      for (std::size_t i = 0; i < r.entries.size() && i < room; ++i)
        a->ev_op.entries[i].state = static_cast<mrc_ctl_ev_state>(r.entries[i].state);
    }
  }
  if ((mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) && m.fields_op == MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS) {
    if (rc == E2BIG) a->ev_fields_op.field_count = static_cast<int>(r.needed);
    if (rc == 0) {
      a->ev_fields_op.field_count = static_cast<int>(r.fields.size());
      for (std::size_t i = 0; i < r.fields.size(); ++i) {
        const mrc::api::EvField& f = r.fields[i];
        a->ev_fields_op.fields[i] = mrc_ctl_ev_field{f.width, f.init_val, f.min_val, f.max_val, f.mask};
      }
    }
  }
  return rc;
}

}  // namespace

int mrc::api::ctl_save_profiles(mrc_ctl_context* h, const std::vector<std::uint64_t>& ev_fmt_ids,
                                const std::vector<std::uint64_t>& ev_ids,
                                const std::vector<std::uint64_t>& cc_ids) {
  if (h == nullptr) return EINVAL;
  json rsp;
  return call(h, json{{"op", "save_profiles"}, {"ev_fmt", ev_fmt_ids}, {"ev", ev_ids}, {"cc", cc_ids}}, rsp);
}

int mrc::api::ctl_restore_profiles(mrc_ctl_context* h, bool restore) {
  if (h == nullptr) return EINVAL;
  json rsp;
  return call(h, json{{"op", restore ? "restore_profiles" : "forget_profiles"}}, rsp);
}

bool mrc::api::ctl_reply_timeout(std::chrono::milliseconds& out, std::string& err) {
  out = std::chrono::milliseconds(10000);
  const char* t = std::getenv("MRC_CTL_TIMEOUT");
  if (t == nullptr || *t == '\0') return true;
  char* end = nullptr;
  errno = 0;
  const double sec = std::strtod(t, &end);
  // The negated range test also refuses NaN.
  if (end == t || *end != '\0' || errno == ERANGE || !(sec >= 0.001 && sec <= 86400)) {
    err = std::string("MRC_CTL_TIMEOUT=") + t + ": not a number of seconds in 0.001-86400";
    return false;
  }
  out = std::chrono::milliseconds(static_cast<std::int64_t>(sec * 1000));
  return true;
}

mrc_ctl_context* mrc::api::ctl_open_embedded(CtlService& service, bool privileged) {
  auto* ctx = new mrc_ctl_context;
  ctx->service = &service;
  ctx->session.privileged = privileged;
  return ctx;
}

mrc_ctl_context* mrc_ctl_open(const char* socket_path) {
  sockaddr_un sa{};
  if (socket_path == nullptr || std::strlen(socket_path) == 0 ||
      std::strlen(socket_path) >= sizeof(sa.sun_path)) {
    errno = EINVAL;
    return nullptr;
  }
  std::chrono::milliseconds timeout;
  if (std::string err; !mrc::api::ctl_reply_timeout(timeout, err)) {
    errno = EINVAL;
    return nullptr;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, socket_path, std::strlen(socket_path));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return nullptr;
  }
  auto* ctx = new mrc_ctl_context;
  ctx->fd = fd;
  ctx->reply_timeout = timeout;
  return ctx;
}

mrc_ctl_context* mrc_ctl_open_local(const mrc_ctl_local_attr* attr) {
  if (attr == nullptr || attr->planes == nullptr || attr->num_planes == 0 ||
      attr->num_planes > mrc::engine::kMaxPorts || (attr->flags & ~MRC_CTL_LOCAL_UNPRIVILEGED)) {
    errno = EINVAL;
    return nullptr;
  }
  mrc::io::UdpConfig uc;
  for (std::uint32_t i = 0; i < attr->num_planes; ++i) {
    mrc::io::IpAddr a;
    if (attr->planes[i] == nullptr || !mrc::io::IpAddr::parse(attr->planes[i], a)) {
      errno = EINVAL;
      return nullptr;
    }
    uc.planes.push_back(a);
  }
  if (attr->udp_port != 0) uc.port = attr->udp_port;
  auto ctx = std::make_unique<mrc_ctl_context>();
  std::string err;
  errno = 0;
  ctx->udp = mrc::io::UdpEndpoint::create(uc, err);
  if (!ctx->udp) {
    if (errno == 0) errno = EINVAL;
    return nullptr;
  }
  for (std::uint32_t i = 0; i < attr->num_peers; ++i) {
    std::vector<mrc::io::IpAddr> addrs;
    std::string spec = attr->peers && attr->peers[i] ? attr->peers[i] : "";
    for (std::size_t pos = 0; !spec.empty() && pos != std::string::npos;) {
      const std::size_t comma = spec.find(',', pos);
      mrc::io::IpAddr a;
      if (!mrc::io::IpAddr::parse(spec.substr(pos, comma == std::string::npos ? comma : comma - pos), a))
        break;
      addrs.push_back(a);
      pos = comma == std::string::npos ? comma : comma + 1;
    }
    if (ctx->udp->add_peer(addrs) == 0) {
      errno = EINVAL;
      return nullptr;
    }
  }
  ctx->store = std::make_unique<mrc::api::ProfileStore>();
  ctx->own_service = std::make_unique<CtlService>(*ctx->store, ctx->udp.get(), true);
  ctx->service = ctx->own_service.get();
  ctx->session.privileged = !(attr->flags & MRC_CTL_LOCAL_UNPRIVILEGED) && mrc::api::process_privileged();
  if (!ctx->udp->start()) {
    errno = EIO;
    return nullptr;
  }
  return ctx.release();
}

int mrc_ctl_close(mrc_ctl_context* ctx) {
  if (ctx == nullptr) return EINVAL;
  if (ctx->cqs != 0) return EBUSY;
  delete ctx;
  return 0;
}

const char* mrc_ctl_last_error(const mrc_ctl_context* ctx) {
  return ctx ? ctx->last_error.c_str() : "no handle";
}

int mrc_ctl_query_device(mrc_ctl_context* ctx, mrc_ctl_device_attr* attr) {
  if (ctx == nullptr || attr == nullptr) return EINVAL;
  json rsp;
  if (const int rc = call(ctx, json{{"op", "query_device"}}, rsp); rc != 0) return rc;
  try {
    *attr = mrc_ctl_device_attr{};
    attr->mrc_ctl_protocol_version = MRC_CTL_PROTOCOL_VERSION_1;
    const auto ev = rsp.at("ev").get<std::vector<std::uint32_t>>();
    if (ev.size() != 7) return EIO;
    attr->ev.ev_max_fmt_profiles = ev[0];
    attr->ev.ev_max_profiles = ev[1];
    attr->ev.ev_max_count = ev[2];
    attr->ev.ev_free_count = ev[3];
    attr->ev.ev_max_count_profile = ev[4];
    attr->ev.ev_count_align = ev[5];
    attr->ev.ev_max_width = ev[6];
    attr->ev.ev_fmt_mode_mask = MRC_CTL_EV_FMT_MODE_STEV | MRC_CTL_EV_FMT_MODE_SRV6 | MRC_CTL_EV_FMT_MODE_UDP;
    attr->ev.ev_mode_mask = MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN;
    attr->ev.ev_op_max_entries = 0;
    attr->cc.cc_max_profiles = rsp.at("cc_max_profiles").get<std::uint32_t>();
    attr->cc.algorithms = kAlgorithms;
    const auto planes = rsp.at("planes").get<std::uint32_t>();
    attr->phy_port_mask = static_cast<std::uint32_t>(((std::uint64_t{1} << planes) - 1) << 1);
    attr->opt_attr =
        MRC_CTL_OPT_CAP_EV_EVENT | MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT | MRC_CTL_OPT_CAP_EP_OP_EV_PROBE;
  } catch (const std::exception& e) {
    ctx->last_error = std::string("bad response: ") + e.what();
    return EIO;
  }
  return 0;
}

int mrc_ctl_query_port(mrc_ctl_context* ctx, uint8_t port, mrc_ctl_port_attr* attr, uint32_t attr_mask) {
  if (ctx == nullptr || attr == nullptr || (attr_mask & ~MRC_CTL_PORT_ADMIN_STATE)) return EINVAL;
  json rsp;
  if (const int rc = call(ctx, json{{"op", "query_port"}, {"port", port}}, rsp); rc != 0) return rc;
  if (attr_mask & MRC_CTL_PORT_ADMIN_STATE)
    attr->port_admin_state =
        rsp.value("admin", 0u) ? MRC_CTL_PORT_ADMIN_ENABLED : MRC_CTL_PORT_ADMIN_DISABLED;
  return 0;
}

int mrc_ctl_modify_port(mrc_ctl_context* ctx, uint8_t port, const mrc_ctl_port_attr* attr,
                        uint32_t attr_mask) {
  if (ctx == nullptr || attr == nullptr) return EINVAL;
  json rsp;
  return call(ctx,
              json{{"op", "modify_port"},
                   {"port", port},
                   {"mask", attr_mask},
                   {"admin", static_cast<std::uint32_t>(attr->port_admin_state)}},
              rsp);
}

int mrc_ctl_list_profiles(mrc_ctl_context* ctx, mrc_ctl_profile_kind kind, uint64_t* ids, uint32_t* count) {
  static const char* const kKeys[] = {"ev_fmt", "ev", "cc"};
  if (ctx == nullptr || count == nullptr || (*count > 0 && ids == nullptr) ||
      kind < MRC_CTL_PROFILE_KIND_EV_FMT || kind > MRC_CTL_PROFILE_KIND_CC)
    return EINVAL;
  json rsp;
  if (const int rc = call(ctx, json{{"op", "list"}}, rsp); rc != 0) return rc;
  try {
    const auto v = rsp.at(kKeys[kind]).get<std::vector<std::uint64_t>>();
    const std::uint32_t room = *count;
    *count = static_cast<std::uint32_t>(v.size());
    if (room < v.size()) return E2BIG;
    std::copy(v.begin(), v.end(), ids);
  } catch (const std::exception& e) {
    ctx->last_error = std::string("bad response: ") + e.what();
    return EIO;
  }
  return 0;
}

int mrc_ctl_query_port_counters(mrc_ctl_context* ctx, uint8_t port, mrc_ctl_port_counters* out) {
  if (ctx == nullptr || out == nullptr) return EINVAL;
  json rsp;
  if (const int rc = call(ctx, json{{"op", "counters"}}, rsp); rc != 0) return rc;
  try {
    const json& planes = rsp.at("planes");
    if (port < 1 || port > planes.size()) {
      ctx->last_error = "port must be 1.." + std::to_string(planes.size());
      return EINVAL;
    }
    const json& p = planes[port - 1u];
    *out = mrc_ctl_port_counters{
        p.at("tx_packets").get<std::uint64_t>(), p.at("rx_packets").get<std::uint64_t>(),
        p.at("tx_dropped").get<std::uint64_t>(), p.at("rx_ecn_ce").get<std::uint64_t>(),
        p.at("rx_trimmed").get<std::uint64_t>()};
  } catch (const std::exception& e) {
    ctx->last_error = std::string("bad response: ") + e.what();
    return EIO;
  }
  return 0;
}

int mrc_ctl_modify_ev_fmt_profile(mrc_ctl_context* ctx, uint64_t id, mrc_ctl_ev_fmt_profile_attr* attr,
                                  uint32_t attr_mask) {
  if (ctx == nullptr || attr == nullptr) return EINVAL;
  // The service's mask has a bit per field operation; OCP's one OP bit and ev_fmt_op.op.
  const bool op = attr_mask & MRC_CTL_EV_FMT_PROFILE_OP;
  if (op && attr->ev_fmt_op.op != MRC_CTL_EV_FMT_OP_MODIFY_FIELDS &&
      attr->ev_fmt_op.op != MRC_CTL_EV_FMT_OP_QUERY_FIELDS)
    return EINVAL;
  const bool modify_fields = op && attr->ev_fmt_op.op == MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  std::uint32_t wire_mask = attr_mask & (MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE |
                                         MRC_CTL_EV_FMT_PROFILE_MODE);
  if (modify_fields) wire_mask |= mrc::api::kWireFmtModifyFields;
  std::vector<std::uint32_t> widths;
  if (modify_fields) {
    if (attr->ev_fmt_op.fmt_field_count < 0 ||
        (attr->ev_fmt_op.fmt_field_count > 0 && attr->ev_fmt_op.fmt_fields == nullptr))
      return EINVAL;
    for (int i = 0; i < attr->ev_fmt_op.fmt_field_count; ++i)
      widths.push_back(attr->ev_fmt_op.fmt_fields[i].width);
  }
  json rsp;
  const int rc = call(ctx,
                      json{{"op", "modify_ev_fmt"},
                           {"id", id},
                           {"mask", wire_mask},
                           {"state", static_cast<std::uint32_t>(attr->profile_state)},
                           {"mode", static_cast<std::uint32_t>(attr->ev_fmt_mode)},
                           {"widths", widths}},
                      rsp);
  if (rc != 0 || !op || modify_fields) return rc;
  // QUERY_FIELDS with a modify: the fields after it.
  mrc_ctl_ev_fmt_profile_attr q = *attr;
  const int qrc = mrc_ctl_query_ev_fmt_profile(ctx, id, &q, MRC_CTL_EV_FMT_PROFILE_OP);
  attr->ev_fmt_op.fmt_field_count = q.ev_fmt_op.fmt_field_count;
  return qrc;
}

int mrc_ctl_query_ev_fmt_profile(mrc_ctl_context* ctx, uint64_t id, mrc_ctl_ev_fmt_profile_attr* attr,
                                 uint32_t attr_mask) {
  constexpr std::uint32_t known = MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE |
                                  MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP |
                                  static_cast<std::uint32_t>(MRC_CTL_EV_FMT_VENDOR_CFG);
  if (ctx == nullptr || attr == nullptr || (attr_mask & ~known)) return EINVAL;
  const bool query_fields = attr_mask & MRC_CTL_EV_FMT_PROFILE_OP;
  if (query_fields && attr->ev_fmt_op.op != MRC_CTL_EV_FMT_OP_QUERY_FIELDS) {
    ctx->last_error = "a query takes MRC_CTL_EV_FMT_OP_QUERY_FIELDS only";
    return EINVAL;
  }
  json rsp;
  if (const int rc = call(ctx, json{{"op", "query_ev_fmt"}, {"id", id}}, rsp); rc != 0) return rc;
  try {
    attr->cur_profile_state = static_cast<mrc_ctl_profile_state>(rsp.at("state").get<std::uint32_t>());
    if (attr_mask & MRC_CTL_EV_FMT_PROFILE_STATE) attr->profile_state = attr->cur_profile_state;
    if (attr_mask & MRC_CTL_EV_FMT_PROFILE_MODE)
      attr->ev_fmt_mode = static_cast<mrc_ctl_ev_fmt_mode>(rsp.at("mode").get<std::uint32_t>());
    if (query_fields) {
      const auto widths = rsp.at("widths").get<std::vector<std::uint32_t>>();
      const std::size_t room =
          attr->ev_fmt_op.fmt_field_count > 0 ? static_cast<std::size_t>(attr->ev_fmt_op.fmt_field_count) : 0;
      attr->ev_fmt_op.fmt_field_count = static_cast<int>(widths.size());
      if (room < widths.size()) {
        ctx->last_error = "the field array needs " + std::to_string(widths.size()) + " entries";
        return E2BIG;
      }
      if (!widths.empty() && attr->ev_fmt_op.fmt_fields == nullptr) return EINVAL;
      for (std::size_t i = 0; i < widths.size(); ++i)
        attr->ev_fmt_op.fmt_fields[i].width = static_cast<std::uint8_t>(widths[i]);
    }
  } catch (const std::exception& e) {
    ctx->last_error = std::string("bad response: ") + e.what();
    return EIO;
  }
  return 0;
}

int mrc_ctl_modify_ev_profile(mrc_ctl_context* ctx, uint64_t id, mrc_ctl_ev_profile_attr* attr,
                              uint32_t attr_mask, uint32_t* done) {
  if (attr != nullptr && (attr_mask & MRC_CTL_EV_PROFILE_CUR_STATE)) return EINVAL;
  return ev_profile_call(ctx, true, id, attr, attr_mask, done);
}

int mrc_ctl_query_ev_profile(mrc_ctl_context* ctx, uint64_t id, mrc_ctl_ev_profile_attr* attr,
                             uint32_t attr_mask) {
  if (attr != nullptr && (attr_mask & MRC_CTL_EV_PROFILE_EV_OP) &&
      attr->ev_op.op != MRC_CTL_EV_OP_QUERY_EV_STATE && attr->ev_op.op != MRC_CTL_EV_OP_QUERY_EV_ARRAY)
    return EINVAL;
  return ev_profile_call(ctx, false, id, attr, attr_mask, nullptr);
}

int mrc_ctl_modify_cc_profile(mrc_ctl_context* ctx, uint64_t id, mrc_ctl_cc_profile_attr* attr,
                              uint32_t attr_mask) {
  if (ctx == nullptr || attr == nullptr) return EINVAL;
  json config = nullptr;
  if (attr_mask & MRC_CTL_CC_PROFILE_CONFIG) {
    if (attr->cc_config == nullptr) {
      ctx->last_error = "cc_config must point to a struct mrc_ctl_cc_nscc_cfg";
      return EINVAL;
    }
    config = mrc::api::to_json(*static_cast<const mrc_ctl_cc_nscc_cfg*>(attr->cc_config));
  }
  json rsp;
  return call(ctx,
              json{{"op", "modify_cc"},
                   {"id", id},
                   {"mask", attr_mask},
                   {"state", static_cast<std::uint32_t>(attr->profile_state)},
                   {"algorithm", attr->algorithm ? json(attr->algorithm) : json(nullptr)},
                   {"config", config}},
              rsp);
}

int mrc_ctl_query_cc_profile(mrc_ctl_context* ctx, uint64_t id, mrc_ctl_cc_profile_attr* attr,
                             uint32_t attr_mask) {
  constexpr std::uint32_t known = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE |
                                  MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG |
                                  static_cast<std::uint32_t>(MRC_CTL_CC_PROFILE_VENDOR_CFG);
  if (ctx == nullptr || attr == nullptr || (attr_mask & ~known)) return EINVAL;
  json rsp;
  if (const int rc = call(ctx, json{{"op", "query_cc"}, {"id", id}}, rsp); rc != 0) return rc;
  try {
    attr->cur_profile_state = static_cast<mrc_ctl_profile_state>(rsp.at("state").get<std::uint32_t>());
    if (attr_mask & MRC_CTL_CC_PROFILE_STATE) attr->profile_state = attr->cur_profile_state;
    if (attr_mask & MRC_CTL_CC_PROFILE_ALGORITHM)
      attr->algorithm = rsp.at("algorithm").is_null() ? nullptr : kAlgorithms[0];
    if (attr_mask & MRC_CTL_CC_PROFILE_CONFIG) {
      if (attr->cc_config == nullptr) return EINVAL;
      // The caller's buffer (OCP's member is const void*: the provider fills what it points to).
      if (!rsp.at("config").is_null())
        *static_cast<mrc_ctl_cc_nscc_cfg*>(const_cast<void*>(attr->cc_config)) =
            mrc::api::nscc_from_json(rsp.at("config"));
    }
  } catch (const std::exception& e) {
    ctx->last_error = std::string("bad response: ") + e.what();
    return EIO;
  }
  return 0;
}

mrc_ctl_ev_event_cq* mrc_ctl_create_ev_event_cq(mrc_ctl_context* ctx, int cqe, void* cq_context,
                                                void* channel, int comp_vector) {
  if (ctx == nullptr || cqe <= 0 || channel != nullptr || comp_vector != 0) {
    errno = EINVAL;
    return nullptr;
  }
  json rsp;
  if (const int rc = call(ctx, json{{"op", "create_cq"}, {"cqe", cqe}}, rsp); rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* cq = new mrc_ctl_ev_event_cq;
  ++ctx->cqs;
  cq->ctx = ctx;
  cq->id = rsp.value("cq", std::uint64_t{0});
  cq->cq_context = cq_context;
  return cq;
}

int mrc_ctl_destroy_ev_event_cq(mrc_ctl_ev_event_cq* cq) {
  if (cq == nullptr) return EINVAL;
  json rsp;
  const int rc = call(cq->ctx, json{{"op", "destroy_cq"}, {"cq", cq->id}}, rsp);
  if (rc != 0) return rc;
  --cq->ctx->cqs;
  delete cq;
  return 0;
}

void* mrc_ctl_ev_event_cq_context(const mrc_ctl_ev_event_cq* cq) {
  return cq ? cq->cq_context : nullptr;
}

int mrc_ctl_poll_ev_event(mrc_ctl_ev_event_cq* cq, int num_entries, mrc_ctl_ev_event* ev) {
  if (cq == nullptr || num_entries < 0 || (num_entries > 0 && ev == nullptr)) return -EINVAL;
  json rsp;
  if (const int rc = call(cq->ctx, json{{"op", "poll_cq"}, {"cq", cq->id}, {"n", num_entries}}, rsp); rc != 0)
    return -rc;
  try {
    const json& events = rsp.at("events");
    int n = 0;
    for (const json& e : events) {
      if (n >= num_entries) break;
      mrc_ctl_ev_event& o = ev[n++];
      o = mrc_ctl_ev_event{};
      o.profile_id = e.at("profile").get<std::uint64_t>();
      copy_ev(e.at("ev").get<std::string>(), o.ev.val);
      o.ev.port = e.at("port").get<std::uint8_t>();
      o.drop_count = e.at("drops").get<std::uint32_t>();
      o.state = static_cast<mrc_ctl_ev_state>(e.at("state").get<std::uint32_t>());
    }
    return n;
  } catch (const std::exception& e) {
    cq->ctx->last_error = std::string("bad response: ") + e.what();
    return -EIO;
  }
}

int mrc_ctl_ep_batch_send_wait(mrc_ctl_context* ctx, uint8_t req_tc, mrc_ctl_ep_op_type op_type,
                               const mrc_ctl_ep_req* req, uint32_t num_req, uint64_t rsp_timeout_ns,
                               mrc_ctl_ep_rsp* rsp, uint32_t* num_rsp) {
  if (ctx == nullptr || num_rsp == nullptr || (num_req > 0 && req == nullptr) ||
      (op_type == MRC_CTL_EP_OP_EV_PROBE && num_req > 0 && rsp == nullptr))
    return EINVAL;
  *num_rsp = 0;
  json reqs = json::array();
  for (std::uint32_t i = 0; i < num_req; ++i) {
    const mrc_ctl_ep_req& r = req[i];
    reqs.push_back(json{{"req_id", r.req_id},
                        {"dgid", std::vector<std::uint8_t>(r.dgid.raw, r.dgid.raw + 16)},
                        {"ev_fmt_mode", r.ev_fmt_mode},
                        {"ev", mrc::api::ev_hex(ev_bytes(r.req_ev.val))},
                        {"port", r.req_ev.port},
                        {"port_status", r.op.port_status_update.port_status}});
  }
  json out;
  const int rc = call(ctx,
                      json{{"op", "ep_batch"},
                           {"tc", req_tc},
                           {"op_type", static_cast<std::uint32_t>(op_type)},
                           {"timeout", rsp_timeout_ns},
                           {"reqs", reqs}},
                      out, rsp_timeout_ns);
  // ETIMEDOUT with an answer: some probes went unanswered (the others are in it); without one, the
  // endpoint itself did not answer.
  if (rc != 0 && (rc != ETIMEDOUT || !out.is_object())) return rc;
  try {
    for (const json& r : out.at("rsps")) {
      if (*num_rsp >= num_req) break;
      mrc_ctl_ep_rsp& o = rsp[(*num_rsp)++];
      o.req_id = r.at("req_id").get<std::uint16_t>();
      o.port = r.at("port").get<std::uint8_t>();
      o.rtt =
          static_cast<unsigned int>(std::min<std::uint64_t>(r.at("rtt").get<std::uint64_t>(), 0xFFFFFFFFu));
      o.adj_svc_time = r.at("adj").get<bool>() ? 1 : 0;
    }
  } catch (const std::exception& e) {
    ctx->last_error = std::string("bad response: ") + e.what();
    return EIO;
  }
  return rc;
}
