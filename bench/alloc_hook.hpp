// Counts global operator new calls made while armed, to check that measured regions never allocate.
#pragma once
#include <cstdint>

namespace mrc::bench {

/// Arms (true) or disarms (false) counting. Single-threaded use.
void alloc_count_arm(bool on);
/// operator new calls seen while armed since the program started.
std::uint64_t alloc_count();

}  // namespace mrc::bench
