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
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli_checks.hpp"
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

using Bytes = std::vector<std::uint8_t>;

std::uint16_t be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
std::uint32_t rd32(const std::uint8_t* p, bool swap) {
  const std::uint32_t v = static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
                          (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
  return swap ? __builtin_bswap32(v) : v;
}

std::string ip_text(const std::uint8_t* a, bool v6) {
  char b[64];
  if (!v6) {
    std::snprintf(b, sizeof b, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
    return b;
  }
  std::string s;
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(b, sizeof b, "%s%x", i ? ":" : "", be16(a + i));
    s += b;
  }
  return s;  // uncompressed form: unambiguous, no zero-run rules
}

/// Where the MRC bytes of one frame are, and what the IP/UDP layers said.
struct Udp {
  std::size_t mrc_off = 0, mrc_len = 0;
  nlohmann::ordered_json ip, udp;
  Bytes masked_ip_udp;  ///< RoCEv2 ICRC prefix: IP + UDP with the variant fields set to ones
};

/// Finds IPv4/IPv6 + UDP at `off`; nullopt with `why` if the frame is not UDP to one of `ports`.
std::optional<Udp> parse_ip(const Bytes& f, std::size_t off, std::string& why) {
  if (off >= f.size()) {
    why = "no IP header";
    return std::nullopt;
  }
  const int ver = f[off] >> 4;
  Udp u;
  std::size_t udp_off = 0;
  if (ver == 4) {
    if (off + 20 > f.size()) {
      why = "truncated IPv4 header";
      return std::nullopt;
    }
    const std::size_t ihl = static_cast<std::size_t>(f[off] & 0xF) * 4;
    if (ihl < 20 || off + ihl + 8 > f.size() || f[off + 9] != 17) {
      why = "not UDP over IPv4";
      return std::nullopt;
    }
    u.ip = {{"version", 4},
            {"src", ip_text(&f[off + 12], false)},
            {"dst", ip_text(&f[off + 16], false)},
            {"dscp", f[off + 1] >> 2},
            {"ecn", f[off + 1] & 3},
            {"id", be16(&f[off + 4])},
            {"ttl", f[off + 8]}};
    u.masked_ip_udp.assign(f.begin() + static_cast<std::ptrdiff_t>(off),
                           f.begin() + static_cast<std::ptrdiff_t>(off + ihl));
    u.masked_ip_udp[1] = 0xFF;                         // TOS (DSCP, ECN)
    u.masked_ip_udp[8] = 0xFF;                         // TTL
    u.masked_ip_udp[10] = u.masked_ip_udp[11] = 0xFF;  // header checksum
    udp_off = off + ihl;
  } else if (ver == 6) {
    if (off + 40 + 8 > f.size() || f[off + 6] != 17) {
      why = "not UDP over IPv6 (extension headers are not followed)";
      return std::nullopt;
    }
    const std::uint32_t flow = (static_cast<std::uint32_t>(f[off + 1] & 0xF) << 16) | be16(&f[off + 2]);
    u.ip = {{"version", 6},
            {"src", ip_text(&f[off + 8], true)},
            {"dst", ip_text(&f[off + 24], true)},
            {"dscp", ((f[off] & 0xF) << 2) | (f[off + 1] >> 6)},
            {"ecn", (f[off + 1] >> 4) & 3},
            {"flow_label", flow},
            {"hop_limit", f[off + 7]}};
    u.masked_ip_udp.assign(f.begin() + static_cast<std::ptrdiff_t>(off),
                           f.begin() + static_cast<std::ptrdiff_t>(off + 40));
    u.masked_ip_udp[0] |= 0x0F;  // traffic class, flow label
    u.masked_ip_udp[1] = u.masked_ip_udp[2] = u.masked_ip_udp[3] = 0xFF;
    u.masked_ip_udp[7] = 0xFF;  // hop limit
    udp_off = off + 40;
  } else {
    why = "not IP";
    return std::nullopt;
  }
  const std::uint16_t sport = be16(&f[udp_off]), dport = be16(&f[udp_off + 2]);
  bool ours = false;
  for (std::uint32_t p : g_opt.ports) ours = ours || p == dport;
  if (!ours) {
    why = "UDP to port " + std::to_string(dport);
    return std::nullopt;
  }
  const std::size_t udp_len = be16(&f[udp_off + 4]);
  std::size_t end = f.size();
  if (udp_len >= 8 && udp_off + udp_len <= f.size()) end = udp_off + udp_len;  // drop Ethernet padding
  u.udp = {{"src_port", sport}, {"dst_port", dport}, {"length", udp_len}};
  u.masked_ip_udp.insert(u.masked_ip_udp.end(), f.begin() + static_cast<std::ptrdiff_t>(udp_off),
                         f.begin() + static_cast<std::ptrdiff_t>(udp_off + 8));
  u.masked_ip_udp[u.masked_ip_udp.size() - 2] = u.masked_ip_udp[u.masked_ip_udp.size() - 1] = 0xFF;
  u.mrc_off = udp_off + 8;
  u.mrc_len = end - u.mrc_off;
  return u;
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
    o["ip"] = udp->ip;
    o["udp"] = udp->udp;
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
      ic["rocev2"] = wire::icrc_with_prefix(udp->masked_ip_udp, hdr, p.payload, pad) == p.icrc;
    o["icrc"] = ic;
  }
  put(o);
}

