// Registered memory regions: what a responder may write (rkey) and a requester may read (lkey).
#pragma once
#include <cstdint>
#include <unordered_map>

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
  const MemoryRegion* register_region(void* addr, std::uint64_t length, std::uint32_t access);
  bool deregister(std::uint32_t lkey);
  const MemoryRegion* find_rkey(std::uint32_t rkey) const;
  const MemoryRegion* find_lkey(std::uint32_t lkey) const;
  std::size_t size() const { return by_lkey_.size(); }

 private:
  Rng rng_;
  std::unordered_map<std::uint32_t, MemoryRegion> by_lkey_;
  std::unordered_map<std::uint32_t, std::uint32_t> rkey_to_lkey_;
};

}  // namespace mrc::engine
