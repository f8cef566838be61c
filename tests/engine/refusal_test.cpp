// Bad input never touches memory and gets the right answer: crafted packets fed straight into the
// responder (wrong rkey, bounds, PSN window, WIMM limit, peer, P_Key, QPN, ICRC, garbage), end-to-end
// protection errors through the API, and invalid API calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <vector>

#include "harness.hpp"
#include "packet_util.hpp"

namespace mrc::test {
namespace {

using wire::NackReason;
using wire::Opcode;

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

std::uint64_t addr_of(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

/// A connected pair whose responder (b) we drive by hand: packets go in through receive() as if
/// sent by a, answers come out of b's poll_tx().
class Rig {
 public:
  explicit Rig(const PairOptions& o = PairOptions{}) : p(o), all((1u << o.planes) - 1) {}

  /// A data packet for b's QP from a, with ack_req set so an accepted packet is answered at once.
  wire::Packet data(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey,
                    std::span<const std::uint8_t> payload, Opcode op = Opcode::kWriteOnly) const {
    wire::Packet k;
    k.bth.opcode = op;
    k.bth.dest_qp = p.qpn_b();
    k.bth.psn = psn;
    k.bth.ack_req = true;
    k.reth.va = va;
    k.reth.rkey = rkey;
    k.reth.dma_len = static_cast<std::uint32_t>(payload.size());
    k.payload = payload;
    return k;
  }
  std::uint64_t dst_va(std::size_t off = 0) { return addr_of(p.dst().data() + off); }
  std::uint32_t rkey() const { return p.mr_b().rkey; }

  void feed(std::span<const std::uint8_t> bytes, std::uint32_t peer, std::uint8_t port = 1,
            std::uint32_t ev = 0x1234) {
    p.b().receive(bytes, rx_meta(peer, port, ev), p.net().now());
  }
  void feed(const wire::Packet& k, std::uint8_t port = 1, std::uint32_t ev = 0x1234) {
    const auto bytes = encode_packet(k);
    feed(bytes, p.node_a(), port, ev);
  }
  std::vector<Frame> answers() { return pull_all(p.b(), p.net().now(), all); }

  Pair p;
  std::uint32_t all;
};

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + 31 * i + (i >> 8));
  return v;
}

/// `answers` is exactly one Transport ACK carrying the remote-access-error NAK for `psn`, sent to a.
void expect_access_nak(Rig& r, const std::vector<Frame>& answers, std::uint32_t psn, std::uint8_t port) {
  ASSERT_EQ(answers.size(), 1u);
  const Frame& f = answers[0];
  wire::Packet k;
  ASSERT_EQ(f.decode(k), wire::Error::kOk);
  EXPECT_EQ(static_cast<int>(k.bth.opcode), 0xD1);
  EXPECT_EQ(k.aeth.syndrome, wire::aeth::kNakRemoteAccessError);
  EXPECT_EQ(k.bth.psn, psn);
  EXPECT_EQ(k.bth.dest_qp, r.p.qpn_a());
  EXPECT_EQ(k.bth.pkey, wire::kDefaultPkey);
  EXPECT_EQ(f.peer, r.p.node_a());
  EXPECT_EQ(f.port, port);  // feedback returns on the plane the data came in on
  EXPECT_EQ(f.tc, engine::TrafficClass::kControl);
}

void expect_nack(Rig& r, const std::vector<Frame>& answers, std::uint32_t psn, NackReason reason,
                 std::uint32_t ev) {
  ASSERT_EQ(answers.size(), 1u);
  wire::Packet k;
  ASSERT_EQ(answers[0].decode(k), wire::Error::kOk);
  EXPECT_EQ(k.bth.opcode, Opcode::kNack);
  EXPECT_EQ(k.neth.reason, reason) << static_cast<int>(k.neth.reason);
  EXPECT_EQ(k.neth.nack_psn, psn);
  EXPECT_EQ(k.neth.entropy, ev);
  EXPECT_EQ(k.bth.dest_qp, r.p.qpn_a());
  EXPECT_EQ(answers[0].peer, r.p.node_a());
}

/// An accepted packet with ack_req: one SACK acknowledging through `cack`.
void expect_sack(const std::vector<Frame>& answers, std::uint32_t cack) {
  ASSERT_EQ(answers.size(), 1u);
  wire::Packet k;
  ASSERT_EQ(answers[0].decode(k), wire::Error::kOk);
  EXPECT_EQ(k.bth.opcode, Opcode::kSack);
  EXPECT_EQ(k.seth.cack_psn, cack);
}

// --- crafted packets ------------------------------------------------------------------------------

TEST(Refusal, WrongRkeyIsNakedWithRemoteAccessErrorAndMemoryIsUntouched) {
  Rig r;
  const auto pay = pattern(512, 7);
  const std::vector<std::uint8_t> before = r.p.dst();
  const std::uint32_t psn = r.p.psn_ab();
  const std::uint32_t bad_keys[] = {r.rkey() ^ 1u, r.rkey() + 0x100u, 0u, ~r.rkey()};
  std::uint64_t refused = 0;
  for (const std::uint32_t key : bad_keys) {
    SCOPED_TRACE(key);
    r.feed(r.data(psn, r.dst_va(4096), key, pay), 2);
    expect_access_nak(r, r.answers(), psn, 2);
    EXPECT_EQ(r.p.dst(), before);
    EXPECT_EQ(r.p.qpb().counters().rx_refused, ++refused);
    EXPECT_EQ(r.p.qpb().counters().rx_data, 0u);
    EXPECT_EQ(r.p.qpb().counters().bytes_placed, 0u);
  }
  EXPECT_EQ(r.p.qpb().counters().tx_ack, 4u);
  // Control: the same packet with the right rkey lands and is SACKed.
  r.feed(r.data(psn, r.dst_va(4096), r.rkey(), pay), 2);
  expect_sack(r.answers(), psn);
  EXPECT_TRUE(std::equal(pay.begin(), pay.end(), r.p.dst().begin() + 4096));
}

TEST(Refusal, RkeyOfARegionWithoutRemoteWriteOrOfADeregisteredRegionIsNaked) {
  Rig r;
  std::vector<std::uint8_t> local(8192, 0x11), gone(8192, 0x22);
  const engine::MemoryRegion* lmr =
      r.p.b().memory().register_region(local.data(), local.size(), engine::access::kLocalWrite);
  const engine::MemoryRegion* gmr =
      r.p.b().memory().register_region(gone.data(), gone.size(), engine::access::kAll);
  ASSERT_NE(lmr, nullptr);
  ASSERT_NE(gmr, nullptr);
  const std::uint32_t gone_rkey = gmr->rkey;
  ASSERT_TRUE(r.p.b().memory().deregister(gmr->lkey));
  const auto pay = pattern(300, 3);
  const std::uint32_t psn = r.p.psn_ab();
  r.feed(r.data(psn, addr_of(local.data()), lmr->rkey, pay), 0);
  expect_access_nak(r, r.answers(), psn, 0);
  r.feed(r.data(psn, addr_of(gone.data()), gone_rkey, pay), 3);
  expect_access_nak(r, r.answers(), psn, 3);
  EXPECT_TRUE(std::all_of(local.begin(), local.end(), [](std::uint8_t b) { return b == 0x11; }));
  EXPECT_TRUE(std::all_of(gone.begin(), gone.end(), [](std::uint8_t b) { return b == 0x22; }));
}

TEST(Refusal, VaOutsideTheRegionIsNakedAndNoByteAroundItChanges) {
  Rig r;
  // A 2 KiB region in the middle of a 16 KiB buffer: the guard bytes around it catch any overrun.
  std::vector<std::uint8_t> buf(16384, 0x5A);
  constexpr std::size_t kOff = 4096, kLen = 2048;
  const engine::MemoryRegion* mr =
      r.p.b().memory().register_region(buf.data() + kOff, kLen, engine::access::kAll);
  ASSERT_NE(mr, nullptr);
  const std::uint64_t base = addr_of(buf.data() + kOff);
  const std::vector<std::uint8_t> before = buf;
  struct Case {
    const char* what;
    std::uint64_t va;
    std::uint32_t len;
  };
  const Case cases[] = {
      {"starts 1 byte before", base - 1, 64},
      {"ends 1 byte after", base + kLen - 63, 64},
      {"ends 8 bytes after", base + kLen - 8, 16},
      {"longer than the region", base, static_cast<std::uint32_t>(kLen + 4)},
      {"adjacent after", base + kLen, 16},
      {"fully before", base - 4096, 64},
      {"far away", base + (1ull << 40), 64},
      {"address 0", 0, 64},
      {"va + len wraps past 2^64", kU64Max - 7, 16},
      {"va = 2^64 - 1", kU64Max, 1},
      {"va - base wraps to inside", base - (1ull << 63), 64},
  };
  const std::uint32_t psn = r.p.psn_ab();
  std::uint64_t refused = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const auto pay = pattern(c.len, 9);
    r.feed(r.data(psn, c.va, mr->rkey, pay), 1);
    expect_access_nak(r, r.answers(), psn, 1);
    EXPECT_EQ(buf, before);
    EXPECT_EQ(r.p.qpb().counters().rx_refused, ++refused);
  }
  EXPECT_EQ(r.p.qpb().counters().bytes_placed, 0u);
  // Control: the last in-bounds bytes are accepted, and only they change.
  const auto pay = pattern(64, 1);
  r.feed(r.data(psn, base + kLen - 64, mr->rkey, pay), 1);
  expect_sack(r.answers(), psn);
  EXPECT_TRUE(std::equal(pay.begin(), pay.end(), buf.begin() + kOff + kLen - 64));
  EXPECT_TRUE(std::equal(before.begin(), before.begin() + kOff + kLen - 64, buf.begin()));
  EXPECT_TRUE(std::equal(before.begin() + kOff + kLen, before.end(), buf.begin() + kOff + kLen));
}

