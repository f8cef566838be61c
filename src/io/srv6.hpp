// SRv6 uSID paths for EvMode::kSrv6: the carrier address an EV's path gives a packet, and the
// UDP checksum over the final destination that a raw send must carry.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "io/addr.hpp"

namespace mrc::io {

/// SRv6 uSID paths (EvMode::kSrv6). A path is the list of uSIDs a packet visits before its final
/// destination, e.g. {spine} or {source leaf, spine, destination leaf}; the same list serves every
/// plane and peer (the block and the final uSIDs come from the peer's address).
struct Srv6Config {
  std::uint32_t block_bits = 32;  ///< locator block length (lblen); a multiple of 16
  std::vector<std::vector<std::uint16_t>> paths;
};

/// The uSID carrier for reaching `final_addr` through `usids`: the first block_bits of final_addr,
/// then the uSIDs, then the rest of final_addr shifted right by 16 bits per uSID. False when that
/// would push set bits out of the address (the final address has no room for that many uSIDs).
bool srv6_carrier(const IpAddr& final_addr, std::span<const std::uint16_t> usids, std::uint32_t block_bits,
                  IpAddr& out);

/// The UDP checksum (RFC 8200 §8.1) of a datagram from `src` to `dst` whose UDP header (checksum
/// field zero) and data are the concatenation of `pieces` (any lengths). 0 is returned as 0xFFFF.
std::uint16_t udp6_checksum(const IpAddr& src, const IpAddr& dst,
                            std::span<const std::span<const std::uint8_t>> pieces);

}  // namespace mrc::io
