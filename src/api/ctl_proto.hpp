// Wire form of controller requests (shared by the client and the dispatcher): JSON objects, EVs as
// 64-digit hex strings, framed on the control socket by a 4-byte big-endian length.
//
// Everything here faces a peer that may be hostile (docs/security.md): the framing never allocates
// by an announced length, and the JSON readers check type and range of every number instead of
// converting whatever arrives.
#pragma once
#include <chrono>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "api/profile_store.hpp"

namespace mrc::api {

/// Largest message either side sends or accepts. The largest legitimate one is a bulk EV REPLACE
/// (or the QUERY_EV_ARRAY answer) of StoreLimits::max_evs_profile = 65,536 entries at <= 214 bytes
/// each (all 32-byte EVs, every number at its maximum): 14.0 MB. 16 MiB leaves room for the rest.
inline constexpr std::uint32_t kCtlMaxMessage = 16u << 20;
/// A request may nest at most this deep (legitimate ones: 3), have at most this many arrays and
/// objects (legitimate: one per EV entry, 65,536) and at most this many values, keys, arrays and
/// objects in all (legitimate: 13 per EV entry, 851,968). Checked by a pass that builds nothing,
/// so the parsed form of any accepted message stays under ~60 MB.
inline constexpr int kCtlMaxDepth = 16;
inline constexpr std::uint32_t kCtlMaxContainers = 1u << 17;
inline constexpr std::uint32_t kCtlMaxValues = 1u << 20;

std::string ev_hex(const EvBytes& b);
/// Throws std::invalid_argument unless `s` is 1..64 hex digits (shorter strings fill the left).
EvBytes ev_from_hex(const std::string& s);

/// Parses one request within the limits above; throws std::exception (with a message that may
/// quote the input) when it is not JSON or is over a limit.
nlohmann::json parse_request(const std::string& text);

/// Checked readers of `obj[key]`: a missing key, another type, a fraction or a number outside T
/// throws std::invalid_argument naming the key. Integers must be JSON integers; floats must be
/// finite and within float.
std::uint64_t json_uint(const nlohmann::json& obj, const char* key, std::uint64_t max);
template <class T>
T json_get(const nlohmann::json& obj, const char* key) {
  static_assert(std::is_unsigned_v<T> && !std::is_same_v<T, bool>);
  return static_cast<T>(json_uint(obj, key, std::numeric_limits<T>::max()));
}
std::int64_t json_int64(const nlohmann::json& obj, const char* key);
float json_float(const nlohmann::json& obj, const char* key);
std::string json_string(const nlohmann::json& obj, const char* key);
/// An array of integers 0..max.
std::vector<std::uint64_t> json_uint_array(const nlohmann::json& obj, const char* key, std::uint64_t max);
/// obj[key] when it is an array, else throws.
const nlohmann::json& json_array(const nlohmann::json& obj, const char* key);

nlohmann::json to_json(const EvField& f);
EvField field_from_json(const nlohmann::json& j);
nlohmann::json to_json(const EvOpEntry& e);
EvOpEntry entry_from_json(const nlohmann::json& j);
nlohmann::json to_json(const mrc_ctl_cc_nscc_cfg& c);
mrc_ctl_cc_nscc_cfg nscc_from_json(const nlohmann::json& j);

/// Incremental reader of one length-prefixed message. It is fed at most want() bytes at a time,
/// so it never reads past its message, and it holds only what has arrived: a header announcing
/// more than `max` is refused at once (kTooBig) and nothing is allocated for the announced size.
class CtlFrameReader {
 public:
  enum class Status { kNeedMore, kMessage, kTooBig };
  explicit CtlFrameReader(std::uint32_t max = kCtlMaxMessage) : max_(max) {}
  /// Bytes that complete the header or the body (1..).
  std::size_t want() const { return got_ < 4 ? 4 - got_ : announced_ - body_.size(); }
  /// Takes n <= want() bytes.
  Status feed(const char* p, std::size_t n);
  Status status() const { return status_; }
  /// The header's length (once the 4 header bytes are in).
  std::uint32_t announced() const { return announced_; }
  /// Some byte of a message has arrived (a timeout now leaves a half message).
  bool started() const { return got_ > 0; }
  /// The message (status kMessage); the reader starts over.
  std::string take();
  /// Bytes held for the body (to check that nothing was allocated ahead of the data).
  std::size_t capacity() const { return body_.capacity(); }

 private:
  std::uint32_t max_;
  std::size_t got_ = 0;  ///< header bytes in
  unsigned char hdr_[4] = {};
  std::uint32_t announced_ = 0;
  std::string body_;
  Status status_ = Status::kNeedMore;
};

enum class CtlRecv {
  kMessage,
  kClosed,   ///< EOF before a message began
  kTooBig,   ///< the header announced more than the limit (`announced` says how much)
  kTimeout,  ///< the message did not complete within its timeout, or the connection was idle
  kError,    ///< EOF inside a message, or a socket error
};

struct CtlRecvLimits {
  std::uint32_t max_message = kCtlMaxMessage;
  /// From a message's first byte to its last; 0 = no limit.
  std::chrono::milliseconds message_timeout{0};
  /// Before a message's first byte; 0 = wait for ever.
  std::chrono::milliseconds idle_timeout{0};
};

/// Reads one message. `announced` (optional) gets the header's length.
CtlRecv recv_msg(int fd, std::string& msg, const CtlRecvLimits& limits, std::uint32_t* announced = nullptr);
/// Sends one message; `timeout` (0 = none) bounds the whole send (a peer that does not read).
bool send_msg(int fd, const std::string& msg, std::chrono::milliseconds timeout);

/// Whole-message socket I/O without timeouts: false on EOF, error or a message over kCtlMaxMessage.
bool send_msg(int fd, const std::string& msg);
bool recv_msg(int fd, std::string& msg);

}  // namespace mrc::api
