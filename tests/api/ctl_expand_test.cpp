// EV expansion (docs/protocol.md §7.5): the five worked examples byte-exact, validation rules,
// generated-EV enumeration, and properties over random profiles.
#include <gtest/gtest.h>

#include <bit>

#include "api/ev_expand.hpp"
#include "common/rng.hpp"

namespace mrc::api {
namespace {

EvBytes bytes(std::initializer_list<std::uint8_t> b) {
  EvBytes e{};
  std::size_t i = 0;
  for (const std::uint8_t x : b) e[i++] = x;
  return e;
}

EvBytes expand_ok(const std::vector<std::uint32_t>& fmt, const std::vector<EvField>& fields,
                  const EvBytes& raw) {
  EXPECT_EQ(check_fields(fmt, fields), "");
  EvBytes out{};
  EXPECT_TRUE(expand(fmt, fields, raw, out));
  return out;
}

TEST(CtlExpand, Example1StevFixedHighNibblesSplitMask) {
  const std::vector<std::uint32_t> fmt{16, 16};
  const std::vector<EvField> f{{16, 0x1000, 1, 0xFF, 0x0F0F}, {16, 0x2000, 1, 0xFF, 0x0F0F}};
  EXPECT_EQ(expand_ok(fmt, f, bytes({0x33, 0x12})), bytes({0x13, 0x03, 0x21, 0x02}));
  EXPECT_EQ(raw_bits(f), 16u);
  EvBytes out{};
  EXPECT_FALSE(expand(fmt, f, bytes({0x33, 0x12, 0x01}), out)) << "raw bits beyond the cursor must be zero";
}

TEST(CtlExpand, Example2Srv6GeneratedWithFixedLocator) {
  const std::vector<std::uint32_t> fmt{32, 16, 16, 16, 16};
  std::vector<EvField> f{{32, 0x13131313, 0, 0, 0}};
  for (std::uint32_t i = 1; i <= 4; ++i) f.push_back({16, i << 8, 1, 0xF, 0x000F});
  EXPECT_EQ(expand_ok(fmt, f, bytes({0x9B, 0x79})),
            bytes({0x13, 0x13, 0x13, 0x13, 0x01, 0x09, 0x02, 0x0b, 0x03, 0x07, 0x04, 0x09}));
  // Width-4 fields inside 16-bit format fields: left zero-fill.
  std::vector<EvField> narrow{{32, 0x13131313, 0, 0, 0}};
  for (int i = 0; i < 4; ++i) narrow.push_back({4, 0, 0, 0xF, 0xF});
  EXPECT_EQ(expand_ok(fmt, narrow, bytes({0x78, 0xBA})),
            bytes({0x13, 0x13, 0x13, 0x13, 0x00, 0x07, 0x00, 0x08, 0x00, 0x0B, 0x00, 0x0A}));
}

TEST(CtlExpand, Example3GeneratedStevTiers) {
  const std::vector<std::uint32_t> fmt{8, 4, 4};
  const std::vector<EvField> f{{8, 0, 0, 255, 0xFF}, {4, 0, 0, 15, 0xF}, {4, 0, 0, 15, 0xF}};
  EXPECT_EQ(expand_ok(fmt, f, bytes({0xB3, 0x5A})), bytes({0xB3, 0x5A}));
  EXPECT_EQ(generated_space(f), 65536u);
  EXPECT_EQ(generated_raw(f, 179 * 256 + 5 * 16 + 10), bytes({0xB3, 0x5A}));
  EXPECT_EQ(ev_value_be32(bytes({0xB3, 0x5A})), 0xB35A0000u);
}

TEST(CtlExpand, Example4HostEndianPitfall) {
  // memcpy of the host integer 0x12345678 on a little-endian host: bytes 78 56 34 12.
  const std::vector<std::uint32_t> fmt{16, 16};
  const std::vector<EvField> f{{16, 0, 0, 0xFFFF, 0xFFFF}, {16, 0, 0, 0xFFFF, 0xFFFF}};
  const EvBytes out = expand_ok(fmt, f, bytes({0x78, 0x56, 0x34, 0x12}));
  EXPECT_EQ(out, bytes({0x78, 0x56, 0x34, 0x12}));
  EXPECT_EQ(ev_value_be32(out), 0x78563412u);  // f0 = 0x7856, f1 = 0x3412
}

TEST(CtlExpand, Example5Srv6Subset) {
  const std::vector<std::uint32_t> fmt{32, 16, 16, 16, 16};
  const std::vector<EvField> f{
      {32, 0xDEADDEAD, 0, 0, 0}, {16, 0, 0, 0xFFFF, 0xFFFF}, {16, 0, 0, 0xFFFF, 0xFFFF}};
  EXPECT_EQ(expand_ok(fmt, f, bytes({0xE2, 0x98, 0xF1, 0x15})),
            bytes({0xDE, 0xAD, 0xDE, 0xAD, 0xE2, 0x98, 0xF1, 0x15}));
}

TEST(CtlExpand, ValidationRejectsEveryRule) {
  const std::vector<std::uint32_t> fmt{16, 16};
  const EvField ok{16, 0, 0, 0xFF, 0xFF};
  EXPECT_EQ(check_fields(fmt, std::vector<EvField>{ok, ok}), "");
  EXPECT_NE(check_fields(fmt, std::vector<EvField>{}), "");
  EXPECT_NE(check_fields(fmt, std::vector<EvField>{ok, ok, ok}), "") << "more fields than format fields";
  EXPECT_NE(check_fields(fmt, std::vector<EvField>{{17, 0, 0, 0, 0}}), "")
      << "wider than its format field (Q-EV-4)";
  EXPECT_NE(check_fields(std::vector<std::uint32_t>{32, 32}, std::vector<EvField>{{33, 0, 0, 0, 0}}), "");
  EXPECT_NE(check_fields(fmt, std::vector<EvField>{{0, 0, 0, 0, 0}}), "") << "width 0";
  EXPECT_NE(check_fields(fmt, std::vector<EvField>{{8, 0x100, 0, 0, 0}}), "") << "init_val too wide";
  EXPECT_NE(check_fields(fmt, std::vector<EvField>{{8, 0, 0, 1, 0x100}}), "") << "mask above width";
  EXPECT_NE(check_fields(fmt, std::vector<EvField>{{8, 0, 0, 16, 0x0F}}), "") << "max_val >= 2^popcount";
  EXPECT_NE(check_fields(fmt, std::vector<EvField>{{8, 0, 5, 4, 0x0F}}), "") << "min_val > max_val";
  EXPECT_EQ(check_fields(fmt, std::vector<EvField>{{8, 0xAB, 0, 0, 0}}), "") << "fixed field";
  EXPECT_NE(check_format(EvFmtMode::kStev, std::vector<std::uint32_t>{16, 17}), "");
  EXPECT_NE(check_format(EvFmtMode::kUdp, std::vector<std::uint32_t>{8, 9}), "");
  EXPECT_NE(check_format(EvFmtMode::kStev, std::vector<std::uint32_t>{0}), "");
  EXPECT_NE(check_format(EvFmtMode::kSrv6, std::vector<std::uint32_t>{33}), "");
  EXPECT_EQ(check_format(EvFmtMode::kSrv6, std::vector<std::uint32_t>(8, 32)), "");
  EXPECT_NE(check_format(EvFmtMode::kSrv6, std::vector<std::uint32_t>(9, 32)), "");
}

TEST(CtlExpand, GeneratedEnumerationIsMixedRadixLastFieldFastest) {
  const std::vector<std::uint32_t> fmt{8, 8};
  const std::vector<EvField> f{{8, 0, 2, 3, 0x3}, {8, 0xA0, 1, 3, 0x3}};
  EXPECT_EQ(generated_space(f), 2u * 3u);
  // (2,1) (2,2) (2,3) (3,1) ...; ports round-robin over ports 1 and 3.
  const auto g = generate(fmt, f, 4, (1u << 1) | (1u << 3), nullptr);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].expanded, bytes({0x02, 0xA1}));
  EXPECT_EQ(g[1].expanded, bytes({0x02, 0xA2}));
  EXPECT_EQ(g[2].expanded, bytes({0x02, 0xA3}));
  EXPECT_EQ(g[3].expanded, bytes({0x03, 0xA1}));
  EXPECT_EQ(g[0].port, 1);
  EXPECT_EQ(g[1].port, 3);
  EXPECT_EQ(g[2].port, 1);
  // Denied EVs are skipped; the port sequence goes on with the next tuple.
  const auto d = generate(fmt, f, 10, 1u << 1, [](const EvBytes& e, std::uint8_t) { return e[1] == 0xA2; });
  ASSERT_EQ(d.size(), 4u) << "6 tuples, 2 denied";
  for (const auto& x : d) EXPECT_NE(x.expanded[1], 0xA2);
  EXPECT_TRUE(generate(fmt, f, 4, 0, nullptr).empty()) << "no port, no EV";
}

