// The control socket against hostile local peers (docs/security.md, "The controller socket"):
// malformed bytes of every kind get an error answer and never end the process; announced
// lengths over the limit are refused before anything is allocated; connections are capped; a
// half-sent message is closed after its timeout; the socket file is owner-only unless a group is
// named.
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "api/ctl_proto.hpp"
#include "api/ctl_server.hpp"
#include "ctl_harness.hpp"

namespace mrc::ctltest {
namespace {

using nlohmann::json;

std::string path_for(const char* tag) {
  return "/tmp/mrc-ctlsec-" + std::string(tag) + "-" + std::to_string(::getpid());
}

/// A one-plane endpoint on 127.<net>.1.1 for a control server to stand on.
std::unique_ptr<io::UdpEndpoint> endpoint(int net) {
  io::UdpConfig c;
  io::IpAddr a;
  EXPECT_TRUE(io::IpAddr::parse("127." + std::to_string(net) + ".1.1", a));
  c.planes = {a};
  std::string err;
  auto u = io::UdpEndpoint::create(c, err);
  EXPECT_TRUE(u) << err;
  if (u) {
    EXPECT_TRUE(u->start());
  }
  return u;
}

int raw_connect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0) << std::strerror(errno);
  return fd;
}

void send_raw(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

std::string header(std::uint32_t len) {
  return std::string{static_cast<char>(len >> 24), static_cast<char>(len >> 16), static_cast<char>(len >> 8),
                     static_cast<char>(len)};
}

/// The next answer on fd (a test that hangs fails after 20 s instead).
json reply(int fd) {
  api::CtlRecvLimits l;
  l.idle_timeout = std::chrono::seconds(20);
  std::string out;
  EXPECT_EQ(api::recv_msg(fd, out, l), api::CtlRecv::kMessage);
  try {
    return json::parse(out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "answer is not JSON: " << e.what();
    return json::object();
  }
}

/// True when the server has closed fd (EOF within 20 s).
bool closed_by_server(int fd) {
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char b[256];
  for (;;) {
    const ssize_t r = ::recv(fd, b, sizeof(b), 0);
    if (r == 0) return true;
    if (r < 0) return errno == ECONNRESET;
  }
}

/// Waits (at most 20 s) until `pred` holds.
template <class P>
bool eventually(P pred) {
  for (int i = 0; i < 2000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

void expect_query_device_works(const std::string& path) {
  mrc_ctl_context* c = mrc_ctl_open(path.c_str());
  ASSERT_NE(c, nullptr) << std::strerror(errno);
  mrc_ctl_device_attr d{};
  EXPECT_EQ(mrc_ctl_query_device(c, &d), 0) << mrc_ctl_last_error(c);
  EXPECT_EQ(mrc_ctl_close(c), 0);
}

TEST(CtlSocketAttack, NonUtf8AndGarbageGetAnErrorAndTheProcessSurvives) {
  auto u = endpoint(81);
  ASSERT_TRUE(u);
  api::ProfileStore store;
  std::string err;
  const std::string path = path_for("garbage");
  auto srv = api::start_ctl_server(*u, store, path, err, true);
  ASSERT_TRUE(srv) << err;

  // The review's 5-byte message: one byte, not UTF-8. It used to abort the process (the parse
  // error quotes the byte and the answer could not be serialised).
  int fd = raw_connect(path);
  send_raw(fd, header(1) + "\xff");
  json r = reply(fd);
  EXPECT_EQ(r.value("rc", 0), EINVAL);
  EXPECT_NE(r.value("why", std::string()).find("malformed request"), std::string::npos) << r.dump();

  const std::string deep(100000, '[');
  const char* const bad[] = {
      "",
      "\xc3",
      "\xff\xfe\xfd",
      "{\"op\":\"\xff\"}",
      "{\"op\":\"query_device\",\"x\":\"\xc3\x28\"}",
      "not json",
      "{",
      "[]",
      "null",
      "42",
      "\"op\"",
      "{\"op\":5}",
      "{\"op\":\"nope\"}",
      "{\"op\":\"modify_ev\"}",
      "{\"op\":\"modify_ev_fmt\",\"id\":1e999,\"mask\":1,\"state\":1,\"mode\":1,\"widths\":[]}",
      "{\"op\":\"modify_ev_fmt\",\"id\":NaN,\"mask\":1,\"state\":1,\"mode\":1,\"widths\":[]}",
      "{\"op\":\"modify_ev_fmt\",\"id\":1,\"mask\":1,\"state\":1,\"mode\":1,\"widths\":[1e300]}",
      "{\"op\":\"modify_ev_fmt\",\"id\":-1,\"mask\":1,\"state\":1,\"mode\":1,\"widths\":[]}",
      "{\"op\":\"modify_ev_fmt\",\"id\":1,\"mask\":4294967296,\"state\":1,\"mode\":1,\"widths\":[]}",
      "{\"op\":\"modify_ev_fmt\",\"id\":1,\"mask\":1.5,\"state\":1,\"mode\":1,\"widths\":[]}",
      "{\"op\":\"modify_ev_fmt\",\"id\":1,\"mask\":true,\"state\":1,\"mode\":1,\"widths\":[]}",
      "{\"op\":\"modify_ev_fmt\",\"id\":1,\"mask\":1,\"state\":7,\"mode\":1,\"widths\":[]}",
      "{\"op\":\"modify_ev_fmt\",\"id\":1,\"mask\":1,\"state\":1,\"mode\":1,\"widths\":{\"a\":1}}",
      "{\"op\":\"create_cq\",\"cqe\":99999999999999999999999}",
      "{\"op\":\"poll_cq\",\"cq\":\"1\",\"n\":1}",
      "{\"op\":\"query_port\",\"port\":-5}",
      "{\"op\":\"query_port\"}",
      deep.c_str()};
  for (const char* b : bad) {
    const std::string msg(b);
    send_raw(fd, header(static_cast<std::uint32_t>(msg.size())) + msg);
    r = reply(fd);
    EXPECT_NE(r.value("rc", 0), 0) << msg.substr(0, 80);
    EXPECT_FALSE(r.value("why", std::string()).empty()) << msg.substr(0, 80);
  }
  // The same connection still answers a good request.
  send_raw(fd, header(21) + R"({"op":"query_device"})");
  EXPECT_EQ(reply(fd).value("rc", -1), 0);
  // Bad framing: half a header, then gone; a header and half a body, then gone.
  ::close(fd);
  fd = raw_connect(path);
  send_raw(fd, std::string("\0\0", 2));
  ::close(fd);
  fd = raw_connect(path);
  send_raw(fd, header(100) + "{\"op\":");
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return srv->stats().broken >= 2; })) << srv->stats().broken;
  EXPECT_GE(srv->stats().malformed, 20u);
  // And the next legitimate client is served.
  expect_query_device_works(path);
}

TEST(CtlSocketAttack, NumbersAreRangeCheckedNotWrapped) {
  Ctl t;
  api::CtlSession s{true, {}, {}};
  online_fmt(t.ctx, 13);
  ASSERT_EQ(ev_offline(t.ctx, 1, MRC_CTL_EV_MODE_EXP, 13, 2, full16x2()), 0) << mrc_ctl_last_error(t.ctx);
  // An entry whose port_new does not fit a byte (257) used to become port 1 and be accepted.
  const auto replace = [](unsigned port_new) {
    json e = api::to_json(api::EvOpEntry{});
    e["ev_new"] = "00010001";
    e["port_new"] = port_new;
    e["state"] = MRC_CTL_EV_GOOD;
    return json{{"op", "modify_ev"},
                {"id", 1},
                {"mask", MRC_CTL_EV_PROFILE_EV_OP},
                {"state", 0},
                {"mode", 0},
                {"fmt_id", 0},
                {"count", 0},
                {"min_active", 0},
                {"event_mask", 0},
                {"ev_op", 0},
                {"entries", json::array({e})},
                {"capacity", 0},
                {"fields_op", 0},
                {"fields", json::array()},
                {"fields_capacity", 0}}
        .dump();
  };
  json r = json::parse(t.svc->dispatch(s, replace(257)));
  EXPECT_EQ(r.at("rc").get<int>(), EINVAL);
  EXPECT_NE(r.at("why").get<std::string>().find("port_new"), std::string::npos) << r.dump();
  r = json::parse(t.svc->dispatch(s, replace(1)));
  EXPECT_EQ(r.at("rc").get<int>(), 0) << r.dump();
  // A state the enum cannot hold is refused by name, not cast.
  r = json::parse(t.svc->dispatch(
      s, R"({"op":"modify_cc","id":5,"mask":1,"state":4294967295,"algorithm":null,"config":null})"));
  EXPECT_EQ(r.at("rc").get<int>(), EINVAL);
  EXPECT_NE(r.at("why").get<std::string>().find("unknown profile state"), std::string::npos) << r.dump();
  // Nesting and size of the parsed form are bounded.
  r = json::parse(t.svc->dispatch(s, std::string(40, '[') + std::string(40, ']')));
  EXPECT_NE(r.at("why").get<std::string>().find("nests deeper"), std::string::npos) << r.dump();
  std::string many = "[";
  for (std::uint32_t i = 0; i <= api::kCtlMaxContainers; ++i) many += i ? ",{}" : "{}";
  r = json::parse(t.svc->dispatch(s, many + "]"));
  EXPECT_NE(r.at("why").get<std::string>().find("arrays and objects"), std::string::npos);
  // An answer never repeats a long request at length.
  r = json::parse(t.svc->dispatch(s, R"({"op":")" + std::string(100000, 'x') + R"("})"));
  EXPECT_LT(r.at("why").get<std::string>().size(), 400u);
}

TEST(CtlSocketFraming, AnOversizedHeaderIsRefusedBeforeAnythingIsAllocated) {
  api::CtlFrameReader r;
  const std::string big = header(64u << 20);
  for (char c : big.substr(0, 3)) EXPECT_EQ(r.feed(&c, 1), api::CtlFrameReader::Status::kNeedMore);
  EXPECT_EQ(r.feed(&big[3], 1), api::CtlFrameReader::Status::kTooBig);
  EXPECT_EQ(r.announced(), 64u << 20);
  EXPECT_EQ(r.capacity(), std::string().capacity()) << "nothing allocated for the body";
  // Under the limit, the body grows with what arrives, not to the announced length.
  api::CtlFrameReader ok;
  const std::string h = header(api::kCtlMaxMessage);
  EXPECT_EQ(ok.feed(h.data(), 4), api::CtlFrameReader::Status::kNeedMore);
  EXPECT_EQ(ok.want(), api::kCtlMaxMessage);
  const std::string part(1000, 'x');
  EXPECT_EQ(ok.feed(part.data(), part.size()), api::CtlFrameReader::Status::kNeedMore);
  EXPECT_LT(ok.capacity(), 4096u);
  // A complete message, then the next one.
  api::CtlFrameReader m(16);
  const std::string two = header(2) + "{}" + header(0);
  EXPECT_EQ(m.feed(two.data(), 4), api::CtlFrameReader::Status::kNeedMore);
  EXPECT_EQ(m.feed(two.data() + 4, m.want()), api::CtlFrameReader::Status::kMessage);
  EXPECT_EQ(m.take(), "{}");
  EXPECT_EQ(m.feed(two.data() + 6, 4), api::CtlFrameReader::Status::kMessage);
  EXPECT_EQ(m.take(), "");
  EXPECT_EQ(m.feed(header(17).data(), 4), api::CtlFrameReader::Status::kTooBig);
}

TEST(CtlSocketFraming, TheLargestLegitimateRequestFits) {
  // A REPLACE of max_evs_profile entries with every value at its maximum.
  api::EvOpEntry e;
  e.ev.fill(0xff);
  e.ev_new.fill(0xff);
  e.port = e.port_new = 255;
  e.state = e.flags = 0xffffffffu;
  const std::size_t entry = api::to_json(e).dump().size() + 1;
  const std::size_t n = api::StoreLimits{}.max_evs_profile;
  EXPECT_LT(entry * n + 4096, api::kCtlMaxMessage) << entry << " bytes per entry";
}

TEST(CtlSocketFraming, ServerAnswersEmsgsizeAndCloses) {
  auto u = endpoint(82);
  ASSERT_TRUE(u);
  api::ProfileStore store;
  std::string err;
  const std::string path = path_for("big");
  auto srv = api::start_ctl_server(*u, store, path, err, true);
  ASSERT_TRUE(srv) << err;
  // 16 announcers of 64 MiB that send nothing more: each is refused at its header.
  std::vector<int> fds;
  for (int i = 0; i < 16; ++i) {
    fds.push_back(raw_connect(path));
    send_raw(fds.back(), header(64u << 20));
  }
  for (const int fd : fds) {
    const json r = reply(fd);
    EXPECT_EQ(r.value("rc", 0), EMSGSIZE);
    EXPECT_NE(r.value("why", std::string()).find("67108864 bytes"), std::string::npos) << r.dump();
    EXPECT_TRUE(closed_by_server(fd));
    ::close(fd);
  }
  EXPECT_EQ(srv->stats().oversized, 16u);
  expect_query_device_works(path);
  // A smaller configured limit, reached by the real client.
  srv.reset();
  api::CtlServerOptions o;
  o.max_message = 256;
  srv = api::start_ctl_server(*u, store, path, err, true, {}, o);
  ASSERT_TRUE(srv) << err;
  mrc_ctl_context* c = mrc_ctl_open(path.c_str());
  ASSERT_NE(c, nullptr);
  mrc_ctl_ev_profile_attr a{};
  std::vector<mrc_ctl_ev_op_entry> entries(8);
  a.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
  a.ev_op.entries = entries.data();
  a.ev_op.entry_count = 8;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(c, 1, &a, MRC_CTL_EV_PROFILE_EV_OP), EMSGSIZE);
  EXPECT_NE(std::string(mrc_ctl_last_error(c)).find("limit of 256"), std::string::npos)
      << mrc_ctl_last_error(c);
  EXPECT_EQ(mrc_ctl_close(c), 0);
}

