// Out-of-band connection setup over TCP, like the OCP benchmark: each side sends what the other
// needs to connect a QP (QPN, initial PSN, rkey, VA, length, plane addresses, mpr_dest,
// max_wimm_dest) before any MRC packet flows.
//
// Framing (big-endian): magic "MRCO" (4) | version (2) | type (2) | body length (4) | body.
//   kConnInfo body: qpn 4 | psn 4 | rkey 4 | va 8 | length 8 | mpr_dest 1 | max_wimm_dest 2 |
//                   planes 1 | per plane: family 1 (4 or 6) + 4 or 16 address bytes |
//                   auth 1 (0 off, 1 on) | if on: this side's 128-bit transmit MAC key (16)
//   kValues body:   count 4 | count x u64 (small control messages: parameters, barriers, checksums)
//   kError body:    UTF-8 text, at most kOobMaxError bytes: why the sender is ending the session (a
//                   refused parameter, a mismatch, a shutdown); a receive waiting for any other type
//                   fails with "peer: " + that text
// Every malformed or truncated message is reported with a message, never trusted.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/time.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

inline constexpr std::uint32_t kOobMagic = 0x4D52434Fu;  // "MRCO"
inline constexpr std::uint16_t kOobVersion = 3;          // 2: authentication key; 3: kError
inline constexpr std::uint32_t kOobMaxError = 1024;
inline constexpr std::uint32_t kOobMaxBody = 1u << 16;
inline constexpr std::uint16_t kOobDefaultPort = 18515;  // as perftest

enum class OobType : std::uint16_t { kConnInfo = 1, kValues = 2, kError = 3 };

struct ConnInfo {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;  ///< initial PSN of this side's sends (24 bits)
  std::uint32_t rkey = 0;
  std::uint64_t va = 0;
  std::uint64_t length = 0;
  std::uint8_t mpr_dest = 8;
  std::uint16_t max_wimm_dest = 128;
  std::vector<IpAddr> planes;
  bool auth = false;        ///< this side authenticates the connection (opt-in)
  engine::MacKey auth_key;  ///< with auth: the key this side's packets are tagged with
  friend bool operator==(const ConnInfo&, const ConnInfo&) = default;
};

/// A random 24-bit initial PSN.
std::uint32_t random_psn();
/// A fresh random 128-bit MAC key from getrandom(2); false with a message if the kernel refused.
bool random_mac_key(engine::MacKey& out, std::string& err);
/// The QP authentication of a connection from both sides' announcements: off when neither side
/// authenticates, our key for sending and theirs for checking when both do; an error when only one
/// side does (the other would drop every packet).
bool qp_auth(const ConnInfo& mine, const ConnInfo& theirs, engine::QpAuth& out, std::string& err);

/// Full framed message (header + body).
std::vector<std::uint8_t> encode_conn_info(const ConnInfo& c);
std::vector<std::uint8_t> encode_values(std::span<const std::uint64_t> v);
/// An error message (text cut to kOobMaxError bytes).
std::vector<std::uint8_t> encode_error(const std::string& text);
/// Checks the 12-byte header; on success gives type and body length.
bool decode_header(std::span<const std::uint8_t> hdr, OobType& type, std::uint32_t& body_len,
                   std::string& err);
bool decode_conn_info_body(std::span<const std::uint8_t> body, ConnInfo& out, std::string& err);
bool decode_values_body(std::span<const std::uint8_t> body, std::vector<std::uint64_t>& out,
                        std::string& err);

/// One connected TCP stream. Blocking I/O bounded by a timeout per call.
class OobChannel {
 public:
  OobChannel() = default;
  explicit OobChannel(int fd) : fd_(fd) {}
  ~OobChannel();
  OobChannel(OobChannel&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OobChannel& operator=(OobChannel&& o) noexcept;
  OobChannel(const OobChannel&) = delete;
  OobChannel& operator=(const OobChannel&) = delete;

  /// Connects to host:port, retrying refused/unreachable attempts until `timeout` has passed (an
  /// attempt that gets no answer is also bounded by it).
  static std::optional<OobChannel> connect(const std::string& host, std::uint16_t port, Duration timeout,
                                           std::string& err);
  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  bool send_conn_info(const ConnInfo& c, std::string& err);
  bool recv_conn_info(ConnInfo& out, Duration timeout, std::string& err);
  bool send_values(std::span<const std::uint64_t> v, std::string& err);
  bool recv_values(std::vector<std::uint64_t>& out, Duration timeout, std::string& err);
  /// Tells the peer why this side ends the session (best effort: false if it could not be sent).
  bool send_error(const std::string& text, std::string& err);
  /// Sends ours, then receives theirs (both sides may call it in any order).
  bool exchange(const ConnInfo& mine, ConnInfo& theirs, Duration timeout, std::string& err);
  /// Raw bytes, for tests of malformed input.
  bool send_raw(std::span<const std::uint8_t> bytes, std::string& err);

 private:
  bool recv_msg(OobType want, std::vector<std::uint8_t>& body, Duration timeout, std::string& err);
  bool read_exact(std::uint8_t* p, std::size_t n, Time deadline, std::string& err);
  int fd_ = -1;
};

class OobListener {
 public:
  OobListener() = default;
  ~OobListener();
  OobListener(const OobListener&) = delete;
  OobListener& operator=(const OobListener&) = delete;
  /// Listens on addr:port (IPv4 or IPv6 literal; port 0 = any free port).
  bool listen(const std::string& addr, std::uint16_t port, std::string& err);
  std::uint16_t port() const { return port_; }
  std::optional<OobChannel> accept(Duration timeout, std::string& err);

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace mrc::io
