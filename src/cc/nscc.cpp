// NSCC as written in docs/protocol.md §8.4 (UET 1.0 §3.6.13), with the MRC choices recorded in
// docs/cc.md. Units: bytes and nanoseconds throughout; alpha in B/ns.
#include "cc/nscc.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mrc::cc {

namespace {

// Reference network of the UET default derivation: 100 Gb/s and 12 us, i.e. a 150,000 B BDP.
constexpr double kRefRttNs = 12000.0;
constexpr double kRefBdpBytes = 100e9 * kRefRttNs / 8e9;  // 150,000 B
// Below this window the sender asks for an immediate ACK (UET ACK_GEN_TRIGGER, 16 KiB).
constexpr std::int64_t kAckGenTrigger = 16384;
// Delay EWMA weight (htsim _delay_alpha).
constexpr double kDelayEwmaWeight = 0.0125;
// "delay ~= 0" for fast increase: htsim's 1 us (decision CC-D4 in docs/cc.md).
constexpr std::uint64_t kFastIncreaseDelayNs = 1000;

// Bytes in flight at line rate over one RTT. Written as (bps * ns) / 8e9 so that round inputs give
// exact results (1e11 * 1e4 / 8e9 = 125,000 exactly, where * 1e-9 would give 124,999.99...).
double bdp_bytes(std::uint64_t linkspeed_bps, std::uint64_t rtt_ns) {
  return static_cast<double>(linkspeed_bps) * static_cast<double>(rtt_ns) / 8e9;
}

std::uint32_t to_u32(double v) {
  if (!(v > 0.0)) return 0;
  if (v >= static_cast<double>(std::numeric_limits<std::uint32_t>::max()))
    return std::numeric_limits<std::uint32_t>::max();
  return static_cast<std::uint32_t>(std::llround(v));
}

// alpha = 4 * scaling_a * scaling_b * MTU / target with scaling_b = target / 12 us: target cancels,
// so alpha = 4 * MTU * scaling_a / 12 us (B/ns) and is defined even for target = 0.
double derive_alpha(double bdp, std::uint32_t mtu) {
  return 4.0 * static_cast<double>(mtu) * (bdp / kRefBdpBytes) / kRefRttNs;
}

}  // namespace

NsccConfig NsccConfig::derive(std::uint64_t linkspeed_bps, std::uint32_t base_rtt_ns, std::uint32_t mtu,
                              bool trimming) {
  NsccConfig c;
  const double bdp = bdp_bytes(linkspeed_bps, base_rtt_ns);
  const double scaling_a = bdp / kRefBdpBytes;
  const double m = static_cast<double>(mtu);
  c.base_rtt_ns = base_rtt_ns;
  c.target_delay_ns = to_u32((trimming ? 0.75 : 1.0) * static_cast<double>(base_rtt_ns));
  c.max_cwnd = to_u32(1.5 * bdp);
  c.gamma = 0.8f;
  c.max_md_jump = 0.5f;
  c.fi = static_cast<float>(5.0 * m * scaling_a);
  c.fi_scale = static_cast<float>(0.25 * scaling_a);
  c.eta = static_cast<float>(0.15 * m * scaling_a);
  c.qa_gate = 3;
  c.qa_threshold_ns = to_u32(4.0 * static_cast<double>(c.target_delay_ns));
  c.adjust_bytes_threshold = to_u32(8.0 * m);
  c.adjust_period_threshold_ns = base_rtt_ns;
  c.disable_qa = false;
  c.mtu = mtu;
  c.linkspeed_bps = linkspeed_bps;
  if (c.target_delay_ns > 0) {
    // The spec's form, with the integer target the config carries; equal to derive_alpha().
    const double target = static_cast<double>(c.target_delay_ns);
    const double scaling_b = target / kRefRttNs;
    c.alpha = 4.0 * scaling_a * scaling_b * m / target;
  } else {
    c.alpha = derive_alpha(bdp, mtu);
  }
  return c;
}

Nscc::Nscc(const NsccConfig& cfg)
    : cfg_(cfg), alpha_(cfg.alpha), cwnd_(0), max_wnd_(0), base_rtt_(cfg.base_rtt_ns) {
  cfg_.mtu = std::max<std::uint32_t>(cfg_.mtu, 1);
  if (cfg_.base_rtt_ns == 0) cfg_.base_rtt_ns = 1;  // precondition violated: keep arithmetic sane
  // Negative increments would be converted to unsigned below; factors outside [0, 1] are nonsense.
  cfg_.fi = std::max(cfg_.fi, 0.0f);
  cfg_.fi_scale = std::max(cfg_.fi_scale, 0.0f);
  cfg_.eta = std::max(cfg_.eta, 0.0f);
  cfg_.gamma = std::clamp(cfg_.gamma, 0.0f, 1.0f);
  cfg_.max_md_jump = std::clamp(cfg_.max_md_jump, 0.0f, 1.0f);
  base_rtt_ = cfg_.base_rtt_ns;
  if (!(alpha_ > 0.0)) {
    const double bdp = cfg_.linkspeed_bps > 0 ? bdp_bytes(cfg_.linkspeed_bps, cfg_.base_rtt_ns)
                                              : static_cast<double>(cfg_.max_cwnd) / 1.5;
    alpha_ = derive_alpha(bdp, cfg_.mtu);
  }
  max_wnd_ = std::max<std::uint64_t>(cfg_.max_cwnd, cfg_.mtu);
  cwnd_ = max_wnd_;  // new flows start at line rate
}

