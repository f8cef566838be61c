// The controller's request dispatcher: one per endpoint process. Every controller call, whether it
// came over the control socket or from an in-process handle, is a serialized request (a JSON
// object, see ctl_service.cpp) handled by dispatch(), so both paths run the same code.
//
// It owns what the profile store does not: EV event CQs, EV probes in flight, probe peers, loading
// the store's SRv6 table into an SRv6 endpoint, and the privilege rule (a Session says whether its peer may
// modify anything).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/profile_store.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::api {

/// One controller connection (or in-process handle).
struct CtlSession {
  bool privileged = false;
  std::vector<std::uint64_t> cqs;                       ///< EV event CQs it created (destroyed with it)
  std::shared_ptr<const ProfileStore::Snapshot> saved;  ///< "save_profiles", for "restore_profiles"
};

/// uid 0 or CAP_NET_ADMIN in the effective set of process `pid` (0 = this process).
bool process_privileged(int pid = 0);

struct CtlHooks {
  /// A port's admin state changed (1-based port): the application API's port events.
  std::function<void(std::uint8_t port, bool up)> port_changed;
};

class CtlService {
 public:
  /// `udp` null: profiles only (port admin and endpoint operations answer ENOTSUP). With
  /// `poll_events` the service drains udp->poll_event() itself (no application in the process);
  /// otherwise the owner hands every engine event it does not consume to on_engine_event().
  CtlService(ProfileStore& store, io::UdpEndpoint* udp, bool poll_events, CtlHooks hooks = {});
  ~CtlService();
  CtlService(const CtlService&) = delete;
  CtlService& operator=(const CtlService&) = delete;

  /// Handles one request; never throws. A malformed request (not JSON or not UTF-8, over the
  /// parse limits of ctl_proto.hpp, of the wrong shape or types, an unknown op, a missing field, a
  /// number out of its field's range) gets EINVAL and the reason in "why".
  std::string dispatch(CtlSession& s, const std::string& request);
  /// modify_ev / query_ev without the request encoding, for an in-process handle (what dispatch()
  /// does after decoding): one REPLACE_EV call per EV then costs no JSON round trip (OCP's
  /// walkthrough programs an EV array that way). `out`: the profile's attributes (query).
  int ev_profile(CtlSession& s, bool modify, std::uint64_t id, const EvModify& m, EvProfileInfo& out,
                 EvResult& r, std::string& why);
  /// Releases what the session owned.
  void end_session(CtlSession& s);
  /// EV state changes and EV probe answers from the engine (any thread).
  void on_engine_event(const engine::Event& e);

  ProfileStore& store() { return store_; }
  /// Requests answered "malformed request" so far.
  std::uint64_t malformed_requests() const { return malformed_.load(std::memory_order_relaxed); }

 private:
  struct EventCq {
    std::uint32_t cqe = 0;
    std::deque<EvEventRecord> events;
    std::deque<std::uint32_t> drops;  ///< per queued event: events lost just before it
    std::uint32_t pending_drops = 0;  ///< lost since the last queued event
  };
  struct ProbeWait {
    bool answered = false, timed_out = false;
    std::uint64_t rtt = 0;
    bool adj = false;
    std::uint8_t port = 0;
    std::uint64_t order = 0;
  };
  struct Request;

  void pump();
  int modify_ev(std::uint64_t id, const EvModify& m, EvResult& r, std::string& why);
  void on_store_event(const EvEventRecord& r);
  /// The endpoint peer for a probe to `gid` on 0-based `plane` (-1: any plane, port-status
  /// updates): the one the endpoint attributes that address's packets to, else a new stand-in.
  std::uint32_t peer_for(const std::uint8_t gid[16], int plane, int& rc);
  /// SRv6 endpoint: loads the store's SRv6 table as its path list when the table grew (D37).
  int load_srv6_paths(std::string& why);
  int ep_batch(Request& q);

  ProfileStore& store_;
  io::UdpEndpoint* udp_;
  std::atomic<std::uint64_t> malformed_{0};
  bool poll_events_;
  CtlHooks hooks_;
  std::mutex pump_mu_;

  std::mutex cq_mu_;
  std::map<std::uint64_t, EventCq> cqs_;
  std::uint64_t next_cq_ = 1;

  std::mutex probe_mu_;
  std::condition_variable probe_cv_;
  std::map<std::uint16_t, ProbeWait> probes_;
  std::uint64_t answer_order_ = 0;

  std::mutex peer_mu_;

  std::mutex srv6_mu_;
  std::size_t srv6_loaded_ = 0;  ///< store SRv6 table entries the endpoint has
};

}  // namespace mrc::api