TEST(Refusal, PayloadLargerThanPmtuOrThanTheMessageIsNaked) {
  Rig r;
  const std::vector<std::uint8_t> before = r.p.dst();
  const std::uint32_t psn = r.p.psn_ab();
  const auto big = pattern(4096 + 4, 5);
  r.feed(r.data(psn, r.dst_va(), r.rkey(), big), 0);
  expect_access_nak(r, r.answers(), psn, 0);
  const auto pay = pattern(256, 5);
  wire::Packet k = r.data(psn, r.dst_va(), r.rkey(), pay);
  k.reth.dma_len = 128;  // the packet carries more than the whole message
  r.feed(k, 0);
  expect_access_nak(r, r.answers(), psn, 0);
  EXPECT_EQ(r.p.dst(), before);
}

TEST(Refusal, PsnBeyondTheResponderWindowIsNackedPsnOorWindow) {
  Rig r;
  const std::vector<std::uint8_t> before = r.p.dst();
  const std::uint32_t epsn = r.p.psn_ab();
  const std::uint32_t window = r.p.qpb().window_dest();
  ASSERT_EQ(window, 8u * 128u);
  const auto pay = pattern(1000, 4);
  const std::uint32_t offsets[] = {window, window + 1, 5000, (1u << 23) - 1};
  std::uint64_t nacks = 0;
  for (const std::uint32_t d : offsets) {
    SCOPED_TRACE(d);
    const std::uint32_t psn = psn_add(epsn, d);
    r.feed(r.data(psn, r.dst_va(), r.rkey(), pay), 2, 0xABCD0 + d);
    expect_nack(r, r.answers(), psn, NackReason::kPsnOorWindow, 0xABCD0 + d);
    EXPECT_EQ(r.p.dst(), before);
    EXPECT_EQ(r.p.qpb().counters().nack_sent_by_reason[0x0B], ++nacks);
  }
  // Control: the last PSN inside the window is placed.
  const std::uint32_t last = psn_add(epsn, window - 1);
  r.feed(r.data(last, r.dst_va(), r.rkey(), pay), 2);
  const auto a = r.answers();
  ASSERT_EQ(a.size(), 1u);
  wire::Packet k;
  ASSERT_EQ(a[0].decode(k), wire::Error::kOk);
  EXPECT_EQ(k.bth.opcode, Opcode::kSack);
  EXPECT_TRUE(std::equal(pay.begin(), pay.end(), r.p.dst().begin()));
}

TEST(Refusal, DynamicMprShrinksTheWindowTheResponderEnforces) {
  Rig r;
  EXPECT_EQ(r.p.qpb().set_advertised_mpr(0), EINVAL);
  EXPECT_EQ(r.p.qpb().set_advertised_mpr(9), EINVAL);  // above mpr_dest
  ASSERT_EQ(r.p.qpb().set_advertised_mpr(1), 0);
  const std::uint32_t epsn = r.p.psn_ab();
  const auto pay = pattern(100, 4);
  const std::uint32_t out = psn_add(epsn, 128);
  r.feed(r.data(out, r.dst_va(), r.rkey(), pay), 0);
  expect_nack(r, r.answers(), out, NackReason::kPsnOorWindow, 0x1234);
  EXPECT_NE(r.p.dst()[0], pay[0]);
  r.feed(r.data(psn_add(epsn, 127), r.dst_va(), r.rkey(), pay), 0);
  const auto a = r.answers();
  ASSERT_EQ(a.size(), 1u);
  wire::Packet k;
  ASSERT_EQ(a[0].decode(k), wire::Error::kOk);
  EXPECT_EQ(k.bth.opcode, Opcode::kSack);
  EXPECT_EQ(k.seth.mpr, 1);  // the advertisement travels in every SACK
}

TEST(Refusal, OldDuplicatePsnIsSackedWithoutTouchingMemory) {
  Rig r;
  const std::uint32_t epsn = r.p.psn_ab();
  const auto first = pattern(200, 1);
  r.feed(r.data(epsn, r.dst_va(), r.rkey(), first), 0);
  expect_sack(r.answers(), epsn);
  const std::vector<std::uint8_t> before = r.p.dst();
  const auto second = pattern(200, 99);
  r.feed(r.data(epsn, r.dst_va(), r.rkey(), second), 0);  // same PSN again, other bytes
  expect_sack(r.answers(), epsn);
  r.feed(r.data(psn_add(epsn, -500), r.dst_va(), r.rkey(), second), 0);  // long gone
  expect_sack(r.answers(), epsn);
  r.feed(r.data(psn_add(epsn, -(1 << 22)), r.dst_va(), r.rkey(), second), 0);  // absurdly old: dropped
  EXPECT_TRUE(r.answers().empty());
  EXPECT_EQ(r.p.dst(), before);
  EXPECT_EQ(r.p.qpb().counters().rx_dup, 3u);
}

TEST(Refusal, AProbeFloodDoesNotStarveTheQpsOwnWrites) {
  // Every reliability probe is answered, and the answers go before data; but a peer that probes
  // faster than they drain must not hold back this QP's own requests (a loaded software peer did:
  // 4096 queued answers, and a WRITE_IMM that never left).
  Rig r;
  constexpr std::uint32_t kProbes = 1000;
  for (std::uint32_t i = 0; i < kProbes; ++i) {
    wire::Packet k;
    k.bth.opcode = Opcode::kProbe;
    k.bth.dest_qp = r.p.qpn_b();
    k.bth.psn = r.p.psn_ab();
    k.bth.ack_req = true;
    k.peth.probe_id = static_cast<std::uint16_t>(i + 1);
    r.feed(k, static_cast<std::uint8_t>(i % 4), 0x100 + i);
  }
  engine::SendWr wr;
  wr.wr_id = 9;
  wr.with_imm = true;
  wr.imm = 0xC0FFEE;
  wr.local_addr = addr_of(r.p.dst().data());
  wr.length = 64;
  wr.lkey = r.p.mr_b().lkey;
  wr.remote_addr = addr_of(r.p.src().data());
  wr.rkey = r.p.mr_a().rkey;
  ASSERT_EQ(r.p.b().post_send(r.p.qpn_b(), wr, r.p.net().now()), 0);
  const std::vector<Frame> out = r.answers();
  std::size_t first_data = out.size(), answers = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    wire::Packet k;
    ASSERT_EQ(out[i].decode(k), wire::Error::kOk);
    if (k.bth.opcode == Opcode::kWriteOnlyImm && first_data == out.size()) first_data = i;
    answers += k.bth.opcode == Opcode::kSack && k.seth.pr;
  }
  EXPECT_LE(first_data, 16u);   // the write leaves after at most one run of answers ...
  EXPECT_EQ(answers, kProbes);  // ... and no answer is lost for it
}

