// Classic pcap writer for MRC traffic: every MRC packet (BTH .. ICRC) is wrapped in a synthetic
// Ethernet + IPv4/IPv6 + UDP frame (LINKTYPE_ETHERNET) so that Wireshark/tshark can open the file.
//
// File format (libpcap "classic", https://www.tcpdump.org/manpages/pcap-savefile.5.html):
//   global header (24 bytes, host byte order, magic 0xA1B2C3D4 = microseconds or 0xA1B23C4D =
//   nanoseconds), then per packet a 16-byte record header (ts_sec, ts_frac, incl_len, orig_len) and
//   the frame bytes. IPv4 header checksum and UDP checksum are computed (RFC 791 / RFC 768 / RFC 8200).
//
// Per packet the writer does not allocate: the 78-byte Ethernet/IP/UDP prefix is built in a member
// buffer and the MRC bytes are handed to the (already buffered) FILE stream piece by piece.
// Not thread-safe: one writer per thread, or external locking.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

struct sockaddr;

namespace mrc::io {

/// An IPv4 or IPv6 address in network byte order (IPv4 uses bytes[0..3]).
struct IpAddress {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};

  /// From a host-order 32-bit value, e.g. 0x0A000001 = 10.0.0.1.
  static IpAddress v4(std::uint32_t host_order);
  static IpAddress v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d);
  static IpAddress v6_bytes(const std::array<std::uint8_t, 16>& b);
  /// Parses dotted-quad IPv4 or textual IPv6 ("fd00::1"); false if `text` is neither.
  static bool parse(std::string_view text, IpAddress& out);
  /// From a sockaddr_in / sockaddr_in6 (port in host order); false for other families or null.
  static bool from_sockaddr(const sockaddr* sa, IpAddress& addr, std::uint16_t& port);
  std::string to_string() const;
  bool operator==(const IpAddress&) const = default;
};

/// Everything the synthetic frame needs besides the MRC bytes.
struct FrameInfo {
  std::uint64_t time_ns = 0;  ///< capture time, ns since the Unix epoch (or any origin)
  IpAddress src;
  std::uint16_t src_port = 0;
  IpAddress dst;
  std::uint16_t dst_port = 4791;
  std::uint32_t flow_label = 0;  ///< IPv6 only, 20 bits (ignored for IPv4)
  std::uint8_t dscp = 0;         ///< 6 bits
  std::uint8_t ecn = 0;          ///< 2 bits (3 = CE)
  std::uint8_t hop_limit = 64;   ///< IPv4 TTL / IPv6 hop limit
  /// IPv4 identification; -1: the writer numbers its frames. The UDP endpoint writes 0, what Linux sends
  /// with DF from an unconnected socket, so a capture's RoCEv2 ICRCs check (docs/wire-format.md W22).
  std::int32_t ipv4_id = -1;
  std::array<std::uint8_t, 6> src_mac{0x02, 0, 0, 0, 0, 0x01};  ///< locally administered defaults
  std::array<std::uint8_t, 6> dst_mac{0x02, 0, 0, 0, 0, 0x02};
};

enum class TimestampResolution : std::uint8_t { kMicro, kNano };

class PcapWriter {
 public:
  static constexpr std::uint32_t kMagicMicro = 0xA1B2C3D4;
  static constexpr std::uint32_t kMagicNano = 0xA1B23C4D;
  static constexpr std::uint32_t kLinktypeEthernet = 1;
  static constexpr std::uint32_t kSnapLen = 262144;
  static constexpr std::size_t kEthHeader = 14;
  static constexpr std::size_t kIpv4Header = 20;
  static constexpr std::size_t kIpv6Header = 40;
  static constexpr std::size_t kUdpHeader = 8;
  /// Largest UDP payload: IPv4 total length (16 bits) minus IPv4 and UDP headers; used for both families.
  static constexpr std::size_t kMaxUdpPayload = 65535 - kIpv4Header - kUdpHeader;

  PcapWriter() = default;
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  /// Creates/truncates `path` and writes the global header. False (see error()) if the file cannot
  /// be created or the writer is already open.
  bool open(const std::string& path, TimestampResolution res = TimestampResolution::kNano);
  bool is_open() const { return file_ != nullptr; }

  /// Writes one frame whose UDP payload is `mrc`. False (see error()) when not open, on invalid
  /// FrameInfo (mixed address families, DSCP > 63, ECN > 3, flow label > 20 bits), a UDP payload
  /// larger than kMaxUdpPayload, or an I/O error.
  bool write(const FrameInfo& f, std::span<const std::uint8_t> mrc);
  /// Same, with the UDP payload given as header | payload | trailer (the engine's scatter/gather form).
  bool write(const FrameInfo& f, std::span<const std::uint8_t> header, std::span<const std::uint8_t> payload,
             std::span<const std::uint8_t> trailer);

  bool flush();
  /// Flushes and closes; false if an I/O error happened. Safe to call when not open.
  bool close();

  const std::string& error() const { return error_; }
  std::uint64_t packets_written() const { return packets_; }

 private:
  bool fail(std::string msg);

  std::FILE* file_ = nullptr;
  TimestampResolution res_ = TimestampResolution::kNano;
  std::uint64_t packets_ = 0;
  std::uint16_t ip_id_ = 0;
  std::string error_;
  /// record header (16) + Ethernet (14) + IPv6 (40) + UDP (8): the largest prefix we build.
  std::array<std::uint8_t, 16 + kEthHeader + kIpv6Header + kUdpHeader> prefix_{};
};

/// Internet checksum (RFC 1071) over pieces of any length, for the capture's IP/UDP headers and the
/// UDP checksum of SRv6 raw sends (udp6_checksum). `sum` accumulates 16-bit big-endian words;
/// `odd` tracks whether an odd number of bytes has been added so far (pieces may split a word).
struct InetChecksum {
  std::uint64_t sum = 0;
  bool odd = false;
  void add(std::span<const std::uint8_t> data);
  std::uint16_t finish() const;  ///< ones' complement of the folded sum
};

}  // namespace mrc::io
