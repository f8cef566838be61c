// Controller operations that reach the endpoint: EV probes between two UDP endpoints on
// loopback, port-status updates, port admin, the control socket (server thread + client in the
// same test) and privilege checks of socket peers.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

#include "api/ctl_proto.hpp"
#include "api/ctl_server.hpp"
#include "ctl_harness.hpp"

namespace mrc::ctltest {
namespace {

io::IpAddr addr(const std::string& s) {
  io::IpAddr a;
  EXPECT_TRUE(io::IpAddr::parse(s, a)) << s;
  return a;
}

/// Endpoint A (controller side) and B on 127.<net>.<plane>.1 / .2; B knows A as a peer so it
/// answers A's probes.
struct Pair {
  std::unique_ptr<io::UdpEndpoint> a, b;
  explicit Pair(int net) {
    const std::string p = "127." + std::to_string(net) + ".";
    io::UdpConfig ca;
    ca.planes = {addr(p + "1.1"), addr(p + "2.1")};
    io::UdpConfig cb = ca;
    cb.planes = {addr(p + "1.2"), addr(p + "2.2")};
    std::string err;
    a = io::UdpEndpoint::create(ca, err);
    EXPECT_TRUE(a) << err;
    b = io::UdpEndpoint::create(cb, err);
    EXPECT_TRUE(b) << err;
    if (!a || !b) return;
    EXPECT_NE(b->add_peer(ca.planes), 0u);
    EXPECT_TRUE(a->start());
    EXPECT_TRUE(b->start());
  }
};

mrc_ctl_ep_req probe(std::uint16_t id, const std::string& v4, std::uint8_t port, std::uint32_t ev) {
  mrc_ctl_ep_req r{};
  r.req_id = id;
  r.dgid.raw[10] = r.dgid.raw[11] = 0xFF;
  EXPECT_EQ(inet_pton(AF_INET, v4.c_str(), r.dgid.raw + 12), 1);
  r.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  r.req_ev.val[0] = static_cast<std::uint8_t>(ev >> 24);
  r.req_ev.val[1] = static_cast<std::uint8_t>(ev >> 16);
  r.req_ev.val[2] = static_cast<std::uint8_t>(ev >> 8);
  r.req_ev.val[3] = static_cast<std::uint8_t>(ev);
  r.req_ev.port = port;
  return r;
}

constexpr std::uint64_t kLong = 2'000'000'000;  // answers normally come in microseconds

TEST(CtlProbe, RoundTripBetweenTwoLoopbackEndpointsHasPositiveRtt) {
  Pair p(71);
  ASSERT_TRUE(p.a && p.b);
  Ctl t(2, p.a.get(), true);
  mrc_ctl_ep_req req[2] = {probe(7, "127.71.1.2", 1, 0x00010002u), probe(8, "127.71.2.2", 2, 0x12345678u)};
  mrc_ctl_ep_rsp rsp[2]{};
  std::uint32_t n = 0;
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, req, 2, kLong, rsp, &n), 0)
      << mrc_ctl_last_error(t.ctx);
  ASSERT_EQ(n, 2u);
  for (std::uint32_t i = 0; i < n; ++i) {
    EXPECT_GT(rsp[i].rtt, 0u);
    EXPECT_EQ(rsp[i].port, rsp[i].req_id == 7 ? 1 : 2);
  }
  EXPECT_NE(rsp[0].req_id, rsp[1].req_id);
  // One answers, one goes to an address nobody has: ETIMEDOUT with the answer returned.
  mrc_ctl_ep_req mixed[2] = {probe(9, "127.71.1.2", 1, 5), probe(10, "127.71.1.3", 1, 6)};
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, mixed, 2, 50'000'000, rsp, &n),
            ETIMEDOUT);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(rsp[0].req_id, 9);
  // Refusals.
  mrc_ctl_ep_req dup[2] = {probe(11, "127.71.1.2", 1, 5), probe(11, "127.71.1.2", 1, 6)};
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, dup, 2, kLong, rsp, &n), EINVAL);
  mrc_ctl_ep_req bad = probe(12, "127.71.1.2", 3, 5);
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &bad, 1, kLong, rsp, &n), EINVAL)
      << "port 3 of 2";
  bad = probe(12, "127.71.1.2", 1, 5);
  bad.dgid.raw[10] = 0;  // not an IPv4-mapped GID on an IPv4 endpoint
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &bad, 1, kLong, rsp, &n), EINVAL);
  bad = probe(12, "127.71.1.2", 1, 5);
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 64, MRC_CTL_EP_OP_EV_PROBE, &bad, 1, kLong, rsp, &n), EINVAL)
      << "req_tc is a DSCP";
  api::CtlSession s{true, {}, {}};
  const auto unknown = nlohmann::json::parse(
      t.svc->dispatch(s, R"({"op":"ep_batch","tc":0,"op_type":7,"timeout":1,"reqs":[]})"));
  EXPECT_EQ(unknown.at("rc").get<int>(), ENOTSUP);
}

