// A thin C++ layer over mrc.h: unique-ownership handles that destroy their object in the
// destructor, and calls that throw mrc::Error (a std::system_error carrying the errno) instead of
// returning -1. The data path (post_send, post_recv, poll) stays as cheap as the C calls: it
// throws only on a refused request, and poll returns the count.
//
// Destruction order is the application's: a handle whose object is still in use (a CQ with QPs)
// fails to destroy in its destructor and the object leaks, exactly as the C call would refuse it.
// Declare handles in creation order so they are destroyed in reverse.
#pragma once
#include <cerrno>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <utility>

#include "mrc/mrc.h"

namespace mrc {

class Error : public std::system_error {
 public:
  Error(int err, const std::string& what) : std::system_error(err, std::generic_category(), what) {}
};

namespace detail {
inline void check(int rc, const char* what) {
  if (rc != 0) throw Error(errno, what);
}
template <class T>
T* check_ptr(T* p, const char* what) {
  if (p == nullptr) throw Error(errno, what);
  return p;
}
template <auto Destroy>
struct Deleter {
  template <class T>
  void operator()(T* p) const noexcept {
    (void)Destroy(p);
  }
};
}  // namespace detail

/// A unique handle: the C object and the function that destroys it.
template <class T, auto Destroy>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* p) : p_(p) {}
  T* get() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }
  /// Destroys now, reporting a refusal (EBUSY ...) as an exception; the handle stays owning then.
  void destroy() {
    if (p_ && Destroy(p_.get()) != 0) throw Error(errno, "mrc: destroy");
    (void)p_.release();
  }

 private:
  std::unique_ptr<T, detail::Deleter<Destroy>> p_;
};

namespace detail {
// The verbs destroy calls return an errno value; Handle wants 0 or -1 + errno.
inline int errno_rc(int rc) {
  if (rc != 0) errno = rc;
  return rc != 0 ? -1 : 0;
}
inline int dealloc_pd(ibv_pd* p) {
  return errno_rc(ibv_dealloc_pd(p));
}
inline int dereg_mr(ibv_mr* m) {
  return errno_rc(ibv_dereg_mr(m));
}
inline int close_device(ibv_context* c) {
  return errno_rc(ibv_close_device(c));
}
}  // namespace detail

using Pd = Handle<ibv_pd, detail::dealloc_pd>;
using Mr = Handle<ibv_mr, detail::dereg_mr>;
using CompChannel = Handle<mrc_comp_channel, mrc_destroy_comp_channel>;
using QpHint = Handle<mrc_qp_hint, mrc_destroy_qp_hint>;

/// A software verbs device (ibv_context) of libmrc.
class Device : public Handle<ibv_context, detail::close_device> {
 public:
  Device() = default;
  /// "ADDR[,ADDR...][@PORT]" (see mrc_open_device_str).
  static Device open(const char* spec) {
    return Device(detail::check_ptr(mrc_open_device_str(spec), "mrc_open_device"));
  }
  static Device open(const mrc_device_config& cfg) {
    return Device(detail::check_ptr(mrc_open_device(&cfg), "mrc_open_device"));
  }
  mrc_device_attr query() const {
    mrc_device_attr a{};
    detail::check(mrc_query_device(get(), &a, nullptr), "mrc_query_device");
    return a;
  }
  std::uint8_t num_ports() const {
    ibv_device_attr a{};
    if (const int rc = ibv_query_device(get(), &a); rc != 0) throw Error(rc, "ibv_query_device");
    return a.phys_port_cnt;
  }
  ibv_gid gid(std::uint8_t port_num, int index = 0) const {
    ibv_gid g{};
    detail::check(ibv_query_gid(get(), port_num, index, &g), "ibv_query_gid");
    return g;
  }
  std::uint16_t udp_port() const {
    std::uint16_t p = 0;
    detail::check(mrc_query_udp_port(get(), &p), "mrc_query_udp_port");
    return p;
  }
  Pd alloc_pd() const { return Pd(detail::check_ptr(ibv_alloc_pd(get()), "ibv_alloc_pd")); }

