#include "io/oob.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "common/psn.hpp"

namespace mrc::io {
namespace {

constexpr std::size_t kHeader = kOobHeader;
constexpr Duration kRetryPause = 50'000'000;  // 50 ms between connect attempts

void put(std::vector<std::uint8_t>& b, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

struct Reader {
  std::span<const std::uint8_t> in;
  std::size_t pos = 0;
  bool ok = true;
  std::uint64_t get(int bytes) {
    if (pos + static_cast<std::size_t>(bytes) > in.size()) {
      ok = false;
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | in[pos++];
    return v;
  }
  /// Copies out.size() raw bytes (an address, a key) with one bounds check; on a short body it
  /// leaves `out` untouched and clears `ok`.
  void read(std::span<std::uint8_t> out) {
    if (pos + out.size() > in.size()) {
      ok = false;
      return;
    }
    std::memcpy(out.data(), in.data() + pos, out.size());
    pos += out.size();
  }
};

std::vector<std::uint8_t> frame(OobType type, const std::vector<std::uint8_t>& body) {
  std::vector<std::uint8_t> b;
  b.reserve(kHeader + body.size());
  put(b, kOobMagic, 4);
  put(b, kOobVersion, 2);
  put(b, static_cast<std::uint16_t>(type), 2);
  put(b, body.size(), 4);
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

std::string sys_err(const std::string& what) {
  return "oob: " + what + ": " + std::strerror(errno);
}

}  // namespace

std::uint32_t random_psn() {
  std::random_device rd;
  return rd() & kPsnMask;
}

bool random_mac_key(engine::MacKey& out, std::string& err) {
  std::array<std::uint8_t, 16> b{};
  std::size_t got = 0;
  while (got < b.size()) {
    const ssize_t n = ::getrandom(b.data() + got, b.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = sys_err("getrandom");
      return false;
    }
    got += static_cast<std::size_t>(n);
  }
  out = engine::MacKey::from_bytes(b);
  return true;
}

bool qp_wire_ext(const ConnInfo& mine, const ConnInfo& theirs) {
  return mine.wire_ext && theirs.wire_ext;
}

bool qp_auth(const ConnInfo& mine, const ConnInfo& theirs, engine::QpAuth& out, std::string& err) {
  if (mine.auth != theirs.auth) {
    err = std::string("oob: ") + (mine.auth
                                      ? "the peer does not authenticate its packets (--auth on one side only)"
                                      : "the peer requires authenticated packets (--auth)");
    return false;
  }
  out = engine::QpAuth{mine.auth, mine.auth_key, theirs.auth_key};
  return true;
}

std::vector<std::uint8_t> encode_conn_info(const ConnInfo& c) {
  std::vector<std::uint8_t> b;
  put(b, c.qpn, 4);
  put(b, c.psn, 4);
  put(b, c.rkey, 4);
  put(b, c.va, 8);
  put(b, c.length, 8);
  put(b, c.mpr_dest, 1);
  put(b, c.max_wimm_dest, 2);
  put(b, c.planes.size(), 1);
  for (const IpAddr& a : c.planes) {
    const bool v6 = a.family == AF_INET6;
    put(b, v6 ? 6 : 4, 1);
    b.insert(b.end(), a.bytes.begin(), a.bytes.begin() + (v6 ? 16 : 4));
  }
  put(b, c.auth ? 1 : 0, 1);
  if (c.auth) {
    const std::array<std::uint8_t, 16> k = c.auth_key.bytes();
    b.insert(b.end(), k.begin(), k.end());
  }
  put(b, c.wire_ext ? 1 : 0, 1);
  return frame(OobType::kConnInfo, b);
}

std::vector<std::uint8_t> encode_values(std::span<const std::uint64_t> v) {
  std::vector<std::uint8_t> b;
  put(b, v.size(), 4);
  for (const std::uint64_t x : v) put(b, x, 8);
  return frame(OobType::kValues, b);
}

std::vector<std::uint8_t> encode_error(const std::string& text) {
  const std::size_t n = std::min<std::size_t>(text.size(), kOobMaxError);
  return frame(OobType::kError, std::vector<std::uint8_t>(text.begin(), text.begin() + static_cast<long>(n)));
}

std::uint32_t oob_max_body(OobType t) {
  switch (t) {
    case OobType::kConnInfo:
      return kOobMaxConnInfo;
    case OobType::kValues:
      return kOobMaxValuesBody;
    case OobType::kError:
      return kOobMaxError;
  }
  return 0;
}

bool decode_header(std::span<const std::uint8_t> hdr, OobType& type, std::uint32_t& body_len,
                   std::string& err) {
  Reader r{hdr};
  const auto magic = static_cast<std::uint32_t>(r.get(4));
  const auto version = static_cast<std::uint16_t>(r.get(2));
  const auto t = static_cast<std::uint16_t>(r.get(2));
  const auto len = static_cast<std::uint32_t>(r.get(4));
  if (!r.ok) {
    err = "oob: truncated header (" + std::to_string(hdr.size()) + " of 12 bytes)";
    return false;
  }
  if (magic != kOobMagic) {
    err = "oob: bad magic (not an MRC out-of-band message)";
    return false;
  }
  if (version != kOobVersion) {
    err = "oob: unsupported version " + std::to_string(version) + " (this side speaks " +
          std::to_string(kOobVersion) + ")";
    return false;
  }
  if (t != static_cast<std::uint16_t>(OobType::kConnInfo) &&
      t != static_cast<std::uint16_t>(OobType::kValues) && t != static_cast<std::uint16_t>(OobType::kError)) {
    err = "oob: unknown message type " + std::to_string(t);
    return false;
  }
  if (const std::uint32_t max = oob_max_body(static_cast<OobType>(t)); len > max) {
    err = "oob: message body too large (" + std::to_string(len) + " bytes; a type " + std::to_string(t) +
          " message has at most " + std::to_string(max) + ")";
    return false;
  }
  type = static_cast<OobType>(t);
  body_len = len;
  return true;
}

bool decode_conn_info_body(std::span<const std::uint8_t> body, ConnInfo& out, std::string& err) {
  Reader r{body};
  ConnInfo c;
  c.qpn = static_cast<std::uint32_t>(r.get(4));
  c.psn = static_cast<std::uint32_t>(r.get(4));
  c.rkey = static_cast<std::uint32_t>(r.get(4));
  c.va = r.get(8);
  c.length = r.get(8);
  c.mpr_dest = static_cast<std::uint8_t>(r.get(1));
  c.max_wimm_dest = static_cast<std::uint16_t>(r.get(2));
  const auto planes = static_cast<std::size_t>(r.get(1));
  if (!r.ok) {
    err = "oob: truncated connection info";
    return false;
  }
  if (c.psn > kPsnMask) {
    err = "oob: initial PSN does not fit in 24 bits";
    return false;
  }
  if (c.qpn == 0 || c.qpn > 0xFFFFFFu) {
    err = "oob: invalid QPN " + std::to_string(c.qpn);
    return false;
  }
  if (planes == 0 || planes > engine::kMaxPorts) {
    err = "oob: invalid plane count " + std::to_string(planes);
    return false;
  }
  for (std::size_t i = 0; i < planes; ++i) {
    IpAddr a;
    const auto fam = r.get(1);
    if (!r.ok) break;
    if (fam != 4 && fam != 6) {
      err = "oob: plane " + std::to_string(i) + " has unknown address family " + std::to_string(fam);
      return false;
    }
    a.family = fam == 6 ? AF_INET6 : AF_INET;
    r.read(std::span<std::uint8_t>(a.bytes.data(), fam == 6 ? 16u : 4u));
    c.planes.push_back(a);
  }
  if (!r.ok) {
    err = "oob: truncated plane address list";
    return false;
  }
  const auto auth = r.get(1);
  if (auth > 1) {
    err = "oob: authentication flag must be 0 or 1, got " + std::to_string(auth);
    return false;
  }
  c.auth = auth == 1;
  if (c.auth) {
    std::array<std::uint8_t, 16> k{};
    r.read(k);
    c.auth_key = engine::MacKey::from_bytes(k);
  }
  if (!r.ok) {
    err = "oob: truncated authentication fields";
    return false;
  }
  const auto ext = r.get(1);
  if (!r.ok || ext > 1) {
    err = r.ok ? "oob: wire extension flag must be 0 or 1, got " + std::to_string(ext)
               : "oob: truncated connection info (no wire extension flag)";
    return false;
  }
  c.wire_ext = ext == 1;
  if (r.pos != body.size()) {
    err = "oob: " + std::to_string(body.size() - r.pos) + " unexpected trailing bytes in connection info";
    return false;
  }
  out = std::move(c);
  return true;
}

bool decode_values_body(std::span<const std::uint8_t> body, std::vector<std::uint64_t>& out,
                        std::string& err) {
  Reader r{body};
  const auto n = r.get(4);
  if (!r.ok || body.size() != 4 + n * 8) {
    err = "oob: value list length does not match its count";
    return false;
  }
  if (n > kOobMaxValues) {
    err =
        "oob: value list of " + std::to_string(n) + " values (at most " + std::to_string(kOobMaxValues) + ")";
    return false;
  }
  out.clear();
  out.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) out.push_back(r.get(8));
  return true;
}

std::string decode_error_body(std::span<const std::uint8_t> body) {
  std::string text;
  const std::size_t n = std::min<std::size_t>(body.size(), kOobMaxError);
  text.reserve(n);
  for (const std::uint8_t ch : body.first(n))
    text.push_back(ch >= 0x20 && ch < 0x7F ? static_cast<char>(ch) : '?');
  return text;
}

// ------------------------------------------------------------------------------------------------

std::span<std::uint8_t> OobFrameReader::room() {
  if (!have_header_) return std::span<std::uint8_t>(hdr_ + hdr_got_, kHeader - hdr_got_);
  return std::span<std::uint8_t>(body_).subspan(body_got_);
}

OobFrameReader::Status OobFrameReader::commit(std::size_t n, std::string& err) {
  if (!have_header_) {
    hdr_got_ += n;
    if (hdr_got_ < kHeader) return status_;
    std::uint32_t len = 0;
    if (!decode_header(hdr_, type_, len, err)) {
      err_ = err;
      return status_ = Status::kError;
    }
    have_header_ = true;
    body_.assign(len, 0);  // len <= oob_max_body(type_): checked by decode_header
  } else {
    body_got_ += n;
  }
  if (body_got_ == body_.size()) status_ = Status::kDone;
  return status_;
}

OobFrameReader::Status OobFrameReader::feed(std::span<const std::uint8_t> in, std::size_t& used,
                                            std::string& err) {
  used = 0;
  while (status_ == Status::kMore && used < in.size()) {
    const std::span<std::uint8_t> to = room();
    const std::size_t n = std::min(to.size(), in.size() - used);
    std::memcpy(to.data(), in.data() + used, n);
    used += n;
    commit(n, err);
  }
  if (status_ == Status::kError) err = err_;
  return status_;
}

OobFrameReader::Status OobFrameReader::read_from(int fd, std::string& err) {
  while (status_ == Status::kMore) {
    const std::span<std::uint8_t> to = room();
    const ssize_t r = ::recv(fd, to.data(), to.size(), MSG_DONTWAIT);
    if (r > 0) {
      commit(static_cast<std::size_t>(r), err);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return status_;
    err_ = r < 0             ? sys_err("recv")
           : received() == 0 ? "oob: peer closed the connection"
                             : "oob: truncated message (peer closed after " + std::to_string(received()) +
                                   " of " + std::to_string(expected()) + " bytes)";
    status_ = Status::kError;
  }
  if (status_ == Status::kError) err = err_;
  return status_;
}

bool OobFrameReader::is(OobType want, std::string& err) const {
  if (status_ != Status::kDone) {
    err = status_ == Status::kError ? err_ : "oob: message not complete";
    return false;
  }
  if (type_ == OobType::kError && want != OobType::kError) {
    err = "peer: " + decode_error_body(body_);  // the peer's reason for ending the session
    return false;
  }
  if (type_ != want) {
    err = "oob: expected message type " + std::to_string(static_cast<int>(want)) + ", got " +
          std::to_string(static_cast<int>(type_));
    return false;
  }
  return true;
}

void OobFrameReader::reset() {
  hdr_got_ = body_got_ = 0;
  have_header_ = false;
  type_ = {};
  body_.clear();
  status_ = Status::kMore;
  err_.clear();
}

// ------------------------------------------------------------------------------------------------

OobChannel::~OobChannel() {
  if (fd_ >= 0) ::close(fd_);
}

OobChannel& OobChannel::operator=(OobChannel&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    send_timeout_ = o.send_timeout_;
    o.fd_ = -1;
  }
  return *this;
}

std::optional<OobChannel> OobChannel::connect(const std::string& host, std::uint16_t port, Duration timeout,
                                              std::string& err) {
  const Time deadline = UdpEndpoint::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) {
    err = "oob: cannot resolve '" + host + "': " + ::gai_strerror(gai);
    return std::nullopt;
  }
  std::string last = "timed out";
  for (;;) {
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      // Non-blocking, so an address that never answers is bounded by the deadline too.
      const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
      if (fd < 0) continue;
      int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        const Time t = UdpEndpoint::now();
        pollfd pfd{fd, POLLOUT, 0};
        const int ms = t >= deadline ? 0 : static_cast<int>((deadline - t) / 1'000'000 + 1);
        int soerr = ETIMEDOUT;
        socklen_t sl = sizeof soerr;
        if (::poll(&pfd, 1, ms) > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        rc = soerr == 0 ? 0 : -1;
        errno = soerr;
      }
      if (rc == 0) {
        ::freeaddrinfo(res);
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return OobChannel(fd);
      }
      last = std::strerror(errno);
      ::close(fd);
    }
    if (UdpEndpoint::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::nanoseconds(kRetryPause));
  }
  ::freeaddrinfo(res);
  err = "oob: cannot connect to " + host + ":" + std::to_string(port) + ": " + last;
  return std::nullopt;
}

bool OobChannel::send_raw(std::span<const std::uint8_t> bytes, std::string& err) {
  // Non-blocking sends bounded by the send timeout: a peer that reads nothing cannot hold this side.
  const Time deadline = UdpEndpoint::now() + send_timeout_;
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      err = sys_err("send");
      return false;
    }
    const Time t = UdpEndpoint::now();
    if (t >= deadline) {
      err = "oob: timed out sending to the peer (it reads nothing; " + std::to_string(off) + " of " +
            std::to_string(bytes.size()) + " bytes sent)";
      return false;
    }
    pollfd pfd{fd_, POLLOUT, 0};
    const int ms = static_cast<int>(std::min<Duration>((deadline - t) / 1'000'000 + 1, 1'000'000));
    if (::poll(&pfd, 1, ms) < 0 && errno != EINTR) {
      err = sys_err("poll");
      return false;
    }
  }
  return true;
}

