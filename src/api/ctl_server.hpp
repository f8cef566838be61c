// The control socket of an endpoint process (mrc_ctl.h over a UNIX socket).
//
// mrc_open_device starts one when its config names a ctl_socket (src/api/device.cpp): the device
// keeps the server and hands it, through ctl_event_sink, every engine event the application does
// not consume (poll_events = false). poll_events = true lets the server drain
// UdpEndpoint::poll_event itself: only for a process where nothing else polls events.
//
// One thread accepts, one thread serves each connection; each connection is a CtlSession whose
// privilege comes from SO_PEERCRED (uid 0 or CAP_NET_ADMIN in the peer's effective set, D33).
// Who may connect at all is the socket file's mode: 0600 (the process's user) unless a group is
// named (CtlServerOptions::group or $MRC_CTL_GROUP), then 0660 with that group. Peers are not
// trusted (docs/security.md): messages are capped before anything is allocated, a message must
// arrive within a timeout, the connections are capped, and every refusal is counted (stats()).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "api/ctl_proto.hpp"
#include "api/ctl_service.hpp"

namespace mrc::api {

struct CtlServerOptions {
  /// Group allowed to connect (a name or a number): the socket becomes mode 0660 with that group.
  /// Unset: $MRC_CTL_GROUP when set and not empty, else none. None: mode 0600, owner only.
  std::optional<std::string> group;
  /// Largest message accepted; a longer announced length is answered with EMSGSIZE and the
  /// connection closed, before any of it is read.
  std::uint32_t max_message = kCtlMaxMessage;
  /// Connections served at once; one more is answered with EBUSY and closed.
  std::uint32_t max_connections = 16;
  /// From a message's first byte to its last, and for sending one answer; then the connection is
  /// closed. 0 = no limit.
  std::chrono::milliseconds message_timeout{10'000};
  /// Between messages; 0 = none (the default: a controller may hold its handle, and its event CQs,
  /// for as long as it likes).
  std::chrono::milliseconds idle_timeout{0};
  /// Requests of more than this many bytes are handled one at a time (bounds the parsed form of
  /// large requests held at once).
  std::uint32_t large_request = 64u << 10;
};

/// What the server refused (monotonic counts).
struct CtlServerStats {
  std::uint64_t accepted = 0;      ///< connections served
  std::uint64_t refused_busy = 0;  ///< connections over max_connections (answered EBUSY)
  std::uint64_t oversized = 0;     ///< messages announcing more than max_message (EMSGSIZE)
  std::uint64_t timed_out = 0;     ///< connections closed by message_timeout / idle_timeout
  std::uint64_t broken = 0;        ///< connections that ended inside a message or on an error
  std::uint64_t malformed = 0;     ///< requests answered EINVAL "malformed request"
  std::uint64_t send_failed = 0;   ///< answers that could not be sent (peer gone or not reading)
};

class CtlServer {
 public:
  ~CtlServer();
  CtlServer(const CtlServer&) = delete;
  CtlServer& operator=(const CtlServer&) = delete;

  const std::string& path() const { return path_; }
  CtlService& service() { return service_; }
  void on_engine_event(const engine::Event& e) { service_.on_engine_event(e); }
  CtlServerStats stats() const;
  /// Connections being served now.
  std::uint32_t connections() const;

 private:
  friend std::unique_ptr<CtlServer> start_ctl_server(io::UdpEndpoint&, ProfileStore&, const std::string&,
                                                     std::string&, bool, CtlHooks, CtlServerOptions);
  struct Conn {
    int fd = -1;
    std::thread worker;
    bool done = false;  ///< the worker has finished (join it)
  };
  CtlServer(io::UdpEndpoint& udp, ProfileStore& store, bool poll_events, CtlHooks hooks,
            CtlServerOptions opts);
  void accept_loop();
  void serve(Conn& c);
  void refuse(int fd, int rc, const std::string& why);
  /// Joins the workers that have finished (mu_ held).
  void reap();

  CtlService service_;
  CtlServerOptions opts_;
  std::string path_;
  int listen_fd_ = -1;
  std::thread acceptor_;
  mutable std::mutex mu_;
  bool stopping_ = false;
  std::list<Conn> conns_;
  std::uint32_t live_ = 0;  ///< conns_ entries not done
  std::mutex large_mu_;     ///< held while a large request is parsed and handled
  struct Counters {
    std::atomic<std::uint64_t> accepted{0}, refused_busy{0}, oversized{0}, timed_out{0}, broken{0},
        malformed{0}, send_failed{0};
  } counts_;
};

/// Listens on `path` (an existing socket file there is replaced). nullptr + `err` (errno kept) on
/// failure, an unknown group included.
std::unique_ptr<CtlServer> start_ctl_server(io::UdpEndpoint& udp, ProfileStore& store,
                                            const std::string& path, std::string& err,
                                            bool poll_events = false, CtlHooks hooks = {},
                                            CtlServerOptions opts = {});

}  // namespace mrc::api