TEST(CtlSocketLimits, ConnectionsAreCappedAndRefusalsCounted) {
  auto u = endpoint(83);
  ASSERT_TRUE(u);
  api::ProfileStore store;
  std::string err;
  const std::string path = path_for("cap");
  api::CtlServerOptions o;
  o.max_connections = 2;
  auto srv = api::start_ctl_server(*u, store, path, err, true, {}, o);
  ASSERT_TRUE(srv) << err;
  const int a = raw_connect(path), b = raw_connect(path);
  ASSERT_TRUE(eventually([&] { return srv->connections() == 2; }));
  mrc_ctl_context* c = mrc_ctl_open(path.c_str());  // the kernel's backlog takes it
  ASSERT_NE(c, nullptr);
  mrc_ctl_device_attr d{};
  EXPECT_EQ(mrc_ctl_query_device(c, &d), EBUSY);
  EXPECT_NE(std::string(mrc_ctl_last_error(c)).find("at most 2 connections"), std::string::npos)
      << mrc_ctl_last_error(c);
  EXPECT_EQ(mrc_ctl_close(c), 0);
  EXPECT_EQ(srv->stats().refused_busy, 1u);
  // The two held connections are served all along.
  send_raw(a, header(21) + R"({"op":"query_device"})");
  EXPECT_EQ(reply(a).value("rc", -1), 0);
  // One ends: its place is free again.
  ::close(b);
  ASSERT_TRUE(eventually([&] { return srv->connections() == 1; }));
  expect_query_device_works(path);
  ::close(a);
  // Many short connections one after another (each once the server has seen the last one end):
  // finished workers are reaped and their places reused, none is refused.
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(eventually([&] { return srv->connections() < 2; }));
    expect_query_device_works(path);
  }
  EXPECT_EQ(srv->stats().refused_busy, 1u);
  EXPECT_TRUE(eventually([&] { return srv->connections() == 0; }));
}