TEST(CtlProbe, PeerTheEndpointAlreadyKnowsAnswers) {
  // A knows B already (as a QP registers it: every plane's address). Probes used to register a
  // second, stand-in peer for the dgid, while answers were attributed to the first one: timeout.
  Pair p(81);
  ASSERT_TRUE(p.a && p.b);
  const std::vector<io::IpAddr> b_planes = {addr("127.81.1.2"), addr("127.81.2.2")};
  std::uint32_t known = 0;
  p.a->execute([&](engine::Endpoint&) { known = p.a->add_peer(b_planes); });
  ASSERT_NE(known, 0u);
  Ctl t(2, p.a.get(), true);
  mrc_ctl_ep_req req[2] = {probe(1, "127.81.1.2", 1, 0x00010002u), probe(2, "127.81.2.2", 2, 7)};
  mrc_ctl_ep_rsp rsp[2]{};
  std::uint32_t n = 0;
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, req, 2, kLong, rsp, &n), 0)
      << mrc_ctl_last_error(t.ctx);
  EXPECT_EQ(n, 2u);
  std::uint32_t peers_after = 0;
  p.a->execute([&](engine::Endpoint&) { peers_after = p.a->add_peer(b_planes); });
  EXPECT_EQ(peers_after, known + 1) << "the probes reused the known peer";
}

TEST(CtlProbe, PeerRegisteredAfterAProbeGetsItsTraffic) {
  // A probe to an unknown address registers a stand-in; a QP's peer registered later for the same
  // address must receive that address's packets (the latest registration wins), and probes follow.
  Pair p(82);
  ASSERT_TRUE(p.a && p.b);
  Ctl t(2, p.a.get(), true);
  mrc_ctl_ep_req r = probe(1, "127.82.1.2", 1, 5);
  mrc_ctl_ep_rsp rsp{};
  std::uint32_t n = 0;
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &r, 1, kLong, &rsp, &n), 0)
      << mrc_ctl_last_error(t.ctx);
  std::uint32_t stand_in = 0, qp_peer = 0;
  p.a->execute([&](engine::Endpoint&) {
    stand_in = p.a->peer_at(0, addr("127.82.1.2"));
    qp_peer = p.a->add_peer({addr("127.82.1.2"), addr("127.82.2.2")});
  });
  ASSERT_NE(stand_in, 0u);
  ASSERT_NE(qp_peer, 0u);
  std::uint32_t now_at = 0;
  p.a->execute([&](engine::Endpoint&) { now_at = p.a->peer_at(0, addr("127.82.1.2")); });
  EXPECT_EQ(now_at, qp_peer);
  r.req_id = 2;
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &r, 1, kLong, &rsp, &n), 0)
      << mrc_ctl_last_error(t.ctx);
}

