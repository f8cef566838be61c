// NSCC (UET 1.0 network-signal congestion control) as used by MRC: a sender-side, SACK-clocked,
// byte-granular window driven by ECN echoes and RTT-derived queueing delay (docs/protocol.md §8).
#pragma once
#include <cstdint>

#include "common/time.hpp"

namespace mrc::cc {

/// Mirrors struct mrc_ctl_cc_nscc_cfg (mrc_ctl.h). fi and eta are in bytes, fi_scale is a pure
/// factor (decision Q-CC-1, docs/decisions.md). alpha is derived, not configured.
struct NsccConfig {
  std::uint32_t base_rtt_ns = 14023;      ///< config_base_rtt
  std::uint32_t target_delay_ns = 10517;  ///< target_qdelay
  std::uint32_t max_cwnd = 262926;        ///< MaxWnd in bytes (also the initial cwnd)
  float gamma = 0.8f;
  float max_md_jump = 0.5f;
  float fi = 23873.7f;        ///< fair-increase constant, bytes
  float fi_scale = 0.29214f;  ///< fast-increase scale
  float eta = 716.21f;        ///< additive bump per adjust period, bytes
  std::uint8_t qa_gate = 3;
  std::uint32_t qa_threshold_ns = 42068;
  std::uint32_t adjust_bytes_threshold = 33200;
  std::uint32_t adjust_period_threshold_ns = 14023;
  bool disable_qa = false;
  // Not in the OCP struct; the engine supplies them.
  std::uint32_t mtu = 4150;                          ///< nominal packet size used for min cwnd and increments
  std::uint64_t linkspeed_bps = 100'000'000'000ULL;  ///< min(send, receive) line rate
  /// Proportional-increase gain in bytes per nanosecond (B/ns): each acked byte adds
  /// alpha * (target - delay[ns]) to inc_bytes (B^2), and fulfill_adjustment adds inc_bytes / cwnd to
  /// cwnd, so one window's worth of ACKs grows cwnd by alpha * (target - delay) bytes. htsim's value
  /// is in B/ps (ours = htsim * 1000). 0 = derive from mtu, linkspeed and base RTT (docs/cc.md).
  double alpha = 0.0;

  /// The UET default derivation (docs/protocol.md §8.2) for a network with this line rate, base RTT
  /// and MTU. `trimming` selects target = 0.75*base_rtt (else 1.0*base_rtt).
  static NsccConfig derive(std::uint64_t linkspeed_bps, std::uint32_t base_rtt_ns, std::uint32_t mtu,
                           bool trimming);
};

/// Why a NACK arrived (the subset NSCC distinguishes).
enum class NackKind : std::uint8_t { kTrimmed, kTrimmedLastHop, kOther };

/// Everything one SACK tells the sender's CC.
struct AckSample {
  std::uint32_t newly_acked_bytes = 0;  ///< bytes newly acknowledged by this SACK
  bool ecn_echo = false;                ///< the triggering packet was CE-marked
  bool rtt_valid = false;         ///< rtt_ns is a clean sample (docs/protocol.md §8.4 retransmission rule)
  std::uint64_t rtt_ns = 0;       ///< already corrected for responder service time
  std::uint8_t rcv_cwnd_pen = 0;  ///< responder backpressure 0..127
  bool restore_cwnd = false;
};

class Nscc {
 public:
  explicit Nscc(const NsccConfig& cfg);

  const NsccConfig& config() const { return cfg_; }
  /// With nothing in flight one packet may always go (CC-D13): a packet charged more than the
  /// minimum window (payload + header overhead > mtu) must not stall the QP with no timer armed.
  bool can_send(std::uint32_t bytes) const {
    return inflight_ <= 0 || inflight_ + static_cast<std::int64_t>(bytes) <= static_cast<std::int64_t>(cwnd_);
  }
  /// The sender should set the A bit: little window left, or cwnd below the ACK-generation trigger.
  bool ack_request() const;
  void on_send(std::uint32_t bytes) { inflight_ += bytes; }
  void on_ack(const AckSample& s, Time now);
  void on_nack(std::uint32_t bytes, NackKind kind, bool rtt_valid, std::uint64_t rtt_ns, Time now);
  /// Loss inferred without a NACK (RACK/timeout): shrink by the packet, stop counting it.
  void on_inferred_loss(std::uint32_t bytes, Time now);
  /// Bytes that left the network without an ACK being due (e.g. a plane went down).
  void on_forget(std::uint32_t bytes) { release(bytes); }

  std::uint64_t cwnd() const { return cwnd_; }
  std::int64_t inflight() const { return inflight_; }
  std::uint64_t base_rtt_ns() const { return base_rtt_; }
  /// Current upper bound on cwnd: max_cwnd, lowered to 1.5 * linkspeed * base_rtt as base_rtt shrinks.
  std::uint64_t max_wnd() const { return max_wnd_; }
  double avg_delay_ns() const { return avg_delay_; }

  struct Stats {
    /// Bytes added by each increase rule (as asked for, before clamping to max_wnd).
    std::uint64_t fair_inc = 0, prop_inc = 0, fast_inc = 0, eta_inc = 0;
    /// Event counts: MDs applied, quick-adapts fired, trim NACKs that cut one packet, inferred losses.
    std::uint64_t multi_dec = 0, quick_adapt = 0, nack_dec = 0, loss_dec = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  void update_delay(std::uint64_t delay, bool ecn);
  bool quick_adapt(bool loss, bool ecn, std::uint64_t qdelay, Time now);
  void proportional_increase(std::uint32_t n, std::uint64_t delay);
  void fast_increase(std::uint32_t n, std::uint64_t delay);
  void multiplicative_decrease(Time now);
  void fulfill_adjustment(Time now);
  bool apply_penalty(std::uint8_t pen, bool restore, std::uint32_t n);
  void update_base_rtt(std::uint64_t rtt);
  void release(std::uint32_t bytes) {
    inflight_ = inflight_ > static_cast<std::int64_t>(bytes) ? inflight_ - bytes : 0;
  }
  void bound_cwnd();
  void reset_increments();

  NsccConfig cfg_;
  double alpha_;
  std::uint64_t cwnd_;
  std::uint64_t max_wnd_;
  std::int64_t inflight_ = 0;
  std::uint64_t saved_cwnd_ = 0;
  std::uint64_t base_rtt_;
  std::uint64_t achieved_bytes_ = 0;
  std::uint64_t received_bytes_ = 0;
  std::uint64_t fi_count_ = 0;
  bool trigger_qa_ = false;
  Time qa_endtime_ = 0;
  std::uint64_t bytes_to_ignore_ = 0;
  std::uint64_t bytes_ignored_ = 0;
  double inc_bytes_ = 0;
  Time last_adjust_time_ = 0;
  bool increase_mode_ = false;
  Time last_dec_time_ = 0;
  double avg_delay_ = 0;
  double fair_pending_ = 0;  // fair-increase part of inc_bytes_, for Stats only
  double prop_pending_ = 0;  // proportional-increase part of inc_bytes_, for Stats only
  Stats stats_;
};

}  // namespace mrc::cc
