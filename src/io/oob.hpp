// Out-of-band connection setup over TCP, like the OCP benchmark: each side sends what the other
// needs to connect a QP (QPN, initial PSN, rkey, VA, length, plane addresses, mpr_dest,
// max_wimm_dest) before any MRC packet flows.
//
// Framing (big-endian): magic "MRCO" (4) | version (2) | type (2) | body length (4) | body.
//   kConnInfo body: qpn 4 | psn 4 | rkey 4 | va 8 | length 8 | mpr_dest 1 | max_wimm_dest 2 |
//                   planes 1 | per plane: family 1 (4 or 6) + 4 or 16 address bytes |
//                   auth 1 (0 off, 1 on) | if on: this side's 128-bit transmit MAC key (16) |
//                   wire_ext 1 (0 off, 1: this side offers the project's wire extensions, D45)
//   kValues body:   count 4 | count x u64, at most kOobMaxValues (small control messages: parameters,
//                   barriers, checksums)
//   kError body:    UTF-8 text, at most kOobMaxError bytes: why the sender is ending the session (a
//                   refused parameter, a mismatch, a shutdown); a receive waiting for any other type
//                   fails with "peer: " + that text
// Every malformed or truncated message is reported with a message, never trusted. The body length of
// a header is checked against the largest body of its type (oob_max_body) before a byte of the body
// is read or any room is made for it, so a reader never holds more than kOobHeader + that limit.
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
inline constexpr std::uint16_t kOobVersion = 4;          // 2: authentication key; 3: kError; 4: wire_ext
inline constexpr std::size_t kOobHeader = 12;
inline constexpr std::uint32_t kOobMaxError = 1024;
/// The longest value list (mrc perf's largest: a verification request, 2 + 256 QPs values).
inline constexpr std::uint32_t kOobMaxValues = 1024;
/// The largest body of each type: connection info with kMaxPorts IPv6 planes and a key; a full value
/// list; an error text.
inline constexpr std::uint32_t kOobMaxConnInfo = 32 + engine::kMaxPorts * 17 + 1 + 16 + 1;
inline constexpr std::uint32_t kOobMaxValuesBody = 4 + 8 * kOobMaxValues;
inline constexpr std::uint32_t kOobMaxBody = kOobMaxValuesBody;  ///< the largest of the three
inline constexpr std::uint16_t kOobDefaultPort = 18515;          // as perftest

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
  bool wire_ext = false;    ///< this side offers the project's wire extensions (W20, D45)
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

/// Whether a connection uses the project's wire extensions (QpRemote::wire_ext): only when both sides
/// offer them, so a side that does not (or a peer that is not this implementation) never sees them and
/// is never misread.
bool qp_wire_ext(const ConnInfo& mine, const ConnInfo& theirs);

/// Full framed message (header + body).
std::vector<std::uint8_t> encode_conn_info(const ConnInfo& c);
std::vector<std::uint8_t> encode_values(std::span<const std::uint64_t> v);
/// An error message (text cut to kOobMaxError bytes).
std::vector<std::uint8_t> encode_error(const std::string& text);
/// The largest body a message of type `t` may have.
std::uint32_t oob_max_body(OobType t);
/// Checks the 12-byte header (magic, version, type, the body length against oob_max_body of the
/// type); on success gives type and body length.
bool decode_header(std::span<const std::uint8_t> hdr, OobType& type, std::uint32_t& body_len,
                   std::string& err);
bool decode_conn_info_body(std::span<const std::uint8_t> body, ConnInfo& out, std::string& err);
bool decode_values_body(std::span<const std::uint8_t> body, std::vector<std::uint64_t>& out,
                        std::string& err);
/// The text of a kError body as printable ASCII (every other byte shown as '?'), at most
/// kOobMaxError characters.
std::string decode_error_body(std::span<const std::uint8_t> body);

/// One framed message, read piece by piece: from a non-blocking socket (read_from) or from bytes at
/// hand (feed). It takes exactly the bytes of one message (what follows belongs to the next one), and
/// the header is checked before any room is made for the body, so it never holds more than
/// kOobHeader + oob_max_body(type) bytes. After kDone or kError, reset() starts the next message.
class OobFrameReader {
 public:
  enum class Status { kMore, kDone, kError };
  /// Takes the bytes of this message from the front of `in` and says how many (`used`).
  Status feed(std::span<const std::uint8_t> in, std::size_t& used, std::string& err);
  /// Reads what `fd` has ready without blocking (kMore: nothing more for now); the peer closing
  /// before the message is complete is an error ("peer closed the connection" / "truncated ...").
  Status read_from(int fd, std::string& err);
  Status status() const { return status_; }
  /// Bytes of the message taken so far, and how many the message has (12 until the header is in).
  std::size_t received() const { return hdr_got_ + body_got_; }
  std::size_t expected() const { return kOobHeader + (have_header_ ? body_.size() : 0); }
  bool have_header() const { return have_header_; }
  /// With kDone: the message.
  OobType type() const { return type_; }
  std::span<const std::uint8_t> body() const { return body_; }
  /// With kDone: true if the message is of type `want`; otherwise false with the error ("peer: TEXT"
  /// for a kError message, else "expected message type ...").
  bool is(OobType want, std::string& err) const;
  void reset();

 private:
  std::span<std::uint8_t> room();  ///< where the next bytes of the message go (exactly what it lacks)
  Status commit(std::size_t n, std::string& err);
  std::uint8_t hdr_[kOobHeader] = {};
  std::size_t hdr_got_ = 0, body_got_ = 0;
  bool have_header_ = false;
  OobType type_{};
  std::vector<std::uint8_t> body_;
  Status status_ = Status::kMore;
  std::string err_;
};

/// One connected TCP stream. Blocking I/O bounded by a timeout per call.
class OobChannel {
 public:
  OobChannel() = default;
  explicit OobChannel(int fd) : fd_(fd) {}
  ~OobChannel();
  OobChannel(OobChannel&& o) noexcept : fd_(o.fd_), send_timeout_(o.send_timeout_) { o.fd_ = -1; }
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
  /// How long a send may wait for room while the peer reads nothing (0: never wait; default 30 s);
  /// then it fails ("timed out sending").
  void set_send_timeout(Duration t) { send_timeout_ = t; }

 private:
  /// One whole message of type `want` by `timeout` (a total deadline, not one per read).
  bool recv_msg(OobType want, OobFrameReader& rd, Duration timeout, std::string& err);
  int fd_ = -1;
  Duration send_timeout_ = 30'000'000'000ull;
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
  int fd() const { return fd_; }
  std::optional<OobChannel> accept(Duration timeout, std::string& err);

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace mrc::io