TEST(Refusal, WriteImmBeyondMaxWimmDestIsNackedUnexpEvent) {
  PairOptions o;
  o.max_wimm_dest = 4;
  Rig r(o);
  const std::vector<std::uint8_t> before = r.p.dst();
  const std::uint32_t epsn = r.p.psn_ab();
  const auto pay = pattern(64, 8);
  const std::uint16_t bad_rqmsn[] = {4, 5, 200, 0xFFFF};
  std::uint64_t nacks = 0;
  for (const std::uint16_t rq : bad_rqmsn) {
    SCOPED_TRACE(rq);
    wire::Packet k = r.data(epsn, r.dst_va(), r.rkey(), pay, Opcode::kWriteOnlyImm);
    k.meth.rqmsn = rq;
    k.imm = 0xFEEDu;
    r.feed(k, 3, 77);
    expect_nack(r, r.answers(), epsn, NackReason::kUnexpEvent, 77);
    EXPECT_EQ(r.p.dst(), before);
    EXPECT_EQ(r.p.qpb().counters().nack_sent_by_reason[0x19], ++nacks);
  }
  // Control: RQMSN 3 (the last slot) is accepted and placed.
  wire::Packet k = r.data(epsn, r.dst_va(), r.rkey(), pay, Opcode::kWriteOnlyImm);
  k.meth.rqmsn = 3;
  r.feed(k, 3);
  expect_sack(r.answers(), epsn);
  EXPECT_TRUE(std::equal(pay.begin(), pay.end(), r.p.dst().begin()));
  // A second WRITE_IMM for the same, still undelivered RQMSN is a protocol violation too.
  const std::vector<std::uint8_t> after = r.p.dst();
  const auto pay2 = pattern(64, 200);
  wire::Packet k2 = r.data(psn_add(epsn, 1), r.dst_va(), r.rkey(), pay2, Opcode::kWriteOnlyImm);
  k2.meth.rqmsn = 3;
  r.feed(k2, 3, 78);
  expect_nack(r, r.answers(), psn_add(epsn, 1), NackReason::kUnexpEvent, 78);
  EXPECT_EQ(r.p.dst(), after);
}

TEST(Refusal, LegitimateWriteImmsAreNotRefusedAcrossTheRqmsnWrap) {
  // RQMSN is 16 bits. With max_wimm_dest = 100 (not a divisor of 65536), WRITE_IMMs 65500..65535
  // and 0 may be outstanding together (37 < 100): none of them may be refused as a WIMM violation.
  PairOptions o;
  o.max_wimm = o.max_wimm_dest = 100;
  Rig r(o);
  const std::uint32_t epsn = r.p.psn_ab();
  auto wimm = [&](std::uint32_t n, std::uint16_t rqmsn) {
    wire::Packet k = r.data(psn_add(epsn, n), r.dst_va(), r.rkey(), {}, Opcode::kWriteOnlyImm);
    k.bth.ack_req = false;
    k.meth.rqmsn = rqmsn;
    k.meth.msn = static_cast<std::uint16_t>(n);
    k.imm = n;
    r.feed(k, static_cast<std::uint8_t>(n % 4));
  };
  constexpr std::uint32_t kBefore = 65500;
  engine::Completion c;
  for (std::uint32_t n = 0; n < kBefore; ++n) {
    ASSERT_EQ(r.p.b().post_recv(r.p.qpn_b(), n), 0);
    wimm(n, static_cast<std::uint16_t>(n));
    ASSERT_TRUE(r.p.b().poll_completion(c)) << n;
    ASSERT_EQ(c.wr_id, n);
    ASSERT_EQ(c.imm, n);
  }
  ASSERT_TRUE(r.answers().empty());
  for (std::uint32_t n = kBefore; n < 65536 + 5; ++n) ASSERT_EQ(r.p.b().post_recv(r.p.qpn_b(), n), 0);
  // RQMSN 0 (message 65536) arrives early, then 65500..65535 and 65537.. in order.
  wimm(65536, 0);
  for (std::uint32_t n = kBefore; n < 65536; ++n) wimm(n, static_cast<std::uint16_t>(n));
  for (std::uint32_t n = 65537; n < 65536 + 5; ++n) wimm(n, static_cast<std::uint16_t>(n));
  for (const Frame& f : r.answers()) {
    wire::Packet k;
    ASSERT_EQ(f.decode(k), wire::Error::kOk);
    EXPECT_NE(k.bth.opcode, Opcode::kNack) << "NACK reason " << static_cast<int>(k.neth.reason)
                                           << " for PSN offset " << psn_diff(k.neth.nack_psn, epsn);
  }
  std::vector<std::uint64_t> ids;
  while (r.p.b().poll_completion(c)) ids.push_back(c.wr_id);
  ASSERT_EQ(ids.size(), 65536u + 5 - kBefore);
  for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], kBefore + i);
}

TEST(Refusal, PacketFromAWrongPeerIsDroppedSilently) {
  Rig r;
  const std::vector<std::uint8_t> before = r.p.dst();
  const auto pay = pattern(128, 2);
  const auto bytes = encode_packet(r.data(r.p.psn_ab(), r.dst_va(), r.rkey(), pay));
  const std::uint32_t peers[] = {r.p.node_b(), r.p.node_a() + 2, 0xFFFFFFFFu};
  std::uint64_t n = 0;
  for (const std::uint32_t peer : peers) {
    r.feed(bytes, peer);
    EXPECT_EQ(r.p.b().counters().rx_wrong_peer, ++n);
    EXPECT_TRUE(r.answers().empty());
    EXPECT_EQ(r.p.dst(), before);
  }
  EXPECT_EQ(r.p.qpb().counters().rx_data, 0u);
  r.feed(bytes, r.p.node_a());  // control
  expect_sack(r.answers(), r.p.psn_ab());
  EXPECT_EQ(r.p.b().counters().rx_wrong_peer, n);
}

TEST(Refusal, WrongPkeyIsDroppedSilently) {
  Rig r;
  const std::vector<std::uint8_t> before = r.p.dst();
  const auto pay = pattern(128, 2);
  const std::uint16_t keys[] = {0x0000, 0x1234, 0x8001, 0xFFFE};
  std::uint64_t n = 0;
  for (const std::uint16_t key : keys) {
    wire::Packet k = r.data(r.p.psn_ab(), r.dst_va(), r.rkey(), pay);
    k.bth.pkey = key;
    r.feed(k);
    EXPECT_EQ(r.p.b().counters().rx_bad_pkey, ++n) << key;
    EXPECT_TRUE(r.answers().empty());
  }
  EXPECT_EQ(r.p.dst(), before);
  EXPECT_EQ(r.p.qpb().counters().rx_data, 0u);
}

