// libFuzzer target for the out-of-band setup messages (src/io/oob.cpp).
//
// The input's first byte picks how the rest arrives (in pieces of 1..255 bytes, or all at once); the
// rest is a byte stream read message by message with OobFrameReader, as mrc perf --server reads a
// connection. Every complete message is decoded by its type, and what decodes must encode back to
// the same bytes (connection info, value lists) or to the same text (errors). The whole stream is
// also decoded directly as a connection info body and as a value list body. The reader must never
// hold more than a message's limit, take more bytes than a message has, or accept an oversized
// header. Any violation aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "io/oob.hpp"

namespace {

using namespace mrc::io;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fuzz_oob: %s\n", what);
  std::abort();
}

void check_conn_info(std::span<const std::uint8_t> body) {
  ConnInfo c;
  std::string err;
  if (!decode_conn_info_body(body, c, err)) {
    if (err.empty()) die("conn info refused without a message");
    return;
  }
  if (body.size() > kOobMaxConnInfo) die("conn info body beyond its limit decoded");
  const std::vector<std::uint8_t> again = encode_conn_info(c);
  if (again.size() != kOobHeader + body.size() ||
      !std::equal(body.begin(), body.end(), again.begin() + kOobHeader))
    die("conn info does not encode back to its bytes");
  ConnInfo d;
  if (!decode_conn_info_body(std::span(again).subspan(kOobHeader), d, err) || !(d == c))
    die("conn info round trip differs");
}

void check_values(std::span<const std::uint8_t> body) {
  std::vector<std::uint64_t> v;
  std::string err;
  if (!decode_values_body(body, v, err)) {
    if (err.empty()) die("value list refused without a message");
    return;
  }
  if (v.size() > kOobMaxValues || body.size() > kOobMaxValuesBody) die("value list beyond its limit decoded");
  const std::vector<std::uint8_t> again = encode_values(v);
  if (again.size() != kOobHeader + body.size() ||
      !std::equal(body.begin(), body.end(), again.begin() + kOobHeader))
    die("value list does not encode back to its bytes");
}

void check_error(std::span<const std::uint8_t> body) {
  const std::string text = decode_error_body(body);
  if (text.size() != std::min<std::size_t>(body.size(), kOobMaxError)) die("error text length");
  for (const char ch : text)
    if (ch < 0x20 || ch >= 0x7F) die("unprintable byte in an error text");
  const std::vector<std::uint8_t> again = encode_error(text);
  if (decode_error_body(std::span(again).subspan(kOobHeader)) != text) die("error text round trip differs");
}

/// Reads `in` message by message, `piece` bytes at a time (0: all that is left).
void read_stream(std::span<const std::uint8_t> in, std::size_t piece) {
  OobFrameReader rd;
  std::size_t at = 0;
  while (at < in.size()) {
    const std::size_t n = piece == 0 ? in.size() - at : std::min(piece, in.size() - at);
    std::size_t used = 0;
    std::string err;
    const OobFrameReader::Status st = rd.feed(in.subspan(at, n), used, err);
    if (used > n) die("took more than it was given");
    at += used;
    if (rd.received() > rd.expected()) die("received more than the message has");
    if (rd.have_header() && rd.body().size() > oob_max_body(rd.type()))
      die("holds more than the type's limit");
    if (st == OobFrameReader::Status::kError) {
      if (err.empty()) die("reader failed without a message");
      if (rd.received() > kOobHeader || !rd.body().empty()) die("body taken for a refused header");
      return;  // a server drops the connection here
    }
    if (st == OobFrameReader::Status::kMore) {
      if (used != n) die("more needed but not everything taken");
      continue;
    }
    // A whole message: its header decodes to what the reader says, then its body by type.
    if (rd.received() != rd.expected()) die("done before the whole message");
    OobType t{};
    std::uint32_t len = 0;
    if (!decode_header(in.subspan(at - rd.received(), kOobHeader), t, len, err) || t != rd.type() ||
        len != rd.body().size())
      die("reader and decode_header disagree");
    std::string why;
    switch (rd.type()) {
      case OobType::kConnInfo:
        if (!rd.is(OobType::kConnInfo, why)) die("is() refused its own type");
        check_conn_info(rd.body());
        break;
      case OobType::kValues:
        if (rd.is(OobType::kConnInfo, why) || why.empty()) die("is() accepted a wrong type");
        check_values(rd.body());
        break;
      case OobType::kError:
        if (rd.is(OobType::kValues, why) || why.rfind("peer: ", 0) != 0) die("an error message not reported");
        check_error(rd.body());
        break;
    }
    rd.reset();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::uint8_t> in(data + 1, size - 1);
  read_stream(in, data[0]);
  check_conn_info(in);
  check_values(in);
  check_error(in);
  return 0;
}