TEST(CtlSrv6, StoreTableIsTheEndpointPathList) {
  // SRv6 mode needs CAP_NET_RAW (raw sockets); the tests run as root. Nothing is sent: the check is
  // the carrier the endpoint would address for each profile EV.
  io::UdpConfig c;
  c.planes = {addr("::1")};
  c.ev_mode = io::EvMode::kSrv6;
  c.port = 24921;
  c.srv6.paths = {{0x2001}};  // the endpoint's own list, until a controller names paths
  std::string err;
  auto ep = io::UdpEndpoint::create(c, err);
  ASSERT_TRUE(ep) << err;
  const std::uint32_t peer = ep->add_peer({addr("fcbb:bb01:3002::")});
  ASSERT_NE(peer, 0u);
  Ctl t(1, ep.get());
  online_fmt(t.ctx, 15, MRC_CTL_EV_FMT_MODE_SRV6, {32, 16, 16});
  // Locator block fcbb:bb01 fixed, two uSIDs from the raw EV.
  std::vector<mrc_ctl_ev_field> f = {
      {32, 0xFCBBBB01u, 0, 0, 0}, {16, 0, 0, 0xFFFF, 0xFFFF}, {16, 0, 0, 0xFFFF, 0xFFFF}};
  ASSERT_EQ(ev_offline(t.ctx, 3, MRC_CTL_EV_MODE_EXP, 15, 3, f), 0) << mrc_ctl_last_error(t.ctx);
  std::vector<mrc_ctl_ev_op_entry> e(3);
  const std::uint16_t usids[3][2] = {{0x2002, 0}, {0x1001, 0x2003}, {0x2001, 0}};
  for (int i = 0; i < 3; ++i) {
    e[i].ev_new = ev16(usids[i][0], usids[i][1], 1);
    e[i].state = MRC_CTL_EV_GOOD;
  }
  ASSERT_EQ(ev_op(t.ctx, 3, MRC_CTL_EV_OP_REPLACE_EV, e), 0) << mrc_ctl_last_error(t.ctx);
  ASSERT_EQ(ev_online(t.ctx, 3), 0) << mrc_ctl_last_error(t.ctx);
  api::QpProfiles qp;
  ASSERT_EQ(t.store.acquire(3, 0, 1, qp), 0);
  ASSERT_EQ(qp.evs.size(), 3u);
  const char* want[3] = {"fcbb:bb01:2002:3002::", "fcbb:bb01:1001:2003:3002::", "fcbb:bb01:2001:3002::"};
  for (int i = 0; i < 3; ++i) {
    io::IpAddr dst;
    ASSERT_TRUE(ep->srv6_destination(peer, 0, qp.evs[i].value, dst));
    EXPECT_EQ(dst.str(), want[i]) << "EV " << i;
  }
  t.store.release(3, 0);
  // An EV the endpoint cannot carry is refused when it is set: a zero uSID then a set one.
  std::vector<mrc_ctl_ev_op_entry> bad(1);
  bad[0].ev = e[0].ev_new;
  bad[0].ev_new = ev16(0, 0x2002, 1);
  bad[0].state = MRC_CTL_EV_GOOD;
  ASSERT_EQ(ev_state(t.ctx, 3, MRC_CTL_PROFILE_OFFLINE), 0);
  EXPECT_EQ(ev_op(t.ctx, 3, MRC_CTL_EV_OP_REPLACE_EV, bad), EINVAL);
  EXPECT_NE(std::string(mrc_ctl_last_error(t.ctx)).find("end of carrier"), std::string::npos)
      << mrc_ctl_last_error(t.ctx);
}