// Random profiles whose masks are disjoint bit slots: distinct raw EVs give distinct expanded
// EVs, nothing is written past the format width, and stray raw bits are refused.
TEST(CtlExpand, PropertyInjectiveWithinFormatWidth) {
  Rng rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<std::uint32_t> fmt;
    std::vector<EvField> f;
    const auto nf = 1 + rng.below(5);
    for (std::uint32_t i = 0; i < nf; ++i) {
      const auto fw = static_cast<std::uint32_t>(1 + rng.below(32));
      const auto w = static_cast<std::uint32_t>(1 + rng.below(fw));
      const std::uint32_t full = w == 32 ? 0xFFFFFFFFu : (1u << w) - 1;
      const auto mask = static_cast<std::uint32_t>(rng.next()) & full;
      const auto init = static_cast<std::uint32_t>(rng.next()) & full;
      const std::uint32_t pc = static_cast<std::uint32_t>(std::popcount(mask));
      const std::uint32_t maxv = mask == 0 ? 0 : (pc == 32 ? 0xFFFFFFFFu : (1u << pc) - 1);
      fmt.push_back(fw);
      f.push_back({w, init, 0, maxv, mask});
    }
    ASSERT_EQ(check_fields(fmt, f), "");
    std::uint32_t fmt_total = 0;
    for (auto w : fmt) fmt_total += w;
    const std::uint32_t nbits = raw_bits(f);
    for (int k = 0; k < 40; ++k) {
      EvBytes raw{};
      for (std::uint32_t b = 0; b < nbits; ++b)
        if (rng.below(2)) raw[b / 8] = static_cast<std::uint8_t>(raw[b / 8] | (0x80u >> (b % 8)));
      EvBytes out{};
      ASSERT_TRUE(expand(fmt, f, raw, out));
      for (std::uint32_t b = fmt_total; b < kEvBits; ++b) ASSERT_FALSE((out[b / 8] >> (7 - b % 8)) & 1u);
      // Injective: raws differing in any one consumed bit expand differently.
      EvBytes raw2 = raw;
      if (nbits > 0) {
        const std::uint32_t flip = static_cast<std::uint32_t>(rng.below(nbits));
        raw2[flip / 8] = static_cast<std::uint8_t>(raw2[flip / 8] ^ (0x80u >> (flip % 8)));
        EvBytes out2{};
        ASSERT_TRUE(expand(fmt, f, raw2, out2));
        ASSERT_NE(out, out2);
      }
      if (nbits < kEvBits) {
        EvBytes stray = raw;
        const std::uint32_t b = nbits + static_cast<std::uint32_t>(rng.below(kEvBits - nbits));
        stray[b / 8] = static_cast<std::uint8_t>(stray[b / 8] | (0x80u >> (b % 8)));
        ASSERT_FALSE(expand(fmt, f, stray, out));
      }
    }
  }
}

