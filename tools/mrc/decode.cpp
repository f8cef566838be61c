// `mrc decode`: every header field of MRC packets as JSON, one object per packet (JSON Lines).
//
// Input: a classic pcap file (Ethernet, Linux cooked, raw IP or BSD loopback link types; the MRC
// packet is the payload of a UDP datagram to one of --port, 4791 and 4971 by default), or packet
// bytes as hex (BTH .. ICRC): --hex arguments, or a text file / stdin with one packet per line.
// Field names are those of docs/wire-format.md (wire::describe). Undecodable input: exit 2, with
// the reason and the byte offset (in the MRC packet; pcap: also in the frame) on stderr and in
// that packet's JSON object. The ICRC is checked both without the IP/UDP headers (W16, the
// simulator's) and, for pcap input, as the RoCEv2 invariant CRC over the frame's masked IP/UDP
// headers (W22, what the UDP endpoint sends); neither mismatch is an error (the object says which
// matched). The input is read as it comes (a live capture on a pipe decodes as it arrives).
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_checks.hpp"
#include "io/capture_reader.hpp"
#include "wire/describe.hpp"
#include "wire/packet.hpp"

namespace mrc::tools {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;

struct DecodeOpt {
  std::string file;
  std::vector<std::string> hex;
  std::vector<std::uint32_t> ports;
  bool ext = false;
  bool trimmed = false;
};
DecodeOpt g_opt;

namespace capture = io::capture;
using capture::Bytes;
using capture::Udp;

/// The IP and UDP layers as `mrc decode` prints them.
void layers_json(const Udp& u, nlohmann::ordered_json& o) {
  const bool v6 = u.ip_version == 6;
  nlohmann::ordered_json ip = {{"version", u.ip_version},
                               {"src", capture::ip_text(u.src.data(), v6)},
                               {"dst", capture::ip_text(u.dst.data(), v6)},
                               {"dscp", u.dscp},
                               {"ecn", u.ecn}};
  if (v6) {
    ip["flow_label"] = u.flow_label;
    ip["hop_limit"] = u.ttl;
  } else {
    ip["id"] = u.ip_id;
    ip["ttl"] = u.ttl;
  }
  o["ip"] = std::move(ip);
  o["udp"] = {{"src_port", u.src_port}, {"dst_port", u.dst_port}, {"length", u.udp_length}};
}

nlohmann::ordered_json field_json(const wire::FieldValue& f) {
  switch (f.kind) {
    case wire::FieldValue::Kind::kSigned:
      return f.i;
    case wire::FieldValue::Kind::kBool:
      return f.b;
    case wire::FieldValue::Kind::kUnsigned:
      break;
  }
  return f.u;
}

int g_bad = 0;  // undecodable packets seen
/// The input is a pipe or a terminal (a live capture, say): each object is written out as it is
/// made, not when a buffer fills.
bool g_live = false;

void put(const nlohmann::ordered_json& o) {
  std::cout << o.dump() << '\n';
  if (g_live) std::cout.flush();
}

/// Decodes one MRC packet and prints its object. `frame` counts from 1; `frame_off` is where the
/// MRC bytes start in the frame (0 for hex input).
void emit(std::size_t frame, std::span<const std::uint8_t> mrc, const Udp* udp, std::size_t frame_off) {
  nlohmann::ordered_json o;
  o["frame"] = frame;
  if (udp != nullptr) {
    layers_json(*udp, o);
  }
  o["length"] = mrc.size();
  wire::Packet p;
  std::size_t at = 0;
  wire::DecodeOptions opt;
  opt.ext = g_opt.ext;
  opt.trimmed = g_opt.trimmed;
  opt.error_offset = &at;
  const wire::Error e = wire::decode(mrc, p, opt);
  if (e != wire::Error::kOk) {
    ++g_bad;
    o["error"] = wire::to_string(e);
    o["offset"] = at;
    if (udp != nullptr)
      std::fprintf(stderr,
                   "mrc decode: frame %zu: %s at byte %zu of the MRC packet (byte %zu of the frame)\n", frame,
                   wire::to_string(e), at, frame_off + at);
    else
      std::fprintf(stderr, "mrc decode: packet %zu: %s at byte %zu\n", frame, wire::to_string(e), at);
    put(o);
    return;
  }
  o["opcode_name"] = wire::opcode_name(p.bth.opcode);
  for (const wire::FieldValue& f : wire::describe(p, g_opt.ext)) o[f.header][f.name] = field_json(f);
  if (p.trimmed) {
    o["trimmed"] = true;
  } else {
    const std::size_t hs = wire::header_size(p.bth.opcode, p.has_tseth);
    const auto hdr = mrc.first(hs);
    const std::uint8_t pad = p.bth.pad_cnt;
    nlohmann::ordered_json ic;
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", p.icrc);
    ic["value"] = hex;
    ic["mrc"] = wire::icrc(hdr, p.payload, pad) == p.icrc;  // W16: no IP/UDP headers
    if (udp != nullptr)
      ic["rocev2"] = wire::icrc_with_prefix(udp->masked_ip_udp(), hdr, p.payload, pad) == p.icrc;
    o["icrc"] = ic;
  }
  put(o);
}

}  // namespace

