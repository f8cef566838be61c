// Capture reader, the counterpart of pcap.hpp's writer: a classic pcap, record by record (Ethernet
// with VLAN tags (802.1Q, 802.1ad), Linux cooked v1/v2, raw IP or BSD loopback link types), whose frames
// hold MRC packets in UDP datagrams to given ports; or text, one packet a line as hex. What
// `mrc decode` reads (docs/cli.md). The input is read as it comes, in constant memory: a capture of
// any size, or a live one on a pipe; an endless input (/dev/zero) is refused at its first oversized
// record or line. Fuzzed by fuzz/fuzz_capture.cpp.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mrc::io::capture {

using Bytes = std::vector<std::uint8_t>;

/// An IP address as text: dotted quad, or IPv6 in the uncompressed form (unambiguous, no zero-run rules).
std::string ip_text(const std::uint8_t* a, bool v6);

constexpr std::size_t kMaxRecord = 262144;  ///< libpcap's largest snapshot length
constexpr std::size_t kMaxLine = 1 << 20;   ///< a packet of 9 KB is 18 KB of hex

/// Where the MRC bytes of one frame are, and what its IP and UDP headers say.
struct Udp {
  std::size_t mrc_off = 0, mrc_len = 0;  ///< in the frame
  std::uint8_t ip_version = 4;
  std::array<std::uint8_t, 16> src{}, dst{};  ///< IPv4: the first 4 bytes
  std::uint8_t dscp = 0, ecn = 0;
  std::uint8_t ttl = 0;          ///< IPv6: the hop limit
  std::uint16_t ip_id = 0;       ///< IPv4 only
  std::uint32_t flow_label = 0;  ///< IPv6 only
  std::uint16_t src_port = 0, dst_port = 0, udp_length = 0;
  /// RoCEv2 ICRC prefix: the IP (up to 60 bytes) and UDP headers with their variant fields set to ones.
  std::array<std::uint8_t, 68> masked{};
  std::size_t masked_len = 0;
  std::span<const std::uint8_t> masked_ip_udp() const { return {masked.data(), masked_len}; }
};

/// Finds IPv4/IPv6 + UDP at `off` of frame `f`; nullopt with `why` if the frame is not UDP to one
/// of `ports`.
std::optional<Udp> parse_ip(const Bytes& f, std::size_t off, std::span<const std::uint32_t> ports,
                            std::string& why);

/// One packet's bytes as hex digits (0x prefixes, and whitespace, ':', '-' or ',' between bytes, are
/// allowed); false with `why` for anything else.
bool parse_hex(const std::string& text, Bytes& out, std::string& why);

/// A packet found: its number (pcap: the frame, from 1; text: the packet, from 1), its MRC bytes and,
/// for pcap input, its frame's IP/UDP layers (nullptr for text).
using OnPacket = std::function<void(std::size_t n, std::span<const std::uint8_t> mrc, const Udp* udp)>;

/// Reads the whole input, calling `on_packet` for each MRC packet as it is read. Returns "" or why
/// the input ended badly (a pcap global header or record that cannot be read, a text line that is
/// not hex or too long, text without packets), after the packets before that point. A pcap without
/// records is not an error.
std::string read_input(std::istream& in, std::span<const std::uint32_t> ports, const OnPacket& on_packet);

}  // namespace mrc::io::capture
