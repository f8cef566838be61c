// Registered memory regions: what a responder may write (rkey) and a requester may read (lkey).
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/rng.hpp"

namespace mrc::engine {

namespace access {
inline constexpr std::uint32_t kLocalWrite = 1u << 0;   ///< IBV_ACCESS_LOCAL_WRITE
inline constexpr std::uint32_t kRemoteWrite = 1u << 1;  ///< IBV_ACCESS_REMOTE_WRITE
inline constexpr std::uint32_t kAll = kLocalWrite | kRemoteWrite;
}  // namespace access

struct MemoryRegion {
  std::uint8_t* addr = nullptr;
  std::uint64_t length = 0;
  std::uint32_t access = 0;
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
  /// Does [va, va+len) lie inside the region? VAs are the region's host addresses (as in verbs).
  /// Inline: the responder asks for every packet it places.
  bool contains(std::uint64_t va, std::uint64_t len) const {
    const auto base = reinterpret_cast<std::uintptr_t>(addr);
    return va >= base && len <= length && va - base <= length - len;
  }
};

class MemoryTable {
 public:
  explicit MemoryTable(std::uint64_t seed) : rng_(seed) {}
  /// Registers [addr, addr+length) with random, unique, non-zero lkey/rkey. Returns nullptr if
  /// addr is null, length is 0 or access has unknown bits.
  /// The region stays at this address until it is deregistered.
  const MemoryRegion* register_region(void* addr, std::uint64_t length, std::uint32_t access);
  bool deregister(std::uint32_t lkey);
  /// Valid until the next register_region() or deregister(): read it at once.
  const MemoryRegion* find_rkey(std::uint32_t rkey) const {
    if (rkey == 0 || by_rkey_.empty()) return nullptr;
    const std::size_t mask = by_rkey_.size() - 1;
    for (std::size_t i = rkey_home(rkey);; i = (i + 1) & mask) {
      const MemoryRegion& r = by_rkey_[i];
      if (r.rkey == rkey) return &r;
      if (r.rkey == 0) return nullptr;  // the table is never full
    }
  }
  const MemoryRegion* find_lkey(std::uint32_t lkey) const;
  std::size_t size() const { return by_lkey_.size(); }

 private:
  std::size_t rkey_home(std::uint32_t rkey) const {
    return (rkey * 0x9E3779B1u) >> rkey_shift_;  // Fibonacci hashing: the top bits
  }
  void rkey_insert(const MemoryRegion& mr);
  void rkey_place(const MemoryRegion& mr);
  void rkey_erase(std::uint32_t rkey);

  Rng rng_;
  std::unordered_map<std::uint32_t, MemoryRegion> by_lkey_;  ///< the regions (stable addresses)
  /// Every packet a responder places looks its rkey up: an open-addressed table of copies of the
  /// regions, keyed by rkey (0: an empty slot; keys are never 0), linear probing, at most half
  /// full, backward-shift deletion. A lookup reads one or two lines where two node-based maps read four.
  std::vector<MemoryRegion> by_rkey_;
  unsigned rkey_shift_ = 32;  ///< 32 - log2(by_rkey_.size())
};

}  // namespace mrc::engine
