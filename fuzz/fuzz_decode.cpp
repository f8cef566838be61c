// libFuzzer target for the wire decoder.
//
// Every input is decoded in seven modes (plain, verify_icrc, trimmed, trimmed+verify, plain and
// trimmed with the project's wire extensions, and verify_icrc with an IP/UDP prefix XOR and any IPv4 ID).
// Whenever a decode succeeds, the packet is re-encoded and decoded again, and the fields must match up to
// what the decoder reports but the encoder never sends (TS on a control packet, a timestamp ftype other than
// 1, SACK m = 3): encode/decode agree on every other field. Any mismatch aborts.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "wire/packet.hpp"

namespace {

using namespace mrc::wire;

[[noreturn]] void die(const char* what, Error e = Error::kOk) {
  std::fprintf(stderr, "fuzz_decode: %s (%s)\n", what, to_string(e));
  std::abort();
}

bool same_fields(const Packet& a, const Packet& b) {
  return a.bth == b.bth && a.meth == b.meth && a.has_tseth == b.has_tseth && a.tseth == b.tseth &&
         a.reth == b.reth && a.imm == b.imm && a.aeth == b.aeth && a.seth == b.seth && a.neth == b.neth &&
         a.peth == b.peth && a.erth == b.erth && a.eeth == b.eeth && std::ranges::equal(a.payload, b.payload);
}

// Static buffers: libFuzzer runs one input at a time, and packets are at most kMaxPacketSize.
std::array<std::uint8_t, kMaxPacketSize> g_full;
std::array<std::uint8_t, kMaxHeaderSize> g_hdr;

void check_round_trip(std::span<const std::uint8_t> in, const Packet& p, const DecodeOptions& opt) {
  // Structural facts about a successful decode.
  const bool data = is_data(p.bth.opcode);
  const std::size_t hs = header_size(p.bth.opcode, p.has_tseth);
  if (hs == 0 || hs > in.size() || hs > kMaxHeaderSize) die("bad header size");
  if (p.has_tseth != (p.bth.ts && data)) die("ts/has_tseth");
  if (p.seth.m == SackMode::kReserved) return;  // received, never encoded (F5)
  if (p.trimmed != opt.trimmed) die("trimmed flag");
  if (opt.trimmed) {
    if (!p.payload.empty()) die("trimmed packet with payload");
  } else {
    if (in.size() != hs + p.payload.size() + p.bth.pad_cnt + kIcrcSize) die("length accounting");
    if (!p.payload.empty() && p.payload.data() != in.data() + hs) die("payload view");
    if (!data && (!p.payload.empty() || p.bth.pad_cnt != 0)) die("control packet payload");
  }

  // Headers only (scatter/gather path) must equal the first hs input bytes up to ignored bits;
  // decoding them as a trimmed packet gives the same fields.
  // What the encoder writes for fields it does not take from the packet.
  Packet sent = p;
  if (!data) sent.bth.ts = false;
  sent.tseth.ftype = sent.peth.ftype = sent.erth.ftype = 0x1;
  const EncodeOptions eo{.ext = opt.ext};
  Error err = Error::kOk;
  const std::size_t hn = encode_headers(p, static_cast<std::uint32_t>(p.payload.size()), g_hdr, &err, eo);
  if (err != Error::kOk || hn != hs) die("encode_headers failed", err);
  Packet t;
  if (const Error e =
          decode(std::span<const std::uint8_t>(g_hdr.data(), hn), t, {.ext = opt.ext, .trimmed = true});
      e != Error::kOk)
    die("trimmed re-decode failed", e);
  Packet want = sent;
  want.payload = {};
  if (opt.trimmed) want.bth.pad_cnt = t.bth.pad_cnt;  // the original PadCnt is not preserved by trimming
  if (!same_fields(t, want)) die("trimmed round-trip mismatch");

  // Full packet.
  const std::size_t n = encode(p, g_full, &err, eo);
  if (err != Error::kOk || n == 0) die("encode failed", err);
  Packet q;
  if (const Error e =
          decode(std::span<const std::uint8_t>(g_full.data(), n), q, {.verify_icrc = true, .ext = opt.ext});
      e != Error::kOk)
    die("re-decode failed", e);
  Packet want_full = sent;
  if (opt.trimmed) want_full.bth.pad_cnt = 0;  // re-encoded without payload
  if (!same_fields(q, want_full)) die("round-trip mismatch");
  // (The ICRC may legitimately differ: the input may have had reserved bits set, which the
  // encoder writes as zero.)
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  static constexpr DecodeOptions kModes[] = {
      {.verify_icrc = false, .trimmed = false},
      {.verify_icrc = true, .trimmed = false},
      {.verify_icrc = false, .trimmed = true},
      {.verify_icrc = true, .trimmed = true},
      {.verify_icrc = false, .ext = true, .trimmed = false},
      {.verify_icrc = false, .ext = true, .trimmed = true},
      // RoCEv2's ICRC over a driver's IP/UDP prefix (W22): the XOR and the any-IPv4-ID reading.
      {.verify_icrc = true, .trimmed = false, .icrc_xor = 0x9E3779B9u, .icrc_any_ipv4_id = true},
  };
  Error plain = Error::kOk;
  for (const DecodeOptions& opt : kModes) {
    Packet p;
    const Error e = decode(in, p, opt);
    if (!opt.trimmed && !opt.verify_icrc && !opt.ext) plain = e;
    // The extensions only read reserved bytes: they never change whether a packet decodes.
    if (!opt.trimmed && opt.ext && e != plain) die("ext changed error", e);
    // verify_icrc only adds a check: it can turn success into kBadIcrc, nothing else.
    if (!opt.trimmed && opt.verify_icrc && e != plain && e != Error::kBadIcrc) die("verify changed error", e);
    if (e == Error::kOk) check_round_trip(in, p, opt);
  }
  return 0;
}
