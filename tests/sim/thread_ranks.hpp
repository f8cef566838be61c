// In-process ranks for tests of distributed runs (sim/ranks.hpp): R threads, each with its own
// ThreadRanks over one shared Hub, stand in for R MPI processes. Collectives meet at a barrier, so
// every rank must make the same calls in the same order, as with MPI.
#pragma once
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "sim/ranks.hpp"

namespace mrc::sim::test {

class ThreadRanks final : public Ranks {
 public:
  struct Hub {
    explicit Hub(std::uint32_t n)
        : size(n), meet(n), vals(n), mail(n, std::vector<std::vector<std::uint8_t>>(n)) {}
    std::uint32_t size;
    std::barrier<> meet;
    std::vector<std::vector<std::uint64_t>> vals;
    std::vector<std::vector<std::vector<std::uint8_t>>> mail;  ///< [from][to]
  };

  ThreadRanks(Hub& hub, std::uint32_t rank) : hub_(hub), rank_(rank) {}
  std::uint32_t rank() const override { return rank_; }
  std::uint32_t size() const override { return hub_.size; }
  void sum(std::span<std::uint64_t> v) override {
    reduce(v, [](std::uint64_t a, std::uint64_t b) { return a + b; });
  }
  void min(std::span<std::uint64_t> v) override {
    reduce(v, [](std::uint64_t a, std::uint64_t b) { return std::min(a, b); });
  }
  void max(std::span<std::uint64_t> v) override {
    reduce(v, [](std::uint64_t a, std::uint64_t b) { return std::max(a, b); });
  }
  void exchange(std::span<const std::uint8_t> send, std::span<const std::uint64_t> send_counts,
                std::vector<std::uint8_t>& recv, std::vector<std::uint64_t>& recv_counts,
                std::span<const std::uint64_t> mine, std::vector<std::uint64_t>& every) override {
    std::size_t at = 0;
    for (std::uint32_t r = 0; r < hub_.size; ++r) {
      hub_.mail[rank_][r].assign(send.begin() + static_cast<std::ptrdiff_t>(at),
                                 send.begin() + static_cast<std::ptrdiff_t>(at + send_counts[r]));
      at += send_counts[r];
    }
    hub_.vals[rank_].assign(mine.begin(), mine.end());
    hub_.meet.arrive_and_wait();
    recv.clear();
    recv_counts.assign(hub_.size, 0);
    every.clear();
    for (std::uint32_t r = 0; r < hub_.size; ++r) {
      recv.insert(recv.end(), hub_.mail[r][rank_].begin(), hub_.mail[r][rank_].end());
      recv_counts[r] = hub_.mail[r][rank_].size();
      every.insert(every.end(), hub_.vals[r].begin(), hub_.vals[r].end());
    }
    hub_.meet.arrive_and_wait();
  }

 private:
  void reduce(std::span<std::uint64_t> v,
              const std::function<std::uint64_t(std::uint64_t, std::uint64_t)>& op) {
    hub_.vals[rank_].assign(v.begin(), v.end());
    hub_.meet.arrive_and_wait();
    std::vector<std::uint64_t> out = hub_.vals[0];
    for (std::uint32_t r = 1; r < hub_.size; ++r)
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = op(out[i], hub_.vals[r][i]);
    hub_.meet.arrive_and_wait();  // every rank has read every value before any is overwritten
    std::copy(out.begin(), out.end(), v.begin());
  }

  Hub& hub_;
  std::uint32_t rank_;
};

/// Runs fn(ranks) on `n` threads, one rank each; returns when all are done.
inline void run_ranks(std::uint32_t n, const std::function<void(Ranks&)>& fn) {
  ThreadRanks::Hub hub(n);
  std::vector<ThreadRanks> ranks;
  ranks.reserve(n);
  for (std::uint32_t r = 0; r < n; ++r) ranks.emplace_back(hub, r);
  std::vector<std::thread> threads;
  for (std::uint32_t r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(ranks[r]); });
  for (std::thread& t : threads) t.join();
}

}  // namespace mrc::sim::test
