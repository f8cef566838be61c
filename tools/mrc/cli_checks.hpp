// Option checks shared by every `mrc` subcommand. CLI11's own Range passes NaN (every comparison
// with NaN is false) and its unsigned conversion wraps "-5" and 2^64; these refuse both and name
// the allowed range, which CLI11 prefixes with the option's name.
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace mrc::tools {

/// A decimal integer in [lo, hi] (after any size-suffix transform has run).
inline CLI::Validator uint_range(std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE || v < lo || v > hi) return "must be " + range + ", got '" + s + "'";
        return {};
      },
      "UINT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", "uint_range");
}

/// A finite real number in [lo, hi]; `what` names a unit or meaning in the message (e.g. "seconds").
inline CLI::Validator real_range(double lo, double hi, const std::string& what = "a number") {
  const std::string range =
      what + " in [" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
        if (s.empty() || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < lo ||
            v > hi)
          return "must be " + range + ", got '" + s + "'";
        return {};
      },
      "NUMBER in [" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]", "real_range");
}

}  // namespace mrc::tools
