#include "api/ctl_proto.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace mrc::api {

using nlohmann::json;

std::string ev_hex(const EvBytes& b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (const std::uint8_t x : b) {
    s += kDigits[x >> 4];
    s += kDigits[x & 15];
  }
  return s;
}

EvBytes ev_from_hex(const std::string& s) {
  if (s.empty() || s.size() > 2 * kEvBytes) throw std::invalid_argument("EV must be 1..64 hex digits");
  // Left-aligned: "b35a" is the EV whose first two bytes are b3 5a (big-endian byte string).
  EvBytes b{};
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    int v = -1;
    if (c >= '0' && c <= '9') v = c - '0';
    if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    if (v < 0) throw std::invalid_argument("EV has a non-hex digit");
    b[i / 2] = static_cast<std::uint8_t>(b[i / 2] | (i % 2 ? v : v << 4));
  }
  return b;
}

namespace {

[[noreturn]] void bad(const char* key, const std::string& what) {
  throw std::invalid_argument(std::string(key) + ": " + what);
}

const json& member(const json& obj, const char* key) {
  if (!obj.is_object()) throw std::invalid_argument(std::string("expected an object with \"") + key + "\"");
  const auto it = obj.find(key);
  if (it == obj.end()) bad(key, "missing");
  return *it;
}

std::uint64_t uint_of(const json& v, const char* key, std::uint64_t max) {
  // Only JSON integers: a float, a bool or a string is refused rather than converted.
  if (!v.is_number_integer()) bad(key, "must be an integer 0.." + std::to_string(max));
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= max) return u;
  } else if (const auto i = v.get<std::int64_t>(); i >= 0 && static_cast<std::uint64_t>(i) <= max) {
    return static_cast<std::uint64_t>(i);
  }
  bad(key, "must be an integer 0.." + std::to_string(max));
}

}  // namespace

namespace {

/// A counting pass over the request (SAX: nothing is built), stopped at the first limit it passes.
struct LimitCheck {
  int depth = 0;
  std::uint32_t containers = 0, values = 0;
  std::string over;  ///< the limit passed, if any

  bool value() {
    if (++values <= kCtlMaxValues) return true;
    over = "request has more than " + std::to_string(kCtlMaxValues) + " values";
    return false;
  }
  bool open() {
    if (++depth > kCtlMaxDepth) {
      over = "request nests deeper than " + std::to_string(kCtlMaxDepth) + " levels";
      return false;
    }
    if (++containers > kCtlMaxContainers) {
      over = "request has more than " + std::to_string(kCtlMaxContainers) + " arrays and objects";
      return false;
    }
    return value();
  }
  bool close() {
    --depth;
    return true;
  }
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(); }
  bool key(json::string_t&) { return value(); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return false; }
};

}  // namespace

json parse_request(const std::string& text) {
  // Counted before the parsed form is built, so an over-limit request never gets one. A syntax
  // error also stops this pass; the real parse below then reports it.
  LimitCheck check;
  if (!json::sax_parse(text, &check) && !check.over.empty()) throw std::length_error(check.over);
  return json::parse(text);
}

std::uint64_t json_uint(const json& obj, const char* key, std::uint64_t max) {
  return uint_of(member(obj, key), key, max);
}

std::int64_t json_int64(const json& obj, const char* key) {
  const json& v = member(obj, key);
  if (!v.is_number_integer()) bad(key, "must be an integer");
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) bad(key, "out of range");
    return static_cast<std::int64_t>(u);
  }
  return v.get<std::int64_t>();
}

