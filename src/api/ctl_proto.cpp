#include "api/ctl_proto.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cerrno>
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

json to_json(const EvField& f) {
  return json::array({f.width, f.init_val, f.min_val, f.max_val, f.mask});
}

EvField field_from_json(const json& j) {
  if (!j.is_array() || j.size() != 5) throw std::invalid_argument("a field is [width, init, min, max, mask]");
  return EvField{j[0].get<std::uint32_t>(), j[1].get<std::uint32_t>(), j[2].get<std::uint32_t>(),
                 j[3].get<std::uint32_t>(), j[4].get<std::uint32_t>()};
}

json to_json(const EvOpEntry& e) {
  return json{{"ev", ev_hex(e.ev)},     {"port", e.port},   {"ev_new", ev_hex(e.ev_new)},
              {"port_new", e.port_new}, {"state", e.state}, {"flags", e.flags}};
}

EvOpEntry entry_from_json(const json& j) {
  EvOpEntry e;
  e.ev = ev_from_hex(j.at("ev").get<std::string>());
  e.port = j.at("port").get<std::uint8_t>();
  e.ev_new = ev_from_hex(j.at("ev_new").get<std::string>());
  e.port_new = j.at("port_new").get<std::uint8_t>();
  e.state = j.at("state").get<std::uint32_t>();
  e.flags = j.at("flags").get<std::uint32_t>();
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
  c.base_rtt = j.at("base_rtt").get<std::uint32_t>();
  c.target_delay = j.at("target_delay").get<std::uint32_t>();
  c.max_cwnd = j.at("max_cwnd").get<std::uint32_t>();
  c.gamma = j.at("gamma").get<float>();
  c.max_md_jump = j.at("max_md_jump").get<float>();
  c.fi = j.at("fi").get<float>();
  c.fi_scale = j.at("fi_scale").get<float>();
  c.eta = j.at("eta").get<float>();
  c.qa_gate = j.at("qa_gate").get<std::uint8_t>();
  c.qa_threshold = j.at("qa_threshold").get<std::uint32_t>();
  c.adjust_bytes_threshold = j.at("adjust_bytes_threshold").get<std::uint32_t>();
  c.adjust_period_threshold = j.at("adjust_period_threshold").get<std::uint32_t>();
  c.disable_qa = j.at("disable_qa").get<std::uint8_t>();
  return c;
}

namespace {

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

bool send_msg(int fd, const std::string& msg) {
  if (msg.size() > kCtlMaxMessage) return false;
  const std::uint32_t len = htonl(static_cast<std::uint32_t>(msg.size()));
  return write_all(fd, reinterpret_cast<const char*>(&len), 4) && write_all(fd, msg.data(), msg.size());
}

bool recv_msg(int fd, std::string& msg) {
  std::uint32_t len = 0;
  if (!read_all(fd, reinterpret_cast<char*>(&len), 4)) return false;
  len = ntohl(len);
  if (len > kCtlMaxMessage) return false;
  msg.assign(len, '\0');
  return read_all(fd, msg.data(), len);
}

}  // namespace mrc::api