TEST(CtlPort, AdminStateDrivesTheEngineAndPortStatusUpdates) {
  Pair p(72);
  ASSERT_TRUE(p.a && p.b);
  Ctl t(2, p.a.get(), true);
  mrc_ctl_port_attr pa{};
  ASSERT_EQ(mrc_ctl_query_port(t.ctx, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), 0);
  EXPECT_EQ(pa.port_admin_state, MRC_CTL_PORT_ADMIN_ENABLED);
  EXPECT_EQ(mrc_ctl_query_port(t.ctx, 3, &pa, MRC_CTL_PORT_ADMIN_STATE), EINVAL);
  EXPECT_EQ(mrc_ctl_query_port(t.ctx, 0, &pa, MRC_CTL_PORT_ADMIN_STATE), EINVAL);
  pa.port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED;
  EXPECT_EQ(mrc_ctl_modify_port(t.ctx, 1, &pa, 1u << 1), EINVAL) << "unknown mask bit";
  ASSERT_EQ(mrc_ctl_modify_port(t.ctx, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), 0);
  ASSERT_EQ(mrc_ctl_query_port(t.ctx, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), 0);
  EXPECT_EQ(pa.port_admin_state, MRC_CTL_PORT_ADMIN_DISABLED);
  std::uint32_t engine_mask = 0;
  p.a->execute([&](engine::Endpoint& ep) { engine_mask = ep.port_mask(); });
  EXPECT_EQ(engine_mask, 0b10u);
  mrc_ctl_ep_req r = probe(1, "127.72.1.2", 1, 5);
  mrc_ctl_ep_rsp rsp{};
  std::uint32_t n = 0;
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &r, 1, kLong, &rsp, &n), EIO)
      << "port 1 is down";
  // A port-status update must carry the real usable ports (bit N = port N): now port 2 only.
  mrc_ctl_ep_req u = probe(2, "127.72.2.2", 2, 0);
  u.op.port_status_update.port_status = 0b110;
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &u, 1, kLong, nullptr, &n),
            EINVAL);
  u.op.port_status_update.port_status = 0b100;
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &u, 1, kLong, nullptr, &n),
            0)
      << mrc_ctl_last_error(t.ctx);
  EXPECT_EQ(n, 0u) << "updates are not answered";
  bool seen = false;
  for (int i = 0; i < 20000 && !seen; ++i) {
    engine::Event e;
    while (p.b->poll_event(e))
      if (e.type == engine::EventType::kPortStatus && e.port_mask == 0b10u) seen = true;
    if (!seen) ::usleep(100);
  }
  EXPECT_TRUE(seen) << "B learned that A has only its second port";
  pa.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
  ASSERT_EQ(mrc_ctl_modify_port(t.ctx, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), 0);
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(t.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &r, 1, kLong, &rsp, &n), 0);
  // Without an endpoint behind the controller these are ENOTSUP.
  Ctl offline;
  EXPECT_EQ(mrc_ctl_query_port(offline.ctx, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), ENOTSUP);
}

std::string sock_path(const char* tag) {
  return "/tmp/mrc-ctl-" + std::string(tag) + "-" + std::to_string(::getpid());
}