bool Nscc::ack_request() const {
  const std::int64_t room = static_cast<std::int64_t>(cwnd_) - inflight_;
  return room < static_cast<std::int64_t>(cfg_.mtu) || static_cast<std::int64_t>(cwnd_) < kAckGenTrigger;
}

void Nscc::bound_cwnd() {
  cwnd_ = std::clamp<std::uint64_t>(cwnd_, cfg_.mtu, max_wnd_);
}

void Nscc::reset_increments() {
  inc_bytes_ = 0;
  fair_pending_ = 0;
  prop_pending_ = 0;
  received_bytes_ = 0;
}

void Nscc::on_ack(const AckSample& s, Time now) {
  const std::uint32_t n = s.newly_acked_bytes;
  release(n);
  bytes_ignored_ += n;
  received_bytes_ += n;
  achieved_bytes_ += n;

  const bool limited = apply_penalty(s.rcv_cwnd_pen, s.restore_cwnd, n);
  // A zero RTT cannot be a real measurement; treating it as valid would collapse max_wnd to one MTU.
  if (!s.rtt_valid || s.rtt_ns == 0) return;

  update_base_rtt(s.rtt_ns);
  const std::uint64_t delay = s.rtt_ns - base_rtt_;  // rtt_ns >= base_rtt_ after the update
  update_delay(delay, s.ecn_echo);

  if (quick_adapt(false, s.ecn_echo, delay, now)) return;

  const std::uint64_t target = cfg_.target_delay_ns;
  if (!s.ecn_echo && delay >= target) {
    if (!limited) {  // fair increase
      const double inc = static_cast<double>(cfg_.fi) * n;
      inc_bytes_ += inc;
      fair_pending_ += inc;
    }
  } else if (!s.ecn_echo) {
    if (!limited) proportional_increase(n, delay);
  } else if (delay >= target) {
    multiplicative_decrease(now);
  }
  // else: ECN with delay below target: no window change (the EV layer reacts with SKIP).

  if (now >= last_adjust_time_ + cfg_.adjust_period_threshold_ns ||
      received_bytes_ > cfg_.adjust_bytes_threshold) {
    fulfill_adjustment(now);
  }
  bound_cwnd();
}

void Nscc::on_nack(std::uint32_t bytes, NackKind kind, bool rtt_valid, std::uint64_t rtt_ns, Time now) {
  release(bytes);
  if (rtt_valid && rtt_ns > 0) update_base_rtt(rtt_ns);
  if (kind != NackKind::kTrimmed && kind != NackKind::kTrimmedLastHop) return;

  // A trimmed packet met a full queue: count it as a queueing-delay sample of one config base RTT
  // (htsim's estimate of the trim threshold), as an ECN-marked sample.
  update_delay(cfg_.base_rtt_ns, true);
  bytes_ignored_ += bytes;
  // MRC has no RCCC, so a last-hop trim triggers quick-adapt exactly like any other trim.
  trigger_qa_ = true;
  if (!quick_adapt(true, true, 0, now)) {
    cwnd_ = cwnd_ > bytes ? cwnd_ - bytes : 0;
    ++stats_.nack_dec;
  }
  bound_cwnd();
}

void Nscc::on_inferred_loss(std::uint32_t bytes, Time /*now*/) {
  cwnd_ = cwnd_ > bytes ? cwnd_ - bytes : 0;
  bytes_ignored_ += bytes;
  release(bytes);
  ++stats_.loss_dec;
  bound_cwnd();
}

void Nscc::update_base_rtt(std::uint64_t rtt) {
  if (rtt >= base_rtt_) return;
  base_rtt_ = rtt;
  const double wnd = cfg_.linkspeed_bps > 0 ? 1.5 * bdp_bytes(cfg_.linkspeed_bps, rtt)
                                            : static_cast<double>(cfg_.max_cwnd) * static_cast<double>(rtt) /
                                                  static_cast<double>(cfg_.base_rtt_ns);
  // Never above the configured max_cwnd (identical to the spec when max_cwnd = 1.5 * BDP).
  const auto w = static_cast<std::uint64_t>(std::min(wnd, static_cast<double>(cfg_.max_cwnd)));
  max_wnd_ = std::max<std::uint64_t>(w, cfg_.mtu);
  bound_cwnd();
}

