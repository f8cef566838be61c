#include "api/ctl_server.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "api/ctl_proto.hpp"

namespace mrc::api {

CtlServer::CtlServer(io::UdpEndpoint& udp, ProfileStore& store, bool poll_events, CtlHooks hooks)
    : service_(store, &udp, poll_events, std::move(hooks)) {}

std::unique_ptr<CtlServer> start_ctl_server(io::UdpEndpoint& udp, ProfileStore& store,
                                            const std::string& path, std::string& err, bool poll_events,
                                            CtlHooks hooks) {
  sockaddr_un sa{};
  if (path.empty() || path.size() >= sizeof(sa.sun_path)) {
    err = "control socket path must be 1.." + std::to_string(sizeof(sa.sun_path) - 1) + " characters";
    return nullptr;
  }
  std::unique_ptr<CtlServer> s(new CtlServer(udp, store, poll_events, std::move(hooks)));
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
  if (::bind(s->listen_fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::chmod(path.c_str(), 0666) != 0 || ::listen(s->listen_fd_, 16) != 0) {
    const int e = errno;
    err = "control socket " + path + ": " + std::strerror(e);
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
    for (const int fd : conns_) ::shutdown(fd, SHUT_RDWR);
  }
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  for (std::thread& t : workers_) t.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
}

void CtlServer::accept_loop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard lk(mu_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    conns_.push_back(fd);
    workers_.emplace_back([this, fd] { serve(fd); });
  }
}

void CtlServer::serve(int fd) {
  CtlSession session;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
    session.privileged = cred.uid == 0 || process_privileged(cred.pid);
  std::string req;
  while (recv_msg(fd, req))
    if (!send_msg(fd, service_.dispatch(session, req))) break;
  service_.end_session(session);
  std::lock_guard lk(mu_);
  std::erase(conns_, fd);
  ::close(fd);
}

}  // namespace mrc::api
