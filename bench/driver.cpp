// Deterministic driver for instruction counting under callgrind (bench/callgrind.sh).
//
//   mrc_bench_driver send|recv|deadline|memcpy|icrc N [icrc]
//
// Runs the same batches as the Google Benchmark programs (bench/rig.hpp): a warm-up, then N packets
// (a multiple of kBatch). `deadline` makes N calls of Endpoint::next_deadline() on the requester
// with a batch in flight; `memcpy` and `icrc` process N hot 4 KiB buffers (baselines). Only the measure_*
// functions below do the measured work, so `valgrind --tool=callgrind --collect-atstart=no
// --toggle-collect='*measure_send*'` counts exactly the requester send path; the difference between two
// values of N removes one-time effects.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "alloc_hook.hpp"
#include "rig.hpp"
#include "wire/packet.hpp"

namespace {

using mrc::bench::kBatch;
using mrc::bench::kPayload;
using mrc::bench::Rig;

constexpr int kWarmupBatches = 8;

__attribute__((noinline)) bool measure_send(Rig& rig) {
  bool sent = true;
  for (std::uint32_t i = 0; i < kBatch; ++i) sent = rig.send_one(i) && sent;
  return sent;
}

__attribute__((noinline)) void measure_recv(Rig& rig) {
  for (std::uint32_t i = 0; i < kBatch; ++i) rig.receive_one(i);
}

__attribute__((noinline)) mrc::Time measure_deadline(mrc::engine::Endpoint& ep) {
  mrc::Time earliest = mrc::kNever;
  for (std::uint32_t i = 0; i < kBatch; ++i) earliest = std::min(earliest, ep.next_deadline());
  return earliest;
}

/// kBatch copies laid out like the receive path's placement: wire buffer i (past the data header)
/// to the next 4 KiB of the region.
/// kBatch copies laid out like the receive path's placement: wire buffer i (past the data header)
/// to the next 4 KiB of the region. The length is hidden from the compiler so that, as in the
/// engine, the copy is a call to the C library's memcpy rather than inline code.
__attribute__((noinline)) void measure_memcpy(std::uint8_t* region, const std::uint8_t* payload0,
                                              std::uint64_t batch) {
  std::size_t len = kPayload;
  __asm__ volatile("" : "+r"(len));
  for (std::uint32_t i = 0; i < kBatch; ++i) {
    const std::size_t pkt = (batch * kBatch + i) % (mrc::bench::kRegion / kPayload);
    std::uint8_t* dst = region + pkt * kPayload;
    std::memcpy(dst, payload0 + i * mrc::bench::kSlot, len);
    __asm__ volatile("" : : "r"(dst) : "memory");  // keep every copy
  }
}

__attribute__((noinline)) std::uint32_t measure_icrc(std::span<const std::uint8_t> hdr,
                                                     std::span<const std::uint8_t> payload) {
  std::uint32_t acc = 0;
  for (std::uint32_t i = 0; i < kBatch; ++i) {
    acc ^= mrc::wire::icrc(hdr, payload, 0);
    __asm__ volatile("" : "+r"(acc));
  }
  return acc;
}

int usage() {
  std::fprintf(stderr,
               "usage: mrc_bench_driver send|recv|deadline|memcpy|icrc N [icrc]   (N a multiple of %u)\n",
               kBatch);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string_view mode = argv[1];
  const long n = std::strtol(argv[2], nullptr, 10);
  const bool icrc = argc > 3 && std::string_view(argv[3]) == "icrc";
  if (n <= 0 || n % kBatch != 0) return usage();
  const auto batches = static_cast<std::uint64_t>(n) / kBatch;

  if (mode == "memcpy" || mode == "icrc") {
    // Buffers shaped like the rig's: kBatch wire buffers and the registered region.
    std::vector<std::uint8_t> wire(kBatch * mrc::bench::kSlot, 0x5A), region(mrc::bench::kRegion, 0);
    const std::uint8_t* payload = wire.data() + mrc::bench::data_header_size();
    std::uint32_t acc = 0;
    for (std::uint64_t i = 0; i < batches; ++i) {
      if (mode == "memcpy")
        measure_memcpy(region.data(), payload, i);
      else
        acc ^= measure_icrc({wire.data(), mrc::bench::data_header_size()}, {payload, kPayload});
    }
    std::printf("%s: %ld x 4096 B (%u)\n", argv[1], n, acc);
    return 0;
  }
  if (mode != "send" && mode != "recv" && mode != "deadline") return usage();

  auto rig = std::make_unique<Rig>(icrc);
  for (int i = 0; i < kWarmupBatches; ++i) rig->cycle();
  if (mode == "deadline") {  // the deadline heap's storage is allocated at its first use: not measured
    rig->send_all();
    (void)rig->requester().next_deadline();
    rig->to_wire();
    rig->receive_all();
    rig->ack();
  }
  const std::uint64_t a0 = mrc::bench::alloc_count();
  for (std::uint64_t i = 0; i < batches && rig->ok(); ++i) {
    if (mode == "deadline") {
      rig->send_all();
      mrc::bench::alloc_count_arm(true);
      const mrc::Time t = measure_deadline(rig->requester());
      mrc::bench::alloc_count_arm(false);
      if (t == mrc::kNever) rig->fail("no deadline with packets in flight");
      rig->to_wire();
      rig->receive_all();
    } else if (mode == "send") {
      mrc::bench::alloc_count_arm(true);
      const bool sent = measure_send(*rig);
      mrc::bench::alloc_count_arm(false);
      if (!sent) rig->fail("requester stalled: poll_tx returned false inside a batch");
      rig->to_wire();
      rig->receive_all();
    } else {
      rig->send_all();
      rig->to_wire();
      mrc::bench::alloc_count_arm(true);
      measure_recv(*rig);
      mrc::bench::alloc_count_arm(false);
    }
    rig->ack();
  }
  const std::uint64_t allocs = mrc::bench::alloc_count() - a0;
  if (!rig->verify()) {
    std::fprintf(stderr, "mrc_bench_driver: %s\n", rig->error().c_str());
    return 1;
  }
  std::printf("%s: %ld %s measured (icrc %s), %llu allocations in measured code, %llu packets total\n",
              argv[1], n, mode == "deadline" ? "calls" : "packets", icrc ? "on" : "off",
              static_cast<unsigned long long>(allocs), static_cast<unsigned long long>(rig->sent_pkts()));
  return allocs == 0 ? 0 : 1;
}