TEST(CtlSocket, ServerAndClientRunTheSameOperations) {
  Pair p(73);
  ASSERT_TRUE(p.a && p.b);
  api::ProfileStore store;
  std::string err;
  const std::string path = sock_path("srv");
  auto srv = api::start_ctl_server(*p.a, store, path, err, true);
  ASSERT_TRUE(srv) << err;
  errno = 0;
  EXPECT_EQ(mrc_ctl_open("/tmp/mrc-ctl-does-not-exist"), nullptr);
  EXPECT_EQ(errno, ENOENT);
  mrc_ctl_context* c = mrc_ctl_open(path.c_str());
  ASSERT_NE(c, nullptr);
  online_fmt(c, 13);
  explicit_profile(c, 1, 13, 4, 2);
  std::vector<mrc_ctl_ev_op_entry> arr(4);
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  q.ev_op.entries = arr.data();
  q.ev_op.entry_count = 4;
  ASSERT_EQ(mrc_ctl_query_ev_profile(c, 1, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(arr[3].ev.val[1], 4);
  EXPECT_EQ(arr[3].ev.port, 2);
  api::QpProfiles qp;
  ASSERT_EQ(store.acquire(1, 0, 2, qp), 0) << "the server changed this process's store";
  EXPECT_EQ(ev_state(c, 1, MRC_CTL_PROFILE_OFFLINE), EBUSY);
  store.release(1, 0);
  mrc_ctl_ep_req r = probe(3, "127.73.1.2", 1, 5);
  mrc_ctl_ep_rsp rsp{};
  std::uint32_t n = 0;
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(c, 0, MRC_CTL_EP_OP_EV_PROBE, &r, 1, kLong, &rsp, &n), 0)
      << mrc_ctl_last_error(c);
  EXPECT_GT(rsp.rtt, 0u);
  mrc_ctl_ev_event_cq* cq = mrc_ctl_create_ev_event_cq(c, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  std::vector<mrc_ctl_ev_op_entry> e(1);
  e[0].ev = ev16(1, 1, 1);
  e[0].state = MRC_CTL_EV_DENIED;
  ASSERT_EQ(ev_op(c, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), 0);
  e[0].state = MRC_CTL_EV_GOOD;
  ASSERT_EQ(ev_op(c, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, e), 0);
  mrc_ctl_ev_event ev[2];
  ASSERT_EQ(mrc_ctl_poll_ev_event(cq, 2, ev), 1);
  EXPECT_EQ(ev[0].state, MRC_CTL_EV_GOOD);
  // A raw garbage message gets an error answer and the connection keeps working.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  std::string out;
  ASSERT_TRUE(api::send_msg(fd, "not json"));
  ASSERT_TRUE(api::recv_msg(fd, out));
  EXPECT_EQ(nlohmann::json::parse(out).at("rc").get<int>(), EINVAL);
  ASSERT_TRUE(api::send_msg(fd, R"({"op":"query_device"})"));
  ASSERT_TRUE(api::recv_msg(fd, out));
  EXPECT_EQ(nlohmann::json::parse(out).at("rc").get<int>(), 0);
  ::close(fd);
  EXPECT_EQ(mrc_ctl_close(c), EBUSY) << "an event CQ is still open";
  EXPECT_EQ(mrc_ctl_destroy_ev_event_cq(cq), 0);
  EXPECT_EQ(mrc_ctl_close(c), 0);
}

// A listening UNIX socket nobody serves: connect() completes from its backlog.
int unserved_socket(const std::string& path) {
  ::unlink(path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, 4) != 0)
    return -1;
  return fd;
}

// A control socket whose endpoint never answers (stopped, stuck), or that speaks something else,
// gives the call an error within the reply timeout (MRC_CTL_TIMEOUT, here 0.2 s) instead of waiting
// for ever; the connection is then given up, since a late answer would be read as the next call's.
TEST(CtlSocket, ASilentOrForeignSocketGivesAnErrorNotAHang) {
  const std::string silent = sock_path("silent"), foreign = sock_path("foreign");
  const int ls = unserved_socket(silent), lf = unserved_socket(foreign);
  ASSERT_GE(ls, 0);
  ASSERT_GE(lf, 0);
  ::setenv("MRC_CTL_TIMEOUT", "0.2", 1);
  mrc_ctl_context* c = mrc_ctl_open(silent.c_str());
  mrc_ctl_context* f = mrc_ctl_open(foreign.c_str());
  ::unsetenv("MRC_CTL_TIMEOUT");
  ASSERT_NE(c, nullptr);
  ASSERT_NE(f, nullptr);
  mrc_ctl_device_attr d{};
  EXPECT_EQ(mrc_ctl_query_device(c, &d), ETIMEDOUT);
  EXPECT_NE(std::string(mrc_ctl_last_error(c)).find("no answer from the endpoint within 201 ms"),
            std::string::npos)
      << mrc_ctl_last_error(c);
  EXPECT_EQ(mrc_ctl_query_device(c, &d), EIO);
  EXPECT_NE(std::string(mrc_ctl_last_error(c)).find("control connection lost"), std::string::npos)
      << mrc_ctl_last_error(c);
  EXPECT_EQ(mrc_ctl_close(c), 0);
  // The other answers with bytes that are no MRC control message: a length of 4 GB.
  const int a = ::accept(lf, nullptr, nullptr);
  ASSERT_GE(a, 0);
  const std::uint8_t junk[8] = {0xFF, 0xFF, 0xFF, 0xFF, 'j', 'u', 'n', 'k'};
  ASSERT_EQ(::write(a, junk, sizeof junk), static_cast<ssize_t>(sizeof junk));
  EXPECT_EQ(mrc_ctl_query_device(f, &d), EPROTO);
  EXPECT_NE(std::string(mrc_ctl_last_error(f)).find("not an MRC control socket?"), std::string::npos)
      << mrc_ctl_last_error(f);
  EXPECT_EQ(mrc_ctl_close(f), 0);
  ::close(a);
  ::close(ls);
  ::close(lf);
  ::unlink(silent.c_str());
  ::unlink(foreign.c_str());
}

// A timeout that is not a number of seconds in range fails the open (EINVAL, with the reason for
// the caller that asks) rather than quietly waiting the default 10 s.
TEST(CtlSocket, AnInvalidTimeoutFailsTheOpen) {
  const std::string path = sock_path("timeout");
  const int l = unserved_socket(path);
  ASSERT_GE(l, 0);
  for (const char* bad : {"ten", "0", "0.0005", "-1", "86401", "1e999", "nan", "5s", " "}) {
    ::setenv("MRC_CTL_TIMEOUT", bad, 1);
    errno = 0;
    EXPECT_EQ(mrc_ctl_open(path.c_str()), nullptr) << bad;
    EXPECT_EQ(errno, EINVAL) << bad;
    std::chrono::milliseconds t{};
    std::string why;
    EXPECT_FALSE(mrc::api::ctl_reply_timeout(t, why)) << bad;
    EXPECT_EQ(why, std::string("MRC_CTL_TIMEOUT=") + bad + ": not a number of seconds in 0.001-86400");
  }
  for (const auto& [good, ms] : std::initializer_list<std::pair<const char*, std::int64_t>>{
           {"0.001", 1}, {"2.5", 2500}, {"86400", 86400000}, {"", 10000}}) {
    ::setenv("MRC_CTL_TIMEOUT", good, 1);
    std::chrono::milliseconds t{};
    std::string why;
    EXPECT_TRUE(mrc::api::ctl_reply_timeout(t, why)) << good << ": " << why;
    EXPECT_EQ(t.count(), ms) << good;
    mrc_ctl_context* c = mrc_ctl_open(path.c_str());
    EXPECT_NE(c, nullptr) << good;
    if (c != nullptr) {
      mrc_ctl_close(c);
      ::close(::accept(l, nullptr, nullptr));  // keep the listen queue from filling
    }
  }
  ::unsetenv("MRC_CTL_TIMEOUT");
  ::close(l);
  ::unlink(path.c_str());
}

TEST(CtlSocket, UnprivilegedPeerGetsEpermAndMayQuery) {
  // Fork before any thread exists; the child drops to nobody and talks to the server.
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const std::string path = sock_path("perm");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char b = 0;
    if (::read(go[0], &b, 1) != 1) ::_exit(10);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(11);
    mrc_ctl_context* c = mrc_ctl_open(path.c_str());
    if (c == nullptr) ::_exit(12);
    mrc_ctl_ev_fmt_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
    if (mrc_ctl_modify_ev_fmt_profile(c, 13, &a,
                                      MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE) != EPERM)
      ::_exit(13);
    mrc_ctl_device_attr d{};
    if (mrc_ctl_query_device(c, &d) != 0) ::_exit(14);
    mrc_ctl_close(c);
    ::_exit(0);
  }
  ::close(go[0]);
  Pair p(74);
  ASSERT_TRUE(p.a && p.b);
  api::ProfileStore store;
  std::string err;
  api::CtlServerOptions opts;
  opts.group = "65534";  // the socket is 0600 unless a group may connect: the child's
  auto srv = api::start_ctl_server(*p.a, store, path, err, true, {}, opts);
  ASSERT_TRUE(srv) << err;
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  ::close(go[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10+: child step that failed";
  api::EvFmtInfo f;
  EXPECT_EQ(store.query_ev_fmt(13, f), ENOENT) << "nothing was created";
}

TEST(CtlLocal, OpenLocalValidatesAndHonoursTheUnprivilegedFlag) {
  const char* bad[] = {"not-an-address"};
  mrc_ctl_local_attr la{};
  la.planes = bad;
  la.num_planes = 1;
  errno = 0;
  EXPECT_EQ(mrc_ctl_open_local(&la), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_ctl_open_local(nullptr), nullptr);
  const char* planes[] = {"127.75.1.1"};
  la.planes = planes;
  la.flags = MRC_CTL_LOCAL_UNPRIVILEGED;
  mrc_ctl_context* c = mrc_ctl_open_local(&la);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(fmt_to(c, 13, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_MODE), EPERM);
  mrc_ctl_port_attr pa{};
  EXPECT_EQ(mrc_ctl_query_port(c, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), 0);
  EXPECT_EQ(mrc_ctl_close(c), 0);
  la.flags = 0;
  c = mrc_ctl_open_local(&la);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(fmt_to(c, 13, MRC_CTL_PROFILE_OFFLINE, MRC_CTL_EV_FMT_PROFILE_MODE), 0) << "we run as root";
  EXPECT_EQ(mrc_ctl_close(c), 0);
  const char* peers[] = {"127.75.1.2,127.75.1.3"};  // two addresses for a one-plane endpoint
  la.peers = peers;
  la.num_peers = 1;
  errno = 0;
  EXPECT_EQ(mrc_ctl_open_local(&la), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace
}  // namespace mrc::ctltest
