#include "engine/memory.hpp"

#include <cstdint>

namespace mrc::engine {

const MemoryRegion* MemoryTable::register_region(void* addr, std::uint64_t length, std::uint32_t acc) {
  if (addr == nullptr || length == 0 || (acc & ~access::kAll) != 0) return nullptr;
  if (reinterpret_cast<std::uintptr_t>(addr) > UINTPTR_MAX - length) return nullptr;
  // Keys are random (an rkey is a capability: guessing one must be hard) and never 0.
  std::uint32_t lkey = 0, rkey = 0;
  do lkey = static_cast<std::uint32_t>(rng_.next());
  while (lkey == 0 || by_lkey_.count(lkey));
  do rkey = static_cast<std::uint32_t>(rng_.next());
  while (rkey == 0 || rkey_to_lkey_.count(rkey));
  MemoryRegion mr{static_cast<std::uint8_t*>(addr), length, acc, lkey, rkey};
  rkey_to_lkey_.emplace(rkey, lkey);
  return &by_lkey_.emplace(lkey, mr).first->second;
}

bool MemoryTable::deregister(std::uint32_t lkey) {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return false;
  rkey_to_lkey_.erase(it->second.rkey);
  by_lkey_.erase(it);
  return true;
}

const MemoryRegion* MemoryTable::find_rkey(std::uint32_t rkey) const {
  auto it = rkey_to_lkey_.find(rkey);
  return it == rkey_to_lkey_.end() ? nullptr : find_lkey(it->second);
}

const MemoryRegion* MemoryTable::find_lkey(std::uint32_t lkey) const {
  auto it = by_lkey_.find(lkey);
  return it == by_lkey_.end() ? nullptr : &it->second;
}

}  // namespace mrc::engine
