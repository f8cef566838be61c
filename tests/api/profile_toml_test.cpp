// The profile-file parser of `mrc ctl` (src/api/profile_toml.cpp): text in, checked profile
// definitions with their lines, or a file:line error.
#include "api/profile_toml.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mrc::api {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_profiles(text, "p.toml");
  } catch (const ProfileTomlError& e) {
    return e.what();
  }
  return "";
}

TEST(ProfileToml, ParsesDefinitionsWithTheirLines) {
  const ProfileFile f = parse_profiles(
      "[[ev_format]]\nid = 1\nmode = \"udp\"\nwidths = [16]\n\n"
      "[[ev_profile]]\nid = 2\nmode = \"explicit\"\nformat = 1\n"
      "fields = [{ width = 16 }]\n"
      "evs = [{ ev = \"4000\", port = 3, copies = 2 },\n       { ev = \"4001\", port = 1 }]\n",
      "p.toml");
  ASSERT_EQ(f.fmts.size(), 1u);
  EXPECT_EQ(f.fmts[0].at.line, 1u);
  EXPECT_EQ(f.fmts[0].at.key("widths"), 4u);
  ASSERT_EQ(f.evps.size(), 1u);
  const EvDef& d = f.evps[0];
  EXPECT_EQ(d.at.line, 6u);
  EXPECT_EQ(d.count, 3u);
  ASSERT_EQ(d.ev_lines.size(), 3u);
  EXPECT_EQ(d.ev_lines[0], 11u);
  EXPECT_EQ(d.ev_lines[2], 12u);
  EXPECT_EQ(d.field_lines.size(), 1u);
  EXPECT_EQ(f.ports_needed, 3u);
  EXPECT_EQ(f.at(f.port_line), "p.toml:11");
  EXPECT_EQ(f.at(0), "p.toml");
}

TEST(ProfileToml, ErrorsNameFileAndLine) {
  EXPECT_EQ(error_of(""),
            "p.toml: defines no profile (a profile file has [[ev_format]], [[ev_profile]] or "
            "[[cc_profile]] tables)");
  EXPECT_EQ(error_of("[[cc_profile]]\nid = 1\nalgorithm = \"none\"\ngamma = 1\n"),
            "p.toml:4: 'gamma' needs algorithm = \"uet-1.0-nscc\" (algorithm \"none\" takes no settings)");
  EXPECT_EQ(error_of("x = [\n").rfind("p.toml:", 0), 0u);
}

// 'copies' may be 65,536 per entry: a 30-byte entry repeated made the parser allocate gigabytes
// before the store could refuse the profile. At most kMaxListedEvs EVs are listed per file.
TEST(ProfileToml, RefusesMoreListedEvsThanAStoreHolds) {
  std::string text =
      "[[ev_profile]]\nid = 1\nmode = \"explicit\"\nformat = 1\nfields = [{ width = 16 }]\nevs = [\n";
  for (std::uint64_t i = 0; i <= kMaxListedEvs / 65536; ++i)
    text += "{ ev = \"1\", port = 1, copies = 65536 },\n";
  text += "]\n";
  EXPECT_EQ(error_of(text),
            "p.toml:" + std::to_string(7 + kMaxListedEvs / 65536) +
                ": the 'evs' entries list more than 1048576 EVs (copies included), more than a "
                "profile store holds");
}

}  // namespace
}  // namespace mrc::api
