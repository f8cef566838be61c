// The EV-array index behind single-EV REPLACE_EV calls (D47), all-or-nothing profile files
// (api::apply_profiles, save / restore) and the control-socket runtime directory (D46).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "api/ctl_discovery.hpp"
#include "api/ctl_harness.hpp"
#include "api/profile_toml.hpp"

namespace mrc::ctltest {
namespace {

std::vector<mrc_ctl_ev_op_entry> array_of(mrc_ctl_context* c, std::uint64_t id, std::uint32_t n) {
  std::vector<mrc_ctl_ev_op_entry> out(n);
  mrc_ctl_ev_profile_attr a{};
  a.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  a.ev_op.entries = out.data();
  a.ev_op.entry_count = static_cast<int>(n);
  EXPECT_EQ(mrc_ctl_query_ev_profile(c, id, &a, MRC_CTL_EV_PROFILE_EV_OP), 0) << mrc_ctl_last_error(c);
  return out;
}

int one(mrc_ctl_context* c, std::uint64_t id, mrc_ctl_ev_op op, mrc_ctl_ev ev, mrc_ctl_ev ev_new,
        std::uint32_t state = MRC_CTL_EV_GOOD, std::uint32_t flags = 0) {
  std::vector<mrc_ctl_ev_op_entry> e(1);
  e[0].ev = ev;
  e[0].ev_new = ev_new;
  e[0].state = static_cast<mrc_ctl_ev_state>(state);
  e[0].flags = flags;
  return ev_op(c, id, op, e);
}

TEST(CtlBulk, SingleReplacesFillTheFirstUnpopulatedEntryInArrayOrder) {
  Ctl t(2);
  online_fmt(t.ctx, 13);
  ASSERT_EQ(ev_offline(t.ctx, 1, MRC_CTL_EV_MODE_EXP, 13, 6, full16x2()), 0);
  const mrc_ctl_ev unpop{};
  for (std::uint16_t i = 0; i < 4; ++i)
    ASSERT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, unpop, ev16(0xC000 + i, i, 1 + i % 2)), 0)
        << mrc_ctl_last_error(t.ctx);
  // An entry cannot go back to unpopulated (port 0 is no port).
  EXPECT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, ev16(0xC001, 1, 2), unpop), EINVAL);
  // Two copies of one EV, then replace every copy at once.
  ASSERT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, unpop, ev16(0xC007, 7, 2)), 0);
  ASSERT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, unpop, ev16(0xC007, 7, 2)), 0);
  ASSERT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, unpop, ev16(0xC008, 8, 1)), ENOENT)
      << "the array is full";
  ASSERT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, ev16(0xC007, 7, 2), ev16(0xC00A, 10, 1), MRC_CTL_EV_GOOD,
                MRC_CTL_EV_OP_F_ALL_COPIES),
            0);
  // Replacing an EV by itself keeps it where it is.
  ASSERT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, ev16(0xC002, 2, 1), ev16(0xC002, 2, 1)), 0);
  EXPECT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_REPLACE_EV, ev16(0xC007, 7, 2), ev16(0xC00B, 11, 1)), ENOENT);
  ASSERT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, ev16(0xC00A, 10, 1), {}, MRC_CTL_EV_DENIED,
                MRC_CTL_EV_OP_F_ALL_COPIES),
            0);
  const auto a = array_of(t.ctx, 1, 6);
  const std::uint16_t want_hi[6] = {0xC000, 0xC001, 0xC002, 0xC003, 0xC00A, 0xC00A};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(a[i].ev.val[0] << 8 | a[i].ev.val[1], want_hi[i]) << "entry " << i;
    EXPECT_EQ(a[i].state, i >= 4 ? MRC_CTL_EV_DENIED : MRC_CTL_EV_GOOD) << "entry " << i;
  }
  // QUERY_EV_STATE finds entries through the same index.
  std::vector<mrc_ctl_ev_op_entry> q(2);
  q[0].ev = ev16(0xC00A, 10, 1);
  q[1].ev = ev16(0xC001, 1, 2);
  mrc_ctl_ev_profile_attr qa{};
  qa.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
  qa.ev_op.entries = q.data();
  qa.ev_op.entry_count = 2;
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &qa, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(q[0].state, MRC_CTL_EV_DENIED);
  EXPECT_EQ(q[1].state, MRC_CTL_EV_GOOD);
  // A modify of anything else (a copy of the profile) must not keep a stale index: shrink the
  // count, then the old entries 4-5 are gone.
  mrc_ctl_ev_profile_attr c{};
  c.ev_count = 4;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(t.ctx, 1, &c, MRC_CTL_EV_PROFILE_COUNT), 0)
      << mrc_ctl_last_error(t.ctx);
  EXPECT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, ev16(0xC00A, 10, 1), {}, MRC_CTL_EV_GOOD), ENOENT);
  EXPECT_EQ(one(t.ctx, 1, MRC_CTL_EV_OP_MODIFY_EV_STATE, ev16(0xC003, 3, 2), {}, MRC_CTL_EV_DENIED), 0);
}