bool OobChannel::recv_msg(OobType want, OobFrameReader& rd, Duration timeout, std::string& err) {
  if (fd_ < 0) {
    err = "oob: channel not connected";
    return false;
  }
  const Time deadline = UdpEndpoint::now() + timeout;
  rd.reset();
  for (;;) {
    const OobFrameReader::Status st = rd.read_from(fd_, err);
    if (st == OobFrameReader::Status::kError) return false;
    if (st == OobFrameReader::Status::kDone) return rd.is(want, err);
    const Time t = UdpEndpoint::now();
    if (t >= deadline) {
      err = "oob: timed out waiting for the peer (" + std::to_string(rd.received()) + " of " +
            std::to_string(rd.expected()) + " bytes)";
      return false;
    }
    pollfd pfd{fd_, POLLIN, 0};
    const int ms = static_cast<int>(std::min<Duration>((deadline - t) / 1'000'000 + 1, 1'000'000));
    if (::poll(&pfd, 1, ms) < 0 && errno != EINTR) {
      err = sys_err("poll");
      return false;
    }
  }
}

bool OobChannel::send_conn_info(const ConnInfo& c, std::string& err) {
  return send_raw(encode_conn_info(c), err);
}

bool OobChannel::recv_conn_info(ConnInfo& out, Duration timeout, std::string& err) {
  OobFrameReader rd;
  return recv_msg(OobType::kConnInfo, rd, timeout, err) && decode_conn_info_body(rd.body(), out, err);
}

