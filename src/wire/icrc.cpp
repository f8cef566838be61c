// CRC-32 (IEEE 802.3 polynomial, reflected) with slicing-by-8 tables built at compile time, and the
// RoCEv2-style invariant CRC of an MRC packet (docs/wire-format.md, "ICRC").
#include <array>

#include "wire/packet.hpp"

namespace mrc::wire {
namespace {

constexpr std::uint32_t kPolyReflected = 0xEDB88320u;

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

// t[0] is the classic byte-at-a-time table; t[k][i] is the CRC of byte i followed by k zero bytes,
// which lets the main loop fold 8 input bytes with 8 independent lookups.
constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPolyReflected : (c >> 1);
    t[0][i] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables[0][1] == 0x77073096u && kTables[0][255] == 0x2D02EF8Du);

/// Advances the raw (non-inverted) CRC register over `n` bytes.
std::uint32_t advance(std::uint32_t c, const std::uint8_t* p, std::size_t n) {
  const auto& t = kTables;
  while (n >= 8) {
    const std::uint32_t lo =
        c ^ (static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
             (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24));
    c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^ t[3][p[4]] ^
        t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n-- != 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFFu];
  return c;
}

inline std::uint32_t advance(std::uint32_t c, std::span<const std::uint8_t> s) {
  return s.empty() ? c : advance(c, s.data(), s.size());
}

constexpr std::size_t kBthResv8Offset = 4;  ///< BTH byte masked to 0xFF for the ICRC

}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::uint8_t> data) {
  return ~advance(~crc, data);
}

std::uint32_t icrc_with_prefix(std::span<const std::uint8_t> masked_ip_udp,
                               std::span<const std::uint8_t> headers, std::span<const std::uint8_t> payload,
                               std::uint8_t pad_cnt) {
  static constexpr std::uint8_t kOnes[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  static constexpr std::uint8_t kZeros[8] = {};
  std::uint32_t c = advance(0xFFFFFFFFu, kOnes, sizeof kOnes);  // masked LRH placeholder
  c = advance(c, masked_ip_udp);
  if (headers.size() > kBthResv8Offset) {
    c = advance(c, headers.first(kBthResv8Offset));
    c = advance(c, kOnes, 1);  // BTH resv8 is variant: counted as 0xFF
    c = advance(c, headers.subspan(kBthResv8Offset + 1));
  } else {
    c = advance(c, headers);
  }
  c = advance(c, payload);
  for (std::size_t left = pad_cnt; left != 0;) {
    const std::size_t n = left < sizeof kZeros ? left : sizeof kZeros;
    c = advance(c, kZeros, n);
    left -= n;
  }
  return ~c;
}

std::uint32_t icrc(std::span<const std::uint8_t> headers, std::span<const std::uint8_t> payload,
                   std::uint8_t pad_cnt) {
  return icrc_with_prefix({}, headers, payload, pad_cnt);
}

}  // namespace mrc::wire
