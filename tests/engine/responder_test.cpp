// Responder (the receive side of a QP) on its own: packets built by hand, what it places, what it
// asks the QP to send, the SACK fields it fills, the WRITE_IMM completions it makes.
#include "engine/responder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include "common/rng.hpp"

namespace mrc::engine {
namespace {

constexpr std::uint32_t kPmtu = 1024;
constexpr std::uint32_t kRqPsn = 0xFFFFF0;  // the 24-bit PSN wraps inside every test

struct Rig {
  Endpoint ep{EndpointConfig{}};
  QpConfig cfg;
  QpCounters ctr;
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(1 << 20, 0);
  const MemoryRegion* mr = nullptr;
  std::vector<std::uint8_t> src = std::vector<std::uint8_t>(1 << 20);
  std::unique_ptr<Responder> rx;

  explicit Rig(std::uint8_t mpr_dest = 8, std::uint16_t max_wimm_dest = 128) {
    cfg.pmtu = kPmtu;
    cfg.mpr_dest = mpr_dest;
    cfg.max_wimm_dest = max_wimm_dest;
    mr = ep.memory().register_region(mem.data(), mem.size(), access::kAll);
    std::iota(src.begin(), src.end(), 0);
    rx = std::make_unique<Responder>(ep, 1, cfg, ctr);
    rx->start(kRqPsn);
  }
  /// Packet i (PSN kRqPsn + i) of one message of `n` packets, carrying src[i * pmtu ...].
  wire::Packet data(std::uint32_t i, std::uint32_t n, bool ack_req = false) const {
    wire::Packet p;
    using wire::Opcode;
    p.bth.opcode = n == 1       ? Opcode::kWriteOnly
                   : i == 0     ? Opcode::kWriteFirst
                   : i == n - 1 ? Opcode::kWriteLast
                                : Opcode::kWriteMiddle;
    p.bth.psn = psn_add(kRqPsn, static_cast<std::int32_t>(i));
    p.bth.ack_req = ack_req;
    p.reth.va = reinterpret_cast<std::uintptr_t>(mem.data()) + i * kPmtu;
    p.reth.rkey = mr->rkey;
    p.reth.dma_len = n * kPmtu;
    p.payload = std::span<const std::uint8_t>(src.data() + i * kPmtu, kPmtu);
    return p;
  }
  bool placed(std::uint32_t i) const {
    return std::equal(mem.begin() + i * kPmtu, mem.begin() + (i + 1) * kPmtu, src.begin() + i * kPmtu);
  }
  /// Whether the SACK the responder would send now reports `i` as received (cumulatively or in
  /// its bitmap), and whether it asks for a continuation.
  bool reports(const wire::Seth& s, std::uint32_t i) const {
    const std::uint32_t psn = psn_add(kRqPsn, static_cast<std::int32_t>(i));
    if (!psn_lt(s.cack_psn, psn)) return true;
    const std::uint32_t base = psn_add(s.cack_psn, s.sack_offset);
    const std::int32_t bit = psn_diff(psn, base);
    return bit >= 0 && bit < 64 && ((s.sack_bitmap >> bit) & 1u);
  }
};

/// A one-packet WRITE_WITH_IMM at PSN i with RQMSN rqmsn; its immediate is 1000 + rqmsn.
wire::Packet imm_of(const Rig& rig, std::uint32_t i, std::uint16_t rqmsn) {
  wire::Packet p = rig.data(i, 1, true);
  p.bth.opcode = wire::Opcode::kWriteOnlyImm;
  p.meth.rqmsn = rqmsn;
  p.imm = 1000 + rqmsn;
  return p;
}

TEST(Responder, PlacesPacketsInAnyOrderAndAdvancesTheExpectedPsn) {
  Rig r;
  constexpr std::uint32_t n = 40;
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng(7);
  for (std::uint32_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.next() % (i + 1)]);
  std::set<std::uint32_t> got;
  for (std::uint32_t i : order) {
    RxMeta m;
    const Responder::Answer a = r.rx->on_data(r.data(i, n, i == n - 1), m);
    got.insert(i);
    std::uint32_t contiguous = 0;
    while (got.count(contiguous)) ++contiguous;
    EXPECT_EQ(r.rx->epsn(), psn_add(kRqPsn, static_cast<std::int32_t>(contiguous)));
    EXPECT_NE(a.reply, Responder::Reply::kNack);
  }
  for (std::uint32_t i = 0; i < n; ++i) EXPECT_TRUE(r.placed(i)) << i;
  EXPECT_EQ(r.ctr.rx_data, n);
  EXPECT_EQ(r.ctr.bytes_placed, std::uint64_t{n} * kPmtu);
}

TEST(Responder, WithoutPayloadBytesAPacketIsCheckedAndCountedButNotPlaced) {
  // A simulator's fabric carries no payload (RxMeta::no_payload): the memory stays untouched, the
  // PSN is received and the bytes count; bounds are still checked.
  Rig r;
  RxMeta m;
  m.no_payload = true;
  EXPECT_EQ(r.rx->on_data(r.data(0, 2), m).reply, Responder::Reply::kNone);
  EXPECT_FALSE(r.placed(0));
  EXPECT_TRUE(std::all_of(r.mem.begin(), r.mem.begin() + kPmtu, [](std::uint8_t b) { return b == 0; }));
  EXPECT_EQ(r.rx->epsn(), psn_add(kRqPsn, 1));
  EXPECT_EQ(r.ctr.bytes_placed, std::uint64_t{kPmtu});
  wire::Packet out = r.data(1, 2);
  out.reth.va = reinterpret_cast<std::uintptr_t>(r.mem.data()) + r.mem.size();  // past the region
  EXPECT_EQ(r.rx->on_data(out, m).reply, Responder::Reply::kAccessNak);
}

TEST(Responder, AnAckRequestIsAnsweredAndSoIsTheFillOfTheHoleBelowIt) {
  Rig r;
  RxMeta m;
  // Packets 0..2 of 4 coalesce; the last (A bit) is answered; it arrived above a hole (packet 3
  // is lost, 2 arrives late): the fill of the hole is answered again, the cumulative ack the
  // requester waits for.
  EXPECT_EQ(r.rx->on_data(r.data(0, 4), m).reply, Responder::Reply::kNone);
  EXPECT_EQ(r.rx->on_data(r.data(1, 4), m).reply, Responder::Reply::kNone);
  EXPECT_EQ(r.rx->on_data(r.data(3, 4, true), m).reply, Responder::Reply::kSack);
  r.rx->sack_queued();
  EXPECT_EQ(r.rx->on_data(r.data(2, 4), m).reply, Responder::Reply::kSack);
  EXPECT_EQ(r.rx->epsn(), psn_add(kRqPsn, 4));
}

TEST(Responder, DuplicatesAreAnsweredWithoutTouchingMemory) {
  Rig r;
  RxMeta m;
  ASSERT_EQ(r.rx->on_data(r.data(0, 2), m).reply, Responder::Reply::kNone);
  std::fill(r.mem.begin(), r.mem.begin() + kPmtu, 0xEE);  // a duplicate must not write it again
  wire::Packet dup = r.data(0, 2);
  dup.bth.rtx = true;
  const Responder::Answer a = r.rx->on_data(dup, m);
  EXPECT_EQ(a.reply, Responder::Reply::kSack);
  EXPECT_TRUE(a.dup_echo);  // the requester learns its retransmission was spurious
  EXPECT_EQ(r.mem[0], 0xEE);
  EXPECT_EQ(r.ctr.rx_dup, 1u);
  EXPECT_EQ(r.ctr.rx_data, 1u);
}

TEST(Responder, RefusesWhatLiesBeyondTheWindowOrTheKey) {
  Rig r(1);  // a window of 128 PSNs
  RxMeta m;
  wire::Packet far = r.data(128, 200);
  Responder::Answer a = r.rx->on_data(far, m);
  EXPECT_EQ(a.reply, Responder::Reply::kNack);
  EXPECT_EQ(a.reason, wire::NackReason::kPsnOorWindow);

  wire::Packet bad_key = r.data(0, 1);
  bad_key.reth.rkey ^= 0x1234;
  EXPECT_EQ(r.rx->on_data(bad_key, m).reply, Responder::Reply::kAccessNak);
  wire::Packet outside = r.data(0, 1);
  outside.reth.va = reinterpret_cast<std::uintptr_t>(r.mem.data()) + r.mem.size() - 10;
  EXPECT_EQ(r.rx->on_data(outside, m).reply, Responder::Reply::kAccessNak);
  wire::Packet too_long = r.data(0, 1);
  too_long.reth.dma_len = kPmtu - 1;  // payload longer than the message it claims
  EXPECT_EQ(r.rx->on_data(too_long, m).reply, Responder::Reply::kAccessNak);
  EXPECT_EQ(r.rx->epsn(), kRqPsn);  // nothing placed, nothing recorded
  EXPECT_TRUE(std::all_of(r.mem.begin(), r.mem.end(), [](std::uint8_t b) { return b == 0; }));
  EXPECT_EQ(r.ctr.rx_refused, 4u);
}

TEST(Responder, ATrimmedHeaderAsksForItsPacketUnlessItIsHeld) {
  Rig r;
  RxMeta m;
  wire::Packet t = r.data(1, 2);
  t.trimmed = true;
  t.payload = {};
  Responder::Answer a = r.rx->on_data(t, m);
  EXPECT_EQ(a.reply, Responder::Reply::kNack);
  EXPECT_EQ(a.reason, wire::NackReason::kTrimmed);
  RxMeta last_hop;
  last_hop.trimmed_lasthop = true;
  EXPECT_EQ(r.rx->on_data(r.data(1, 2), last_hop).reason, wire::NackReason::kTrimmedLastHop);
  ASSERT_EQ(r.rx->on_data(r.data(1, 2), m).reply, Responder::Reply::kNone);
  EXPECT_EQ(r.rx->on_data(t, m).reply, Responder::Reply::kNone);  // held already
}

TEST(Responder, WriteImmediatesCompleteInOrderOnceEveryEarlierPsnLanded) {
  Rig r;
  RxMeta m;
  auto imm = [&](std::uint32_t i, std::uint16_t rqmsn) { return imm_of(r, i, rqmsn); };
  for (std::uint64_t w = 0; w < 3; ++w) ASSERT_EQ(r.rx->post_recv(w), 0);
  // PSN 2 (RQMSN 1) and PSN 1 (RQMSN 0) arrive before PSN 0, a plain WRITE: nothing completes
  // until PSN 0 lands, then both, in RQMSN order.
  ASSERT_EQ(r.rx->on_data(imm(2, 1), m).reply, Responder::Reply::kSack);
  ASSERT_EQ(r.rx->on_data(imm(1, 0), m).reply, Responder::Reply::kSack);
  Completion c;
  EXPECT_FALSE(r.ep.poll_completion(c));
  r.rx->on_data(r.data(0, 1), m);
  ASSERT_TRUE(r.ep.poll_completion(c));
  EXPECT_EQ(c.imm, 1000u);
  EXPECT_EQ(c.wr_id, 0u);
  ASSERT_TRUE(r.ep.poll_completion(c));
  EXPECT_EQ(c.imm, 1001u);
  EXPECT_EQ(c.wr_id, 1u);
  EXPECT_FALSE(r.ep.poll_completion(c));
  // An immediate that arrives with no receive WR waits for one.
  Rig q;
  ASSERT_EQ(q.rx->on_data(imm_of(q, 0, 0), m).reply, Responder::Reply::kSack);
  EXPECT_FALSE(q.ep.poll_completion(c));
  ASSERT_EQ(q.rx->post_recv(42), 0);
  ASSERT_TRUE(q.ep.poll_completion(c));
  EXPECT_EQ(c.wr_id, 42u);
}

TEST(Responder, MoreWriteImmediatesThanMaxWimmDestAreAProtocolViolation) {
  Rig r(8, 2);
  RxMeta m;
  auto imm = [&](std::uint32_t i, std::uint16_t rqmsn) { return imm_of(r, i, rqmsn); };
  EXPECT_EQ(r.rx->on_data(imm(1, 0), m).reply, Responder::Reply::kSack);
  EXPECT_EQ(r.rx->on_data(imm(2, 1), m).reply, Responder::Reply::kSack);
  const Responder::Answer a = r.rx->on_data(imm(3, 2), m);  // a third, none delivered yet
  EXPECT_EQ(a.reply, Responder::Reply::kNack);
  EXPECT_EQ(a.reason, wire::NackReason::kUnexpEvent);
  EXPECT_FALSE(r.placed(3));
}

TEST(Responder, WriteImmediateSlotsGrowWithTheImmediatesOutstanding) {
  // The slots start small at the first WRITE_IMM and grow, keeping their order from the next
  // immediate to deliver, while immediates arrive further ahead (up to max_wimm_dest).
  Rig r(8, 64);
  RxMeta m;
  auto imm = [&](std::uint32_t i, std::uint16_t rqmsn) { return imm_of(r, i, rqmsn); };
  for (std::uint64_t w = 0; w < 50; ++w) ASSERT_EQ(r.rx->post_recv(w), 0);
  const std::size_t before = r.rx->heap_bytes();
  for (std::uint16_t k = 0; k < 3; ++k) ASSERT_EQ(r.rx->on_data(imm(k, k), m).reply, Responder::Reply::kSack);
  // One immediate outstanding at a time: 8 slots (16 bytes each), not max_wimm_dest's 64.
  EXPECT_LE(r.rx->heap_bytes() - before, 8u * 16u);
  Completion c;
  for (std::uint64_t w = 0; w < 3; ++w) {
    ASSERT_TRUE(r.ep.poll_completion(c));
    EXPECT_EQ(c.wr_id, w);
  }
  // RQMSNs 3..42 at PSNs 4..43, newest first, behind a plain WRITE at PSN 3 that comes last.
  for (std::uint16_t k = 42; k >= 3; --k)
    ASSERT_EQ(r.rx->on_data(imm(k + 1u, k), m).reply, Responder::Reply::kSack) << k;
  EXPECT_FALSE(r.ep.poll_completion(c));
  EXPECT_GT(r.rx->heap_bytes() - before, 8u * 16u);
  // The slots hold at most max_wimm_dest: RQMSN 3 + 64 is refused.
  EXPECT_EQ(r.rx->on_data(imm(70, 3 + 64), m).reason, wire::NackReason::kUnexpEvent);
  r.rx->on_data(r.data(3, 1), m);
  for (std::uint64_t w = 3; w <= 42; ++w) {
    ASSERT_TRUE(r.ep.poll_completion(c)) << w;
    EXPECT_EQ(c.wr_id, w);
    EXPECT_EQ(c.imm, 1000u + w);
  }
  EXPECT_FALSE(r.ep.poll_completion(c));
}

TEST(Responder, EveryArrivalIsReportedBySomeSack) {
  // D3: the bitmap starts at the lowest arrival no SACK reported when the arrivals do not fit in
  // 64 PSNs from the expected one; the rest go in continuation SACKs. Whatever the order, the SACKs
  // built after each arrival report every arrival at least once.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rig r;
    constexpr std::uint32_t n = 600;  // a hole at 0 until the end, arrivals spread over 600 PSNs
    std::vector<std::uint32_t> order(n - 1);
    std::iota(order.begin(), order.end(), 1u);
    Rng rng(seed);
    for (std::uint32_t i = n - 2; i > 0; --i) std::swap(order[i], order[rng.next() % (i + 1)]);
    std::vector<bool> reported(n, false);
    RxMeta m;
    std::vector<std::uint32_t> since;  // arrivals since the last SACK
    for (std::uint32_t k = 0; k < order.size(); ++k) {
      r.rx->on_data(r.data(order[k], n), m);
      if (k % 16 != 15 && k + 1 != order.size()) continue;  // coalesce: a SACK every 16 arrivals
      bool more = true;
      for (int sacks = 0; more && sacks < 16; ++sacks) {  // 600 PSNs fit in 10 bitmaps
        wire::Seth s;
        more = r.rx->fill_sack(s);
        for (std::uint32_t i = 1; i < n; ++i)
          if (r.reports(s, i)) reported[i] = true;
      }
      EXPECT_FALSE(more) << "continuation SACKs without end";
    }
    for (std::uint32_t i = 1; i < n; ++i) EXPECT_TRUE(reported[i]) << "seed " << seed << " PSN offset " << i;
  }
}

