#include "sim/mpi_ranks.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

namespace mrc::sim {

namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}

class MpiRanks final : public Ranks {
 public:
  MpiRanks(int* argc, char*** argv) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      throw std::runtime_error("MPI: the library does not support MPI_THREAD_FUNNELED");
    }
    int r = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    rank_ = static_cast<std::uint32_t>(r);
    size_ = static_cast<std::uint32_t>(n);
  }
  ~MpiRanks() override { MPI_Finalize(); }
  MpiRanks(const MpiRanks&) = delete;
  MpiRanks& operator=(const MpiRanks&) = delete;

  std::uint32_t rank() const override { return rank_; }
  std::uint32_t size() const override { return size_; }
  void sum(std::span<std::uint64_t> v) override { reduce(v, MPI_SUM); }
  void min(std::span<std::uint64_t> v) override { reduce(v, MPI_MIN); }
  void max(std::span<std::uint64_t> v) override { reduce(v, MPI_MAX); }

  // One MPI_Alltoall of fixed blocks (bytes for that rank, bytes this rank sends in all, `mine`),
  // then, unless no rank sends anything, one MPI_Alltoallv of the bytes, straight from and into
  // the callers' buffers.
  void exchange(std::span<const std::uint8_t> send, std::span<const std::uint64_t> send_counts,
                std::vector<std::uint8_t>& recv, std::vector<std::uint64_t>& recv_counts,
                std::span<const std::uint64_t> mine, std::vector<std::uint64_t>& every) override {
    if (send_counts.size() != size_) throw std::invalid_argument("MPI: exchange needs a count per rank");
    const std::size_t k = mine.size(), block = 2 + k;
    std::vector<std::uint64_t> sblock(size_ * block, 0), rblock(size_ * block, 0);
    for (std::uint32_t r = 0; r < size_; ++r) {
      std::uint64_t* b = sblock.data() + r * block;
      b[0] = send_counts[r];
      b[1] = send.size();
      std::copy(mine.begin(), mine.end(), b + 2);
    }
    check(MPI_Alltoall(sblock.data(), to_int(block), MPI_UINT64_T, rblock.data(), to_int(block), MPI_UINT64_T,
                       MPI_COMM_WORLD),
          "MPI_Alltoall");
    every.resize(size_ * k);
    recv_counts.assign(size_, 0);
    std::uint64_t total = 0;
    for (std::uint32_t r = 0; r < size_; ++r) {
      const std::uint64_t* b = rblock.data() + r * block;
      recv_counts[r] = b[0];
      total += b[1];
      std::copy(b + 2, b + block, every.begin() + static_cast<std::ptrdiff_t>(r * k));
    }
    recv.clear();
    if (total == 0) return;  // every rank saw the same total: all skip the second step
    std::vector<int> scount(size_), rcount(size_), sdispl(size_), rdispl(size_);
    std::size_t out = 0, in = 0;
    for (std::uint32_t r = 0; r < size_; ++r) {
      sdispl[r] = to_int(out);
      scount[r] = to_int(send_counts[r]);
      out += send_counts[r];
      rdispl[r] = to_int(in);
      rcount[r] = to_int(recv_counts[r]);
      in += recv_counts[r];
    }
    if (out != send.size()) throw std::invalid_argument("MPI: exchange counts do not add up");
    recv.resize(in);
    check(MPI_Alltoallv(send.data(), scount.data(), sdispl.data(), MPI_BYTE, recv.data(), rcount.data(),
                        rdispl.data(), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Alltoallv");
  }

 private:
  static int to_int(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::runtime_error("MPI: more than 2 GB to exchange in one window");
    return static_cast<int>(n);
  }
  static void reduce(std::span<std::uint64_t> v, MPI_Op op) {
    if (v.empty()) return;
    check(MPI_Allreduce(MPI_IN_PLACE, v.data(), to_int(v.size()), MPI_UINT64_T, op, MPI_COMM_WORLD),
          "MPI_Allreduce");
  }

  std::uint32_t rank_ = 0, size_ = 1;
};

}  // namespace

}  // namespace mrc::sim

extern "C" __attribute__((visibility("default"))) mrc::sim::Ranks* mrc_sim_mpi_init(char* error,
                                                                                    unsigned long error_len) {
  try {
    return new mrc::sim::MpiRanks(nullptr, nullptr);
  } catch (const std::exception& e) {
    if (error != nullptr && error_len > 0) std::snprintf(error, error_len, "%s", e.what());
    return nullptr;
  }
}
