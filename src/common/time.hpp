// Explicit time for the sans-I/O engine: callers pass "now" in; nothing reads a clock.
#pragma once
#include <cstdint>
#include <limits>

namespace mrc {

/// Nanoseconds since an arbitrary epoch chosen by the caller (virtual or real).
using Time = std::uint64_t;
/// A duration in nanoseconds.
using Duration = std::uint64_t;

inline constexpr Time kNever = std::numeric_limits<Time>::max();

inline constexpr Duration operator""_ns(unsigned long long v) {
  return v;
}
inline constexpr Duration operator""_us(unsigned long long v) {
  return v * 1000ULL;
}
inline constexpr Duration operator""_ms(unsigned long long v) {
  return v * 1000000ULL;
}

}  // namespace mrc