float json_float(const json& obj, const char* key) {
  const json& v = member(obj, key);
  if (!v.is_number()) bad(key, "must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) bad(key, "out of range");
  return static_cast<float>(d);
}

std::string json_string(const json& obj, const char* key) {
  const json& v = member(obj, key);
  if (!v.is_string()) bad(key, "must be a string");
  return v.get<std::string>();
}

const json& json_array(const json& obj, const char* key) {
  const json& v = member(obj, key);
  if (!v.is_array()) bad(key, "must be an array");
  return v;
}

std::vector<std::uint64_t> json_uint_array(const json& obj, const char* key, std::uint64_t max) {
  std::vector<std::uint64_t> out;
  for (const json& v : json_array(obj, key)) out.push_back(uint_of(v, key, max));
  return out;
}

json to_json(const EvField& f) {
  return json::array({f.width, f.init_val, f.min_val, f.max_val, f.mask});
}

EvField field_from_json(const json& j) {
  if (!j.is_array() || j.size() != 5) throw std::invalid_argument("a field is [width, init, min, max, mask]");
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint32_t>::max();
  const auto u = [&](std::size_t i) { return static_cast<std::uint32_t>(uint_of(j[i], "field", kMax)); };
  return EvField{u(0), u(1), u(2), u(3), u(4)};
}

json to_json(const EvOpEntry& e) {
  return json{{"ev", ev_hex(e.ev)},     {"port", e.port},   {"ev_new", ev_hex(e.ev_new)},
              {"port_new", e.port_new}, {"state", e.state}, {"flags", e.flags}};
}

EvOpEntry entry_from_json(const json& j) {
  EvOpEntry e;
  e.ev = ev_from_hex(json_string(j, "ev"));
  e.port = json_get<std::uint8_t>(j, "port");
  e.ev_new = ev_from_hex(json_string(j, "ev_new"));
  e.port_new = json_get<std::uint8_t>(j, "port_new");
  e.state = json_get<std::uint32_t>(j, "state");
  e.flags = json_get<std::uint32_t>(j, "flags");
  return e;
}

json to_json(const mrc_ctl_cc_nscc_cfg& c) {
  return json{{"base_rtt", c.base_rtt},
              {"target_delay", c.target_delay},
              {"max_cwnd", c.max_cwnd},
              {"gamma", c.gamma},
              {"max_md_jump", c.max_md_jump},
              {"fi", c.fi},
              {"fi_scale", c.fi_scale},
              {"eta", c.eta},
              {"qa_gate", c.qa_gate},
              {"qa_threshold", c.qa_threshold},
              {"adjust_bytes_threshold", c.adjust_bytes_threshold},
              {"adjust_period_threshold", c.adjust_period_threshold},
              {"disable_qa", c.disable_qa}};
}

mrc_ctl_cc_nscc_cfg nscc_from_json(const json& j) {
  mrc_ctl_cc_nscc_cfg c{};
  c.base_rtt = json_get<std::uint32_t>(j, "base_rtt");
  c.target_delay = json_get<std::uint32_t>(j, "target_delay");
  c.max_cwnd = json_get<std::uint32_t>(j, "max_cwnd");
  c.gamma = json_float(j, "gamma");
  c.max_md_jump = json_float(j, "max_md_jump");
  c.fi = json_float(j, "fi");
  c.fi_scale = json_float(j, "fi_scale");
  c.eta = json_float(j, "eta");
  c.qa_gate = json_get<std::uint8_t>(j, "qa_gate");
  c.qa_threshold = json_get<std::uint32_t>(j, "qa_threshold");
  c.adjust_bytes_threshold = json_get<std::uint32_t>(j, "adjust_bytes_threshold");
  c.adjust_period_threshold = json_get<std::uint32_t>(j, "adjust_period_threshold");
  c.disable_qa = json_get<std::uint8_t>(j, "disable_qa");
  return c;
}

CtlFrameReader::Status CtlFrameReader::feed(const char* p, std::size_t n) {
  if (status_ != Status::kNeedMore || n == 0 || n > want()) return status_;
  if (got_ < 4) {
    std::memcpy(hdr_ + got_, p, n);
    got_ += n;
    if (got_ < 4) return status_;
    announced_ = std::uint32_t{hdr_[0]} << 24 | std::uint32_t{hdr_[1]} << 16 | std::uint32_t{hdr_[2]} << 8 |
                 std::uint32_t{hdr_[3]};
    // Decided on the header alone, before a byte of the body is stored.
    if (announced_ > max_) return status_ = Status::kTooBig;
    if (announced_ == 0) status_ = Status::kMessage;
    return status_;
  }
  body_.append(p, n);  // grows with what arrived, never to the announced size up front
  if (body_.size() == announced_) status_ = Status::kMessage;
  return status_;
}

std::string CtlFrameReader::take() {
  std::string out = std::move(body_);
  body_ = std::string();
  got_ = 0;
  announced_ = 0;
  status_ = Status::kNeedMore;
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

/// Waits for `events` on fd until `deadline` (none when max()); false on timeout or error.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    int ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      ms = static_cast<int>(std::min<long long>(left, 1 << 30));
    }
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) continue;  // re-check the deadline
    return true;           // readable, writable, or an error / hang-up the next call reports
  }
}

Clock::time_point deadline_after(std::chrono::milliseconds t) {
  return t.count() > 0 ? Clock::now() + t : Clock::time_point::max();
}

bool write_all(int fd, const char* p, std::size_t n, Clock::time_point deadline) {
  while (n > 0) {
    if (deadline != Clock::time_point::max() && !wait_fd(fd, POLLOUT, deadline)) return false;
    const ssize_t w =
        ::send(fd, p, n, MSG_NOSIGNAL | (deadline != Clock::time_point::max() ? MSG_DONTWAIT : 0));
    if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

CtlRecv recv_msg(int fd, std::string& msg, const CtlRecvLimits& limits, std::uint32_t* announced) {
  CtlFrameReader r(limits.max_message);
  Clock::time_point deadline = deadline_after(limits.idle_timeout);
  char buf[64 * 1024];
  for (;;) {
    const bool timed = deadline != Clock::time_point::max();
    if (timed && !wait_fd(fd, POLLIN, deadline)) return CtlRecv::kTimeout;
    const std::size_t n = std::min(r.want(), sizeof(buf));
    const ssize_t got = ::recv(fd, buf, n, timed ? MSG_DONTWAIT : 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (got < 0) return CtlRecv::kError;
    if (got == 0) return r.started() ? CtlRecv::kError : CtlRecv::kClosed;
    const bool first = !r.started();
    const CtlFrameReader::Status st = r.feed(buf, static_cast<std::size_t>(got));
    if (announced != nullptr) *announced = r.announced();
    if (st == CtlFrameReader::Status::kTooBig) return CtlRecv::kTooBig;
    if (st == CtlFrameReader::Status::kMessage) {
      msg = r.take();
      return CtlRecv::kMessage;
    }
    if (first) deadline = deadline_after(limits.message_timeout);  // the message's clock starts
  }
}

bool send_msg(int fd, const std::string& msg, std::chrono::milliseconds timeout) {
  if (msg.size() > kCtlMaxMessage) return false;
  const std::uint32_t len = htonl(static_cast<std::uint32_t>(msg.size()));
  const Clock::time_point deadline = deadline_after(timeout);
  return write_all(fd, reinterpret_cast<const char*>(&len), 4, deadline) &&
         write_all(fd, msg.data(), msg.size(), deadline);
}

bool send_msg(int fd, const std::string& msg) {
  return send_msg(fd, msg, std::chrono::milliseconds(0));
}

bool recv_msg(int fd, std::string& msg) {
  return recv_msg(fd, msg, CtlRecvLimits{}) == CtlRecv::kMessage;
}

}  // namespace mrc::api
