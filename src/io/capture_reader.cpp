#include "io/capture_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace mrc::io::capture {
namespace {

std::uint16_t be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
std::uint32_t rd32(const std::uint8_t* p, bool swap) {
  const std::uint32_t v = static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
                          (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
  return swap ? __builtin_bswap32(v) : v;
}

std::size_t read_some(std::istream& in, std::uint8_t* to, std::size_t n) {
  in.read(reinterpret_cast<char*>(to), static_cast<std::streamsize>(n));
  return static_cast<std::size_t>(in.gcount());
}

bool pcap_magic(const std::uint8_t* head, bool& swap) {
  const std::uint32_t magic = rd32(head, false);
  swap = magic == 0xD4C3B2A1u || magic == 0x4D3CB2A1u;
  return swap || magic == 0xA1B2C3D4u || magic == 0xA1B23C4Du;
}

// Classic pcap (either byte order, us or ns), after its 4 magic bytes. A record that cannot be read
// ends the capture (the records after it cannot be found).
std::string read_pcap(std::istream& in, bool swap, std::span<const std::uint32_t> ports,
                      const OnPacket& on_packet) {
  std::uint8_t gh[24];  // (its first 4, the magic, were read already and are not needed again)
  const std::size_t got = 4 + read_some(in, gh + 4, 20);
  if (got < 24) return "truncated pcap global header (" + std::to_string(got) + " bytes)";
  const std::uint32_t link = rd32(&gh[20], swap);
  std::size_t ip = 0;
  switch (link) {
    case 1:  // Ethernet: the IP header follows any VLAN tags, found per frame
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
      return "pcap link type " + std::to_string(link) +
             " is not supported (Ethernet, Linux cooked, raw IP, loopback)";
  }
  std::size_t off = 24, frame = 0;
  Bytes f;
  f.reserve(16384);
  char msg[160];
  for (;;) {
    std::uint8_t rh[16];
    const std::size_t n = read_some(in, rh, 16);
    if (n == 0) return "";
    ++frame;
    if (n < 16) {
      std::snprintf(msg, sizeof msg, "frame %zu: truncated pcap record header at file byte %zu", frame, off);
      return msg;
    }
    const std::uint32_t incl = rd32(&rh[8], swap);
    if (incl > kMaxRecord) {
      std::snprintf(msg, sizeof msg,
                    "frame %zu: record of %u bytes at file byte %zu, more than a pcap record holds (%zu)",
                    frame, incl, off, kMaxRecord);
      return msg;
    }
    f.resize(incl);
    if (read_some(in, f.data(), incl) < incl) {
      std::snprintf(msg, sizeof msg,
                    "frame %zu: record of %u bytes runs past the end of the file (file byte %zu)", frame,
                    incl, off);
      return msg;
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
    const auto u = parse_ip(f, at, ports, skip);
    if (!u) continue;  // not MRC traffic
    on_packet(frame, std::span<const std::uint8_t>(f).subspan(u->mrc_off, u->mrc_len), &*u);
  }
}

// Text: one packet per line as hex; '#' starts a comment; empty lines are skipped. `text` holds what
// was already read of the input.
std::string read_text(std::istream& in, std::string text, const OnPacket& on_packet) {
  std::size_t line_no = 0, n = 0, pos = 0;
  std::string line, why;
  Bytes pkt;
  bool eof = false;
  for (;;) {
    std::size_t nl = text.find('\n', pos);
    while (nl == std::string::npos && !eof) {  // read on until the line ends (or the input does)
      if (text.size() - pos > kMaxLine)
        return "line " + std::to_string(line_no + 1) + ": longer than " + std::to_string(kMaxLine) +
               " bytes (not hex packets, one a line?)";
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
    if (!parse_hex(line, pkt, why)) return "line " + std::to_string(line_no) + ": " + why;
    on_packet(++n, pkt, nullptr);
  }
  return n == 0 ? "no packets in the input" : "";
}

}  // namespace

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

std::optional<Udp> parse_ip(const Bytes& f, std::size_t off, std::span<const std::uint32_t> ports,
                            std::string& why) {
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
    u.ip_version = 4;
    std::copy_n(&f[off + 12], 4, u.src.begin());
    std::copy_n(&f[off + 16], 4, u.dst.begin());
    u.dscp = static_cast<std::uint8_t>(f[off + 1] >> 2);
    u.ecn = f[off + 1] & 3;
    u.ip_id = be16(&f[off + 4]);
    u.ttl = f[off + 8];
    std::copy_n(&f[off], ihl, u.masked.begin());  // ihl <= 60
    u.masked_len = ihl;
    u.masked[1] = 0xFF;                  // TOS (DSCP, ECN)
    u.masked[8] = 0xFF;                  // TTL
    u.masked[10] = u.masked[11] = 0xFF;  // header checksum
    udp_off = off + ihl;
  } else if (ver == 6) {
    if (off + 40 + 8 > f.size() || f[off + 6] != 17) {
      why = "not UDP over IPv6 (extension headers are not followed)";
      return std::nullopt;
    }
    const std::uint32_t flow = (static_cast<std::uint32_t>(f[off + 1] & 0xF) << 16) | be16(&f[off + 2]);
    u.ip_version = 6;
    std::copy_n(&f[off + 8], 16, u.src.begin());
    std::copy_n(&f[off + 24], 16, u.dst.begin());
    u.dscp = static_cast<std::uint8_t>(((f[off] & 0xF) << 2) | (f[off + 1] >> 6));
    u.ecn = (f[off + 1] >> 4) & 3;
    u.flow_label = flow;
    u.ttl = f[off + 7];
    std::copy_n(&f[off], 40, u.masked.begin());
    u.masked_len = 40;
    u.masked[0] |= 0x0F;  // traffic class, flow label
    u.masked[1] = u.masked[2] = u.masked[3] = 0xFF;
    u.masked[7] = 0xFF;  // hop limit
    udp_off = off + 40;
  } else {
    why = "not IP";
    return std::nullopt;
  }
  const std::uint16_t sport = be16(&f[udp_off]), dport = be16(&f[udp_off + 2]);
  bool ours = false;
  for (std::uint32_t p : ports) ours = ours || p == dport;
  if (!ours) {
    why = "UDP to port " + std::to_string(dport);
    return std::nullopt;
  }
  const std::uint16_t udp_len = be16(&f[udp_off + 4]);
  std::size_t end = f.size();
  if (udp_len >= 8 && udp_off + udp_len <= f.size()) end = udp_off + udp_len;  // drop Ethernet padding
  u.src_port = sport;
  u.dst_port = dport;
  u.udp_length = udp_len;
  std::copy_n(&f[udp_off], 8, u.masked.begin() + static_cast<std::ptrdiff_t>(u.masked_len));
  u.masked_len += 8;
  u.masked[u.masked_len - 2] = u.masked[u.masked_len - 1] = 0xFF;  // UDP checksum
  u.mrc_off = udp_off + 8;
  u.mrc_len = end - u.mrc_off;
  return u;
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

std::string read_input(std::istream& in, std::span<const std::uint32_t> ports, const OnPacket& on_packet) {
  std::uint8_t head[4];
  const std::size_t got = read_some(in, head, 4);
  bool swap = false;
  if (got == 4 && pcap_magic(head, swap)) return read_pcap(in, swap, ports, on_packet);
  return read_text(in, std::string(reinterpret_cast<const char*>(head), got), on_packet);
}

}  // namespace mrc::io::capture
