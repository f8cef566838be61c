// libFuzzer target for the scenario parser of `mrc sim` (src/sim/scenario.cpp).
//
// Every input is parsed as the TOML text of a scenario. It must parse or be refused with a
// ScenarioError ("file:line: what"); any other exception, a crash, a hang or an unbounded
// allocation is a bug. The harness only parses: it never runs a scenario. The limits are smaller
// than mrc sim's (a legitimate scenario may ask for 131,072 hosts x 8 planes, scen6_scale.toml), so a
// big fabric is refused before it is built, and a 'cm' workload may not read files.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mrc::sim::ScenarioLimits lim;
  lim.max_host_ports = 2048;
  lim.max_connections = 1u << 14;
  lim.max_faults = 1u << 14;
  lim.read_files = false;
  try {
    const mrc::sim::Scenario sc = mrc::sim::parse_scenario(text, "fuzz.toml", lim);
    (void)sc;
  } catch (const mrc::sim::ScenarioError&) {
  }
  return 0;
}