const char* kGood = R"(
[[ev_format]]
id = 13
mode = "stev"
widths = [16, 16]

[[ev_profile]]
id = 1
mode = "explicit"
format = 13
min_active = 1
event_mask = ["good"]
fields = [{ width = 16, max = 0xFFFF, mask = 0xFFFF }, { width = 16, max = 0xFFFF, mask = 0xFFFF }]
evs = [{ ev = "C0010001", port = 1 }, { ev = "C0020002", port = 2 }]
)";

TEST(CtlApply, AFileWithOneBadProfileChangesNothing) {
  Ctl t(2);
  ASSERT_EQ(api::apply_profiles(t.ctx, api::parse_profiles(kGood, "good.toml")).rc, 0);
  // Profile 1 redefined with other EVs (fine), then a new profile 2 on port 3 of this 2-port
  // endpoint, which the store refuses: nothing of the file may stay.
  const std::string bad = std::string(kGood).replace(std::string(kGood).find("C0020002"), 8, "C0030003") + R"(
[[ev_profile]]
id = 2
mode = "explicit"
format = 13
min_active = 1
event_mask = ["good"]
fields = [{ width = 16, max = 0xFFFF, mask = 0xFFFF }, { width = 16, max = 0xFFFF, mask = 0xFFFF }]
evs = [{ ev = "C0040004", port = 3 }]
)";
  const api::ProfileFile f = api::parse_profiles(bad, "bad.toml");
  const api::ApplyResult r = api::apply_profiles(t.ctx, f);
  ASSERT_NE(r.rc, 0);
  EXPECT_NE(r.message.find("bad.toml:"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("(nothing was changed)"), std::string::npos) << r.message;
  mrc_ctl_ev_profile_attr a{};
  ASSERT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &a, MRC_CTL_EV_PROFILE_CUR_STATE), 0);
  EXPECT_EQ(a.cur_profile_state, MRC_CTL_PROFILE_ONLINE);
  const auto evs = array_of(t.ctx, 1, 2);
  EXPECT_EQ(evs[1].ev.val[0] << 8 | evs[1].ev.val[1], 0xC002) << "profile 1 has its old EVs";
  EXPECT_EQ(mrc_ctl_query_ev_profile(t.ctx, 2, &a, MRC_CTL_EV_PROFILE_CUR_STATE), ENOENT);
  EXPECT_NE(r.message.find("port 3"), std::string::npos) << r.message;
}

TEST(CtlApply, RestoreNeedsASaveAndSaveIsPrivileged) {
  Ctl t(2);
  EXPECT_EQ(api::ctl_restore_profiles(t.ctx, true), EINVAL);
  EXPECT_EQ(api::ctl_save_profiles(t.app, {13}, {1}, {}), EPERM);
  ASSERT_EQ(api::ctl_save_profiles(t.ctx, {13}, {1}, {}), 0);
  online_fmt(t.ctx, 13);
  ASSERT_EQ(api::ctl_restore_profiles(t.ctx, true), 0) << mrc_ctl_last_error(t.ctx);
  mrc_ctl_ev_fmt_profile_attr f{};
  EXPECT_EQ(mrc_ctl_query_ev_fmt_profile(t.ctx, 13, &f, MRC_CTL_EV_FMT_PROFILE_CUR_STATE), ENOENT)
      << "format 13 did not exist when saved";
  EXPECT_EQ(api::ctl_restore_profiles(t.ctx, true), EINVAL) << "a restore uses the saved set up";
}

