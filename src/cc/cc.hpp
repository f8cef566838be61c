// The CC interface the engine talks to: a closed set of algorithms dispatched by a switch (no
// virtual call per packet). Adding an algorithm = one enum value + one member + the cases below.
#pragma once
#include <cstdint>
#include <string_view>

#include "cc/nscc.hpp"

namespace mrc::cc {

enum class Algorithm : std::uint8_t {
  kNone,  ///< no congestion control: only the MPR window limits the sender
  kNscc,  ///< "uet-1.0-nscc"
};

/// Name used by the controller API (`algorithms[]` in mrc_ctl.h); kNone has no name (NULL).
std::string_view algorithm_name(Algorithm a);
bool algorithm_from_name(std::string_view name, Algorithm& out);

struct Config {
  Algorithm algorithm = Algorithm::kNscc;
  NsccConfig nscc;
};

class Controller {
 public:
  explicit Controller(const Config& cfg) : algo_(cfg.algorithm), nscc_(cfg.nscc) {}

  Algorithm algorithm() const { return algo_; }
  bool can_send(std::uint32_t bytes) const {
    switch (algo_) {
      case Algorithm::kNscc:
        return nscc_.can_send(bytes);
      case Algorithm::kNone:
        break;
    }
    return true;
  }
  bool ack_request() const { return algo_ == Algorithm::kNscc && nscc_.ack_request(); }
  void on_send(std::uint32_t bytes) {
    if (algo_ == Algorithm::kNscc) nscc_.on_send(bytes);
  }
  void on_ack(const AckSample& s, Time now) {
    if (algo_ == Algorithm::kNscc) nscc_.on_ack(s, now);
  }
  void on_nack(std::uint32_t bytes, NackKind kind, bool rtt_valid, std::uint64_t rtt_ns, Time now) {
    if (algo_ == Algorithm::kNscc) nscc_.on_nack(bytes, kind, rtt_valid, rtt_ns, now);
  }
  void on_inferred_loss(std::uint32_t bytes, Time now) {
    if (algo_ == Algorithm::kNscc) nscc_.on_inferred_loss(bytes, now);
  }
  void on_forget(std::uint32_t bytes) {
    if (algo_ == Algorithm::kNscc) nscc_.on_forget(bytes);
  }
  /// Congestion window in bytes (UINT64_MAX when unlimited).
  std::uint64_t cwnd() const { return algo_ == Algorithm::kNscc ? nscc_.cwnd() : UINT64_MAX; }
  const Nscc& nscc() const { return nscc_; }

 private:
  Algorithm algo_;
  Nscc nscc_;
};

}  // namespace mrc::cc
