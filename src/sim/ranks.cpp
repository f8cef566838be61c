#include "sim/ranks.hpp"

#include <cstdlib>
#include <string>

namespace mrc::sim {

std::uint32_t launcher_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    if (*end == '\0' && n > 0 && n < (1ul << 31)) return static_cast<std::uint32_t>(n);
  }
  return 0;
}

}  // namespace mrc::sim