TEST(Responder, FarAboveAHoleEachSackRepeatsTheRecentArrivals) {
  // D62: in-order arrivals far above a hole at PSN 0, a SACK every 4 of them. Each SACK's bitmap
  // ends at the newest arrival, so an arrival is reported by the next 15 SACKs too and one lost
  // SACK hides nothing from the requester (reported once each, its 4 packets looked lost).
  Rig r;
  RxMeta m;
  constexpr std::uint32_t n = 400;
  std::vector<int> times(n, 0);
  for (std::uint32_t i = 1; i < n; ++i) {
    r.rx->on_data(r.data(i, n), m);
    if (i % 4 != 0) continue;
    wire::Seth s;
    EXPECT_FALSE(r.rx->fill_sack(s));
    EXPECT_EQ(s.cack_psn, psn_add(kRqPsn, -1));  // the hole holds the cumulative ACK
    EXPECT_TRUE(r.reports(s, i));
    for (std::uint32_t k = 1; k <= i; ++k) times[k] += r.reports(s, k);
  }
  // Far above the hole (from PSN 64 on) every arrival is in 16 SACKs; never fewer than one.
  for (std::uint32_t k = 64; k + 64 < n; ++k) EXPECT_EQ(times[k], 16) << "PSN offset " << k;
  for (std::uint32_t k = 1; k < 396; ++k) EXPECT_GE(times[k], 1) << "PSN offset " << k;
}