TEST(CtlApply, AProfileAQpTookMeanwhileIsNotRolledBack) {
  Ctl t(2);
  ASSERT_EQ(api::ctl_save_profiles(t.ctx, {13}, {1}, {}), 0);
  online_fmt(t.ctx, 13);
  explicit_profile(t.ctx, 1, 13, 2, 2);
  api::QpProfiles qp;
  ASSERT_EQ(t.store.acquire(1, 0, 2, qp), 0);
  EXPECT_EQ(api::ctl_restore_profiles(t.ctx, true), EBUSY);
  EXPECT_NE(std::string(mrc_ctl_last_error(t.ctx)).find("EV profile 1"), std::string::npos);
  mrc_ctl_ev_profile_attr a{};
  EXPECT_EQ(mrc_ctl_query_ev_profile(t.ctx, 1, &a, MRC_CTL_EV_PROFILE_CUR_STATE), 0);
  t.store.release(1, 0);
}

// ---- runtime directory (D46) -----------------------------------------------------------------

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/mrc_ctl_dir_test.XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(CtlDiscovery, SocketNamesArePidAndASafeDeviceName) {
  EXPECT_EQ(api::ctl_socket_path("/d", "mrc_0", 42), "/d/42.mrc_0.sock");
  EXPECT_EQ(api::ctl_socket_path("/d", "../x y", 7), "/d/7.___x_y.sock");
  EXPECT_EQ(api::ctl_socket_path("/d", "", 7), "/d/7.mrc.sock");
  EXPECT_EQ(api::ctl_socket_path("/d", std::string(40, 'a'), 1), "/d/1." + std::string(32, 'a') + ".sock");
}

TEST(CtlDiscovery, TheDirectoryIsOursAndPrivateOrRefused) {
  TempDir t;
  std::string err;
  const std::string d = t.path + "/mrc";
  ASSERT_TRUE(api::ensure_ctl_dir(d, err)) << err;
  struct stat st {};
  ASSERT_EQ(::stat(d.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(api::ensure_ctl_dir(d, err)) << "an existing private directory is fine";
  ASSERT_EQ(::chmod(d.c_str(), 0777), 0);
  EXPECT_FALSE(api::ensure_ctl_dir(d, err));
  EXPECT_NE(err.find("writable by others"), std::string::npos) << err;
  const std::string link = t.path + "/link";
  ASSERT_EQ(::symlink(d.c_str(), link.c_str()), 0);
  ASSERT_EQ(::chmod(d.c_str(), 0700), 0);
  EXPECT_FALSE(api::ensure_ctl_dir(link, err)) << "a symlink is refused";
  ::setenv("MRC_CTL_DIR", "none", 1);
  EXPECT_EQ(api::ctl_dir(), "");
  ::setenv("MRC_CTL_DIR", d.c_str(), 1);
  EXPECT_EQ(api::ctl_dir(), d);
  ::unsetenv("MRC_CTL_DIR");
}

TEST(CtlDiscovery, ListingSkipsAndRemovesSocketsOfDeadProcesses) {
  TempDir t;
  // A live one (this process) and a stale one (a pid no process has: beyond pid_max).
  const auto bind_at = [](const std::string& p) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p.c_str());
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    return fd;
  };
  const std::string live = api::ctl_socket_path(t.path, "dev", ::getpid());
  const std::string stale = api::ctl_socket_path(t.path, "old", 4194305);
  const int a = bind_at(live), b = bind_at(stale);
  std::FILE* junk = std::fopen((t.path + "/notes.txt").c_str(), "w");
  std::fclose(junk);
  const auto all = api::list_ctl_sockets(t.path, true);
  ASSERT_EQ(all.size(), 2u);
  const auto l = api::list_ctl_sockets(t.path);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].path, live);
  EXPECT_EQ(l[0].pid, ::getpid());
  EXPECT_EQ(l[0].device, "dev");
  EXPECT_TRUE(l[0].alive);
  EXPECT_FALSE(l[0].command.empty());
  EXPECT_NE(::access(stale.c_str(), F_OK), 0) << "the stale socket was removed";
  ::close(a);
  ::close(b);
}

}  // namespace
}  // namespace mrc::ctltest