TEST(CtlSocketLimits, AHalfSentMessageIsClosedAfterItsTimeout) {
  auto u = endpoint(84);
  ASSERT_TRUE(u);
  api::ProfileStore store;
  std::string err;
  const std::string path = path_for("slow");
  api::CtlServerOptions o;
  o.message_timeout = std::chrono::milliseconds(200);
  auto srv = api::start_ctl_server(*u, store, path, err, true, {}, o);
  ASSERT_TRUE(srv) << err;
  const int idle = raw_connect(path);  // connected, sends nothing: kept (no idle timeout)
  const int half = raw_connect(path);
  send_raw(half, header(1000) + "{\"op\":");
  EXPECT_TRUE(closed_by_server(half));
  ::close(half);
  EXPECT_EQ(srv->stats().timed_out, 1u);
  // Half a header counts as a started message too.
  const int half_hdr = raw_connect(path);
  send_raw(half_hdr, std::string("\0", 1));
  EXPECT_TRUE(closed_by_server(half_hdr));
  ::close(half_hdr);
  EXPECT_EQ(srv->stats().timed_out, 2u);
  // The idle connection outlived both timeouts and still works.
  send_raw(idle, header(21) + R"({"op":"query_device"})");
  EXPECT_EQ(reply(idle).value("rc", -1), 0);
  ::close(idle);
  // With an idle timeout, a silent connection goes too.
  srv.reset();
  o.idle_timeout = std::chrono::milliseconds(200);
  srv = api::start_ctl_server(*u, store, path, err, true, {}, o);
  ASSERT_TRUE(srv) << err;
  const int silent = raw_connect(path);
  EXPECT_TRUE(closed_by_server(silent));
  ::close(silent);
  EXPECT_EQ(srv->stats().timed_out, 1u);
  expect_query_device_works(path);
}