TEST(Responder, ALateArrivalBelowAnsweredMessageEndIsReportedAtOnce) {
  // Issue 12 2(b): a packet that lands after the SACK of its message's last packet, with a hole
  // more than 64 PSNs below it, is answered at once and its SACK's bitmap covers it.
  Rig r;
  RxMeta m;
  constexpr std::uint32_t n = 200;
  for (std::uint32_t i = 1; i < n; ++i)
    if (i != 150) r.rx->on_data(r.data(i, n, i == n - 1), m);  // 0 and 150 missing
  wire::Seth s0;
  for (int sacks = 0; sacks < 4 && r.rx->fill_sack(s0); ++sacks) {
  }
  r.rx->sack_queued();
  const Responder::Answer a = r.rx->on_data(r.data(150, n), m);
  EXPECT_EQ(a.reply, Responder::Reply::kSack);
  wire::Seth s;
  r.rx->fill_sack(s);
  EXPECT_TRUE(r.reports(s, 150));
}

TEST(Responder, TheAdvertisedWindowNarrowsWhatIsAccepted) {
  Rig r(4);  // mpr_dest: 512 PSNs
  EXPECT_EQ(r.rx->window(), 512u);
  EXPECT_EQ(r.rx->set_advertised_mpr(5), EINVAL);
  EXPECT_EQ(r.rx->set_advertised_mpr(0), EINVAL);
  ASSERT_EQ(r.rx->set_advertised_mpr(1), 0);
  EXPECT_EQ(r.rx->window(), 128u);
  RxMeta m;
  EXPECT_EQ(r.rx->on_data(r.data(200, 300), m).reply, Responder::Reply::kNack);
  wire::Seth s;
  r.rx->fill_sack(s);
  EXPECT_EQ(s.mpr, 1u);
}

}  // namespace
}  // namespace mrc::engine
