#include "sim/cm.hpp"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace mrc::sim {
namespace {

ConnMatrix parse(const std::string& s, std::uint64_t def = 0) {
  std::istringstream in(s);
  return parse_cm(in, def, "t.cm");
}

TEST(Cm, ParsesHtsimFormat) {
  const auto m = parse(
      "Nodes 8\nConnections 3\n"
      "0->5 id 1 start 0 size 2000000\n"
      "\n"
      "5->0 id 7 start 1500000 size 100\n"
      "3->4 start 2000 trigger 1 prio 2\n",
      64);
  EXPECT_EQ(m.nodes, 8u);
  ASSERT_EQ(m.conns.size(), 3u);
  EXPECT_EQ(m.conns[0].src, 0u);
  EXPECT_EQ(m.conns[0].dst, 5u);
  EXPECT_EQ(m.conns[0].bytes, 2000000u);
  EXPECT_EQ(m.conns[1].id, 7u);
  EXPECT_EQ(m.conns[1].start, 1500u);  // ps -> ns
  EXPECT_EQ(m.conns[2].id, 3u);        // positional
  EXPECT_EQ(m.conns[2].bytes, 64u);    // default size
}

TEST(Cm, MalformedInputGetsAClearError) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"0->1 size 5\n", "before the Nodes line"},
      {"Connections 0\n", "missing 'Nodes'"},
      {"Nodes x\n", "bad count"},
      {"Nodes 4\n0-1 size 5\n", "expected '<src>-><dst>'"},
      {"Nodes 4\n0->9 size 5\n", "out of range"},
      {"Nodes 4\n2->2 size 5\n", "itself"},
      {"Nodes 4\n0->1 size\n", "needs a value"},
      {"Nodes 4\n0->1 bogus 3\n", "unknown keyword"},
      {"Nodes 4\n0->1 size 12abc\n", "bad size"},
      {"Nodes 4\n0->1\n", "without a size"},
      {"Nodes 4\nConnections 2\n0->1 size 5\n", "but 1 connection"},
  };
  for (const auto& c : cases) {
    try {
      parse(c.text);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const CmError& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("t.cm"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(load_cm("/nonexistent/x.cm"), CmError);
  // Not a file: refused at once, not read (/dev/zero would be one line without end; /dev/null first,
  // which without the check would fail fast, as an empty matrix).
  for (const char* path : {"/dev/null", "/dev/zero"}) {
    try {
      load_cm(path);
      FAIL() << "accepted: " << path;
    } catch (const CmError& e) {  // ASSERT: a wrong answer for /dev/null stops before /dev/zero
      ASSERT_NE(std::string(e.what()).find(std::string(path) + ": is not a regular file"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Cm, PermutationIsADerangementAndRoundTrips) {
  const auto m = make_permutation(128, 2000000, 1);
  ASSERT_EQ(m.conns.size(), 128u);
  std::set<std::uint32_t> srcs, dsts;
  for (const auto& c : m.conns) {
    EXPECT_NE(c.src, c.dst);
    srcs.insert(c.src);
    dsts.insert(c.dst);
  }
  EXPECT_EQ(srcs.size(), 128u);
  EXPECT_EQ(dsts.size(), 128u);
  bool differs = false;
  const auto other = make_permutation(128, 1, 2);
  for (std::size_t i = 0; i < 128; ++i) differs = differs || other.conns[i].dst != m.conns[i].dst;
  EXPECT_TRUE(differs);
  EXPECT_EQ(make_permutation(128, 1, 1).conns[5].dst, m.conns[5].dst);
  std::stringstream s;
  write_cm(s, m);
  const auto back = parse_cm(s);
  ASSERT_EQ(back.conns.size(), m.conns.size());
  for (std::size_t i = 0; i < m.conns.size(); ++i) {
    EXPECT_EQ(back.conns[i].src, m.conns[i].src);
    EXPECT_EQ(back.conns[i].dst, m.conns[i].dst);
    EXPECT_EQ(back.conns[i].bytes, m.conns[i].bytes);
  }
}

}  // namespace
}  // namespace mrc::sim
