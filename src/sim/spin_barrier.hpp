// A barrier for the threads of a parallel simulation run (sim/run.cpp): a window of simulated time
// holds a few thousand events, so the barrier must cost about a microsecond, which a mutex and a
// condition variable do not. Waiters spin on a generation counter, then yield (the machine may
// have fewer free cores than threads).
#pragma once
#include <atomic>
#include <thread>

namespace mrc::sim {

class SpinBarrier {
 public:
  explicit SpinBarrier(unsigned threads) : n_(threads) {}

  /// Returns once all `threads` threads have called wait() (for this round). Everything a thread
  /// wrote before its wait() is visible to every thread after theirs.
  void wait() {
    if (n_ <= 1) return;
    const unsigned gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    for (unsigned spins = 0; gen_.load(std::memory_order_acquire) == gen; ++spins) {
      if (spins >= kSpins) std::this_thread::yield();
    }
  }

 private:
  static constexpr unsigned kSpins = 1u << 12;
  const unsigned n_;
  std::atomic<unsigned> count_{0};
  std::atomic<unsigned> gen_{0};
};

}  // namespace mrc::sim