TEST(CtlExpand, Srv6UsidsAreTheDestinationAfterTheBlockUpToEndOfCarrier) {
  std::vector<std::uint16_t> u;
  // fcbb:bb01:1001:2003:: with a 32-bit block: two uSIDs.
  EXPECT_EQ(srv6_usids(bytes({0xFC, 0xBB, 0xBB, 0x01, 0x10, 0x01, 0x20, 0x03}), 32, u), "");
  EXPECT_EQ(u, (std::vector<std::uint16_t>{0x1001, 0x2003}));
  // A 48-bit block takes the first uSID as block bits.
  EXPECT_EQ(srv6_usids(bytes({0xFC, 0xBB, 0xBB, 0x01, 0x10, 0x01, 0x20, 0x03}), 48, u), "");
  EXPECT_EQ(u, (std::vector<std::uint16_t>{0x2003}));
  // Six uSIDs fill the address.
  EvBytes full = bytes({0xFC, 0, 0, 1, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6});
  EXPECT_EQ(srv6_usids(full, 32, u), "");
  EXPECT_EQ(u.size(), 6u);
  // Refused: no uSID, bits after the end of carrier, an SRH segment, a bad block length.
  EXPECT_NE(srv6_usids(bytes({0xFC, 0xBB, 0xBB, 0x01}), 32, u), "");
  EXPECT_NE(
      srv6_usids(bytes({0xFC, 0xBB, 0xBB, 0x01, 0x10, 0x01, 0, 0, 0x20, 0x03}), 32, u).find("end of carrier"),
      std::string::npos);
  EvBytes srh = bytes({0xFC, 0xBB, 0xBB, 0x01, 0x10, 0x01});
  srh[16] = 0xFC;
  EXPECT_NE(srv6_usids(srh, 32, u).find("SRH"), std::string::npos);
  EXPECT_NE(srv6_usids(full, 24, u), "");
  EXPECT_NE(srv6_usids(full, 128, u), "");
}

}  // namespace
}  // namespace mrc::api