TEST(Refusal, UnknownOrUnconnectedQpnIsDroppedSilently) {
  Rig r;
  // A QP that exists but was never connected (RESET) must not accept anything either.
  engine::QpConfig c = make_qp_config(r.p.options(), r.p.net().base_rtt(), 5);
  const std::uint32_t idle = r.p.b().create_qp(c);
  ASSERT_NE(idle, 0u);
  const std::vector<std::uint8_t> before = r.p.dst();
  const auto pay = pattern(128, 2);
  const std::uint32_t qpns[] = {0, 1, r.p.qpn_b() + 100, 0xFFFFFF, idle};
  std::uint64_t n = 0;
  for (const std::uint32_t qpn : qpns) {
    wire::Packet k = r.data(r.p.psn_ab(), r.dst_va(), r.rkey(), pay);
    k.bth.dest_qp = qpn;
    r.feed(k);
    EXPECT_EQ(r.p.b().counters().rx_unknown_qp, ++n) << qpn;
    EXPECT_TRUE(r.answers().empty());
  }
  // QPN 2 is the endpoint: a data packet there is ignored.
  wire::Packet k = r.data(r.p.psn_ab(), r.dst_va(), r.rkey(), pay);
  k.bth.dest_qp = wire::kEpQpn;
  r.feed(k);
  EXPECT_TRUE(r.answers().empty());
  EXPECT_EQ(r.p.dst(), before);
  EXPECT_EQ(r.p.qpb().counters().rx_data, 0u);
}

TEST(Refusal, BadIcrcAndTruncatedPacketsAreCountedAsBadAndDropped) {
  Rig r;
  const std::vector<std::uint8_t> before = r.p.dst();
  const auto pay = pattern(777, 6);
  const auto good = encode_packet(r.data(r.p.psn_ab(), r.dst_va(), r.rkey(), pay));
  std::uint64_t bad = 0;
  // Any single byte changed, except BTH byte 4 (resv8, a variant field the ICRC does not cover).
  for (std::size_t i = 0; i < good.size(); ++i) {
    if (i == 4) continue;
    auto b = good;
    b[i] ^= static_cast<std::uint8_t>(1u << (i % 8));
    r.feed(b, r.p.node_a());
    ASSERT_EQ(r.p.b().counters().rx_bad_packet, ++bad) << "byte " << i;
  }
  // Every truncation, and a few extensions.
  for (std::size_t n = 0; n < good.size(); ++n) {
    r.feed(std::span<const std::uint8_t>(good.data(), n), r.p.node_a());
    ASSERT_EQ(r.p.b().counters().rx_bad_packet, ++bad) << "length " << n;
  }
  for (std::size_t extra : {1u, 3u, 4u, 8u}) {
    auto b = good;
    b.insert(b.end(), extra, 0);
    r.feed(b, r.p.node_a());
    ASSERT_EQ(r.p.b().counters().rx_bad_packet, ++bad) << "extra " << extra;
  }
  EXPECT_TRUE(r.answers().empty());
  EXPECT_EQ(r.p.dst(), before);
  EXPECT_EQ(r.p.qpb().counters().rx_data, 0u);
  // The untouched packet is fine; so is one whose resv8 byte differs.
  auto b = good;
  b[4] = 0xA5;
  r.feed(b, r.p.node_a());
  expect_sack(r.answers(), r.p.psn_ab());
  EXPECT_EQ(r.p.b().counters().rx_bad_packet, bad);
}

/// Checks one round of b's answers to fuzz input: well-formed control packets for a that
/// acknowledge nothing (nothing was ever placed).
void check_fuzz_answers(Rig& r, const std::vector<Frame>& answers) {
  const std::uint32_t cack = psn_add(r.p.psn_ab(), -1);
  for (const Frame& f : answers) {
    wire::Packet k;
    ASSERT_EQ(f.decode(k), wire::Error::kOk);
    ASSERT_EQ(f.tc, engine::TrafficClass::kControl);
    switch (k.bth.opcode) {
      case Opcode::kAck:
        ASSERT_EQ(k.aeth.syndrome, wire::aeth::kNakRemoteAccessError);
        ASSERT_EQ(f.peer, r.p.node_a());
        break;
      case Opcode::kNack:
        ASSERT_EQ(f.peer, r.p.node_a());
        break;
      case Opcode::kSack:
        ASSERT_EQ(k.seth.cack_psn, cack);
        ASSERT_EQ(k.seth.sack_bitmap, 0u);
        ASSERT_EQ(f.peer, r.p.node_a());
        break;
      case Opcode::kEndpointResponse:
        break;
      default:
        FAIL() << "unexpected answer opcode " << static_cast<int>(k.bth.opcode);
    }
  }
}

/// Does [va, va+len) lie inside [base, base+size)? (independent of the engine's own check)
bool inside(std::uint64_t va, std::uint64_t len, std::uint64_t base, std::uint64_t size) {
  return va >= base && va - base <= size && len <= size - (va - base);
}

