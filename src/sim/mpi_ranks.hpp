// Ranks over MPI (sim/ranks.hpp): the module mrc_sim_mpi, built only when CMake found MPI, and
// loaded by load_mpi_ranks (sim/ranks.hpp) only when a launcher started the process (D71). This
// header does not include mpi.h.
#pragma once

#include "sim/ranks.hpp"

/// The module's one entry point (C linkage, found with dlsym): initialises MPI (MPI_THREAD_FUNNELED:
/// only the thread that called this makes MPI calls) and returns the ranks of MPI_COMM_WORLD, which
/// the caller owns; MPI is finalised when it is destroyed. On failure nullptr, with a message in
/// `error` (at most `error_len` bytes, NUL-terminated).
extern "C" mrc::sim::Ranks* mrc_sim_mpi_init(char* error, unsigned long error_len);

namespace mrc::sim {
/// Its name, for dlsym.
inline constexpr const char* kMpiInitSymbol = "mrc_sim_mpi_init";
}  // namespace mrc::sim
