// CRC-32 (IEEE 802.3 polynomial, reflected) and the RoCEv2-style invariant CRC of an MRC packet
// (docs/wire-format.md, "ICRC"). One function, three ways, chosen once at start-up: slicing-by-8
// tables built at compile time (any CPU, and short inputs), and carry-less-multiply folding on x86-64
// with PCLMULQDQ (128-bit, ~5x the tables on 4 KiB) or VPCLMULQDQ+AVX2 (256-bit, ~11x; bench:
// BM_Crc32_4K).
#include <array>
#include <cstring>

#include "wire/packet.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MRC_CRC32_CLMUL 1
#endif

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

/// Advances the raw (non-inverted) CRC register over `n` bytes with the tables.
std::uint32_t advance_table(std::uint32_t c, const std::uint8_t* p, std::size_t n) {
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

#ifdef MRC_CRC32_CLMUL
// Folding, derived from the algebra (notation: a polynomial over GF(2); bytes in message order, bit 0
// of a byte first, i.e. the highest power). A 16-byte little-endian load is the block's polynomial
// with bit i holding the coefficient of x^(127-i). With the register at 0, the CRC of a message M is
// (M * x^32) mod P, so any shorter polynomial congruent to M mod P has the same CRC: folding keeps
// a 128-bit accumulator A congruent to the bytes consumed so far and hands its 16 bytes to the
// table code at the end. To move A = H*x^64 + L forward by D bits past the next block B:
//   A*x^D + B == H * (x^(64+D) mod P) + L * (x^D mod P) + B   (mod P),
// two 64x32-bit carry-less products. PCLMULQDQ on bit-reflected operands yields the product times x
// (the 127-bit result lands one bit up), so the constants are x^(63+D) and x^(D-1) mod P instead.
// A nonzero starting register is the same as XORing it into the first 4 message bytes.

/// x^k mod P in the reflected register layout (bit i is the coefficient of x^(31-i)).
constexpr std::uint32_t xpow_mod(unsigned k) {
  std::uint32_t r = 0x80000000u;                                                       // x^0
  for (unsigned i = 0; i < k; ++i) r = (r & 1u) ? (r >> 1) ^ kPolyReflected : r >> 1;  // times x
  return r;
}
static_assert(xpow_mod(32) == kPolyReflected);

/// The two fold constants for distance D bits as 64-bit reflected operands (degree-31 polynomial in
/// the top half): low lane multiplies H, high lane multiplies L.
struct FoldConstants {
  std::uint64_t for_h, for_l;
};
constexpr FoldConstants fold_constants(unsigned d) {
  return {std::uint64_t{xpow_mod(63 + d)} << 32, std::uint64_t{xpow_mod(d - 1)} << 32};
}
constexpr FoldConstants kFold128 = fold_constants(128);    // next block
constexpr FoldConstants kFold512 = fold_constants(512);    // same lane, 4 blocks on
constexpr FoldConstants kFold1024 = fold_constants(1024);  // same 256-bit lane, 8 blocks on

#define MRC_CLMUL_TARGET __attribute__((target("pclmul,sse2")))
#define MRC_VCLMUL_TARGET __attribute__((target("vpclmulqdq,avx2,pclmul")))

MRC_CLMUL_TARGET inline __m128i fold_constant(FoldConstants k) {
  return _mm_set_epi64x(static_cast<long long>(k.for_l), static_cast<long long>(k.for_h));
}
MRC_CLMUL_TARGET inline __m128i load128(const std::uint8_t* q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
}
MRC_CLMUL_TARGET inline __m128i fold(__m128i a, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)),
                       next);
}

/// Folds the remaining whole blocks into `a`, then leaves the CRC of `a` and the last < 16 bytes
/// to the tables.
MRC_CLMUL_TARGET std::uint32_t finish_clmul(__m128i a, const std::uint8_t* p, std::size_t n) {
  const __m128i k128 = fold_constant(kFold128);
  for (; n >= 16; p += 16, n -= 16) a = fold(a, k128, load128(p));
  alignas(16) std::uint8_t rest[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(rest), a);
  return advance_table(advance_table(0, rest, sizeof rest), p, n);
}

