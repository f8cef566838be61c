// Building EV sets for QPs when no controller profile supplies them (tests, demo, simulator).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/types.hpp"

namespace mrc::engine {

/// `active_per_port` active EVs on each of `num_ports` ports, listed port-interleaved, followed by
/// `backup_per_port` backups per port. Port p owns the contiguous values
/// [base + p*(A+B), base + (p+1)*(A+B)), so any "value mod N" path mapping covers every path.
std::vector<Ev> make_ev_set(std::uint32_t num_ports, std::uint32_t active_per_port,
                            std::uint32_t backup_per_port, std::uint32_t base = 0);

}  // namespace mrc::engine
