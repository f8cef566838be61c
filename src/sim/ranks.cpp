#include "sim/ranks.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "sim/mpi_ranks.hpp"

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

std::unique_ptr<Ranks> load_mpi_ranks(const std::string& path, std::string& error) {
  // RTLD_GLOBAL: OpenMPI loads its own components later, and they resolve libmpi's symbols through
  // the global scope.
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (module == nullptr) {
    const char* why = ::dlerror();
    error = "cannot load " + path + ": " + (why != nullptr ? why : "unknown error");
    return nullptr;
  }
  using Init = Ranks* (*)(char*, unsigned long);
  const auto init = reinterpret_cast<Init>(::dlsym(module, kMpiInitSymbol));
  if (init == nullptr) {
    error = path + " is not mrc's MPI module (no " + kMpiInitSymbol + ")";
    return nullptr;
  }
  char why[256] = "";
  std::unique_ptr<Ranks> ranks(init(why, sizeof why));
  if (ranks == nullptr) error = why[0] != '\0' ? why : "MPI did not start";
  return ranks;
}

}  // namespace mrc::sim