constexpr std::size_t kClmulMin = 64;    ///< below this the tables are as fast
constexpr std::size_t kVclmulMin = 256;  ///< the 256-bit loop takes 128 bytes a round

MRC_CLMUL_TARGET std::uint32_t advance_clmul(std::uint32_t c, const std::uint8_t* p, std::size_t n) {
  const __m128i k512 = fold_constant(kFold512), k128 = fold_constant(kFold128);
  // Four independent lanes hide the multiply latency.
  __m128i a0 = _mm_xor_si128(load128(p), _mm_cvtsi32_si128(static_cast<int>(c)));
  __m128i a1 = load128(p + 16), a2 = load128(p + 32), a3 = load128(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    a0 = fold(a0, k512, load128(p));
    a1 = fold(a1, k512, load128(p + 16));
    a2 = fold(a2, k512, load128(p + 32));
    a3 = fold(a3, k512, load128(p + 48));
  }
  return finish_clmul(fold(fold(fold(a0, k128, a1), k128, a2), k128, a3), p, n);
}

// The same with VPCLMULQDQ: each 256-bit register holds two adjacent blocks and one instruction
// multiplies both, so four registers fold 128 bytes a round (CPUs with AVX2 and VPCLMULQDQ).
MRC_VCLMUL_TARGET inline __m256i fold256(__m256i a, __m256i k, __m256i next) {
  return _mm256_xor_si256(
      _mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00), _mm256_clmulepi64_epi128(a, k, 0x11)), next);
}

MRC_VCLMUL_TARGET inline __m256i load256(const std::uint8_t* q) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
}

MRC_VCLMUL_TARGET std::uint32_t advance_vclmul(std::uint32_t c, const std::uint8_t* p, std::size_t n) {
  const __m256i k1024 = _mm256_broadcastsi128_si256(fold_constant(kFold1024));
  __m256i a0 = _mm256_xor_si256(load256(p), _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(c))));
  __m256i a1 = load256(p + 32), a2 = load256(p + 64), a3 = load256(p + 96);
  p += 128;
  n -= 128;
  for (; n >= 128; p += 128, n -= 128) {
    a0 = fold256(a0, k1024, load256(p));
    a1 = fold256(a1, k1024, load256(p + 32));
    a2 = fold256(a2, k1024, load256(p + 64));
    a3 = fold256(a3, k1024, load256(p + 96));
  }
  // The eight 16-byte accumulators, in message order, fold into one.
  const __m128i k128 = fold_constant(kFold128);
  __m128i a = fold(_mm256_castsi256_si128(a0), k128, _mm256_extracti128_si256(a0, 1));
  for (const __m256i y : {a1, a2, a3})
    a = fold(fold(a, k128, _mm256_castsi256_si128(y)), k128, _mm256_extracti128_si256(y, 1));
  return finish_clmul(a, p, n);
}

enum class Crc32Kind { kTable, kClmul, kVclmul };
Crc32Kind detect_crc32_kind() {
  __builtin_cpu_init();  // may run before other constructors
  if (__builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx2")) return Crc32Kind::kVclmul;
  return __builtin_cpu_supports("pclmul") ? Crc32Kind::kClmul : Crc32Kind::kTable;
}
const Crc32Kind kCrc32Kind = detect_crc32_kind();
#endif

/// Advances the raw (non-inverted) CRC register over `n` bytes.
inline std::uint32_t advance(std::uint32_t c, const std::uint8_t* p, std::size_t n) {
#ifdef MRC_CRC32_CLMUL
  if (n >= kVclmulMin && kCrc32Kind == Crc32Kind::kVclmul) return advance_vclmul(c, p, n);
  if (n >= kClmulMin && kCrc32Kind != Crc32Kind::kTable) return advance_clmul(c, p, n);
#endif
  return advance_table(c, p, n);
}

inline std::uint32_t advance(std::uint32_t c, std::span<const std::uint8_t> s) {
  return s.empty() ? c : advance(c, s.data(), s.size());
}

constexpr std::size_t kBthResv8Offset = 4;  ///< BTH byte masked to 0xFF for the ICRC

}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::uint8_t> data) {
  return ~advance(~crc, data);
}

