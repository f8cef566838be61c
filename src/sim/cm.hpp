// htsim connection matrices (.cm, sim-reference §5) and a permutation generator.
//
// Format (whitespace separated, one statement per line, blank lines ignored):
//   Nodes <n>
//   Connections <c>
//   <src>-><dst> [id <id>] [start <ps>] [size <bytes>] [other htsim keywords...]
// `Triggers` and `Failures` header lines are accepted and ignored; so are the per-connection
// keywords trigger / send_done_trigger / recv_done_trigger (each with one argument), prio <n> and
// msg <n>. Start times in the file are picoseconds (htsim's unit); ConnSpec::start is nanoseconds.
#pragma once
#include <cstdint>
#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/time.hpp"

namespace mrc::sim {

struct ConnSpec {
  std::uint32_t src = 0, dst = 0;
  std::uint32_t id = 0;     ///< from the file, or the connection's 1-based position
  Time start = 0;           ///< ns
  std::uint64_t bytes = 0;  ///< 0 = not given in the file
};

struct ConnMatrix {
  std::uint32_t nodes = 0;
  std::vector<ConnSpec> conns;
};

/// Thrown for malformed input; what() names the line.
class CmError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses a matrix; connections without a size get `default_bytes` (must then be > 0).
ConnMatrix parse_cm(std::istream& in, std::uint64_t default_bytes = 0, const std::string& name = "<cm>");
ConnMatrix load_cm(const std::string& path, std::uint64_t default_bytes = 0);

/// A random permutation of `n` hosts (every host sends once and receives once, never to itself),
/// `bytes` per flow, all starting at `start`. Deterministic for a seed.
ConnMatrix make_permutation(std::uint32_t n, std::uint64_t bytes, std::uint64_t seed, Time start = 0);
/// Writes `m` in the .cm format (start in ps).
void write_cm(std::ostream& out, const ConnMatrix& m);

}  // namespace mrc::sim
