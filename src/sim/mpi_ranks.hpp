// Ranks over MPI (sim/ranks.hpp). Built only when CMake found MPI (MRC_HAVE_MPI); this header does
// not include mpi.h.
#pragma once
#include <memory>

#include "sim/ranks.hpp"

namespace mrc::sim {

/// Initialises MPI (MPI_THREAD_FUNNELED: only the thread that called this makes MPI calls) and
/// returns the ranks of MPI_COMM_WORLD; MPI is finalised when the object is destroyed.
std::unique_ptr<Ranks> mpi_init(int* argc, char*** argv);

}  // namespace mrc::sim
