// PsnBitmap: which PSNs of a responder's window have arrived (the receive side's acknowledgement
// tracker, as ngtcp2's acktr is QUIC's). Every PSN below the expected PSN (ePSN) has arrived; the
// window [ePSN, ePSN + window) is a bitmap ring indexed by PSN modulo its size (a power of two
// >= the window), so a bit is cleared as ePSN passes it and the ring needs no shifting.
// The caller keeps PSNs inside the window: the bit of a PSN at or past ePSN + size aliases an
// older one.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/psn.hpp"

namespace mrc::engine {

class PsnBitmap {
 public:
  /// Starts at `epsn` with nothing received above it, for a window of `window_psns` PSNs.
  void init(std::uint32_t window_psns, std::uint32_t epsn) {
    const std::uint32_t bits = std::bit_ceil(std::max<std::uint32_t>(window_psns, 64));
    words_.assign(bits / 64, 0);
    mask_ = bits - 1;
    epsn_ = epsn;
  }
  /// The expected PSN: the lowest one not yet received.
  std::uint32_t epsn() const { return epsn_; }
  /// Bits in the ring: the largest window it can hold.
  std::uint32_t size() const { return mask_ + 1; }

  /// Whether `psn` (in [epsn, epsn + size)) has arrived.
  bool test(std::uint32_t psn) const {
    const std::uint32_t b = psn & mask_;
    return (words_[b >> 6] >> (b & 63)) & 1u;
  }
  /// Records the arrival of `psn` (in [epsn, epsn + size)).
  void set(std::uint32_t psn) {
    const std::uint32_t b = psn & mask_;
    words_[b >> 6] |= 1ULL << (b & 63);
  }
  /// Moves ePSN past every received PSN at its head, clearing their bits; returns how many.
  std::uint32_t advance() {
    std::uint32_t n = 0;
    while (test(epsn_)) {
      const std::uint32_t b = epsn_ & mask_;
      words_[b >> 6] &= ~(1ULL << (b & 63));
      epsn_ = psn_add(epsn_, 1);
      ++n;
    }
    return n;
  }
  /// The 64 PSNs from `base` (>= ePSN): bit i set when base + i has arrived. Positions at or past
  /// ePSN + `window_psns` (<= size) read as not received: they alias older PSNs in the ring.
  std::uint64_t window(std::uint32_t base, std::uint32_t window_psns) const {
    const std::int32_t room = static_cast<std::int32_t>(window_psns) - psn_diff(base, epsn_);
    if (room <= 0) return 0;
    const std::uint32_t b = base & mask_;
    const std::uint32_t word = b >> 6, shift = b & 63;
    std::uint64_t v = words_[word] >> shift;
    if (shift != 0) v |= words_[(word + 1) & (mask_ >> 6)] << (64 - shift);
    if (room < 64) v &= (1ULL << room) - 1;
    return v;
  }
  std::size_t memory_bytes() const { return words_.capacity() * sizeof(std::uint64_t); }

 private:
  std::vector<std::uint64_t> words_;
  std::uint32_t mask_ = 0;
  std::uint32_t epsn_ = 0;
};

}  // namespace mrc::engine
