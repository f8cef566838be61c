// Bulk EV programming: how many EVs per second a controller fills into an explicit EV profile.
//
// OCP's walkthrough (mrc_ctl_exp_ev) replaces the EVs of an explicit profile one REPLACE_EV call
// each, every call naming "the first unpopulated entry". This program does exactly that for N EVs
// (default 65,536, the store's max_evs_profile) through an in-process handle and through a control
// socket, and, as the baseline measured in the same run, the same N EVs in one batched REPLACE_EV
// call. It prints EVs/s for each and the single-call rate as a fraction of the batched one, and
// checks the array afterwards (every EV in place, none left unpopulated).
//
//   mrc_ctl_bench [N] [--json]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/ctl.hpp"
#include "api/ctl_server.hpp"

namespace {

using namespace mrc;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what, mrc_ctl_context* c) {
  std::fprintf(stderr, "mrc_ctl_bench: %s: %s\n", what.c_str(), c ? mrc_ctl_last_error(c) : "");
  std::exit(1);
}

void check(int rc, const std::string& what, mrc_ctl_context* c) {
  if (rc != 0) die(what + " (" + std::strerror(rc) + ")", c);
}

mrc_ctl_ev ev_of(std::uint32_t i) {
  // Distinct STEV values with no low source port: 0x8000 + i in the port, i in the label.
  mrc_ctl_ev e{};
  const std::uint32_t v = ((0x8000u + (i & 0x7FFF)) << 16) | (i >> 15 << 8) | (i & 0xFF);
  e.val[0] = static_cast<std::uint8_t>(v >> 24);
  e.val[1] = static_cast<std::uint8_t>(v >> 16);
  e.val[2] = static_cast<std::uint8_t>(v >> 8);
  e.val[3] = static_cast<std::uint8_t>(v);
  e.port = static_cast<std::uint8_t>(1 + i % 2);
  return e;
}

/// An ONLINE STEV format 13 and EV profile `id` OFFLINE with `n` unpopulated entries.
void setup(mrc_ctl_context* c, std::uint64_t id, std::uint32_t n) {
  mrc_ctl_ev_fmt_field w[2] = {{16}, {16}};
  mrc_ctl_ev_fmt_profile_attr f{};
  if (mrc_ctl_query_ev_fmt_profile(c, 13, &f, MRC_CTL_EV_FMT_PROFILE_CUR_STATE) != 0 ||
      f.cur_profile_state != MRC_CTL_PROFILE_ONLINE) {
    f = {};
    f.profile_state = MRC_CTL_PROFILE_OFFLINE;
    f.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
    f.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
    f.ev_fmt_op.fmt_fields = w;
    f.ev_fmt_op.fmt_field_count = 2;
    check(mrc_ctl_modify_ev_fmt_profile(
              c, 13, &f,
              MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP),
          "format to OFFLINE", c);
    f = {};
    f.profile_state = MRC_CTL_PROFILE_ONLINE;
    check(mrc_ctl_modify_ev_fmt_profile(c, 13, &f, MRC_CTL_EV_FMT_PROFILE_STATE), "format to ONLINE", c);
  }
  mrc_ctl_ev_field fields[2] = {{16, 0, 0, 0xFFFF, 0xFFFF}, {16, 0, 0, 0xFFFF, 0xFFFF}};
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  a.ev_mode = MRC_CTL_EV_MODE_EXP;
  a.ev_fmt_profile_id = 13;
  a.ev_count = n;
  a.ev_min_active = 1;
  a.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  a.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  a.ev_fields_op.fields = fields;
  a.ev_fields_op.field_count = 2;
  check(mrc_ctl_modify_ev_profile(c, id, &a,
                                  MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                      MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                      MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK |
                                      MRC_CTL_EV_PROFILE_EV_FIELDS_OP),
        "EV profile to OFFLINE", c);
}

/// The array holds exactly the N EVs, in order.
void verify(mrc_ctl_context* c, std::uint64_t id, std::uint32_t n) {
  std::vector<mrc_ctl_ev_op_entry> out(n);
  mrc_ctl_ev_profile_attr a{};
  a.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  a.ev_op.entries = out.data();
  a.ev_op.entry_count = static_cast<int>(n);
  check(mrc_ctl_query_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP), "query the array", c);
  if (a.ev_op.entry_count != static_cast<int>(n)) die("the array has the wrong size", c);
  for (std::uint32_t i = 0; i < n; ++i) {
    const mrc_ctl_ev want = ev_of(i);
    if (std::memcmp(out[i].ev.val, want.val, 4) != 0 || out[i].ev.port != want.port)
      die("entry " + std::to_string(i) + " is not the EV replaced into it", c);
  }
}

