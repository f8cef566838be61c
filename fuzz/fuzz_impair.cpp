// libFuzzer target for the impairment spec parser (src/io/impair.cpp: parse_impair, the text of
// --impair and of an impairment file).
//
// Every input is parsed; a parse that succeeds must give values in range, and the configuration
// printed back (to_string) must parse again to the same values up to printing precision.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "io/impair.hpp"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fuzz_impair: %s\n", what);
  std::abort();
}

bool probability(double p) {
  return p >= 0 && p <= 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  mrc::io::ImpairConfig c;
  std::string err;
  if (!mrc::io::parse_impair(text, c, err)) {
    if (err.empty()) die("refused without a message");
    return 0;
  }
  if (!probability(c.drop) || !probability(c.duplicate) || !probability(c.reorder) || !probability(c.trim) ||
      !probability(c.trim_lasthop))
    die("probability out of [0, 1]");
  if (c.hold_slots == 0 || c.hold_slots > (1u << 20)) die("hold_slots out of range");
  mrc::io::ImpairConfig back;
  back.hold_slots = c.hold_slots;
  if (!mrc::io::parse_impair(mrc::io::to_string(c), back, err)) die("to_string does not parse back");
  const auto near = [](double a, double b) {
    return std::fabs(a - b) <= 1e-5 * std::fmax(1.0, std::fabs(a));
  };
  if (!near(back.drop, c.drop) || !near(back.duplicate, c.duplicate) || !near(back.reorder, c.reorder) ||
      !near(back.trim, c.trim) || !near(back.trim_lasthop, c.trim_lasthop) || back.delay != c.delay ||
      back.jitter != c.jitter || back.reorder_delay != c.reorder_delay || back.seed != c.seed)
    die("to_string round trip changed a value");
  return 0;
}