bool parse_hex(const std::string& text, Bytes& out, std::string& why) {
  out.clear();
  int nibbles = 0;
  unsigned cur = 0;
  std::string s = text;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '0' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X') && nibbles % 2 == 0) {
      ++i;  // an 0x prefix
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c)) || c == ':' || c == '-' || c == ',') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      why = std::string("not a hex digit: '") + c + "' at character " + std::to_string(i + 1);
      return false;
    }
    cur = (cur << 4) |
          static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                                                            : (std::tolower(c) - 'a' + 10));
    if (++nibbles % 2 == 0) {
      out.push_back(static_cast<std::uint8_t>(cur & 0xFF));
      cur = 0;
    }
  }
  if (nibbles % 2 != 0) {
    why = "odd number of hex digits";
    return false;
  }
  return true;
}

// The input is read as it comes, a record or a line at a time: a capture of any size, or a live one
// on a pipe (tcpdump -U -w - | mrc decode), takes constant memory, and an endless input (/dev/zero)
// is refused at its first oversized record or line instead of being read into memory.
constexpr std::size_t kMaxRecord = 262144;  // libpcap's largest snapshot length
constexpr std::size_t kMaxLine = 1 << 20;   // a packet of 9 KB is 18 KB of hex

std::size_t read_some(std::istream& in, std::uint8_t* to, std::size_t n) {
  in.read(reinterpret_cast<char*>(to), static_cast<std::streamsize>(n));
  return static_cast<std::size_t>(in.gcount());
}

bool pcap_magic(const std::uint8_t* head, bool& swap) {
  const std::uint32_t magic = rd32(head, false);
  swap = magic == 0xD4C3B2A1u || magic == 0x4D3CB2A1u;
  return swap || magic == 0xA1B2C3D4u || magic == 0xA1B23C4Du;
}