void Nscc::update_delay(std::uint64_t delay, bool ecn) {
  double sample = static_cast<double>(delay);
  // An unmarked sample above target means the delay is not ours to fight (e.g. a slow reverse path
  // or a queue elsewhere with no ECN): pull the average toward a quarter of the base RTT instead.
  if (!ecn && delay > cfg_.target_delay_ns) sample = 0.25 * static_cast<double>(base_rtt_);
  avg_delay_ = kDelayEwmaWeight * sample + (1.0 - kDelayEwmaWeight) * avg_delay_;
}

bool Nscc::quick_adapt(bool loss, bool ecn, std::uint64_t qdelay, Time now) {
  if (cfg_.disable_qa) return false;
  bool done = false;
  if (bytes_ignored_ < bytes_to_ignore_ && ecn) {
    done = true;  // still draining the backlog that was in flight when QA last fired
  } else if (now >= qa_endtime_) {
    const unsigned gate = std::min<unsigned>(cfg_.qa_gate, 63);
    if (qa_endtime_ != 0 && (trigger_qa_ || loss || qdelay > cfg_.qa_threshold_ns) &&
        achieved_bytes_ < (max_wnd_ >> gate)) {
      cwnd_ = std::max<std::uint64_t>(achieved_bytes_, cfg_.mtu);
      bytes_to_ignore_ = static_cast<std::uint64_t>(std::max<std::int64_t>(inflight_, 0));
      bytes_ignored_ = 0;
      trigger_qa_ = false;
      done = true;
      ++stats_.quick_adapt;
    }
    achieved_bytes_ = 0;
    qa_endtime_ = now + base_rtt_ + cfg_.target_delay_ns;
  }
  if (done) reset_increments();
  return done;
}

void Nscc::proportional_increase(std::uint32_t n, std::uint64_t delay) {
  fast_increase(n, delay);
  if (increase_mode_) return;
  const double inc = alpha_ * n * (static_cast<double>(cfg_.target_delay_ns) - static_cast<double>(delay));
  inc_bytes_ += inc;
  prop_pending_ += inc;
}

void Nscc::fast_increase(std::uint32_t n, std::uint64_t delay) {
  if (delay < kFastIncreaseDelayNs) {
    fi_count_ += n;
    if (fi_count_ > cwnd_ || increase_mode_) {
      const auto inc = static_cast<std::uint64_t>(static_cast<double>(n) * cfg_.fi_scale);
      cwnd_ = std::min(cwnd_ + inc, max_wnd_);
      stats_.fast_inc += inc;
      increase_mode_ = true;
      return;
    }
  } else {
    fi_count_ = 0;
  }
  increase_mode_ = false;
}

void Nscc::multiplicative_decrease(Time now) {
  increase_mode_ = false;
  fi_count_ = 0;
  const double d = avg_delay_;
  const double target = static_cast<double>(cfg_.target_delay_ns);
  if (d > target && now > last_dec_time_ + base_rtt_) {
    const double factor = std::max(1.0 - static_cast<double>(cfg_.gamma) * (d - target) / d,
                                   static_cast<double>(cfg_.max_md_jump));
    const auto w = static_cast<std::uint64_t>(static_cast<double>(cwnd_) * factor);
    cwnd_ = std::max<std::uint64_t>(w, cfg_.mtu);
    last_dec_time_ = now;
    ++stats_.multi_dec;
  }
}

void Nscc::fulfill_adjustment(Time now) {
  const double w = static_cast<double>(cwnd_);
  cwnd_ += static_cast<std::uint64_t>(inc_bytes_ / w);
  stats_.fair_inc += static_cast<std::uint64_t>(fair_pending_ / w);
  stats_.prop_inc += static_cast<std::uint64_t>(prop_pending_ / w);
  if (now >= last_adjust_time_ + cfg_.adjust_period_threshold_ns) {
    const auto eta = static_cast<std::uint64_t>(cfg_.eta);
    cwnd_ += eta;
    stats_.eta_inc += eta;
    last_adjust_time_ = now;
  }
  cwnd_ = std::min(cwnd_, max_wnd_);
  reset_increments();
}

bool Nscc::apply_penalty(std::uint8_t pen, bool restore, std::uint32_t n) {
  if (pen > 0) {
    const std::uint64_t p = std::min<std::uint8_t>(pen, 127);  // field is 7 bits (0..127)
    if (saved_cwnd_ == 0) saved_cwnd_ = cwnd_;
    std::int64_t w = std::min(static_cast<std::int64_t>(cwnd_), inflight_);
    w -= static_cast<std::int64_t>((p * n) >> 7);
    cwnd_ = static_cast<std::uint64_t>(std::max<std::int64_t>(w, cfg_.mtu));
    return true;
  }
  if (restore && saved_cwnd_ > 0) {
    cwnd_ = std::min(saved_cwnd_, max_wnd_);
    saved_cwnd_ = 0;
  }
  return false;
}

}  // namespace mrc::cc
