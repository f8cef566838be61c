// Interop golden vectors (tests/wire/interop_vectors.txt): packets written by hand from the public
// field tables, decoded by our codec field by field; those without a _rx_only suffix must also be
// exactly what our encoder sends for the decoded fields (no wire extension).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "wire/describe.hpp"
#include "wire/packet.hpp"

namespace mrc::wire {
namespace {

struct Vector {
  std::string name;
  std::vector<std::uint8_t> bytes;
  std::map<std::string, std::string> expected;  // "header.field" -> value text
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::vector<Vector> load() {
  const auto path = std::filesystem::path(MRC_WIRE_TEST_DIR) / "interop_vectors.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<Vector> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto a = line.find('|');
    const auto b = line.find('|', a + 1);
    Vector v;
    v.name = trim(line.substr(0, a));
    std::string hex;
    for (char c : line.substr(a + 1, b - a - 1))
      if (std::isxdigit(static_cast<unsigned char>(c))) hex += c;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
      v.bytes.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
    std::istringstream fields(line.substr(b + 1));
    std::string kv;
    while (fields >> kv) {
      const auto eq = kv.find('=');
      v.expected[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::int64_t number(const std::string& s) {
  return static_cast<std::int64_t>(std::stoll(s, nullptr, 0));
}

TEST(WireInterop, HandWrittenVectorsDecodeFieldByField) {
  const auto vectors = load();
  ASSERT_GE(vectors.size(), 17u);
  std::set<int> opcodes;
  for (const Vector& v : vectors) {
    Packet p;
    std::size_t at = 0;
    ASSERT_EQ(decode(v.bytes, p, {.verify_icrc = true, .error_offset = &at}), Error::kOk)
        << v.name << " at byte " << at;
    opcodes.insert(static_cast<int>(p.bth.opcode));
    std::map<std::string, std::int64_t> got;
    for (const FieldValue& f : describe(p, false)) {
      const std::int64_t x = f.kind == FieldValue::Kind::kSigned ? f.i
                             : f.kind == FieldValue::Kind::kBool ? (f.b ? 1 : 0)
                                                                 : static_cast<std::int64_t>(f.u);
      got[std::string(f.header) + "." + f.name] = x;
    }
    for (const auto& [key, want] : v.expected) {
      ASSERT_TRUE(got.count(key)) << v.name << ": no field " << key;
      EXPECT_EQ(got[key], number(want)) << v.name << ": " << key;
    }
  }
  EXPECT_EQ(opcodes.size(), 12u) << "one vector per opcode at least";
}

TEST(WireInterop, WhatWeSendIsTheHandWrittenBytes) {
  for (const Vector& v : load()) {
    if (v.name.ends_with("_rx_only")) continue;
    Packet p;
    ASSERT_EQ(decode(v.bytes, p), Error::kOk) << v.name;
    std::vector<std::uint8_t> out(v.bytes.size() + 8);
    Error err = Error::kBadField;
    const std::size_t n = encode(p, out, &err);
    ASSERT_EQ(err, Error::kOk) << v.name;
    out.resize(n);
    EXPECT_EQ(out, v.bytes) << v.name;
  }
}

}  // namespace
}  // namespace mrc::wire
