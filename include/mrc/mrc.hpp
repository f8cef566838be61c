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

using Pd = Handle<mrc_pd, mrc_dealloc_pd>;
using Mr = Handle<mrc_mr, mrc_dereg_mr>;
using CompChannel = Handle<mrc_comp_channel, mrc_destroy_comp_channel>;
using QpHint = Handle<mrc_qp_hint, mrc_destroy_qp_hint>;

class Device : public Handle<mrc_device, mrc_close_device> {
 public:
  using Handle::Handle;
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
  mrc_gid gid(std::uint8_t port_num) const {
    mrc_gid g{};
    detail::check(mrc_query_gid(get(), port_num, 0, &g), "mrc_query_gid");
    return g;
  }
  std::uint16_t udp_port() const {
    std::uint16_t p = 0;
    detail::check(mrc_query_udp_port(get(), &p), "mrc_query_udp_port");
    return p;
  }
  Pd alloc_pd() const { return Pd(detail::check_ptr(mrc_alloc_pd(get()), "mrc_alloc_pd")); }
};

inline Mr reg_mr(const Pd& pd, void* addr, std::size_t length, int access) {
  return Mr(detail::check_ptr(mrc_reg_mr(pd.get(), addr, length, access), "mrc_reg_mr"));
}

class Cq : public Handle<mrc_cq, mrc_destroy_cq> {
 public:
  using Handle::Handle;
  /// Completions written into `wc` (0 when empty). Throws on a CQ error (overrun).
  std::size_t poll(std::span<mrc_wc> wc) const {
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
  void modify(const mrc_ib_qp_attr* v, std::uint32_t vmask, const mrc_qp_attr* m, std::uint32_t mmask) const {
    detail::check(mrc_modify_qp(get(), v, vmask, m, mmask), "mrc_modify_qp");
  }
  void query(mrc_ib_qp_attr* v, std::uint32_t vmask, mrc_qp_attr* m, std::uint32_t mmask,
             mrc_qp_init_attr* init = nullptr) const {
    detail::check(mrc_query_qp(get(), v, vmask, m, mmask, init), "mrc_query_qp");
  }
  mrc_qp_state state() const {
    mrc_ib_qp_attr v{};
    query(&v, MRC_IB_QP_STATE, nullptr, 0);
    return v.qp_state;
  }
  void post_send(mrc_send_wr& wr) const {
    mrc_send_wr* bad = nullptr;
    detail::check(mrc_post_send(get(), &wr, &bad), "mrc_post_send");
  }
  void post_recv(mrc_recv_wr& wr) const {
    mrc_recv_wr* bad = nullptr;
    detail::check(mrc_post_recv(get(), &wr, &bad), "mrc_post_recv");
  }
};

class Context : public Handle<mrc_context, mrc_destroy_context> {
 public:
  using Handle::Handle;
  static Context create(const Device& dev, const mrc_context_attr* attr = nullptr) {
    return Context(detail::check_ptr(mrc_create_context(dev.get(), attr), "mrc_create_context"));
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
    return QpHint(detail::check_ptr(mrc_create_qp_hint(get(), &attr), "mrc_create_qp_hint"));
  }
  Qp create_qp(const mrc_qp_init_attr& attr) const {
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
