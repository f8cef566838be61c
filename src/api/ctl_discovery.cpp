#include "api/ctl_discovery.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace mrc::api {
namespace {

/// Someone accepts connections on `path` (a live server, in this process or another).
bool listening(const std::string& path) {
  sockaddr_un sa{};
  if (path.size() >= sizeof sa.sun_path) return false;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

bool process_exists(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

}  // namespace

std::string ctl_dir() {
  if (const char* d = std::getenv("MRC_CTL_DIR"); d != nullptr && *d != '\0')
    return std::strcmp(d, "none") == 0 ? std::string() : std::string(d);
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && *x == '/')
    return std::string(x) + "/mrc";
  return "/tmp/mrc-" + std::to_string(::geteuid());
}

bool ensure_ctl_dir(const std::string& dir, std::string& err) {
  const char* group = std::getenv("MRC_CTL_GROUP");
  const mode_t mode = group != nullptr && *group != '\0' ? 0750 : 0700;
  if (::mkdir(dir.c_str(), mode) == 0) {
    (void)::chmod(dir.c_str(), mode);  // mkdir applied the umask
    return true;
  }
  if (errno != EEXIST) {
    err = "control socket directory " + dir + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    err = "control socket directory " + dir + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    err = "control socket directory " + dir + " is not a directory (a symlink is refused too)";
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    err = "control socket directory " + dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to us";
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    err = "control socket directory " + dir + " is writable by others";
    return false;
  }
  return true;
}

std::string ctl_socket_path(const std::string& dir, const std::string& name, long pid) {
  std::string n = name.substr(0, 32);
  for (char& c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) c = '_';
  if (n.empty()) n = "mrc";
  return dir + "/" + std::to_string(pid) + "." + n + ".sock";
}

std::vector<CtlListing> list_ctl_sockets(const std::string& dir, bool keep_stale) {
  std::vector<CtlListing> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string f = e->d_name;
    const std::size_t dot = f.find('.');
    if (dot == std::string::npos || dot == 0 || f.size() < 6 || f.compare(f.size() - 5, 5, ".sock") != 0)
      continue;
    if (!std::all_of(f.begin(), f.begin() + static_cast<long>(dot), ::isdigit)) continue;
    CtlListing l;
    l.path = dir + "/" + f;
    struct stat st {};
    if (::lstat(l.path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    l.pid = std::strtol(f.substr(0, dot).c_str(), nullptr, 10);
    l.device = dot + 1 < f.size() - 5 ? f.substr(dot + 1, f.size() - 5 - dot - 1) : std::string();
    l.alive = process_exists(l.pid);
    if (!l.alive) {
      if (!keep_stale) {
        (void)::unlink(l.path.c_str());
        continue;
      }
    } else {
      std::ifstream comm("/proc/" + std::to_string(l.pid) + "/comm");
      std::getline(comm, l.command);
    }
    out.push_back(std::move(l));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const CtlListing& a, const CtlListing& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.device < b.device;
  });
  return out;
}

std::unique_ptr<CtlServer> serve_ctl(io::UdpEndpoint& udp, ProfileStore& store, const std::string& device,
                                     std::string& err, bool poll_events, CtlHooks hooks) {
  err.clear();
  const std::string dir = ctl_dir();
  if (dir.empty()) return nullptr;
  if (!ensure_ctl_dir(dir, err)) return nullptr;
  const long pid = ::getpid();
  std::string path = ctl_socket_path(dir, device, pid);
  // Our own pid in the name: a live socket there is another device of this process with the
  // same name; anything else there is left over from a process that had our pid.
  for (int k = 2; listening(path) && k < 100; ++k)
    path = ctl_socket_path(dir, device + "-" + std::to_string(k), pid);
  return start_ctl_server(udp, store, path, err, poll_events, std::move(hooks));
}

}  // namespace mrc::api
