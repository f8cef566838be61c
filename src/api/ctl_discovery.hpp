// Where endpoint processes serve the controller API, so `mrc ctl list` can find them
// (docs/decisions.md D46).
//
// Every endpoint process (each libmrc device, `mrc perf`'s among them) serves its control socket in one
// runtime directory, one socket per process and device, named `<pid>.<device>.sock`:
//   $MRC_CTL_DIR when set and not empty ("none": serve nothing), else $XDG_RUNTIME_DIR/mrc when
//   XDG_RUNTIME_DIR is set, else /tmp/mrc-<uid>.
// The directory is created mode 0700 (0750 with $MRC_CTL_GROUP, whose members may then reach the
// sockets, which are 0660 with that group, D41). One that is a symlink, owned by another user or
// writable by others is refused: anyone who could write there could put a socket of their own in
// front of a controller. The server removes its socket when it stops; a process that died leaves a
// stale one, which a listing skips (no such pid) and removes when it can.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "api/ctl_server.hpp"

namespace mrc::api {

/// The runtime directory ("" = serving turned off with MRC_CTL_DIR=none).
std::string ctl_dir();

/// Creates `dir` if missing and checks it is safe to serve in (see above); false + err if not.
bool ensure_ctl_dir(const std::string& dir, std::string& err);

/// `<dir>/<pid>.<name>.sock`, the name cut to 32 characters of [A-Za-z0-9_-] (others become '_').
std::string ctl_socket_path(const std::string& dir, const std::string& name, long pid);

/// One control socket found in the directory.
struct CtlListing {
  std::string path;
  long pid = 0;
  std::string device;   ///< the name part of the file name
  std::string command;  ///< the process's /proc/PID/comm ("" when unknown)
  bool alive = false;   ///< the process exists
};

/// The `*.sock` files of `dir` in pid order. Stale entries (no such process) are removed when the
/// directory allows it and left out; `keep_stale` lists them instead (alive = false).
std::vector<CtlListing> list_ctl_sockets(const std::string& dir, bool keep_stale = false);

/// Starts the control socket of an endpoint process at its discovery path (ctl_dir(), this
/// process, `device`; a name this process already serves gets "-2", "-3", ...). nullptr with `err`
/// empty when serving is turned off, with `err` set when it failed (the endpoint still works).
std::unique_ptr<CtlServer> serve_ctl(io::UdpEndpoint& udp, ProfileStore& store, const std::string& device,
                                     std::string& err, bool poll_events, CtlHooks hooks = {});

}  // namespace mrc::api