TEST(Refusal, ThousandsOfRandomAndMutatedPacketsNeverTouchMemoryAndATransferStillWorks) {
  PairOptions o;
  o.buf_size = 64 << 10;
  Rig r(o);
  const std::vector<std::uint8_t> before = r.p.dst();
  const std::uint64_t base = r.dst_va();
  const std::uint64_t size = r.p.dst().size();
  const std::uint32_t epsn = r.p.psn_ab();
  const std::uint32_t window = r.p.qpb().window_dest();
  Rng rng(20260501);
  auto check_untouched = [&](const char* phase, int i) {
    ASSERT_EQ(r.p.qpb().counters().rx_data, 0u) << phase << " " << i;
    ASSERT_EQ(r.p.qpb().counters().bytes_placed, 0u) << phase << " " << i;
    ASSERT_TRUE(r.p.dst() == before) << phase << " " << i;
  };

  // 1. Random garbage, half of it dressed up with a plausible BTH so it gets past the first checks.
  std::uint64_t bad = r.p.b().counters().rx_bad_packet;
  for (int i = 0; i < 4000; ++i) {
    std::vector<std::uint8_t> b(rng.below(320));
    for (auto& x : b) x = static_cast<std::uint8_t>(rng.next());
    if (b.size() >= 12 && rng.chance(0.5)) {
      b[0] = static_cast<std::uint8_t>(0xC6 + rng.below(0xDF - 0xC6));
      b[1] &= 0xF0;  // TVer 0
      b[2] = b[3] = 0xFF;
      b[5] = 0;
      b[6] = 0;
      b[7] = static_cast<std::uint8_t>(r.p.qpn_b());
    }
    r.feed(b, r.p.node_a(), static_cast<std::uint8_t>(rng.below(4)), static_cast<std::uint32_t>(rng.next()));
    ASSERT_EQ(r.p.b().counters().rx_bad_packet, ++bad) << "garbage " << i;
    ASSERT_TRUE(r.answers().empty());
    if (i % 64 == 0) check_untouched("garbage", i);
    if (HasFatalFailure()) return;
  }
  check_untouched("garbage", 4000);
  if (HasFatalFailure()) return;

  // 2. Mutations of a valid packet (which would be placed as is): flipped bytes, cuts, appendages.
  const auto pay = pattern(1500, 77);
  const auto valid = encode_packet(r.data(epsn, base + 1000, r.rkey(), pay, Opcode::kWriteOnlyImm));
  for (int i = 0; i < 3000; ++i) {
    auto b = valid;
    const std::uint32_t kind = rng.below(4);
    if (kind <= 1) {
      const std::uint32_t flips = 1 + rng.below(4);
      std::vector<std::size_t> at;
      while (at.size() < flips) {
        const std::size_t pos = rng.below(static_cast<std::uint32_t>(b.size()));
        if (pos != 4 && std::find(at.begin(), at.end(), pos) == at.end()) at.push_back(pos);
      }
      for (const std::size_t pos : at) b[pos] ^= static_cast<std::uint8_t>(1 + rng.below(255));
    } else if (kind == 2) {
      b.resize(rng.below(static_cast<std::uint32_t>(b.size())));
    } else {
      const std::uint32_t extra = 1 + rng.below(64);
      for (std::uint32_t k = 0; k < extra; ++k) b.push_back(static_cast<std::uint8_t>(rng.next()));
    }
    r.feed(b, r.p.node_a(), static_cast<std::uint8_t>(rng.below(4)), static_cast<std::uint32_t>(rng.next()));
    ASSERT_EQ(r.p.b().counters().rx_bad_packet, ++bad) << "mutation " << i << " kind " << kind;
    ASSERT_TRUE(r.answers().empty());
    if (i % 64 == 0) check_untouched("mutation", i);
    if (HasFatalFailure()) return;
  }
  check_untouched("mutation", 3000);
  if (HasFatalFailure()) return;

  // 3. Well-formed packets (valid ICRC) with random fields and at least one flaw each.
  for (int i = 0; i < 4000; ++i) {
    const std::uint32_t flaw = rng.below(11);
    wire::Packet k;
    std::vector<std::uint8_t> payload;
    if (flaw == 10) {
      // Control packets from the peer: SACK/NACK/ACK/probe to b's QP, EV probe traffic to QPN 2.
      static constexpr Opcode kCtl[] = {Opcode::kAck,
                                        Opcode::kSack,
                                        Opcode::kNack,
                                        Opcode::kProbe,
                                        Opcode::kEndpointRequest,
                                        Opcode::kEndpointResponse};
      k.bth.opcode = kCtl[rng.below(6)];
      k.bth.dest_qp = k.bth.opcode == Opcode::kEndpointRequest || k.bth.opcode == Opcode::kEndpointResponse
                          ? wire::kEpQpn
                          : r.p.qpn_b();
      k.bth.psn = static_cast<std::uint32_t>(rng.next()) & kPsnMask;
      k.aeth.syndrome = static_cast<std::uint8_t>(rng.next());
      k.aeth.msn = static_cast<std::uint32_t>(rng.next()) & 0xFFFFFF;
      k.seth.m = static_cast<wire::SackMode>(rng.below(3));
      k.seth.pr = rng.chance(0.5);
      k.seth.ack_psn_offset = static_cast<std::int16_t>(rng.next());
      k.seth.entropy = static_cast<std::uint32_t>(rng.next());
      k.seth.probe_id = static_cast<std::uint16_t>(rng.next());
      k.seth.cack_psn = static_cast<std::uint32_t>(rng.next()) & kPsnMask;
      k.seth.mpr = static_cast<std::uint8_t>(rng.next());
      k.seth.sack_offset = static_cast<std::int16_t>(rng.next());
      k.seth.sack_bitmap = rng.next();
      k.seth.cc.rcv_cwnd_pen = static_cast<std::uint8_t>(rng.below(128));
      static constexpr NackReason kReasons[] = {NackReason::kTrimmed,    NackReason::kTrimmedLastHop,
                                                NackReason::kNoBitmap,   NackReason::kNoPktBuffer,
                                                NackReason::kNoResource, NackReason::kPsnOorWindow,
                                                NackReason::kUnexpEvent};
      k.neth.reason = kReasons[rng.below(7)];
      k.neth.nack_psn = static_cast<std::uint32_t>(rng.next()) & kPsnMask;
      k.peth.probe_id = static_cast<std::uint16_t>(rng.next());
      k.erth.op = wire::EpOp::kEvProbe;  // a port-status update would legitimately close planes
      k.erth.entropy = static_cast<std::uint32_t>(rng.next());
      k.eeth.entropy = static_cast<std::uint32_t>(rng.next());
    } else {
      // Data packet; fields that are not the flaw are random but plausible.
      const bool big = flaw == 7;
      std::uint32_t len = big ? 4097 + rng.below(64) : rng.below(2048);
      if (len == 0 && (flaw <= 1 || flaw >= 8)) len = 1;  // zero-length writes check no key or address
      payload.resize(len);
      for (auto& x : payload) x = static_cast<std::uint8_t>(rng.next());
      static constexpr Opcode kData[] = {Opcode::kWriteFirst,   Opcode::kWriteMiddle, Opcode::kWriteLast,
                                         Opcode::kWriteLastImm, Opcode::kWriteOnly,   Opcode::kWriteOnlyImm};
      k.bth.opcode = kData[rng.below(6)];
      k.bth.dest_qp = r.p.qpn_b();
      k.bth.se = rng.chance(0.5);
      k.bth.ack_req = rng.chance(0.5);
      k.bth.rtx = rng.chance(0.2);
      k.has_tseth = rng.chance(0.3);
      k.tseth.tx_timestamp = static_cast<std::uint16_t>(rng.next());
      k.bth.psn = psn_add(epsn, static_cast<std::int64_t>(rng.below(3 * window)) - 2 * window);
      k.meth.msn = static_cast<std::uint16_t>(rng.next());
      k.meth.rqmsn = static_cast<std::uint16_t>(rng.below(8));
      k.imm = static_cast<std::uint32_t>(rng.next());
      k.reth.rkey = r.rkey();
      k.reth.va = base + rng.below(static_cast<std::uint32_t>(size - std::min<std::uint64_t>(len, size)) + 1);
      k.reth.dma_len = len + rng.below(100000);
      k.payload = payload;
      switch (flaw) {
        case 0:  // wrong rkey
          do k.reth.rkey = static_cast<std::uint32_t>(rng.next());
          while (k.reth.rkey == r.rkey());
          break;
        case 1: {  // outside the region
          const std::uint64_t choices[] = {base - 1 - rng.below(5000), base + size - rng.below(len),
                                           rng.next(), kU64Max - rng.below(len)};
          k.reth.va = choices[rng.below(4)];
          if (inside(k.reth.va, len, base, size)) k.reth.va = base + size;
          break;
        }
        case 2:  // beyond the window (in place of the random PSN)
          k.bth.psn = psn_add(epsn, window + rng.below((1u << 23) - window));
          break;
        case 3:
          do k.bth.pkey = static_cast<std::uint16_t>(rng.next());
          while (k.bth.pkey == wire::kDefaultPkey);
          break;
        case 4:
          do k.bth.dest_qp = static_cast<std::uint32_t>(rng.next()) & 0xFFFFFF;
          while (k.bth.dest_qp == r.p.qpn_b());
          break;
        case 8:  // WRITE_IMM far beyond the WIMM limit (RQMSN 128.. while 0 is next)
          k.bth.opcode = rng.chance(0.5) ? Opcode::kWriteOnlyImm : Opcode::kWriteLastImm;
          k.meth.rqmsn = static_cast<std::uint16_t>(128 + rng.below(65536 - 128));
          break;
        case 9:  // payload longer than the message
          k.reth.dma_len = len - 1 - rng.below(len);
          break;
        default:  // 5: wrong peer, 6: corrupted or cut after encoding, 7: payload > PMTU
          break;
      }
    }
    auto bytes = encode_packet(k);
    if (flaw == 6) {
      if (rng.chance(0.5)) {
        std::size_t pos;
        do pos = rng.below(static_cast<std::uint32_t>(bytes.size()));
        while (pos == 4);
        bytes[pos] ^= static_cast<std::uint8_t>(1 + rng.below(255));
      } else {
        bytes.resize(rng.below(static_cast<std::uint32_t>(bytes.size())));
      }
    }
    std::uint32_t peer = r.p.node_a();
    if (flaw == 5) peer = r.p.node_a() + 1 + rng.below(1000);
    engine::RxMeta m =
        rx_meta(peer, static_cast<std::uint8_t>(rng.below(4)), static_cast<std::uint32_t>(rng.next()));
    m.ecn_ce = rng.chance(0.1);
    m.trimmed = rng.chance(0.05);
    r.p.b().receive(bytes, m, r.p.net().now());
    check_fuzz_answers(r, r.answers());
    if (::testing::Test::HasFatalFailure()) FAIL() << "structured " << i << " flaw " << flaw;
    if (i % 32 == 0) check_untouched("structured", i);
    if (HasFatalFailure()) return;
  }
  check_untouched("structured", 4000);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.p.qpb().state(), engine::QpState::kRts);
  // Every kind of flaw was exercised.
  const auto& qc = r.p.qpb().counters();
  const auto& ec = r.p.b().counters();
  EXPECT_GT(qc.tx_ack, 300u);  // access-error NAKs
  EXPECT_GT(qc.nack_sent_by_reason[static_cast<int>(NackReason::kPsnOorWindow)], 100u);
  EXPECT_GT(qc.nack_sent_by_reason[static_cast<int>(NackReason::kUnexpEvent)], 50u);
  EXPECT_GT(qc.rx_trimmed, 50u);
  EXPECT_GT(qc.rx_dup, 100u);
  EXPECT_GT(ec.rx_wrong_peer, 200u);
  EXPECT_GT(ec.rx_bad_pkey, 200u);
  EXPECT_GT(ec.rx_unknown_qp, 200u);

  // 4. The connection is unharmed: a real transfer completes byte-exact.
  ASSERT_EQ(r.p.write(1, 0, 64 << 10, 0), 0);
  ASSERT_TRUE(r.p.run_until_completions(1, 0, 10_ms));
  EXPECT_EQ(r.p.send_done()[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(r.p.same(0, 64 << 10, 0));
}

// --- end to end through the API ---------------------------------------------------------------------

engine::SendWr make_wr(Pair& p, std::uint64_t id, std::size_t off, std::uint32_t len, std::size_t roff) {
  engine::SendWr wr;
  wr.wr_id = id;
  wr.local_addr = addr_of(p.src().data() + off);
  wr.length = len;
  wr.lkey = 0;  // set by the caller
  wr.remote_addr = addr_of(p.dst().data() + roff);
  wr.rkey = p.mr_b().rkey;
  return wr;
}

/// a's lkey for its source buffer (Pair does not expose a's MR).
std::uint32_t src_lkey(Pair& p) {
  // Re-registering the same buffer gives a second, equivalent region with its own keys.
  return p.a().memory().register_region(p.src().data(), p.src().size(), engine::access::kAll)->lkey;
}

TEST(RefusalEndToEnd, WrongRkeyCompletesWithRemoteAccessErrorAndTheQpGoesToError) {
  PairOptions o;
  Pair p(o);
  const std::vector<std::uint8_t> before = p.dst();
  engine::SendWr wr = make_wr(p, 11, 0, 64 << 10, 0);
  wr.lkey = src_lkey(p);
  wr.rkey = p.mr_b().rkey ^ 0x80000000u;
  ASSERT_EQ(p.a().post_send(p.qpn_a(), wr, p.net().now()), 0);
  p.net().kick(p.node_a());
  ASSERT_TRUE(p.run_until_completions(1, 0, 10_ms));
  ASSERT_EQ(p.send_done().size(), 1u);
  EXPECT_EQ(p.send_done()[0].wr_id, 11u);
  EXPECT_EQ(p.send_done()[0].status, engine::WcStatus::kRemoteAccessError);
  EXPECT_EQ(p.qpa().state(), engine::QpState::kError);
  EXPECT_EQ(p.a().qp_state(p.qpn_a()), engine::QpState::kError);
  EXPECT_EQ(p.write(12, 0, 100, 0), EINVAL);
  p.net().run_until(p.net().now() + 1_ms);
  p.drain();
  EXPECT_EQ(p.send_done().size(), 1u);  // nothing more for that WR, nothing for the refused post
  EXPECT_EQ(p.dst(), before);
  EXPECT_EQ(p.qpb().counters().bytes_placed, 0u);
  EXPECT_GE(p.qpb().counters().rx_refused, 1u);
  bool error_event = false;
  for (const auto& e : p.a_events()) error_event |= e.type == engine::EventType::kQpError;
  EXPECT_TRUE(error_event);
  EXPECT_EQ(p.qpb().state(), engine::QpState::kRts);  // the responder is not harmed
}

TEST(RefusalEndToEnd, WritesAfterTheFailingOneAreFlushedAndEarlierOnesSucceed) {
  Pair p(PairOptions{});
  const std::uint32_t lkey = src_lkey(p);
  engine::SendWr w1 = make_wr(p, 1, 0, 16384, 0);
  engine::SendWr w2 = make_wr(p, 2, 16384, 16384, 65536);
  engine::SendWr w3 = make_wr(p, 3, 32768, 4096, 131072);
  w1.lkey = w2.lkey = w3.lkey = lkey;
  w2.rkey = 0;
  ASSERT_EQ(p.a().post_send(p.qpn_a(), w1, 0), 0);
  ASSERT_EQ(p.a().post_send(p.qpn_a(), w2, 0), 0);
  ASSERT_EQ(p.a().post_send(p.qpn_a(), w3, 0), 0);
  p.net().kick(p.node_a());
  ASSERT_TRUE(p.run_until_completions(3, 0, 10_ms));
  ASSERT_EQ(p.send_done().size(), 3u);
  EXPECT_EQ(p.send_done()[0].wr_id, 1u);
  EXPECT_EQ(p.send_done()[1].wr_id, 2u);
  EXPECT_EQ(p.send_done()[2].wr_id, 3u);
  EXPECT_EQ(p.send_done()[1].status, engine::WcStatus::kRemoteAccessError);
  EXPECT_EQ(p.send_done()[2].status, engine::WcStatus::kFlushed);
  // A success must mean the data is there.
  if (p.send_done()[0].status == engine::WcStatus::kSuccess) {
    EXPECT_TRUE(p.same(0, 16384, 0));
  } else {
    EXPECT_EQ(p.send_done()[0].status, engine::WcStatus::kFlushed);
  }
  EXPECT_TRUE(std::all_of(p.dst().begin() + 65536, p.dst().begin() + 65536 + 16384,
                          [](std::uint8_t b) { return b == 0; }));
}

TEST(RefusalEndToEnd, AnAccessErrorNakDoesNotCompleteEarlierUndeliveredWritesAsSuccess) {
  // With spraying, the NAK for a later WR can arrive before an earlier WR's packets. Here WR 1's
  // packets are held back (as if lost or slow) and only WR 2's packet reaches the responder.
  Pair p(PairOptions{});
  const std::uint32_t lkey = src_lkey(p);
  engine::SendWr w1 = make_wr(p, 1, 0, 8192, 0);  // 2 packets
  engine::SendWr w2 = make_wr(p, 2, 8192, 100, 65536);
  w1.lkey = w2.lkey = lkey;
  w2.rkey = p.mr_b().rkey + 1;
  ASSERT_EQ(p.a().post_send(p.qpn_a(), w1, 0), 0);
  ASSERT_EQ(p.a().post_send(p.qpn_a(), w2, 0), 0);
  const std::uint32_t all = 0xF;
  auto sent = pull_all(p.a(), 1000, all);
  ASSERT_EQ(sent.size(), 3u);
  const std::uint32_t psn0 = p.psn_ab();
  std::vector<Frame> held;
  for (const Frame& f : sent) {
    if (f.psn == psn_add(psn0, 2))
      deliver(p.b(), f, p.node_a(), 3000);
    else
      held.push_back(f);
  }
  ASSERT_EQ(held.size(), 2u);
  auto pump_b_to_a = [&](Time t) {
    for (const Frame& f : pull_all(p.b(), t, all)) deliver(p.a(), f, p.node_b(), t + 2000);
  };
  pump_b_to_a(3000);
  engine::Completion c;
  std::vector<engine::Completion> done;
  while (p.a().poll_completion(c)) done.push_back(c);
  for (const auto& d : done) {
    if (d.wr_id == 1 && d.status == engine::WcStatus::kSuccess) {
      EXPECT_TRUE(p.same(0, 8192, 0)) << "WR 1 reported success, but none of its bytes reached the responder";
    }
  }
  // Then WR 1's packets arrive after all; whatever happens, success must still mean delivered.
  // The requester resent WR 2's packet to confirm the NAK (D39); it fails once two more
  // transmissions of it were NAKed and given up without a SACK.
  for (const Frame& f : held) deliver(p.b(), f, p.node_a(), 10000);
  for (Time t = 10000; t < 90000; t += 2000) {
    if (p.a().next_deadline() <= t) p.a().on_timer(t);
    for (const Frame& f : pull_all(p.a(), t, all)) deliver(p.b(), f, p.node_a(), t + 1000);
    pump_b_to_a(t + 1000);
  }
  while (p.a().poll_completion(c)) done.push_back(c);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[1].wr_id, 2u);
  EXPECT_EQ(done[1].status, engine::WcStatus::kRemoteAccessError);
  EXPECT_EQ(p.qpa().state(), engine::QpState::kError);
}