std::uint32_t crc32_update_table(std::uint32_t crc, std::span<const std::uint8_t> data) {
  return data.empty() ? crc : ~advance_table(~crc, data.data(), data.size());
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

// --- Moving an ICRC onto an IP/UDP prefix ------------------------------------------------------
// The register update is linear, so inserting a prefix changes the final register by (the prefix's
// own effect on the register) times x^(8 * bytes after it) mod P. Polynomials below are in the
// register layout: bit i is the coefficient of x^(31-i), so x^0 is 0x80000000.
namespace {

/// a * b mod P.
constexpr std::uint32_t gf_mul(std::uint32_t a, std::uint32_t b) {
  std::uint32_t p = 0;
  for (std::uint32_t m = 0x80000000u; m != 0; m >>= 1) {
    if (a & m) p ^= b;
    b = (b & 1u) ? (b >> 1) ^ kPolyReflected : b >> 1;  // b * x
  }
  return p;
}

constexpr std::uint32_t kX1 = 0x40000000u;  // x
// x^32 = p(x) with constant term 1, so x * (x^31 + (p(x) - 1) / x) = 1.
constexpr std::uint32_t kXInv = ((kPolyReflected & 0x7FFFFFFFu) << 1) | 1u;
static_assert(gf_mul(kX1, kXInv) == 0x80000000u);

constexpr std::uint32_t gf_pow(std::uint32_t base, std::uint64_t e) {
  std::uint32_t r = 0x80000000u;
  for (; e != 0; e >>= 1, base = gf_mul(base, base))
    if (e & 1u) r = gf_mul(r, base);
  return r;
}

/// x^(8n) (forward) and x^(-8n - 32) (inverse, for the IPv4 ID) for n < 2^16 as (hi byte, lo byte)
/// tables: one multiplication joins them. clmul_lo/hi: the forward ones times x^-33, for gf_mul_clmul.
struct ShiftTables {
  std::array<std::uint32_t, 256> fwd_lo, fwd_hi, inv_lo, inv_hi, clmul_lo, clmul_hi;
};
ShiftTables make_shift_tables() {
  ShiftTables t{};
  const std::uint32_t x8 = gf_pow(kX1, 8), x2048 = gf_pow(x8, 256);
  const std::uint32_t xi8 = gf_pow(kXInv, 8), xi2048 = gf_pow(xi8, 256);
  std::uint32_t f = 0x80000000u, F = 0x80000000u, i = gf_pow(kXInv, 32), I = 0x80000000u;
  const std::uint32_t xi33 = gf_pow(kXInv, 33);
  for (std::size_t k = 0; k < 256; ++k) {
    t.fwd_lo[k] = f;
    t.fwd_hi[k] = F;
    t.clmul_lo[k] = gf_mul(f, xi33);
    t.clmul_hi[k] = gf_mul(F, xi33);
    t.inv_lo[k] = i;
    t.inv_hi[k] = I;
    f = gf_mul(f, x8);
    F = gf_mul(F, x2048);
    i = gf_mul(i, xi8);
    I = gf_mul(I, xi2048);
  }
  return t;
}
const ShiftTables kShift = make_shift_tables();

#ifdef MRC_CRC32_CLMUL
/// a * b * x^33 mod P: one carry-less multiply (the 63-bit product of two register-layout values is
/// a*b*x as an 8-byte message, see the folding notes above) reduced by the tables (times x^32).
MRC_CLMUL_TARGET std::uint32_t gf_mul_x33(std::uint32_t a, std::uint32_t b) {
  const __m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)),
                                         _mm_cvtsi32_si128(static_cast<int>(b)), 0x00);
  alignas(8) std::uint8_t q[8];
  _mm_storel_epi64(reinterpret_cast<__m128i*>(q), p);
  return advance_table(0, q, sizeof q);
}
#endif