 private:
  explicit Device(ibv_context* c) : Handle(c) {}
};

inline Mr reg_mr(const Pd& pd, void* addr, std::size_t length, int access) {
  return Mr(detail::check_ptr(ibv_reg_mr(pd.get(), addr, length, access), "ibv_reg_mr"));
}

class Cq : public Handle<mrc_cq, mrc_destroy_cq> {
 public:
  using Handle::Handle;
  /// Completions written into `wc` (0 when empty). Throws on a CQ error (overrun).
  std::size_t poll(std::span<ibv_wc> wc) const {
    const int n = mrc_poll_cq(get(), static_cast<int>(wc.size()), wc.data());
    if (n < 0) throw Error(errno, "mrc_poll_cq");
    return static_cast<std::size_t>(n);
  }
  void req_notify() const { detail::check(mrc_req_notify_cq(get(), 0), "mrc_req_notify_cq"); }
  void ack_events(unsigned n) const { mrc_ack_cq_events(get(), n); }
};

class Qp : public Handle<mrc_qp, mrc_destroy_qp> {
 public:
  using Handle::Handle;
  std::uint32_t qpn() const {
    std::uint32_t n = 0;
    detail::check(mrc_get_qpn(get(), &n), "mrc_get_qpn");
    return n;
  }
  void modify(ibv_qp_attr* v, int vmask, mrc_qp_attr* m, int mmask) const {
    detail::check(mrc_modify_qp(get(), v, vmask, m, mmask), "mrc_modify_qp");
  }
  void query(ibv_qp_attr* v, int vmask, mrc_qp_attr* m, int mmask, mrc_qp_init_attr* init = nullptr) const {
    detail::check(mrc_query_qp(get(), v, vmask, m, mmask, init), "mrc_query_qp");
  }
  ibv_qp_state state() const {
    ibv_qp_attr v{};
    query(&v, IBV_QP_STATE, nullptr, 0);
    return v.qp_state;
  }
  void post_send(ibv_send_wr& wr) const {
    ibv_send_wr* bad = nullptr;
    detail::check(mrc_post_send(get(), &wr, &bad), "mrc_post_send");
  }
  void post_recv(ibv_recv_wr& wr) const {
    ibv_recv_wr* bad = nullptr;
    detail::check(mrc_post_recv(get(), &wr, &bad), "mrc_post_recv");
  }
};

class Context : public Handle<mrc_context, mrc_destroy_context> {
 public:
  using Handle::Handle;
  static Context create(const Device& dev, mrc_context_attr* attr = nullptr, std::uint32_t flags = 0) {
    return Context(detail::check_ptr(mrc_create_context_ex(dev.get(), attr, flags), "mrc_create_context"));
  }
  CompChannel create_comp_channel() const {
    mrc_comp_channel* ch = nullptr;
    detail::check(mrc_create_comp_channel(get(), &ch), "mrc_create_comp_channel");
    return CompChannel(ch);
  }
  Cq create_cq(int cqe, void* cq_context = nullptr, const CompChannel* channel = nullptr) const {
    return Cq(detail::check_ptr(mrc_create_cq(get(), cqe, cq_context, channel ? channel->get() : nullptr, 0),
                                "mrc_create_cq"));
  }
  QpHint create_qp_hint(const mrc_qp_hint_attr& attr) const {
    mrc_qp_hint_init_attr init{attr};
    return QpHint(detail::check_ptr(mrc_create_qp_hint(get(), &init), "mrc_create_qp_hint"));
  }
  Qp create_qp(mrc_qp_init_attr attr) const {
    return Qp(detail::check_ptr(mrc_create_qp(get(), &attr), "mrc_create_qp"));
  }
  /// Application-driven contexts only.
  int progress(int timeout_ms = 0) const {
    const int n = mrc_progress(get(), timeout_ms);
    if (n < 0) throw Error(errno, "mrc_progress");
    return n;
  }
};

}  // namespace mrc
