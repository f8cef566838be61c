#include "sim/cm.hpp"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <ostream>
#include <sstream>
#include <string_view>

#include "common/rng.hpp"
#include "common/small_file.hpp"

namespace mrc::sim {

namespace {

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
    const std::size_t b = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\r') ++i;
    if (i > b) out.push_back(s.substr(b, i - b));
  }
  return out;
}

// Messages are assembled with append(): g++ 12 gives a false -Wrestrict on chains of operator+.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (auto p : parts) s.append(p);
  return s;
}

[[noreturn]] void fail(const std::string& name, std::size_t line, const std::string& msg) {
  throw CmError(cat({name, ":", std::to_string(line), ": ", msg}));
}

std::uint64_t number(std::string_view tok, const std::string& name, std::size_t line, const char* what) {
  std::uint64_t v = 0;
  const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (r.ec != std::errc() || r.ptr != tok.data() + tok.size())
    fail(name, line, cat({"bad ", what, " '", tok, "'"}));
  return v;
}

}  // namespace

ConnMatrix parse_cm(std::istream& in, std::uint64_t default_bytes, const std::string& name) {
  ConnMatrix m;
  bool have_nodes = false, have_conns = false;
  std::uint64_t declared = 0;
  std::string text;
  std::size_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    const auto tok = split(text);
    if (tok.empty()) continue;
    if (tok[0] == "Nodes" || tok[0] == "Connections" || tok[0] == "Triggers" || tok[0] == "Failures") {
      if (tok.size() != 2) fail(name, line, cat({tok[0], " needs exactly one number"}));
      const std::uint64_t v = number(tok[1], name, line, "count");
      if (tok[0] == "Nodes") {
        if (v == 0 || v > 0xFFFFFFFFu) fail(name, line, "Nodes must be 1..2^32-1");
        m.nodes = static_cast<std::uint32_t>(v);
        have_nodes = true;
      } else if (tok[0] == "Connections") {
        declared = v;
        have_conns = true;
      }
      continue;
    }
    const std::size_t arrow = tok[0].find("->");
    if (arrow == std::string_view::npos)
      fail(name, line, cat({"expected '<src>-><dst>', got '", tok[0], "'"}));
    if (!have_nodes) fail(name, line, "connection before the Nodes line");
    ConnSpec c;
    c.src = static_cast<std::uint32_t>(number(tok[0].substr(0, arrow), name, line, "source"));
    c.dst = static_cast<std::uint32_t>(number(tok[0].substr(arrow + 2), name, line, "destination"));
    if (c.src >= m.nodes || c.dst >= m.nodes)
      fail(name, line, cat({"node id out of range (Nodes ", std::to_string(m.nodes), ")"}));
    if (c.src == c.dst) fail(name, line, "a host cannot send to itself");
    c.id = static_cast<std::uint32_t>(m.conns.size() + 1);
    bool have_size = false;
    for (std::size_t i = 1; i < tok.size(); ++i) {
      const std::string_view key = tok[i];
      const bool known = key == "id" || key == "start" || key == "size" || key == "trigger" ||
                         key == "send_done_trigger" || key == "recv_done_trigger" || key == "prio" ||
                         key == "msg";
      if (!known) fail(name, line, cat({"unknown keyword '", key, "'"}));
      if (i + 1 >= tok.size()) fail(name, line, cat({"'", key, "' needs a value"}));
      const std::string keyname(key);
      const std::uint64_t v = number(tok[++i], name, line, keyname.c_str());
      if (key == "id") {
        c.id = static_cast<std::uint32_t>(v);
      } else if (key == "start") {
        c.start = v / 1000;  // ps -> ns
      } else if (key == "size") {
        if (v == 0) fail(name, line, "size must be > 0");
        c.bytes = v;
        have_size = true;
      }
    }
    if (!have_size) {
      if (default_bytes == 0) fail(name, line, "connection without a size and no default size");
      c.bytes = default_bytes;
    }
    m.conns.push_back(c);
  }
  if (!have_nodes) throw CmError(cat({name, ": missing 'Nodes' line"}));
  if (have_conns && declared != m.conns.size())
    throw CmError(cat({name, ": 'Connections ", std::to_string(declared), "' but ",
                       std::to_string(m.conns.size()), " connection lines"}));
  return m;
}

