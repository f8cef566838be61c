// The host transports of a simulator run behind one interface, so that run_matrix drives either
// without knowing which: MRC endpoints (engine::Endpoint) and the RoCEv2 RC baseline (RoceNic).
//
// A run numbers its QPs k = pair * qps_per_peer + q (q = the QP's index among its pair's); each
// transport keeps the QPNs of both ends of QP k. Every call is per QP, connection part or
// completion, never per packet: the Fabric moves the packets and calls the NICs itself.
//
// Distributed runs (RunConfig::ranks, D55): a process holds the NICs of its own partitions' hosts
// only (HostSetup::nets has nullptr for the others): create() makes the ends of a QP that are
// local, share() tells every rank the QPNs (and MRC memory keys) the others made, connect() then
// connects the local ends. Calls about a QP end that is not local do nothing (bytes_placed: 0;
// add_counters adds the local ends only, so the ranks' counters add up to the run's).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "engine/endpoint.hpp"
#include "sim/fabric.hpp"
#include "sim/mapped_array.hpp"
#include "sim/ranks.hpp"
#include "sim/roce.hpp"
#include "sim/run.hpp"
#include "sim/topology.hpp"

namespace mrc::sim {

/// What a transport is told when it is set up.
struct HostSetup {
  const Topology& topo;
  const RunConfig& cfg;
  /// The partitions of the run (one unless it is parallel) and each node's (host h attaches to
  /// *nets[part_of_node[h]]; nullptr: a partition of another rank).
  const std::vector<Fabric*>& nets;
  const std::vector<std::uint32_t>& part_of_node;
  Duration base_rtt = 0;
  cc::NsccConfig nscc;
  std::uint64_t max_part = 1;  ///< largest WRITE of the run (bytes)
  std::uint32_t max_load = 1;  ///< most connections one pair carries
  std::uint64_t qps = 0;       ///< QPs of the run (both ends of every connection)
};

/// Both ends of one QP of a run.
struct QpEnds {
  std::uint32_t src = 0, dst = 0;  ///< hosts
  std::uint32_t src_qp = 0, dst_qp = 0;
};

/// MRC: one engine::Endpoint per host; QPs of a pair share one source and one sink buffer.
class MrcHosts {
 public:
  /// Wire sizes of a full data packet and of a SACK (framing overhead included).
  static std::uint32_t mtu_wire(const RunConfig& cfg);
  static std::uint32_t ack_wire(const RunConfig& cfg);

  explicit MrcHosts(const HostSetup& s);
  /// Creates QP k from host `src` to host `dst` (q: its index among the pair's QPs), local ends.
  void create(std::size_t k, std::uint32_t src, std::uint32_t dst, std::uint32_t q);
  /// Distributed: every rank learns the QPNs and memory keys of the others' ends (collective).
  void share();
  /// Connects QP k's local ends (after create() of every QP and share()).
  void connect(std::size_t k, std::uint32_t sq_psn, std::uint32_t rq_psn);
  /// A completion of `host`, if it has one. The endpoints keep no events (EV transitions, port
  /// status; EndpointConfig::events): a run reports none.
  bool poll_completion(std::uint32_t host, engine::Completion& c) { return eps_[host]->poll_completion(c); }
  /// Posts a receive on QP k's responder (one per WRITE_WITH_IMM it will take). A run posts all of
  /// them before it starts, so that posting a WRITE touches only the sender's host.
  void post_recv(std::size_t k, std::uint64_t wr_id);
  /// Posts one WRITE_WITH_IMM on QP k.
  void post(std::size_t k, engine::SendWr wr, Time now);
  /// Application bytes placed at QP k's receiver.
  std::uint64_t bytes_placed(std::size_t k) const;
  /// Adds QP k's counters (sender and receiver side) to `pc` (SACKs in tx_sack; RoCE: ACKs in
  /// tx_ack, NAKs in tx_nack) and CNPs (RoCE) to `cnp`.
  void add_counters(std::size_t k, engine::QpCounters& pc, std::uint64_t& cnp) const;
  /// Bytes held per QP: after connecting (idle), at the end (senders and the others).
  /// Distributed: collective (sums over ranks).
  void qp_memory_idle(RunResult& r) const;
  void qp_memory_end(RunResult& r) const;
  /// The run ended at `now`: applies the SKIP expiries due by then (they wait for the QP's next
  /// use, which did not come), so that the EV transitions counted are those made by `now`.
  void finish(Time now);

 private:
  const engine::Endpoint& ep(std::uint32_t h) const { return *eps_[h]; }

  Ranks* ranks_ = nullptr;
  std::vector<std::unique_ptr<engine::Endpoint>> eps_;  ///< nullptr: another rank's host
  std::vector<QpEnds> qps_;
  engine::QpConfig qc_;
  std::uint64_t seed_ = 1;  ///< the run's seed (QP k's engine seed derives from it)
  std::uint8_t mpr_ = 0;
  // One shared source buffer and one sink buffer per partition (contents are not checked; a
  // partition's thread is the only writer of its sink), registered per host.
  // In mappings of their own (sim/mapped_array.hpp): never touched, they cost no memory.
  MappedArray<std::uint8_t> src_buf_;
  std::vector<MappedArray<std::uint8_t>> dst_bufs_;
  std::vector<std::uint32_t> part_;  ///< per host
  std::vector<const engine::MemoryRegion*> src_mr_, dst_mr_;
  /// Per host: address and rkey of its sink buffer (distributed: those of the rank that has it).
  std::vector<std::uint64_t> dst_addr_, dst_rkey_;
};

/// RoCEv2 RC: one RoceNic per host; QP q of a pair is bound to NIC port (q + dst) % planes. WRITEs
/// use key 0 (no memory: zeros are sent, the responder discards them).
class RoceHosts {
 public:
  static std::uint32_t mtu_wire(const RunConfig& cfg);
  static std::uint32_t ack_wire(const RunConfig& cfg);

  explicit RoceHosts(const HostSetup& s);
  void create(std::size_t k, std::uint32_t src, std::uint32_t dst, std::uint32_t q);
  void share();
  void connect(std::size_t k, std::uint32_t sq_psn, std::uint32_t rq_psn);
  bool poll_completion(std::uint32_t host, engine::Completion& c) { return nics_[host]->poll_completion(c); }
  void post_recv(std::size_t, std::uint64_t) {}  // RoCE WRITEs need no receive (the NIC completes them)
  void post(std::size_t k, engine::SendWr wr, Time now);
  std::uint64_t bytes_placed(std::size_t k) const;
  void add_counters(std::size_t k, engine::QpCounters& pc, std::uint64_t& cnp) const;
  void qp_memory_idle(RunResult&) const {}
  void qp_memory_end(RunResult&) const {}
  void finish(Time) {}

 private:
  std::uint32_t planes_;
  Ranks* ranks_ = nullptr;
  std::vector<std::unique_ptr<RoceNic>> nics_;  ///< nullptr: another rank's host
  std::vector<QpEnds> qps_;
};

}  // namespace mrc::sim