bool OobChannel::send_values(std::span<const std::uint64_t> v, std::string& err) {
  return send_raw(encode_values(v), err);
}

bool OobChannel::recv_values(std::vector<std::uint64_t>& out, Duration timeout, std::string& err) {
  OobFrameReader rd;
  return recv_msg(OobType::kValues, rd, timeout, err) && decode_values_body(rd.body(), out, err);
}

bool OobChannel::send_error(const std::string& text, std::string& err) {
  return send_raw(encode_error(text), err);
}

bool OobChannel::exchange(const ConnInfo& mine, ConnInfo& theirs, Duration timeout, std::string& err) {
  return send_conn_info(mine, err) && recv_conn_info(theirs, timeout, err);
}

// ------------------------------------------------------------------------------------------------

OobListener::~OobListener() {
  if (fd_ >= 0) ::close(fd_);
}

bool OobListener::listen(const std::string& addr, std::uint16_t port, std::string& err) {
  IpAddr a;
  if (!IpAddr::parse(addr, a)) {
    err = "oob: '" + addr + "' is not an IPv4 or IPv6 address";
    return false;
  }
  fd_ = ::socket(a.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    err = sys_err("socket");
    return false;
  }
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in6 sa{};
  socklen_t len = 0;
  if (a.family == AF_INET) {
    sockaddr_in s4{};
    s4.sin_family = AF_INET;
    s4.sin_port = htons(port);
    std::memcpy(&s4.sin_addr, a.bytes.data(), 4);
    std::memcpy(&sa, &s4, sizeof s4);
    len = sizeof s4;
  } else {
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(port);
    std::memcpy(&sa.sin6_addr, a.bytes.data(), 16);
    len = sizeof sa;
  }
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(fd_, 16) != 0) {
    err = sys_err("listen on " + addr + ":" + std::to_string(port));
    return false;
  }
  len = sizeof sa;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin6_port);  // same offset in sockaddr_in
  return true;
}

std::optional<OobChannel> OobListener::accept(Duration timeout, std::string& err) {
  pollfd pfd{fd_, POLLIN, 0};
  const int ms = static_cast<int>(std::min<Duration>(timeout / 1'000'000, 1u << 30));
  const int pr = ::poll(&pfd, 1, ms);
  if (pr <= 0) {
    err = pr == 0 ? "oob: no client connected in time" : sys_err("poll");
    return std::nullopt;
  }
  const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    err = sys_err("accept");
    return std::nullopt;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return OobChannel(fd);
}

}  // namespace mrc::io
