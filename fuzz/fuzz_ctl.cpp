// libFuzzer target for the controller protocol: the framing (CtlFrameReader) and the request
// handler behind the control socket (CtlService::dispatch), on an offline profile store (no
// endpoint, no sockets). Each input is a fresh store and service, so a crash reproduces alone.
//
// Input: either requests one per line ('\n'; a line starting with '!' is sent by an unprivileged
// session, the rest by a privileged one, so modifications build state for later lines), or, when
// the first byte is 0, a byte stream cut into messages by the socket framing.
//
// Checked: dispatch never throws and always answers one JSON object with an integer "rc" and a
// string "why"; the framing never holds more than what it was fed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/ctl_proto.hpp"
#include "api/ctl_service.hpp"

namespace {

using mrc::api::CtlFrameReader;

[[noreturn]] void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_ctl: %s: %.300s\n", what, detail.c_str());
  std::abort();
}

void handle(mrc::api::CtlService& svc, mrc::api::CtlSession& s, const std::string& req) {
  std::string rsp;
  try {
    rsp = svc.dispatch(s, req);
  } catch (const std::exception& e) {
    die("dispatch threw", e.what());
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(rsp);
  } catch (const std::exception&) {
    die("answer is not JSON", rsp);
  }
  if (!j.is_object() || !j.contains("rc") || !j["rc"].is_number_integer() || !j.contains("why") ||
      !j["why"].is_string())
    die("answer without rc / why", rsp);
  if (rsp.size() > mrc::api::kCtlMaxMessage) die("answer over the message limit", rsp.substr(0, 100));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  mrc::api::ProfileStore store;
  store.set_num_ports(2);
  mrc::api::CtlService svc(store, nullptr, false);
  mrc::api::CtlSession priv{true, {}, {}}, user{false, {}, {}};
  const char* p = reinterpret_cast<const char*>(data);
  if (size > 0 && data[0] == 0) {
    CtlFrameReader r(1u << 20);
    std::size_t off = 1, fed = 0;
    bool odd = false;
    while (off < size) {
      // Uneven pieces, as a socket delivers them.
      const std::size_t n = std::min({r.want(), size - off, std::size_t{1} + (data[off] & 7u)});
      const CtlFrameReader::Status st = r.feed(p + off, n);
      off += n;
      fed += n;
      if (r.capacity() > 2 * fed + 64)
        die("framing holds more than it was fed", std::to_string(r.capacity()));
      if (st == CtlFrameReader::Status::kTooBig) break;  // the server closes here
      if (st == CtlFrameReader::Status::kMessage) {
        handle(svc, odd ? user : priv, r.take());
        odd = !odd;
        fed = 0;
      }
    }
  } else {
    std::size_t start = 0;
    while (start <= size) {
      std::size_t end = start;
      while (end < size && p[end] != '\n') ++end;
      const bool unpriv = end > start && p[start] == '!';
      handle(svc, unpriv ? user : priv, std::string(p + start + (unpriv ? 1 : 0), p + end));
      start = end + 1;
    }
  }
  svc.end_session(priv);
  svc.end_session(user);
  return 0;
}