/// The register after the 8 x 0xFF placeholder, where the prefix starts.
const std::uint32_t kAfterLrh = [] {
  static constexpr std::uint8_t kOnes[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  return advance_table(0xFFFFFFFFu, kOnes, sizeof kOnes);
}();

inline void put16(std::uint8_t* p, std::size_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}

/// UDP header (checksum masked) of a datagram carrying mrc_len bytes.
inline void masked_udp(std::uint8_t* u, std::uint16_t sport, std::uint16_t dport, std::size_t mrc_len) {
  put16(u, sport);
  put16(u + 2, dport);
  put16(u + 4, 8 + mrc_len);
  u[6] = u[7] = 0xFF;
}

constexpr std::uint8_t kIpProtoUdp = 17;
constexpr std::size_t kIpv4IdTail = 20 - 6 + 8;  ///< prefix bytes after the IPv4 ID (flags .. UDP)

}  // namespace

void masked_ipv4_udp(std::uint8_t* out, const std::uint8_t src[4], const std::uint8_t dst[4],
                     std::uint16_t sport, std::uint16_t dport, std::size_t mrc_len, std::uint16_t ipv4_id) {
  out[0] = 0x45;  // version 4, 5 words
  out[1] = 0xFF;  // TOS
  put16(out + 2, kMaskedIpv4UdpSize + mrc_len);
  put16(out + 4, ipv4_id);
  out[6] = 0x40;  // DF, fragment offset 0
  out[7] = 0;
  out[8] = 0xFF;  // TTL
  out[9] = kIpProtoUdp;
  out[10] = out[11] = 0xFF;  // header checksum
  std::memcpy(out + 12, src, 4);
  std::memcpy(out + 16, dst, 4);
  masked_udp(out + 20, sport, dport, mrc_len);
}

void masked_ipv6_udp(std::uint8_t* out, const std::uint8_t src[16], const std::uint8_t dst[16],
                     std::uint16_t sport, std::uint16_t dport, std::size_t mrc_len) {
  out[0] = 0x6F;  // version 6; traffic class and flow label all-ones
  out[1] = out[2] = out[3] = 0xFF;
  put16(out + 4, 8 + mrc_len);
  out[6] = kIpProtoUdp;
  out[7] = 0xFF;  // hop limit
  std::memcpy(out + 8, src, 16);
  std::memcpy(out + 24, dst, 16);
  masked_udp(out + 40, sport, dport, mrc_len);
}

std::uint32_t icrc_prefix_xor(std::span<const std::uint8_t> masked_ip_udp, std::size_t rest_len) {
  const std::uint32_t d = advance_table(kAfterLrh, masked_ip_udp.data(), masked_ip_udp.size()) ^ kAfterLrh;
  const std::size_t hi = (rest_len >> 8) & 0xFFu, lo = rest_len & 0xFFu;
#ifdef MRC_CRC32_CLMUL
  // Both tables carry x^-33, so the two products' x^33 cancel: d * x^(8n).
  if (kCrc32Kind != Crc32Kind::kTable)
    return gf_mul_x33(d, gf_mul_x33(kShift.clmul_hi[hi], kShift.clmul_lo[lo]));
#endif
  return gf_mul(d, gf_mul(kShift.fwd_hi[hi], kShift.fwd_lo[lo]));
}

bool icrc_explained_by_ipv4_id(std::uint32_t diff, std::size_t rest_len) {
  // diff = V * x^32 * x^(8m) for the ID's 16-bit polynomial V (degree < 16, register bits 31-16),
  // m the bytes after the ID.
  const std::size_t m = kIpv4IdTail + rest_len;
  const std::uint32_t v = gf_mul(diff, gf_mul(kShift.inv_hi[(m >> 8) & 0xFFu], kShift.inv_lo[m & 0xFFu]));
  return (v & 0xFFFFu) == 0;
}

}  // namespace mrc::wire
