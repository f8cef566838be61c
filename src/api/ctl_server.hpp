// The control socket of an endpoint process (mrc_ctl.h over a UNIX socket).
//
// mrc_open_device starts one when its config names a ctl_socket (src/api/device.cpp): the device
// keeps the server and hands it, through ctl_event_sink, every engine event the application does
// not consume (poll_events = false). poll_events = true lets the server drain
// UdpEndpoint::poll_event itself: only for a process where nothing else polls events.
//
// One thread accepts, one thread serves each connection; each connection is a CtlSession whose
// privilege comes from SO_PEERCRED (uid 0 or CAP_NET_ADMIN in the peer's effective set). The
// socket file is mode 0666: anyone may query, only privileged peers may modify.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/ctl_service.hpp"

namespace mrc::api {

class CtlServer {
 public:
  ~CtlServer();
  CtlServer(const CtlServer&) = delete;
  CtlServer& operator=(const CtlServer&) = delete;

  const std::string& path() const { return path_; }
  CtlService& service() { return service_; }
  void on_engine_event(const engine::Event& e) { service_.on_engine_event(e); }

 private:
  friend std::unique_ptr<CtlServer> start_ctl_server(io::UdpEndpoint&, ProfileStore&, const std::string&,
                                                     std::string&, bool, CtlHooks);
  CtlServer(io::UdpEndpoint& udp, ProfileStore& store, bool poll_events, CtlHooks hooks);
  void accept_loop();
  void serve(int fd);

  CtlService service_;
  std::string path_;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::mutex mu_;
  bool stopping_ = false;
  std::vector<int> conns_;
  std::vector<std::thread> workers_;
};

/// Listens on `path` (an existing socket file there is replaced). nullptr + `err` (errno kept) on failure.
std::unique_ptr<CtlServer> start_ctl_server(io::UdpEndpoint& udp, ProfileStore& store,
                                            const std::string& path, std::string& err,
                                            bool poll_events = false, CtlHooks hooks = {});

}  // namespace mrc::api
