#include "sim/mpi_ranks.hpp"

#include <mpi.h>

#include <algorithm>
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
  // then, unless no rank sends anything, one MPI_Alltoallv of the bytes.
  void exchange(const std::vector<std::vector<std::uint8_t>>& send,
                std::vector<std::vector<std::uint8_t>>& recv, std::span<const std::uint64_t> mine,
                std::vector<std::uint64_t>& every) override {
    if (send.size() != size_) throw std::invalid_argument("MPI: exchange needs one buffer per rank");
    const std::size_t k = mine.size(), block = 2 + k;
    std::vector<std::uint64_t> sblock(size_ * block, 0), rblock(size_ * block, 0);
    std::uint64_t sent = 0;
    for (std::uint32_t r = 0; r < size_; ++r)
      if (r != rank_) sent += send[r].size();
    for (std::uint32_t r = 0; r < size_; ++r) {
      std::uint64_t* b = sblock.data() + r * block;
      b[0] = r == rank_ ? 0 : send[r].size();
      b[1] = sent;
      std::copy(mine.begin(), mine.end(), b + 2);
    }
    check(MPI_Alltoall(sblock.data(), to_int(block), MPI_UINT64_T, rblock.data(), to_int(block), MPI_UINT64_T,
                       MPI_COMM_WORLD),
          "MPI_Alltoall");
    every.resize(size_ * k);
    std::uint64_t total = 0;
    for (std::uint32_t r = 0; r < size_; ++r) {
      const std::uint64_t* b = rblock.data() + r * block;
      total += b[1];
      std::copy(b + 2, b + block, every.begin() + static_cast<std::ptrdiff_t>(r * k));
    }
    recv.resize(size_);
    for (auto& v : recv) v.clear();
    if (total == 0) return;  // every rank saw the same total: all skip the second step
    std::vector<int> scount(size_, 0), rcount(size_, 0), sdispl(size_, 0), rdispl(size_, 0);
    std::vector<std::uint8_t> sbuf;
    sbuf.reserve(sent);
    for (std::uint32_t r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      sdispl[r] = to_int(sbuf.size());
      scount[r] = to_int(send[r].size());
      sbuf.insert(sbuf.end(), send[r].begin(), send[r].end());
    }
    std::size_t in = 0;
    for (std::uint32_t r = 0; r < size_; ++r) {
      rdispl[r] = to_int(in);
      rcount[r] = to_int(rblock[r * block]);
      in += static_cast<std::size_t>(rcount[r]);
    }
    std::vector<std::uint8_t> rbuf(in);
    check(MPI_Alltoallv(sbuf.data(), scount.data(), sdispl.data(), MPI_BYTE, rbuf.data(), rcount.data(),
                        rdispl.data(), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Alltoallv");
    for (std::uint32_t r = 0; r < size_; ++r)
      recv[r].assign(rbuf.begin() + rdispl[r], rbuf.begin() + rdispl[r] + rcount[r]);
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

std::unique_ptr<Ranks> mpi_init(int* argc, char*** argv) {
  return std::make_unique<MpiRanks>(argc, argv);
}

}  // namespace mrc::sim
