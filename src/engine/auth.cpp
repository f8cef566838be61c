// SipHash-2-4, written from the paper's description (section 2: initialisation, compression with
// c = 2 SipRounds per 8-byte word, finalisation with d = 4 SipRounds).
#include "engine/auth.hpp"

#include <bit>
#include <cstring>

namespace mrc::engine {
namespace {

std::uint64_t load_le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

MacKey MacKey::from_bytes(std::span<const std::uint8_t, 16> b) {
  return MacKey{load_le64(b.data()), load_le64(b.data() + 8)};
}

std::array<std::uint8_t, 16> MacKey::bytes() const {
  std::array<std::uint8_t, 16> out{};
  for (int i = 0; i < 8; ++i) {
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(k0 >> (8 * i));
    out[static_cast<std::size_t>(i) + 8] = static_cast<std::uint8_t>(k1 >> (8 * i));
  }
  return out;
}

// The four constants spell "somepseudorandomlygeneratedbytes".
SipHash24::SipHash24(const MacKey& k)
    : v0_(k.k0 ^ 0x736f6d6570736575ull),
      v1_(k.k1 ^ 0x646f72616e646f6dull),
      v2_(k.k0 ^ 0x6c7967656e657261ull),
      v3_(k.k1 ^ 0x7465646279746573ull) {}

void SipHash24::round() {
  v0_ += v1_;
  v1_ = std::rotl(v1_, 13);
  v1_ ^= v0_;
  v0_ = std::rotl(v0_, 32);
  v2_ += v3_;
  v3_ = std::rotl(v3_, 16);
  v3_ ^= v2_;
  v0_ += v3_;
  v3_ = std::rotl(v3_, 21);
  v3_ ^= v0_;
  v2_ += v1_;
  v1_ = std::rotl(v1_, 17);
  v1_ ^= v2_;
  v2_ = std::rotl(v2_, 32);
}

void SipHash24::compress(std::uint64_t m) {
  v3_ ^= m;
  round();
  round();
  v0_ ^= m;
}

void SipHash24::update(std::span<const std::uint8_t> data) {
  const std::uint8_t* p = data.data();
  std::size_t n = data.size();
  std::size_t have = len_ & 7;
  len_ += n;
  // Complete a word left unfinished by the previous piece.
  while (have != 0 && n != 0) {
    tail_ |= std::uint64_t{*p++} << (8 * have);
    --n;
    if (++have == 8) {
      compress(tail_);
      tail_ = 0;
      have = 0;
    }
  }
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t m;
    std::memcpy(&m, p, 8);
    if constexpr (std::endian::native == std::endian::big) m = load_le64(p);
    compress(m);
  }
  for (std::size_t i = 0; i < n; ++i) tail_ |= std::uint64_t{p[i]} << (8 * (have + i));
}

std::uint64_t SipHash24::finish() {
  // Last word: the remaining bytes and the message length mod 256 in the top byte.
  compress(tail_ | (static_cast<std::uint64_t>(len_ & 0xFF) << 56));
  v2_ ^= 0xFF;
  round();
  round();
  round();
  round();
  return v0_ ^ v1_ ^ v2_ ^ v3_;
}

std::uint64_t siphash24(const MacKey& k, std::span<const std::uint8_t> data) {
  SipHash24 h(k);
  h.update(data);
  return h.finish();
}

std::uint64_t packet_mac(const MacKey& k, std::span<const std::uint8_t> headers,
                         std::span<const std::uint8_t> payload, std::uint8_t pad) {
  static constexpr std::uint8_t kZeros[4] = {};
  SipHash24 h(k);
  h.update(headers);
  h.update(payload);
  h.update(std::span<const std::uint8_t>(kZeros, pad & 3u));
  return h.finish();
}

bool mac_valid(const MacKey& k, std::span<const std::uint8_t> pkt) {
  if (pkt.size() < kMacSize) return false;
  const std::size_t body = pkt.size() - kMacSize;
  const std::uint64_t want = siphash24(k, pkt.first(body));
  std::uint64_t diff = 0;
  for (std::size_t i = 0; i < kMacSize; ++i)
    diff |= (std::uint64_t{pkt[body + i]} << (8 * i)) ^ (want & (0xFFull << (8 * i)));
  return diff == 0;
}

}  // namespace mrc::engine
