#include "io/impair.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "wire/packet.hpp"

namespace mrc::io {
namespace {

std::vector<std::uint8_t> data_packet(std::uint32_t psn, std::size_t payload_len) {
  wire::Packet pk;
  pk.bth.opcode = wire::Opcode::kWriteOnly;
  pk.bth.dest_qp = 5;
  pk.bth.psn = psn;
  std::vector<std::uint8_t> payload(payload_len, 0x42);
  pk.reth.dma_len = static_cast<std::uint32_t>(payload_len);
  pk.payload = payload;
  std::vector<std::uint8_t> buf(payload_len + 128);
  buf.resize(wire::encode(pk, buf));
  return buf;
}

TEST(Impair, ParsesKeysUnitsAndComments) {
  ImpairConfig c;
  std::string err;
  ASSERT_TRUE(parse_impair(
      "drop=5%, dup=1 reorder=2.5;trim=10%\n# comment=ignored\ndelay=2ms jitter=500ns seed=9", c, err))
      << err;
  EXPECT_DOUBLE_EQ(c.drop, 0.05);
  EXPECT_DOUBLE_EQ(c.duplicate, 0.01);
  EXPECT_DOUBLE_EQ(c.reorder, 0.025);
  EXPECT_DOUBLE_EQ(c.trim, 0.10);
  EXPECT_EQ(c.delay, 2'000'000u);
  EXPECT_EQ(c.jitter, 500u);
  EXPECT_EQ(c.seed, 9u);
  EXPECT_TRUE(c.enabled());
  ImpairConfig round;
  ASSERT_TRUE(parse_impair(to_string(c), round, err)) << err;
  EXPECT_DOUBLE_EQ(round.drop, c.drop);
  EXPECT_EQ(round.delay, c.delay);
}

TEST(Impair, RejectsBadInputWithMessage) {
  ImpairConfig c;
  std::string err;
  EXPECT_FALSE(parse_impair("drop=150", c, err));
  EXPECT_NE(err.find("drop"), std::string::npos);
  EXPECT_FALSE(parse_impair("bogus=1", c, err));
  EXPECT_NE(err.find("unknown key"), std::string::npos);
  EXPECT_FALSE(parse_impair("delay=5parsecs", c, err));
  EXPECT_FALSE(parse_impair("drop", c, err));
  EXPECT_NE(err.find("key=value"), std::string::npos);
  EXPECT_FALSE(load_impair_file("/nonexistent/impair.conf", c, err));
  EXPECT_EQ(err, "impair: /nonexistent/impair.conf: no such file");
  EXPECT_FALSE(load_impair_file("/dev/zero", c, err));  // read whole, it would never end
  EXPECT_NE(err.find("/dev/zero: is not a regular file"), std::string::npos) << err;
  EXPECT_FALSE(c.enabled());  // failed parses leave the config untouched
}

// fuzz_impair: "delay=22222222222222222222211194us" cast 2.2e28 ns to a Duration (undefined);
// "inf", "nan" and anything above an hour are refused, as is a "nan" percentage.
TEST(Impair, RefusesDurationsThatDoNotFitAndNan) {
  for (const char* bad : {"delay=22222222222222222222211194us", "delay=inf", "jitter=nan",
                          "reorder_delay=1e300s", "delay=3600.001s", "drop=nan", "dup=nan%", "delay=-nan"}) {
    ImpairConfig c;
    std::string err;
    EXPECT_FALSE(parse_impair(bad, c, err)) << bad;
    EXPECT_NE(err.find("bad value"), std::string::npos) << bad << ": " << err;
    EXPECT_EQ(c.delay, 0u) << bad;
  }
  ImpairConfig c;
  std::string err;
  ASSERT_TRUE(parse_impair("delay=3600s", c, err)) << err;
  EXPECT_EQ(c.delay, kMaxImpairDelay);
}

TEST(Impair, LoadsFile) {
  const std::string path = ::testing::TempDir() + "impair_test.conf";
  {
    std::ofstream f(path);
    f << "# test\ndrop=3\nreorder=1%\n";
  }
  ImpairConfig c;
  std::string err;
  ASSERT_TRUE(load_impair_file(path, c, err)) << err;
  EXPECT_DOUBLE_EQ(c.drop, 0.03);
  EXPECT_DOUBLE_EQ(c.reorder, 0.01);
}

TEST(Impair, TrimmedLengthIsTheHeaderStack) {
  const auto pkt = data_packet(1, 1000);
  const std::size_t hl = trimmed_length(pkt);
  EXPECT_EQ(hl, wire::header_size(wire::Opcode::kWriteOnly, false));
  wire::Packet p;
  wire::DecodeOptions opt;
  opt.trimmed = true;
  EXPECT_EQ(wire::decode(std::span(pkt).first(hl), p, opt), wire::Error::kOk);
  const std::vector<std::uint8_t> junk(5, 0xFF);
  EXPECT_EQ(trimmed_length(junk), 0u);
}

struct Fate {
  std::uint32_t psn;
  std::size_t len;
  bool trimmed;
  bool operator==(const Fate&) const = default;
};

std::vector<Fate> run(const ImpairConfig& cfg, std::size_t n) {
  Impairment imp(cfg, 2048);
  std::vector<Fate> out;
  auto sink = [&](std::span<const std::uint8_t> b, const engine::RxMeta& m) {
    wire::Packet p;
    wire::DecodeOptions o;
    o.trimmed = m.trimmed;
    EXPECT_EQ(wire::decode(b, p, o), wire::Error::kOk);
    out.push_back(Fate{p.bth.psn, b.size(), m.trimmed});
  };
  Time t = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto pkt = data_packet(i, 512);
    imp.on_packet(pkt, engine::RxMeta{}, t, sink);
    t += 1000;
    imp.release(t, sink);
  }
  imp.release(kNever - 1, sink);
  EXPECT_EQ(imp.held(), 0u);
  const ImpairStats& s = imp.stats();
  EXPECT_EQ(s.seen, n);
  EXPECT_EQ(s.delivered, out.size());
  EXPECT_EQ(s.seen - s.dropped + s.duplicated, out.size());
  return out;
}

TEST(Impair, DeterministicForASeedAndDoesWhatItSays) {
  ImpairConfig c;
  c.drop = 0.1;
  c.duplicate = 0.05;
  c.reorder = 0.1;
  c.reorder_delay = 5000;  // 5 packets later
  c.trim = 0.05;
  c.seed = 3;
  const auto a = run(c, 4000);
  const auto b = run(c, 4000);
  EXPECT_EQ(a, b);
  c.seed = 4;
  EXPECT_NE(run(c, 4000), a);

  std::size_t trimmed = 0, out_of_order = 0;
  std::vector<int> seen(4000, 0);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].trimmed) {
      ++trimmed;
      EXPECT_EQ(a[i].len, wire::header_size(wire::Opcode::kWriteOnly, false));
    }
    if (i > 0 && a[i].psn < a[i - 1].psn) ++out_of_order;
    ++seen[a[i].psn];
  }
  const auto dropped = static_cast<std::size_t>(std::count(seen.begin(), seen.end(), 0));
  const auto dups = static_cast<std::size_t>(std::count(seen.begin(), seen.end(), 2));
  EXPECT_GT(dropped, 300u);  // ~10% of 4000
  EXPECT_LT(dropped, 500u);
  EXPECT_GT(dups, 100u);  // ~5% of the survivors
  EXPECT_GT(trimmed, 100u);
  EXPECT_GT(out_of_order, 200u);
}

TEST(Impair, FixedDelayHoldsUntilDue) {
  ImpairConfig c;
  c.delay = 10'000;
  c.hold_slots = 2;
  Impairment imp(c, 2048);
  int delivered = 0;
  auto sink = [&](std::span<const std::uint8_t>, const engine::RxMeta&) { ++delivered; };
  const auto pkt = data_packet(1, 100);
  imp.on_packet(pkt, engine::RxMeta{}, 0, sink);
  imp.on_packet(pkt, engine::RxMeta{}, 0, sink);
  imp.on_packet(pkt, engine::RxMeta{}, 0, sink);  // pool full: goes straight through
  EXPECT_EQ(delivered, 1);
  EXPECT_EQ(imp.stats().hold_overflow, 1u);
  EXPECT_EQ(imp.next_release(), 10'000u);
  imp.release(9'999, sink);
  EXPECT_EQ(delivered, 1);
  imp.release(10'000, sink);
  EXPECT_EQ(delivered, 3);
}

}  // namespace
}  // namespace mrc::io
