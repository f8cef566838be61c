// Engine cost per 4 KiB data packet on one core, against memcpy/ICRC baselines measured in the same
// run (bench/README.md).
//
// Every benchmark here works in batches of kBatch items (packets, copies, calls) and times each
// batch with a steady clock (manual time). Two figures come out:
//   Time     mean over all batches (wall clock: includes preemptions on a loaded machine)
//   p50_ns   the median batch / kBatch: robust to the preemptions; the figure bench/README.md uses
// The engine benchmarks time only their half of the data path; the rest of each round trip (other
// endpoint, serialisation, SACK processing) runs untimed, so the CPU column is not per packet.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "alloc_hook.hpp"
#include "engine/auth.hpp"
#include "rig.hpp"
#include "wire/packet.hpp"

namespace {

using mrc::bench::kBatch;
using mrc::bench::kPayload;
using mrc::bench::Rig;
using Clock = std::chrono::steady_clock;

constexpr int kWarmupBatches = 8;  // two 1 MiB messages: RTT estimate and cwnd settle

/// Times batches of kBatch items, feeds manual time to the benchmark and counts allocations made
/// inside the timed regions.
class BatchTimer {
 public:
  explicit BatchTimer(benchmark::State& state) : state_(state) {
    ns_.reserve(static_cast<std::size_t>(state.max_iterations / kBatch) + 2);
  }
  void start() {
    a0_ = mrc::bench::alloc_count();
    mrc::bench::alloc_count_arm(true);
    t0_ = Clock::now();
  }
  void stop() {
    const Clock::duration d = Clock::now() - t0_;
    mrc::bench::alloc_count_arm(false);
    allocs_ += mrc::bench::alloc_count() - a0_;
    state_.SetIterationTime(std::chrono::duration<double>(d).count());
    ns_.push_back(std::chrono::duration<double, std::nano>(d).count());
  }
  /// Items, bytes (4 KiB per item) and the p50_ns / allocs counters.
  void report(bool bytes = true) {
    const auto items = static_cast<std::int64_t>(ns_.size() * kBatch);
    state_.SetItemsProcessed(items);
    if (bytes) state_.SetBytesProcessed(items * kPayload);
    if (ns_.empty()) return;
    std::nth_element(ns_.begin(), ns_.begin() + static_cast<std::ptrdiff_t>(ns_.size() / 2), ns_.end());
    state_.counters["p50_ns"] = ns_[ns_.size() / 2] / kBatch;
    state_.counters["allocs"] = static_cast<double>(allocs_) / static_cast<double>(items);
  }