/// N single-EV REPLACE_EV calls, each on the first unpopulated entry (OCP's walkthrough).
double single_calls(mrc_ctl_context* c, std::uint64_t id, std::uint32_t n) {
  setup(c, id, n);
  const auto t0 = Clock::now();
  for (std::uint32_t i = 0; i < n; ++i) {
    mrc_ctl_ev_op_entry e{};
    e.ev = mrc_ctl_ev{};  // MRC_CTL_EV_UNPOPULATED
    e.ev_new = ev_of(i);
    e.state = MRC_CTL_EV_GOOD;
    mrc_ctl_ev_profile_attr a{};
    a.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
    a.ev_op.entries = &e;
    a.ev_op.entry_count = 1;
    check(mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP), "replace EV " + std::to_string(i),
          c);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  verify(c, id, n);
  return n / s;
}

/// The same N EVs in one REPLACE_EV call.
double one_batch(mrc_ctl_context* c, std::uint64_t id, std::uint32_t n) {
  setup(c, id, n);
  std::vector<mrc_ctl_ev_op_entry> ops(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    ops[i].ev_new = ev_of(i);
    ops[i].state = MRC_CTL_EV_GOOD;
  }
  const auto t0 = Clock::now();
  mrc_ctl_ev_profile_attr a{};
  a.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
  a.ev_op.entries = ops.data();
  a.ev_op.entry_count = static_cast<int>(n);
  check(mrc_ctl_modify_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP), "batched replace", c);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  verify(c, id, n);
  return n / s;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint32_t n = 65536;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0)
      json = true;
    else
      n = static_cast<std::uint32_t>(std::strtoul(argv[i], nullptr, 10));
  }
  if (n == 0 || n > 65536) {
    std::fprintf(stderr, "usage: mrc_ctl_bench [N (1..65536)] [--json]\n");
    return 2;
  }

  // In process: the handle libmrc gives a controller in the endpoint's own process.
  api::ProfileStore store;
  store.set_num_ports(2);
  api::CtlService svc(store, nullptr, false);
  mrc_ctl_context* local = api::ctl_open_embedded(svc, true);
  const double local_single = single_calls(local, 1, n);
  const double local_batch = one_batch(local, 2, n);
  mrc_ctl_close(local);

  // Over the control socket of a live UDP endpoint (what `mrc ctl` and a remote controller use).
  io::UdpConfig uc;
  io::IpAddr a0, a1;
  io::IpAddr::parse("127.0.96.1", a0);
  io::IpAddr::parse("127.1.96.1", a1);
  uc.planes = {a0, a1};
  std::string err;
  auto udp = io::UdpEndpoint::create(uc, err);
  if (!udp) {
    std::fprintf(stderr, "mrc_ctl_bench: UDP endpoint: %s\n", err.c_str());
    return 1;
  }
  api::ProfileStore sock_store;
  const std::string path = "/tmp/mrc_ctl_bench." + std::to_string(::getpid()) + ".sock";
  auto server = api::start_ctl_server(*udp, sock_store, path, err, true);
  if (!server) {
    std::fprintf(stderr, "mrc_ctl_bench: control socket: %s\n", err.c_str());
    return 1;
  }
  udp->start();
  mrc_ctl_context* remote = mrc_ctl_open(path.c_str());
  if (remote == nullptr) {
    std::fprintf(stderr, "mrc_ctl_bench: connect: %s\n", std::strerror(errno));
    return 1;
  }
  const double sock_single = single_calls(remote, 1, n);
  const double sock_batch = one_batch(remote, 2, n);
  mrc_ctl_close(remote);
  server.reset();
  udp->stop();
  ::unlink(path.c_str());

  if (json) {
    std::printf(
        "{\"evs\": %u, \"in_process\": {\"single_evs_per_s\": %.0f, \"batch_evs_per_s\": %.0f, \"ratio\": "
        "%.4f}, "
        "\"socket\": {\"single_evs_per_s\": %.0f, \"batch_evs_per_s\": %.0f, \"ratio\": %.4f}}\n",
        n, local_single, local_batch, local_single / local_batch, sock_single, sock_batch,
        sock_single / sock_batch);
  } else {
    std::printf("%u EVs, one REPLACE_EV call each (OCP's walkthrough) vs one batched call:\n", n);
    std::printf("  in process      %12.0f EVs/s single  %12.0f EVs/s batched  ratio %.3f\n", local_single,
                local_batch, local_single / local_batch);
    std::printf("  control socket  %12.0f EVs/s single  %12.0f EVs/s batched  ratio %.3f\n", sock_single,
                sock_batch, sock_single / sock_batch);
  }
  return 0;
}
