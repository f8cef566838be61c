// htsim connection matrices (.cm, docs/htsim.md §3) and a permutation generator.
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
  /// Index (in ConnMatrix::conns) of a connection whose data must have arrived at its receiver
  /// before this one starts (step dependencies); kNoDep = none.
  std::uint32_t after = kNoDep;
  static constexpr std::uint32_t kNoDep = ~0u;
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
/// Ring all-reduce of `bytes` per node over nodes 0..n-1: 2(n-1) steps (reduce-scatter, then
/// all-gather), at each step node i sends one chunk of bytes/n (rounded up) to node (i+1) % n;
/// step s > 0 of node i starts once step s-1 of node i-1 has arrived. Connection index = s*n + i.
ConnMatrix make_ring_allreduce(std::uint32_t n, std::uint64_t bytes);
/// All-to-all: every ordered pair (s != d) of nodes 0..n-1, `bytes` each.
ConnMatrix make_all_to_all(std::uint32_t n, std::uint64_t bytes);
/// Incast: senders 1..n to node 0; with a victim, node 1 also sends `victim_bytes` to
/// `victim_dst` (sharing node 1's NIC with an incast flow), as the last connection.
ConnMatrix make_incast(std::uint32_t nodes, std::uint32_t senders, std::uint64_t bytes, bool victim,
                       std::uint64_t victim_bytes, std::uint32_t victim_dst);
/// Writes `m` in the .cm format (start in ps).
void write_cm(std::ostream& out, const ConnMatrix& m);

}  // namespace mrc::sim
