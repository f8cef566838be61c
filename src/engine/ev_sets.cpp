#include "engine/ev_sets.hpp"

namespace mrc::engine {

std::vector<Ev> make_ev_set(std::uint32_t num_ports, std::uint32_t active_per_port,
                            std::uint32_t backup_per_port, std::uint32_t base) {
  std::vector<Ev> evs;
  const std::uint32_t per_port = active_per_port + backup_per_port;
  evs.reserve(static_cast<std::size_t>(num_ports) * per_port);
  for (std::uint32_t k = 0; k < per_port; ++k)
    for (std::uint32_t p = 0; p < num_ports; ++p)
      evs.push_back(Ev{base + p * per_port + k, static_cast<std::uint8_t>(p)});
  return evs;
}

}  // namespace mrc::engine
