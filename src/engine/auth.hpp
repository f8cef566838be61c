// Opt-in per-connection packet authentication: a keyed MAC carried in place of the ICRC.
//
// MAC = SipHash-2-4 (Aumasson & Bernstein, "SipHash: a fast short-input PRF", 2012) with a 128-bit
// key, 64-bit tag. The tag covers the whole MRC packet as it leaves the sender: BTH, extension
// headers, payload and pad (not IP/UDP, which the network legitimately rewrites: ECN, DSCP, the SRv6
// carrier). On the wire it replaces the 4-byte ICRC by 8 tag bytes, least-significant byte first
// (docs/wire-format.md). Each direction of a connection has its own key (QpAuth::tx / rx), so a
// packet reflected back to its sender never verifies (docs/decisions.md).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace mrc::engine {

inline constexpr std::size_t kMacSize = 8;  ///< tag bytes in the trailer (replaces the 4-byte ICRC)

/// A 128-bit SipHash key: k0 = bytes 0-7, k1 = bytes 8-15, each little-endian (as the paper).
struct MacKey {
  std::uint64_t k0 = 0, k1 = 0;
  static MacKey from_bytes(std::span<const std::uint8_t, 16> b);
  std::array<std::uint8_t, 16> bytes() const;
  friend bool operator==(const MacKey&, const MacKey&) = default;
};

/// Authentication of one QP (QpRemote::auth). `on` = every packet this QP sends carries a tag made
/// with `tx`, and every packet addressed to it must carry a valid tag made with `rx`.
struct QpAuth {
  bool on = false;
  MacKey tx;  ///< ours: the peer verifies with it
  MacKey rx;  ///< the peer's transmit key
};

/// Incremental SipHash-2-4 over a message given in pieces (header, payload, pad).
class SipHash24 {
 public:
  explicit SipHash24(const MacKey& k);
  void update(std::span<const std::uint8_t> data);
  std::uint64_t finish();

 private:
  void round();
  void compress(std::uint64_t m);
  std::uint64_t v0_, v1_, v2_, v3_;
  std::uint64_t tail_ = 0;  ///< bytes of the unfinished word, little-endian
  std::size_t len_ = 0;     ///< message bytes so far
};

std::uint64_t siphash24(const MacKey& k, std::span<const std::uint8_t> data);

/// The tag of an MRC packet in the engine's scatter form: header stack | payload | pad zero bytes.
std::uint64_t packet_mac(const MacKey& k, std::span<const std::uint8_t> headers,
                         std::span<const std::uint8_t> payload, std::uint8_t pad);

/// True when the last kMacSize bytes of `pkt` are the tag of the bytes before them (compared
/// without an early exit). False for a packet shorter than the tag.
bool mac_valid(const MacKey& k, std::span<const std::uint8_t> pkt);

}  // namespace mrc::engine
