// Human-readable names for engine enums (logs, CLI output, JSON).
#include "engine/endpoint.hpp"

namespace mrc::engine {

const char* to_string(EvState s) {
  switch (s) {
    case EvState::kGood:
      return "GOOD";
    case EvState::kSkip:
      return "SKIP";
    case EvState::kAssumedBad:
      return "ASSUMED_BAD";
    case EvState::kDenied:
      return "DENIED";
  }
  return "?";
}

const char* to_string(EvCause c) {
  switch (c) {
    case EvCause::kEcnEcho:
      return "ecn_echo";
    case EvCause::kTrimNack:
      return "trim_nack";
    case EvCause::kAlwaysSkip:
      return "always_skip";
    case EvCause::kLoss:
      return "loss";
    case EvCause::kTimeout:
      return "timeout";
    case EvCause::kSkipExpired:
      return "skip_expired";
    case EvCause::kProbeSuccess:
      return "probe_success";
    case EvCause::kController:
      return "controller";
    case EvCause::kPortDown:
      return "port_down";
    case EvCause::kPortUp:
      return "port_up";
  }
  return "?";
}

const char* to_string(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "success";
    case WcStatus::kRetryExceeded:
      return "retry_exceeded";
    case WcStatus::kRemoteAccessError:
      return "remote_access_error";
    case WcStatus::kRemoteInvalidRequest:
      return "remote_invalid_request";
    case WcStatus::kRemoteOpError:
      return "remote_op_error";
    case WcStatus::kLocalProtectionError:
      return "local_protection_error";
    case WcStatus::kFlushed:
      return "flushed";
  }
  return "?";
}

const char* to_string(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace mrc::engine
