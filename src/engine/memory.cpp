#include "engine/memory.hpp"

#include <algorithm>
#include <bit>
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
  while (rkey == 0 || find_rkey(rkey) != nullptr);
  MemoryRegion mr{static_cast<std::uint8_t*>(addr), length, acc, lkey, rkey};
  rkey_insert(mr);
  return &by_lkey_.emplace(lkey, mr).first->second;
}

bool MemoryTable::deregister(std::uint32_t lkey) {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return false;
  rkey_erase(it->second.rkey);
  by_lkey_.erase(it);
  return true;
}

void MemoryTable::rkey_insert(const MemoryRegion& mr) {
  if (2 * (by_lkey_.size() + 1) > by_rkey_.size()) {  // keep it at most half full
    std::vector<MemoryRegion> old(std::max<std::size_t>(8, 2 * by_rkey_.size()));
    old.swap(by_rkey_);  // by_rkey_ is now the larger, empty table
    rkey_shift_ = 32 - static_cast<unsigned>(std::countr_zero(by_rkey_.size()));
    for (const MemoryRegion& r : old)
      if (r.rkey != 0) rkey_place(r);
  }
  rkey_place(mr);
}

void MemoryTable::rkey_place(const MemoryRegion& mr) {
  const std::size_t mask = by_rkey_.size() - 1;
  std::size_t i = rkey_home(mr.rkey);
  while (by_rkey_[i].rkey != 0) i = (i + 1) & mask;
  by_rkey_[i] = mr;
}

// Backward-shift deletion: the entries after the hole that could sit in it move back, so a lookup
// still meets its key before the first empty slot (no tombstones).
void MemoryTable::rkey_erase(std::uint32_t rkey) {
  const std::size_t mask = by_rkey_.size() - 1;
  std::size_t hole = rkey_home(rkey);
  while (by_rkey_[hole].rkey != rkey) {
    if (by_rkey_[hole].rkey == 0) return;  // not there (cannot happen: by_lkey_ had it)
    hole = (hole + 1) & mask;
  }
  for (std::size_t j = hole;;) {
    j = (j + 1) & mask;
    if (by_rkey_[j].rkey == 0) break;
    const std::size_t home = rkey_home(by_rkey_[j].rkey);
    // The entry at j may move to the hole unless its home lies cyclically in (hole, j].
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    by_rkey_[hole] = by_rkey_[j];
    hole = j;
  }
  by_rkey_[hole] = MemoryRegion{};
}

const MemoryRegion* MemoryTable::find_lkey(std::uint32_t lkey) const {
  auto it = by_lkey_.find(lkey);
  return it == by_lkey_.end() ? nullptr : &it->second;
}

}  // namespace mrc::engine