mode_t mode_of(const std::string& path, gid_t* gid = nullptr) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0);
  if (gid) *gid = st.st_gid;
  return st.st_mode & 07777;
}

TEST(CtlSocketAccess, SocketIsOwnerOnlyUnlessAGroupIsNamed) {
  auto u = endpoint(85);
  ASSERT_TRUE(u);
  api::ProfileStore store;
  std::string err;
  const std::string path = path_for("mode");
  ::unsetenv("MRC_CTL_GROUP");
  const mode_t old_mask = ::umask(0);  // the mode must not depend on the umask
  auto srv = api::start_ctl_server(*u, store, path, err, true);
  ::umask(old_mask);
  ASSERT_TRUE(srv) << err;
  EXPECT_EQ(mode_of(path), 0600u);
  srv.reset();

  api::CtlServerOptions o;
  o.group = "65534";
  srv = api::start_ctl_server(*u, store, path, err, true, {}, o);
  ASSERT_TRUE(srv) << err;
  gid_t gid = 0;
  EXPECT_EQ(mode_of(path, &gid), 0660u);
  EXPECT_EQ(gid, 65534u);
  srv.reset();

  // $MRC_CTL_GROUP names it for servers started without the option (mrc_open_device's).
  ::setenv("MRC_CTL_GROUP", "65534", 1);
  srv = api::start_ctl_server(*u, store, path, err, true);
  ASSERT_TRUE(srv) << err;
  EXPECT_EQ(mode_of(path, &gid), 0660u);
  EXPECT_EQ(gid, 65534u);
  srv.reset();
  // An explicit empty group overrides the environment.
  o.group = "";
  srv = api::start_ctl_server(*u, store, path, err, true, {}, o);
  ASSERT_TRUE(srv) << err;
  EXPECT_EQ(mode_of(path), 0600u);
  srv.reset();
  ::unsetenv("MRC_CTL_GROUP");

  // A group that does not exist is an error, not a silently wider socket.
  o.group = "no-such-group-mrc-test";
  EXPECT_FALSE(api::start_ctl_server(*u, store, path, err, true, {}, o));
  EXPECT_NE(err.find("no such group"), std::string::npos) << err;
  if (::group* g = ::getgrgid(0); g != nullptr) {  // by name as well as by number
    o.group = g->gr_name;
    srv = api::start_ctl_server(*u, store, path, err, true, {}, o);
    ASSERT_TRUE(srv) << err;
    EXPECT_EQ(mode_of(path, &gid), 0660u);
    EXPECT_EQ(gid, 0u);
  }
}

TEST(CtlSocketAccess, OtherUsersCannotConnectToTheDefaultSocket) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  auto u = endpoint(86);
  ASSERT_TRUE(u);
  api::ProfileStore store;
  std::string err;
  const std::string path = path_for("other");
  ::unsetenv("MRC_CTL_GROUP");
  auto srv = api::start_ctl_server(*u, store, path, err, true);
  ASSERT_TRUE(srv) << err;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // only system calls from here
    const gid_t none[1] = {65534};
    if (::setgroups(1, none) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(11);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) ::_exit(12);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) ::_exit(13);
    ::_exit(errno == EACCES ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "13: nobody connected to a 0600 root socket";
  EXPECT_EQ(srv->stats().accepted, 0u);
}

}  // namespace
}  // namespace mrc::ctltest