CLI::App* add_decode_command(CLI::App& app) {
  CLI::App* c = app.add_subcommand(
      "decode",
      "print every MRC header field as JSON, one object per packet: from a pcap file, or packets as hex "
      "(--hex, or a text file / stdin with one packet per line)");
  c->add_option("file", g_opt.file, "pcap file, or text file of hex packets; '-' or none: stdin");
  c->add_option("--hex", g_opt.hex, "one MRC packet (BTH .. ICRC) as hex; repeatable")
      ->allow_extra_args(false);
  c->add_option(
       "--port", g_opt.ports,
       "pcap: UDP destination port of MRC traffic; repeatable (default 4791 and 4971, docs/wire-format.md)")
      ->allow_extra_args(false)
      ->check(uint_range(1, 65535));
  c->add_flag("--ext", g_opt.ext, "also read the project's wire extensions (docs/wire-format.md W20)");
  c->add_flag("--trimmed", g_opt.trimmed, "decode as trimmed packets (header stack only)");
  return c;
}

int run_decode() {
  if (g_opt.ports.empty()) g_opt.ports = {wire::kRoceUdpPort, wire::kMrcSpecTypoPort};
  std::string why;
  Bytes pkt;
  if (!g_opt.hex.empty()) {
    if (!g_opt.file.empty()) {
      std::fprintf(stderr, "mrc decode: give a file or --hex, not both\n");
      return kExitBadInput;
    }
    for (std::size_t i = 0; i < g_opt.hex.size(); ++i) {
      if (!capture::parse_hex(g_opt.hex[i], pkt, why)) {
        std::fprintf(stderr, "mrc decode: --hex #%zu: %s\n", i + 1, why.c_str());
        return kExitBadInput;
      }
      emit(i + 1, pkt, nullptr, 0);
    }
    return g_bad ? kExitBadInput : kExitOk;
  }
  std::ifstream file;
  if (!g_opt.file.empty() && g_opt.file != "-") {
    file.open(g_opt.file, std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "mrc decode: %s: cannot open\n", g_opt.file.c_str());
      return kExitBadInput;
    }
  }
  std::istream& in = file.is_open() ? static_cast<std::istream&>(file) : std::cin;
  struct stat st {};
  g_live = file.is_open() ? ::stat(g_opt.file.c_str(), &st) == 0 && !S_ISREG(st.st_mode)
                          : ::fstat(STDIN_FILENO, &st) == 0 && !S_ISREG(st.st_mode);
  const std::string bad = capture::read_input(in, g_opt.ports, [](std::size_t n, auto mrc, const Udp* udp) {
    emit(n, mrc, udp, udp != nullptr ? udp->mrc_off : 0);
  });
  if (!bad.empty()) {
    std::fprintf(stderr, "mrc decode: %s\n", bad.c_str());
    return kExitBadInput;
  }
  return g_bad ? kExitBadInput : kExitOk;
}

}  // namespace mrc::tools