 private:
  benchmark::State& state_;
  std::vector<double> ns_;
  Clock::time_point t0_;
  std::uint64_t a0_ = 0, allocs_ = 0;
};

// Requester: Endpoint::poll_tx producing new 4 KiB data packets (EV choice, NSCC checks, TxRec
// bookkeeping, header encoding, ICRC over header + payload when enabled). The payload is not copied
// (TxPacket points into the registered region).
void BM_SendPath(benchmark::State& state) {
  auto rig = std::make_unique<Rig>(state.range(0) != 0);
  for (int i = 0; i < kWarmupBatches; ++i) rig->cycle();
  BatchTimer timer(state);
  while (state.KeepRunningBatch(kBatch)) {
    bool sent = true;
    timer.start();
    for (std::uint32_t i = 0; i < kBatch; ++i) sent = rig->send_one(i) && sent;
    timer.stop();
    if (!sent) rig->fail("requester stalled: poll_tx returned false inside a batch");
    rig->to_wire();
    rig->receive_all();
    rig->ack();
    if (!rig->ok()) break;
  }
  if (!rig->verify()) state.SkipWithError(rig->error().c_str());
  timer.report();
}
BENCHMARK(BM_SendPath)->ArgName("icrc")->Arg(0)->Arg(1)->UseManualTime();

// Responder: Endpoint::receive of a 4 KiB data packet (decode, ICRC check when enabled, QP and rkey
// lookup, bounds, bitmap, memcpy into the registered region) plus draining Endpoint::poll_tx, which
// builds the SACKs (one per 16 KiB or per A-bit packet).
void BM_ReceivePath(benchmark::State& state) {
  auto rig = std::make_unique<Rig>(state.range(0) != 0);
  for (int i = 0; i < kWarmupBatches; ++i) rig->cycle();
  const std::uint64_t sacks0 = rig->sacks_total(), pkts0 = rig->sent_pkts();
  BatchTimer timer(state);
  while (state.KeepRunningBatch(kBatch)) {
    rig->send_all();  // generate this batch with the real requester (untimed)
    rig->to_wire();
    timer.start();
    for (std::uint32_t i = 0; i < kBatch; ++i) rig->receive_one(i);
    timer.stop();
    rig->ack();
    if (!rig->ok()) break;
  }
  if (!rig->verify()) state.SkipWithError(rig->error().c_str());
  timer.report();
  const std::uint64_t pkts = rig->sent_pkts() - pkts0;
  state.counters["sacks/pkt"] =
      static_cast<double>(rig->sacks_total() - sacks0) / static_cast<double>(pkts ? pkts : 1);
}
BENCHMARK(BM_ReceivePath)->ArgName("icrc")->Arg(0)->Arg(1)->UseManualTime();

// Not per packet by itself, but drivers call Endpoint::next_deadline() once per service loop (the
// loop in endpoint.hpp; PathNet after every delivery): its cost with a batch in flight.
void BM_NextDeadline(benchmark::State& state) {
  auto rig = std::make_unique<Rig>(false);
  for (int i = 0; i < kWarmupBatches; ++i) rig->cycle();
  rig->send_all();
  mrc::engine::Endpoint& ep = rig->requester();
  BatchTimer timer(state);
  while (state.KeepRunningBatch(kBatch)) {
    timer.start();
    for (std::uint32_t i = 0; i < kBatch; ++i) {
      mrc::Time t = ep.next_deadline();
      benchmark::DoNotOptimize(t);
    }
    timer.stop();
  }
  rig->to_wire();
  rig->receive_all();
  rig->ack();
  if (!rig->verify()) state.SkipWithError(rig->error().c_str());
  timer.report(false);
}
BENCHMARK(BM_NextDeadline)->UseManualTime();

// Baseline: one 4 KiB memcpy, the irreducible placement cost, with the receive path's alignment
// (source = a wire buffer past the 32-byte data header stack). rx_footprint=0: the same hot (L1)
// buffers every time. rx_footprint=1: source cycles over the kBatch wire buffers and destination
// over the 1 MiB region, the memory the receive benchmark touches.
void BM_Memcpy4K(benchmark::State& state) {
  const bool wide = state.range(0) != 0;
  const std::size_t hdr = mrc::bench::data_header_size();
  std::vector<std::uint8_t> src(kBatch * mrc::bench::kSlot, 0x5A), dst(mrc::bench::kRegion, 0);
  const std::size_t src_span = wide ? src.size() : mrc::bench::kSlot;
  const std::size_t dst_span = wide ? dst.size() : kPayload;
  std::size_t s_off = 0, d_off = 0, len = kPayload;
  benchmark::DoNotOptimize(len);  // a runtime length: a libc memcpy call, as in the engine
  BatchTimer timer(state);
  while (state.KeepRunningBatch(kBatch)) {
    timer.start();
    for (std::uint32_t i = 0; i < kBatch; ++i) {
      std::memcpy(dst.data() + d_off, src.data() + s_off + hdr, len);
      benchmark::DoNotOptimize(dst.data());
      benchmark::ClobberMemory();
      s_off += mrc::bench::kSlot;
      if (s_off == src_span) s_off = 0;
      d_off += kPayload;
      if (d_off == dst_span) d_off = 0;
    }
    timer.stop();
  }
  timer.report();
}
BENCHMARK(BM_Memcpy4K)->ArgName("rx_footprint")->Arg(0)->Arg(1)->UseManualTime();

// Baseline: wire::icrc over a data packet's header stack and 4 KiB payload (hot buffers): what
// ICRC on adds to each side.
void BM_Icrc4K(benchmark::State& state) {
  std::vector<std::uint8_t> hdr(mrc::bench::data_header_size(), 0x11), payload(kPayload, 0x5A);
  BatchTimer timer(state);
  while (state.KeepRunningBatch(kBatch)) {
    timer.start();
    for (std::uint32_t i = 0; i < kBatch; ++i) {
      std::uint32_t crc = mrc::wire::icrc(hdr, payload, 0);
      benchmark::DoNotOptimize(crc);
    }
    timer.stop();
  }
  timer.report();
}
BENCHMARK(BM_Icrc4K)->UseManualTime();

// What RoCEv2's ICRC (wire-format W22) adds per packet in the UDP endpoint, on each side: building
// the masked IPv4 (mode 0) or IPv6 (mode 1) + UDP header and wire::icrc_prefix_xor, which moves the
// engine's ICRC onto it without touching the payload. Read as a ratio to BM_Icrc4K (same run).
void BM_IcrcPrefixXor(benchmark::State& state) {
  const bool v6 = state.range(0) != 0;
  std::uint8_t src[16] = {10, 0, 0, 1}, dst[16] = {10, 0, 0, 2};
  const std::size_t mrc_len = mrc::bench::data_header_size() + kPayload + mrc::wire::kIcrcSize;
  std::uint8_t pre[mrc::wire::kMaskedIpv6UdpSize];
  BatchTimer timer(state);
  while (state.KeepRunningBatch(kBatch)) {
    timer.start();
    for (std::uint32_t i = 0; i < kBatch; ++i) {
      const auto sport = static_cast<std::uint16_t>(49152 + (i & 0x3FFF));  // a spread EV per packet
      std::uint32_t x;
      if (v6) {
        mrc::wire::masked_ipv6_udp(pre, src, dst, sport, 4791, mrc_len);
        x = mrc::wire::icrc_prefix_xor(pre, mrc_len - mrc::wire::kIcrcSize);
      } else {
        mrc::wire::masked_ipv4_udp(pre, src, dst, sport, 4791, mrc_len);
        x = mrc::wire::icrc_prefix_xor({pre, mrc::wire::kMaskedIpv4UdpSize}, mrc_len - mrc::wire::kIcrcSize);
      }
      benchmark::DoNotOptimize(x);
    }
    timer.stop();
  }
  timer.report();
}
BENCHMARK(BM_IcrcPrefixXor)->ArgName("ipv6")->Arg(0)->Arg(1)->UseManualTime();

// CRC-32 of 4 KiB as crc32_update does it (carry-less multiply where the CPU has it; impl 0)
// against the portable table code (impl 1), measured in the same run: their ratio is the speed-up.
void BM_Crc32_4K(benchmark::State& state) {
  const auto crc32 = state.range(0) == 0 ? mrc::wire::crc32_update : mrc::wire::crc32_update_table;
  std::vector<std::uint8_t> payload(kPayload, 0x5A);
  BatchTimer timer(state);
  while (state.KeepRunningBatch(kBatch)) {
    timer.start();
    for (std::uint32_t i = 0; i < kBatch; ++i) {
      std::uint32_t crc = crc32(i, payload);
      benchmark::DoNotOptimize(crc);
    }
    timer.stop();
  }
  timer.report();
}
BENCHMARK(BM_Crc32_4K)->ArgName("table")->Arg(0)->Arg(1)->UseManualTime();

// Authenticated QPs (engine/auth.hpp): the SipHash-2-4 tag in place of the ICRC, over the same
// header stack and payload. mode 0 = sender (packet_mac over header | payload, as encode_tx),
// mode 1 = receiver (mac_valid over the contiguous datagram, as Endpoint::receive).
void BM_Mac4K(benchmark::State& state) {
  const bool verify = state.range(0) != 0;
  std::vector<std::uint8_t> hdr(mrc::bench::data_header_size(), 0x11), payload(kPayload, 0x5A);
  const mrc::engine::MacKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  std::vector<std::uint8_t> pkt(hdr);
  pkt.insert(pkt.end(), payload.begin(), payload.end());
  const std::uint64_t tag = mrc::engine::packet_mac(key, hdr, payload, 0);
  for (std::size_t i = 0; i < mrc::engine::kMacSize; ++i)
    pkt.push_back(static_cast<std::uint8_t>(tag >> (8 * i)));
  BatchTimer timer(state);
  bool all_valid = true;
  while (state.KeepRunningBatch(kBatch)) {
    timer.start();
    for (std::uint32_t i = 0; i < kBatch; ++i) {
      if (verify) {
        all_valid = mrc::engine::mac_valid(key, pkt) && all_valid;
      } else {
        std::uint64_t t = mrc::engine::packet_mac(key, hdr, payload, 0);
        benchmark::DoNotOptimize(t);
      }
    }
    timer.stop();
  }
  if (!all_valid) state.SkipWithError("a valid tag was refused");
  timer.report();
}
BENCHMARK(BM_Mac4K)->ArgName("verify")->Arg(0)->Arg(1)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
