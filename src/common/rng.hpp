// Small deterministic PRNG (xoshiro256** seeded by splitmix64): no global state.
#pragma once
#include <cstdint>

namespace mrc {

/// splitmix64's finaliser: a bijective 64-bit mix, for hashing and deterministic patterns.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A uniform double in [0, 1) from a 64-bit draw (its top 53 bits).
constexpr double unit_interval(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
/// one 64-bit word of state. Rng's seeder, and a generator of its own for the many small
/// independent streams (one per fabric port) where Rng's 32 bytes each would not fit next to the
/// data they serve.
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed = 0) : s_(seed) {}
  std::uint64_t next() { return mix64(s_ += 0x9e3779b97f4a7c15ULL); }
  /// Uniform double in [0, 1).
  double uniform() { return unit_interval(next()); }
  bool chance(double p) { return p > 0.0 && uniform() < p; }

 private:
  std::uint64_t s_;
};

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 1) { reseed(seed); }

  void reseed(std::uint64_t seed) {
    SplitMix seeder(seed);
    for (auto& w : s_) w = seeder.next();
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, n); n > 0. Lemire's multiply-shift (bias < 2^-32 for our n).
  std::uint32_t below(std::uint32_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
  }

  /// Uniform double in [0, 1).
  double uniform() { return unit_interval(next()); }

  bool chance(double p) { return p > 0.0 && uniform() < p; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace mrc