/// Classic pcap (either byte order, µs or ns), after its 4 magic bytes. False with `why` for a
/// capture that cannot be read at all (its global header); a bad record is reported, counted in
/// g_bad, and ends the capture (the records after it cannot be found).
bool run_pcap(std::istream& in, bool swap, std::string& why) {
  std::uint8_t gh[24];  // (its first 4, the magic, were read already and are not needed again)
  const std::size_t got = 4 + read_some(in, gh + 4, 20);
  if (got < 24) {
    why = "truncated pcap global header (" + std::to_string(got) + " bytes)";
    return false;
  }
  const std::uint32_t link = rd32(&gh[20], swap);
  std::size_t ip = 0;
  switch (link) {
    case 1:  // Ethernet, with up to two VLAN tags: found per frame
      break;
    case 113:  // Linux cooked (SLL)
      ip = 16;
      break;
    case 276:  // Linux cooked v2
      ip = 20;
      break;
    case 0:  // BSD loopback
      ip = 4;
      break;
    case 101:  // raw IP
    case 228:
    case 229:
      ip = 0;
      break;
    default:
      why = "pcap link type " + std::to_string(link) +
            " is not supported (Ethernet, Linux cooked, raw IP, loopback)";
      return false;
  }
  std::size_t off = 24, frame = 0;
  Bytes f;
  f.reserve(16384);
  for (;;) {
    std::uint8_t rh[16];
    const std::size_t n = read_some(in, rh, 16);
    if (n == 0) return true;
    ++frame;
    if (n < 16) {
      std::fprintf(stderr, "mrc decode: frame %zu: truncated pcap record header at file byte %zu\n", frame,
                   off);
      ++g_bad;
      return true;
    }
    const std::uint32_t incl = rd32(&rh[8], swap);
    if (incl > kMaxRecord) {
      std::fprintf(
          stderr,
          "mrc decode: frame %zu: record of %u bytes at file byte %zu, more than a pcap record holds "
          "(%zu)\n",
          frame, incl, off, kMaxRecord);
      ++g_bad;
      return true;
    }
    f.resize(incl);
    if (read_some(in, f.data(), incl) < incl) {
      std::fprintf(
          stderr, "mrc decode: frame %zu: record of %u bytes runs past the end of the file (file byte %zu)\n",
          frame, incl, off);
      ++g_bad;
      return true;
    }
    off += 16 + incl;
    std::size_t at = ip;
    if (link == 1) {
      std::size_t p = 12;
      while (p + 2 <= f.size() && (be16(&f[p]) == 0x8100 || be16(&f[p]) == 0x88A8)) p += 4;
      if (p + 2 > f.size() || (be16(&f[p]) != 0x0800 && be16(&f[p]) != 0x86DD)) continue;
      at = p + 2;
    }
    std::string skip;
    const auto u = parse_ip(f, at, skip);
    if (!u) continue;  // not MRC traffic
    emit(frame, std::span<const std::uint8_t>(f).subspan(u->mrc_off, u->mrc_len), &*u, u->mrc_off);
  }
}

/// Text: one packet per line as hex; '#' starts a comment; empty lines are skipped. `text` holds
/// what was already read of the input. Returns the exit status.
int run_text(std::istream& in, std::string text) {
  std::size_t line_no = 0, n = 0, pos = 0;
  std::string line;
  Bytes pkt;
  std::string why;
  bool eof = false;
  for (;;) {
    std::size_t nl = text.find('\n', pos);
    while (nl == std::string::npos && !eof) {  // read on until the line ends (or the input does)
      if (text.size() - pos > kMaxLine) {
        std::fprintf(stderr, "mrc decode: line %zu: longer than %zu bytes (not hex packets, one a line?)\n",
                     line_no + 1, kMaxLine);
        return kExitBadInput;
      }
      text.erase(0, pos);
      pos = 0;
      const std::size_t had = text.size();
      text.resize(had + 65536);
      const std::size_t got = read_some(in, reinterpret_cast<std::uint8_t*>(text.data() + had), 65536);
      text.resize(had + got);
      eof = got == 0;
      nl = text.find('\n', had);
    }
    if (nl == std::string::npos && pos >= text.size()) break;
    line.assign(text, pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    ++line_no;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!parse_hex(line, pkt, why)) {
      std::fprintf(stderr, "mrc decode: line %zu: %s\n", line_no, why.c_str());
      return kExitBadInput;
    }
    emit(++n, pkt, nullptr, 0);
  }
  if (n == 0) {
    std::fprintf(stderr, "mrc decode: no packets in the input\n");
    return kExitBadInput;
  }
  return g_bad ? kExitBadInput : kExitOk;
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
      if (!parse_hex(g_opt.hex[i], pkt, why)) {
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
  std::uint8_t head[4];
  const std::size_t got = read_some(in, head, 4);
  bool swap = false;
  if (got == 4 && pcap_magic(head, swap)) {
    if (!run_pcap(in, swap, why)) {
      std::fprintf(stderr, "mrc decode: %s\n", why.c_str());
      return kExitBadInput;
    }
    return g_bad ? kExitBadInput : kExitOk;
  }
  return run_text(in, std::string(reinterpret_cast<const char*>(head), got));
}

}  // namespace mrc::tools
