// 24-bit PSN serial-number arithmetic (RFC 1982 style), as in the IB BTH.
#pragma once
#include <cstdint>

namespace mrc {

inline constexpr std::uint32_t kPsnBits = 24;
inline constexpr std::uint32_t kPsnMask = (1u << kPsnBits) - 1;
/// One MPR unit is 128 PSNs (mrc.h mpr/mpr_dest are in these units).
inline constexpr std::uint32_t kMprUnit = 128;

inline constexpr std::uint32_t psn_add(std::uint32_t psn, std::int64_t delta) {
  return static_cast<std::uint32_t>((static_cast<std::int64_t>(psn) + delta) & kPsnMask);
}

/// Signed distance b - a in the 24-bit circle, in [-2^23, 2^23).
inline constexpr std::int32_t psn_diff(std::uint32_t b, std::uint32_t a) {
  std::uint32_t d = (b - a) & kPsnMask;
  return d >= (1u << (kPsnBits - 1)) ? static_cast<std::int32_t>(d) - (1 << kPsnBits)
                                     : static_cast<std::int32_t>(d);
}

inline constexpr bool psn_lt(std::uint32_t a, std::uint32_t b) {
  return psn_diff(b, a) > 0;
}
inline constexpr bool psn_le(std::uint32_t a, std::uint32_t b) {
  return psn_diff(b, a) >= 0;
}

}  // namespace mrc