ConnMatrix load_cm(const std::string& path, std::uint64_t default_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    // The shipped scenarios name htsim's seeded permutations, which are generated, not shipped.
    const bool generated = std::filesystem::path(path).filename().string().rfind("perm_", 0) == 0;
    throw CmError(cat(
        {path, ": no such file",
         generated ? " (generate it: python3 tools/cm/gen_permutation.py; see scenarios/README.md)" : ""}));
  }
  // A device or a pipe may never end (/dev/zero: one endless line, read into memory until it runs
  // out): a matrix is a file. (Its size is not limited: it is read a line at a time.)
  if (std::string err; !check_regular_file(path, "an htsim .cm file", err)) throw CmError(err);
  std::ifstream f(path);
  if (!f) throw CmError(cat({path, ": cannot open"}));
  return parse_cm(f, default_bytes, path);
}

ConnMatrix make_permutation(std::uint32_t n, std::uint64_t bytes, std::uint64_t seed, Time start) {
  if (n < 2) throw std::invalid_argument("permutation: need at least 2 hosts");
  if (bytes == 0) throw std::invalid_argument("permutation: bytes must be > 0");
  Rng rng(seed);
  std::vector<std::uint32_t> dst(n);
  std::iota(dst.begin(), dst.end(), 0u);
  // Sattolo's algorithm: a uniformly random single cycle, hence no fixed point (nobody sends to self).
  for (std::uint32_t i = n - 1; i > 0; --i) std::swap(dst[i], dst[rng.below(i)]);
  ConnMatrix m;
  m.nodes = n;
  for (std::uint32_t s = 0; s < n; ++s) m.conns.push_back(ConnSpec{s, dst[s], s + 1, start, bytes});
  return m;
}

ConnMatrix make_ring_allreduce(std::uint32_t n, std::uint64_t bytes) {
  if (n < 2) throw std::invalid_argument("ring all-reduce: need at least 2 nodes");
  if (bytes == 0) throw std::invalid_argument("ring all-reduce: bytes must be > 0");
  const std::uint64_t chunk = (bytes + n - 1) / n;
  ConnMatrix m;
  m.nodes = n;
  const std::uint32_t steps = 2 * (n - 1);
  m.conns.reserve(static_cast<std::size_t>(steps) * n);
  for (std::uint32_t s = 0; s < steps; ++s) {
    for (std::uint32_t i = 0; i < n; ++i) {
      ConnSpec c{i, (i + 1) % n, s * n + i + 1, 0, chunk};
      if (s > 0) c.after = (s - 1) * n + (i + n - 1) % n;
      m.conns.push_back(c);
    }
  }
  return m;
}

ConnMatrix make_all_to_all(std::uint32_t n, std::uint64_t bytes) {
  if (n < 2) throw std::invalid_argument("all-to-all: need at least 2 nodes");
  if (bytes == 0) throw std::invalid_argument("all-to-all: bytes must be > 0");
  ConnMatrix m;
  m.nodes = n;
  std::uint32_t id = 1;
  for (std::uint32_t s = 0; s < n; ++s)
    for (std::uint32_t d = 0; d < n; ++d)
      if (s != d) m.conns.push_back(ConnSpec{s, d, id++, 0, bytes});
  return m;
}

ConnMatrix make_incast(std::uint32_t nodes, std::uint32_t senders, std::uint64_t bytes, bool victim,
                       std::uint64_t victim_bytes, std::uint32_t victim_dst) {
  if (senders == 0 || senders + 1 > nodes) throw std::invalid_argument("incast: need 1 .. nodes-1 senders");
  if (bytes == 0 || (victim && victim_bytes == 0)) throw std::invalid_argument("incast: bytes must be > 0");
  if (victim && (victim_dst == 0 || victim_dst == 1 || victim_dst >= nodes))
    throw std::invalid_argument("incast: the victim's destination must be a node other than 0 and 1");
  ConnMatrix m;
  m.nodes = nodes;
  for (std::uint32_t i = 1; i <= senders; ++i) m.conns.push_back(ConnSpec{i, 0, i, 0, bytes});
  if (victim) m.conns.push_back(ConnSpec{1, victim_dst, senders + 1, 0, victim_bytes});
  return m;
}

void write_cm(std::ostream& out, const ConnMatrix& m) {
  out << "Nodes " << m.nodes << "\nConnections " << m.conns.size() << "\n";
  for (const auto& c : m.conns)
    out << c.src << "->" << c.dst << " id " << c.id << " start " << c.start * 1000 << " size " << c.bytes
        << "\n";
}

}  // namespace mrc::sim
