#include "api/ctl_server.hpp"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

namespace mrc::api {

namespace {

/// The gid of a group name or number; false when there is no such group.
bool resolve_group(const std::string& g, gid_t& gid, std::string& err) {
  if (!g.empty() && std::all_of(g.begin(), g.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(g.c_str(), &end, 10);
    if (errno == 0 && v < static_cast<unsigned long long>(static_cast<gid_t>(-1))) {
      gid = static_cast<gid_t>(v);
      return true;
    }
  } else if (!g.empty()) {
    std::vector<char> buf(16384);
    group gr{};
    group* found = nullptr;
    if (::getgrnam_r(g.c_str(), &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
      gid = found->gr_gid;
      return true;
    }
  }
  err = "control socket group \"" + g + "\": no such group";
  errno = EINVAL;
  return false;
}

std::string error_reply(int rc, const std::string& why) {
  return nlohmann::json{{"rc", rc}, {"why", why}}.dump(-1, ' ', false,
                                                       nlohmann::json::error_handler_t::replace);
}

}  // namespace

CtlServer::CtlServer(io::UdpEndpoint& udp, ProfileStore& store, bool poll_events, CtlHooks hooks,
                     CtlServerOptions opts)
    : service_(store, &udp, poll_events, std::move(hooks)), opts_(std::move(opts)) {}

std::unique_ptr<CtlServer> start_ctl_server(io::UdpEndpoint& udp, ProfileStore& store,
                                            const std::string& path, std::string& err, bool poll_events,
                                            CtlHooks hooks, CtlServerOptions opts) {
  sockaddr_un sa{};
  if (path.empty() || path.size() >= sizeof(sa.sun_path)) {
    err = "control socket path must be 1.." + std::to_string(sizeof(sa.sun_path) - 1) + " characters";
    errno = EINVAL;
    return nullptr;
  }
  if (!opts.group) {
    const char* env = std::getenv("MRC_CTL_GROUP");
    if (env != nullptr && *env != '\0') opts.group = env;
  }
  if (opts.group && opts.group->empty()) opts.group.reset();
  gid_t gid = 0;
  if (opts.group && !resolve_group(*opts.group, gid, err)) return nullptr;
  if (opts.max_message == 0 || opts.max_message > kCtlMaxMessage) opts.max_message = kCtlMaxMessage;
  if (opts.max_connections == 0) opts.max_connections = 1;
  const mode_t mode = opts.group ? 0660 : 0600;

  std::unique_ptr<CtlServer> s(new CtlServer(udp, store, poll_events, std::move(hooks), std::move(opts)));
  s->path_ = path;
  s->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
  // Linux creates the socket file with the socket's own mode (less the umask): restricting it
  // before bind means the file is never connectable by others, not even between bind and chmod.
  (void)::fchmod(s->listen_fd_, mode);
  const char* step = "bind";
  bool ok = ::bind(s->listen_fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0;
  if (ok && s->opts_.group) {
    step = "chown to the group";
    ok = ::chown(path.c_str(), static_cast<uid_t>(-1), gid) == 0;
  }
  if (ok) {
    step = "chmod";
    ok = ::chmod(path.c_str(), mode) == 0;
  }
  if (ok) {
    step = "listen";
    ok = ::listen(s->listen_fd_, 16) == 0;
  }
  if (!ok) {
    const int e = errno;
    err = "control socket " + path + ": " + step + ": " + std::strerror(e);
    if (std::strcmp(step, "bind") != 0) ::unlink(path.c_str());
    ::close(s->listen_fd_);
    errno = e;
    s->listen_fd_ = -1;
    return nullptr;
  }
  s->acceptor_ = std::thread([p = s.get()] { p->accept_loop(); });
  return s;
}

CtlServer::~CtlServer() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    for (const Conn& c : conns_)
      if (!c.done) ::shutdown(c.fd, SHUT_RDWR);
  }
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  // No new connections now; the workers end on the shut-down sockets.
  for (Conn& c : conns_)
    if (c.worker.joinable()) c.worker.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
}

CtlServerStats CtlServer::stats() const {
  CtlServerStats s;
  s.accepted = counts_.accepted.load();
  s.refused_busy = counts_.refused_busy.load();
  s.oversized = counts_.oversized.load();
  s.timed_out = counts_.timed_out.load();
  s.broken = counts_.broken.load();
  s.malformed = service_.malformed_requests();
  s.send_failed = counts_.send_failed.load();
  return s;
}

std::uint32_t CtlServer::connections() const {
  std::lock_guard lk(mu_);
  return live_;
}

void CtlServer::reap() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (it->done) {
      it->worker.join();  // it has returned from serve(): this does not wait
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void CtlServer::refuse(int fd, int rc, const std::string& why) {
  // A short answer into an empty socket buffer: never blocks. The client reads it as the answer
  // to its first request.
  (void)send_msg(fd, error_reply(rc, why), std::chrono::milliseconds(100));
  ::close(fd);
}

void CtlServer::accept_loop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::unique_lock lk(mu_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: wait for connections to end rather than stop serving.
        lk.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      return;
    }
    reap();
    if (live_ >= opts_.max_connections) {
      counts_.refused_busy.fetch_add(1);
      lk.unlock();
      refuse(fd, EBUSY,
             "the control socket serves at most " + std::to_string(opts_.max_connections) + " connections");
      continue;
    }
    Conn& c = conns_.emplace_back();
    c.fd = fd;
    try {
      c.worker = std::thread([this, &c] { serve(c); });
    } catch (const std::exception&) {
      conns_.pop_back();
      counts_.refused_busy.fetch_add(1);
      lk.unlock();
      refuse(fd, EAGAIN, "the control socket cannot start a thread for this connection");
      continue;
    }
    ++live_;
    counts_.accepted.fetch_add(1);
  }
}

void CtlServer::serve(Conn& c) {
  const int fd = c.fd;
  CtlSession session;
  try {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
      session.privileged = cred.uid == 0 || process_privileged(cred.pid);
    const CtlRecvLimits limits{opts_.max_message, opts_.message_timeout, opts_.idle_timeout};
    std::string req;
    for (;;) {
      std::uint32_t announced = 0;
      const CtlRecv r = recv_msg(fd, req, limits, &announced);
      if (r == CtlRecv::kClosed) break;
      if (r == CtlRecv::kTooBig) {
        counts_.oversized.fetch_add(1);
        // The body is never read, so the stream cannot be resynchronised: answer and close.
        (void)send_msg(fd,
                       error_reply(EMSGSIZE, "message of " + std::to_string(announced) +
                                                 " bytes is over the control socket's limit of " +
                                                 std::to_string(opts_.max_message)),
                       opts_.message_timeout);
        break;
      }
      if (r == CtlRecv::kTimeout) {
        counts_.timed_out.fetch_add(1);
        break;
      }
      if (r != CtlRecv::kMessage) {
        counts_.broken.fetch_add(1);
        break;
      }
      std::string rsp;
      {
        std::unique_lock large(large_mu_, std::defer_lock);
        if (req.size() > opts_.large_request) large.lock();
        rsp = service_.dispatch(session, req);
      }
      req = std::string();  // the request's memory goes now, not with the next one
      if (!send_msg(fd, rsp, opts_.message_timeout)) {
        counts_.send_failed.fetch_add(1);
        break;
      }
    }
  } catch (...) {
    // Out of memory (or thread trouble) on this connection: it ends, the server and others go on.
    counts_.broken.fetch_add(1);
  }
  service_.end_session(session);
  std::lock_guard lk(mu_);
  ::close(fd);
  c.done = true;
  --live_;
}

}  // namespace mrc::api