TEST(RefusalEndToEnd, LocalBufferOutsideItsRegionCompletesWithLocalProtectionError) {
  enum class Kind { kPastTheEnd, kBeforeTheStart, kWrongLkey, kNoLkey };
  for (const Kind kind : {Kind::kPastTheEnd, Kind::kBeforeTheStart, Kind::kWrongLkey, Kind::kNoLkey}) {
    SCOPED_TRACE(static_cast<int>(kind));
    Pair q(PairOptions{});
    // The source region covers src[1024, 1024 + 8192) only.
    const engine::MemoryRegion* mr =
        q.a().memory().register_region(q.src().data() + 1024, 8192, engine::access::kAll);
    ASSERT_NE(mr, nullptr);
    engine::SendWr wr = make_wr(q, 5, 1024, 100, 0);
    wr.lkey = mr->lkey;
    switch (kind) {
      case Kind::kPastTheEnd:
        wr.local_addr = addr_of(q.src().data() + 1024 + 8192 - 50);
        break;
      case Kind::kBeforeTheStart:
        wr.local_addr = addr_of(q.src().data() + 1000);
        break;
      case Kind::kWrongLkey:
        wr.lkey = mr->lkey ^ 0x5555u;
        break;
      case Kind::kNoLkey:
        wr.lkey = 0;
        break;
    }
    EXPECT_EQ(q.a().post_send(q.qpn_a(), wr, 0), 0);  // verbs style: the error comes as a completion
    q.net().kick(q.node_a());
    ASSERT_TRUE(q.run_until_completions(1, 0, 1_ms));
    EXPECT_EQ(q.send_done()[0].wr_id, 5u);
    EXPECT_EQ(q.send_done()[0].status, engine::WcStatus::kLocalProtectionError);
    EXPECT_EQ(q.qpa().state(), engine::QpState::kError);
    EXPECT_EQ(q.write(6, 0, 100, 0), EINVAL);
    q.net().run_until(q.net().now() + 100_us);
    EXPECT_EQ(q.net().stats().sent, 0u);  // nothing went on the wire
    EXPECT_TRUE(std::all_of(q.dst().begin(), q.dst().end(), [](std::uint8_t b) { return b == 0; }));
  }
  // Control: the same WR inside the region works.
  Pair q(PairOptions{});
  const engine::MemoryRegion* mr =
      q.a().memory().register_region(q.src().data() + 1024, 8192, engine::access::kAll);
  engine::SendWr wr = make_wr(q, 5, 1024 + 8192 - 100, 100, 0);
  wr.lkey = mr->lkey;
  ASSERT_EQ(q.a().post_send(q.qpn_a(), wr, 0), 0);
  q.net().kick(q.node_a());
  ASSERT_TRUE(q.run_until_completions(1, 0, 1_ms));
  EXPECT_EQ(q.send_done()[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(q.same(1024 + 8192 - 100, 100, 0));
}

// --- invalid API calls ------------------------------------------------------------------------------

engine::QpConfig valid_config() {
  engine::QpConfig c;
  c.evs = engine::make_ev_set(2, 4, 1);
  c.active_count = 8;
  return c;
}

engine::EndpointConfig two_ports() {
  engine::EndpointConfig ec;
  ec.num_ports = 2;
  return ec;
}

TEST(ApiRefusal, CreateQpRejectsBadConfigsWithAnErrno) {
  engine::Endpoint ep(two_ports());
  struct Case {
    const char* what;
    void (*edit)(engine::QpConfig&);
  };
  const Case cases[] = {
      {"pmtu 300", [](engine::QpConfig& c) { c.pmtu = 300; }},
      {"pmtu 128", [](engine::QpConfig& c) { c.pmtu = 128; }},
      {"pmtu 8192", [](engine::QpConfig& c) { c.pmtu = 8192; }},
      {"mpr 0", [](engine::QpConfig& c) { c.mpr = 0; }},
      {"mpr_dest 0", [](engine::QpConfig& c) { c.mpr_dest = 0; }},
      {"max_wimm 0", [](engine::QpConfig& c) { c.max_wimm = 0; }},
      {"timeout 25", [](engine::QpConfig& c) { c.timeout = 25; }},
      {"retry_linear 8", [](engine::QpConfig& c) { c.retry_linear = 8; }},
      {"retry_exp 26", [](engine::QpConfig& c) { c.retry_exp = 26; }},
      {"sq_depth 0", [](engine::QpConfig& c) { c.sq_depth = 0; }},
      {"empty EV list", [](engine::QpConfig& c) { c.evs.clear(); }},
      {"EV port == num_ports", [](engine::QpConfig& c) { c.evs[3].port = 2; }},
      {"EV port 200", [](engine::QpConfig& c) { c.evs.back().port = 200; }},
      {"active_count > evs", [](engine::QpConfig& c) { c.active_count = 11; }},
      {"ev_min_active > evs", [](engine::QpConfig& c) { c.ev_min_active = 11; }},
  };
  for (const Case& cs : cases) {
    engine::QpConfig c = valid_config();
    cs.edit(c);
    int err = 0;
    EXPECT_EQ(ep.create_qp(c, &err), 0u) << cs.what;
    EXPECT_EQ(err, EINVAL) << cs.what;
    EXPECT_EQ(ep.create_qp(c), 0u) << cs.what;  // err is optional
  }
  EXPECT_TRUE(ep.qpns().empty());
  int err = -1;
  const std::uint32_t qpn = ep.create_qp(valid_config(), &err);
  EXPECT_GT(qpn, wire::kEpQpn);
  EXPECT_EQ(err, 0);
  EXPECT_EQ(ep.qp_state(qpn), engine::QpState::kReset);
}

TEST(ApiRefusal, PostSendBeforeRtsIsEinvalAndStateTransitionsAreOrdered) {
  engine::Endpoint ep(two_ports());
  const std::uint32_t qpn = ep.create_qp(valid_config());
  ASSERT_NE(qpn, 0u);
  engine::SendWr wr;  // zero-length: no memory needed
  const engine::QpRemote remote{7, 0x10, 100, 200, 8, 128};
  EXPECT_EQ(ep.post_send(qpn, wr, 0), EINVAL);  // RESET
  EXPECT_EQ(ep.modify_to_rtr(qpn, remote, 0), EINVAL);
  EXPECT_EQ(ep.modify_to_rts(qpn, 0), EINVAL);
  ASSERT_EQ(ep.modify_to_init(qpn), 0);
  EXPECT_EQ(ep.post_send(qpn, wr, 0), EINVAL);  // INIT
  EXPECT_EQ(ep.modify_to_init(qpn), EINVAL);
  EXPECT_EQ(ep.modify_to_rts(qpn, 0), EINVAL);
  ASSERT_EQ(ep.modify_to_rtr(qpn, remote, 0), 0);
  EXPECT_EQ(ep.post_send(qpn, wr, 0), EINVAL);  // RTR
  ASSERT_EQ(ep.modify_to_rts(qpn, 0), 0);
  EXPECT_EQ(ep.post_send(qpn, wr, 0), 0);
  EXPECT_EQ(ep.post_send(qpn + 1, wr, 0), EINVAL);  // no such QP
  EXPECT_EQ(ep.post_send(0, wr, 0), EINVAL);
  EXPECT_EQ(ep.post_recv(qpn + 1, 1), EINVAL);
}

TEST(ApiRefusal, ModifyToRtrRejectsOutOfRangeRemoteAttributes) {
  engine::Endpoint ep(two_ports());
  const std::uint32_t qpn = ep.create_qp(valid_config());
  ASSERT_EQ(ep.modify_to_init(qpn), 0);
  EXPECT_EQ(ep.modify_to_rtr(qpn, engine::QpRemote{7, 1u << 24, 0, 0, 8, 128}, 0), EINVAL);
  EXPECT_EQ(ep.modify_to_rtr(qpn, engine::QpRemote{7, 0x10, 1u << 24, 0, 8, 128}, 0), EINVAL);
  EXPECT_EQ(ep.modify_to_rtr(qpn, engine::QpRemote{7, 0x10, 0, 1u << 24, 8, 128}, 0), EINVAL);
  EXPECT_EQ(ep.modify_to_rtr(qpn, engine::QpRemote{7, 0x10, 0, 0, 0, 128}, 0), EINVAL);
  EXPECT_EQ(ep.modify_to_rtr(qpn, engine::QpRemote{7, 0x10, 0, 0, 8, 0}, 0), EINVAL);
  EXPECT_EQ(ep.qp_state(qpn), engine::QpState::kInit);
  EXPECT_EQ(ep.modify_to_rtr(qpn, engine::QpRemote{7, 0x10, 0, 0, 8, 128}, 0), 0);
}

TEST(ApiRefusal, SendQueueOverflowIsEnomem) {
  engine::Endpoint ep(two_ports());
  engine::QpConfig c = valid_config();
  c.sq_depth = 4;
  const std::uint32_t qpn = ep.create_qp(c);
  ASSERT_EQ(ep.connect_qp(qpn, engine::QpRemote{7, 0x10, 100, 200, 8, 128}, 0), 0);
  std::vector<std::uint8_t> buf(4096);
  const engine::MemoryRegion* mr = ep.memory().register_region(buf.data(), buf.size(), engine::access::kAll);
  engine::SendWr wr;
  wr.local_addr = addr_of(buf.data());
  wr.length = 1024;
  wr.lkey = mr->lkey;
  for (int i = 0; i < 4; ++i) {
    wr.wr_id = static_cast<std::uint64_t>(i);
    EXPECT_EQ(ep.post_send(qpn, wr, 0), 0) << i;
  }
  EXPECT_EQ(ep.post_send(qpn, wr, 0), ENOMEM);
  EXPECT_EQ(ep.post_send(qpn, wr, 0), ENOMEM);
  EXPECT_EQ(ep.qp_state(qpn), engine::QpState::kRts);  // not an error state
  engine::Completion comp;
  EXPECT_FALSE(ep.poll_completion(comp));
}

TEST(ApiRefusal, ReceiveQueueOverflowIsEnomem) {
  engine::Endpoint ep(two_ports());
  engine::QpConfig c = valid_config();
  c.rq_depth = 4;
  const std::uint32_t qpn = ep.create_qp(c);
  EXPECT_EQ(ep.post_recv(qpn, 1), EINVAL);  // RESET
  ASSERT_EQ(ep.connect_qp(qpn, engine::QpRemote{7, 0x10, 100, 200, 8, 128}, 0), 0);
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_EQ(ep.post_recv(qpn, i), 0) << i;
  EXPECT_EQ(ep.post_recv(qpn, 4), ENOMEM);
  EXPECT_EQ(ep.qp_state(qpn), engine::QpState::kRts);
}

TEST(ApiRefusal, ConnectTwiceIsEinvalAndLeavesTheQpConnected) {
  engine::Endpoint ep(two_ports());
  const std::uint32_t qpn = ep.create_qp(valid_config());
  const engine::QpRemote remote{7, 0x10, 100, 200, 8, 128};
  ASSERT_EQ(ep.connect_qp(qpn, remote, 0), 0);
  EXPECT_EQ(ep.connect_qp(qpn, remote, 0), EINVAL);
  EXPECT_EQ(ep.connect_qp(qpn, engine::QpRemote{8, 0x11, 1, 2, 8, 128}, 0), EINVAL);
  EXPECT_EQ(ep.qp_state(qpn), engine::QpState::kRts);
  EXPECT_EQ(ep.qp(qpn)->remote().peer, 7u);
  EXPECT_EQ(ep.connect_qp(qpn + 1, remote, 0), EINVAL);
}

TEST(ApiRefusal, DestroyedQpRefusesEverything) {
  engine::Endpoint ep(two_ports());
  const std::uint32_t qpn = ep.create_qp(valid_config());
  ASSERT_EQ(ep.connect_qp(qpn, engine::QpRemote{7, 0x10, 100, 200, 8, 128}, 0), 0);
  ASSERT_EQ(ep.destroy_qp(qpn), 0);
  EXPECT_EQ(ep.destroy_qp(qpn), EINVAL);
  EXPECT_EQ(ep.post_send(qpn, engine::SendWr{}, 0), EINVAL);
  EXPECT_EQ(ep.post_recv(qpn, 1), EINVAL);
  EXPECT_EQ(ep.connect_qp(qpn, engine::QpRemote{7, 0x10, 100, 200, 8, 128}, 0), EINVAL);
  EXPECT_TRUE(ep.qpns().empty());
}

TEST(ApiRefusal, ReceivesPostedBeforeRtrAreKept) {
  // Verbs lets an application post receives in INIT, before the connection is up (the usual
  // order). Each WRITE_IMM must consume one of them, with its wr_id.
  engine::EndpointConfig ec = two_ports();
  engine::Endpoint ep(ec);
  const std::uint32_t qpn = ep.create_qp(valid_config());
  ASSERT_EQ(ep.modify_to_init(qpn), 0);
  ASSERT_EQ(ep.post_recv(qpn, 77), 0);
  ASSERT_EQ(ep.post_recv(qpn, 78), 0);
  const std::uint32_t peer = 9, epsn = 500;
  ASSERT_EQ(ep.modify_to_rtr(qpn, engine::QpRemote{peer, 0x10, 100, epsn, 8, 128}, 0), 0);
  ASSERT_EQ(ep.modify_to_rts(qpn, 0), 0);
  std::vector<std::uint8_t> buf(4096);
  const engine::MemoryRegion* mr = ep.memory().register_region(buf.data(), buf.size(), engine::access::kAll);
  const auto pay = pattern(64, 3);
  for (std::uint16_t i = 0; i < 2; ++i) {
    wire::Packet k;
    k.bth.opcode = Opcode::kWriteOnlyImm;
    k.bth.dest_qp = qpn;
    k.bth.psn = epsn + i;
    k.meth.rqmsn = i;
    k.meth.msn = i;
    k.reth.va = addr_of(buf.data() + 64 * i);
    k.reth.rkey = mr->rkey;
    k.reth.dma_len = 64;
    k.imm = 0xAB00u + i;
    k.payload = pay;
    ep.receive(encode_packet(k), rx_meta(peer, 0, 1), 10);
  }
  std::vector<engine::Completion> recvs;
  engine::Completion c;
  while (ep.poll_completion(c))
    if (c.is_recv) recvs.push_back(c);
  ASSERT_EQ(recvs.size(), 2u);
  EXPECT_EQ(recvs[0].wr_id, 77u);
  EXPECT_EQ(recvs[0].imm, 0xAB00u);
  EXPECT_EQ(recvs[1].wr_id, 78u);
  EXPECT_EQ(recvs[1].imm, 0xAB01u);
  EXPECT_EQ(recvs[0].status, engine::WcStatus::kSuccess);
}

}  // namespace
}  // namespace mrc::test
