// The processes of a distributed simulator run (issue 16 goal 4, D55): `mpirun -n R mrc sim FILE`.
// run_matrix talks to the other ranks only through this interface, so nothing in the simulator but
// sim/mpi_ranks.cpp includes mpi.h, and a build without MPI differs only in not having MpiRanks.
//
// Every call is collective: each rank calls it the same number of times in the same order, with
// spans of the same length (the runner's decisions between windows are taken from the reduced
// values, so they are the same on every rank).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mrc::sim {

class Ranks {
 public:
  virtual ~Ranks() = default;
  virtual std::uint32_t rank() const = 0;
  virtual std::uint32_t size() const = 0;
  /// Element-wise reductions over every rank, the result on every rank (in place).
  virtual void sum(std::span<std::uint64_t> v) = 0;
  virtual void min(std::span<std::uint64_t> v) = 0;
  virtual void max(std::span<std::uint64_t> v) = 0;
  /// All-to-all with a small all-gather folded in (one round of messages per window). `send` holds
  /// the bytes for rank 0, then for rank 1, ...: send_counts[r] of them for rank r (size() counts;
  /// ours is 0); `recv` gets what every rank sent us, in rank order, recv_counts[r] bytes from rank
  /// r. `mine` (the same length on every rank) reaches every rank: `every` holds rank r's at
  /// [r * mine.size(), (r + 1) * mine.size()).
  virtual void exchange(std::span<const std::uint8_t> send, std::span<const std::uint64_t> send_counts,
                        std::vector<std::uint8_t>& recv, std::vector<std::uint64_t>& recv_counts,
                        std::span<const std::uint64_t> mine, std::vector<std::uint64_t>& every) = 0;
};

/// The number of processes a launcher (OpenMPI's mpirun, or a PMI-based one) started this one
/// among, from its environment; 0 when it was not started by one.
std::uint32_t launcher_ranks();

/// Loads the MPI module (sim/mpi_ranks.hpp) at `path` and returns its ranks (MPI initialised). The
/// module is loaded only here, so a process that never calls this does not load MPI's libraries
/// (D71); it stays loaded. nullptr with a message in `error` if `path` is not the module or MPI
/// fails to start.
std::unique_ptr<Ranks> load_mpi_ranks(const std::string& path, std::string& error);

}  // namespace mrc::sim
