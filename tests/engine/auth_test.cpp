// Opt-in packet authentication (engine/auth.hpp): SipHash-2-4 against the paper's vectors, and a
// MAC-protected QP pair driven by hand: forged, re-keyed, flipped and trimmed packets never reach a
// QP (no memory written, nothing sent back) and are counted; a real transfer passes.
#include "engine/auth.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/endpoint.hpp"
#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "packet_util.hpp"

namespace mrc::test {
namespace {

using engine::MacKey;

MacKey key_0_to_15() {
  std::array<std::uint8_t, 16> k{};
  std::iota(k.begin(), k.end(), std::uint8_t{0});
  return MacKey::from_bytes(k);
}

TEST(SipHash24, PaperVectors) {
  const MacKey k = key_0_to_15();
  // Appendix A of the SipHash paper: key 00..0f, message 00..0e.
  std::vector<std::uint8_t> m(15);
  std::iota(m.begin(), m.end(), std::uint8_t{0});
  EXPECT_EQ(engine::siphash24(k, m), 0xa129ca6149be45e5ull);
  // The reference implementation's first vector: the empty message.
  EXPECT_EQ(engine::siphash24(k, {}), 0x726fdb47dd0e0e31ull);
}

TEST(SipHash24, PiecesEqualOneShot) {
  const MacKey k{0x0123456789abcdefull, 0xfedcba9876543210ull};
  std::vector<std::uint8_t> m(67);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<std::uint8_t>(i * 37 + 11);
  const std::uint64_t whole = engine::siphash24(k, m);
  const std::span<const std::uint8_t> s(m);
  for (std::size_t a = 0; a <= m.size(); ++a) {
    for (std::size_t b = a; b <= m.size(); b += 5) {
      engine::SipHash24 h(k);
      h.update(s.subspan(0, a));
      h.update(s.subspan(a, b - a));
      h.update(s.subspan(b));
      ASSERT_EQ(h.finish(), whole) << "split at " << a << ", " << b;
    }
  }
}

TEST(SipHash24, KeyBytesRoundTrip) {
  const MacKey k = key_0_to_15();
  EXPECT_EQ(k.k0, 0x0706050403020100ull);
  EXPECT_EQ(MacKey::from_bytes(k.bytes()), k);
}

// Two endpoints, one port, one authenticated QP each; packets moved by hand.
class AuthPair : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kLen = 64 * 1024;
  const MacKey key_ab_{0x1111222233334444ull, 0x5555666677778888ull};  // A -> B
  const MacKey key_ba_{0x9999aaaabbbbccccull, 0xddddeeeeffff0000ull};  // B -> A

  void SetUp() override {
    engine::EndpointConfig ec;
    ec.num_ports = 1;
    ec.seed = 3;
    a_ = std::make_unique<engine::Endpoint>(ec);
    ec.seed = 4;
    b_ = std::make_unique<engine::Endpoint>(ec);
    src_.resize(kLen);
    for (std::size_t i = 0; i < kLen; ++i) src_[i] = static_cast<std::uint8_t>(i * 7 + 1);
    dst_.assign(kLen, 0);
    mra_ = a_->memory().register_region(src_.data(), src_.size(), engine::access::kAll);
    mrb_ = b_->memory().register_region(dst_.data(), dst_.size(), engine::access::kAll);
    engine::QpConfig c;
    c.pmtu = 1024;
    c.evs = engine::make_ev_set(1, 4, 0);
    c.cc.algorithm = cc::Algorithm::kNone;
    qa_ = a_->create_qp(c);
    qb_ = b_->create_qp(c);
    engine::QpRemote ra{1, qb_, 100, 200, 8, 128};
    ra.auth = {true, key_ab_, key_ba_};
    engine::QpRemote rb{1, qa_, 200, 100, 8, 128};
    rb.auth = {true, key_ba_, key_ab_};
    ra.wire_ext = rb.wire_ext = true;
    ASSERT_EQ(a_->connect_qp(qa_, ra, 0), 0);
    ASSERT_EQ(b_->connect_qp(qb_, rb, 0), 0);
  }

  int post_write(std::uint32_t len) {
    engine::SendWr wr;
    wr.wr_id = 1;
    wr.local_addr = reinterpret_cast<std::uintptr_t>(src_.data());
    wr.length = len;
    wr.lkey = mra_->lkey;
    wr.remote_addr = reinterpret_cast<std::uintptr_t>(dst_.data());
    wr.rkey = mrb_->rkey;
    return a_->post_send(qa_, wr, now_);
  }

  /// A's packets to B and B's answers back, until A has a send completion (or `rounds` pass).
  bool run(int rounds) {
    for (int r = 0; r < rounds; ++r) {
      for (const Frame& f : pull_all(*a_, now_, 1)) deliver(*b_, f, 1, now_);
      now_ += 2'000;
      for (const Frame& f : pull_all(*b_, now_, 1)) deliver(*a_, f, 1, now_);
      now_ += 2'000;
      if (now_ >= a_->next_deadline()) a_->on_timer(now_);
      if (now_ >= b_->next_deadline()) b_->on_timer(now_);
      engine::Completion c;
      while (a_->poll_completion(c))
        if (!c.is_recv) return c.status == engine::WcStatus::kSuccess;
    }
    return false;
  }

  /// A correctly addressed WRITE_ONLY of `len` bytes of 0xEE into B's region at PSN 200 (the first
  /// PSN B expects), with a valid ICRC: everything right except, possibly, the MAC.
  std::vector<std::uint8_t> forged_write(std::uint32_t len) {
    payload_.assign(len, 0xEE);
    wire::Packet p;
    p.bth.opcode = wire::Opcode::kWriteOnly;
    p.bth.dest_qp = qb_;
    p.bth.psn = 200;
    p.bth.ack_req = true;
    p.reth.va = reinterpret_cast<std::uintptr_t>(dst_.data());
    p.reth.rkey = mrb_->rkey;
    p.reth.dma_len = len;
    p.payload = payload_;
    return encode_packet(p);
  }

  /// Replaces the 4-byte ICRC of `pkt` by the tag of `k` (a packet built by someone holding `k`).
  static std::vector<std::uint8_t> with_tag(std::vector<std::uint8_t> pkt, const MacKey& k) {
    pkt.resize(pkt.size() - wire::kIcrcSize);
    const std::uint64_t tag = engine::siphash24(k, pkt);
    for (std::size_t i = 0; i < engine::kMacSize; ++i)
      pkt.push_back(static_cast<std::uint8_t>(tag >> (8 * i)));
    return pkt;
  }

  bool dst_untouched() const {
    return std::all_of(dst_.begin(), dst_.end(), [](std::uint8_t x) { return x == 0; });
  }

  std::unique_ptr<engine::Endpoint> a_, b_;
  std::vector<std::uint8_t> src_, dst_, payload_;
  const engine::MemoryRegion *mra_ = nullptr, *mrb_ = nullptr;
  std::uint32_t qa_ = 0, qb_ = 0;
  Time now_ = 1'000;
};

TEST_F(AuthPair, ForgedWriteNeverReachesMemory) {
  const std::vector<std::uint8_t> icrc_only = forged_write(256);
  // No tag at all (a plain ICRC packet), a tag made with the wrong direction's key (a reflected
  // packet), and a tag made with an unrelated key.
  const std::vector<std::vector<std::uint8_t>> forgeries = {icrc_only, with_tag(icrc_only, key_ba_),
                                                            with_tag(icrc_only, MacKey{1, 2})};
  for (const auto& bytes : forgeries) b_->receive(bytes, rx_meta(1, 0, 0), now_);
  EXPECT_EQ(b_->counters().rx_auth_failed, forgeries.size());
  EXPECT_TRUE(dst_untouched());
  EXPECT_EQ(b_->qp(qb_)->counters().rx_data, 0u);
  EXPECT_TRUE(pull_all(*b_, now_, 1).empty()) << "a refused packet must not even be acknowledged";
  // Control: the same packet with the tag of A's key is taken and placed.
  b_->receive(with_tag(icrc_only, key_ab_), rx_meta(1, 0, 0), now_);
  EXPECT_EQ(b_->counters().rx_auth_failed, forgeries.size());
  EXPECT_EQ(b_->qp(qb_)->counters().rx_data, 1u);
  EXPECT_EQ(dst_[0], 0xEE);
  EXPECT_EQ(dst_[255], 0xEE);
}

TEST_F(AuthPair, TransferPassesAndEveryPacketCarriesTheTag) {
  ASSERT_EQ(post_write(kLen), 0);
  std::size_t a_frames = 0, b_frames = 0;
  bool done = false;
  for (int r = 0; r < 2000 && !done; ++r) {
    for (const Frame& f : pull_all(*a_, now_, 1)) {
      ++a_frames;
      ASSERT_TRUE(engine::mac_valid(key_ab_, f.bytes));
      wire::Packet p;
      EXPECT_EQ(f.decode(p), wire::Error::kBadIcrc) << "the trailer must be the tag, not an ICRC";
      deliver(*b_, f, 1, now_);
    }
    now_ += 2'000;
    for (const Frame& f : pull_all(*b_, now_, 1)) {
      ++b_frames;
      ASSERT_TRUE(engine::mac_valid(key_ba_, f.bytes));
      deliver(*a_, f, 1, now_);
    }
    now_ += 2'000;
    engine::Completion c;
    while (a_->poll_completion(c)) done = !c.is_recv && c.status == engine::WcStatus::kSuccess;
  }
  ASSERT_TRUE(done);
  EXPECT_EQ(dst_, src_);
  EXPECT_EQ(a_frames, kLen / 1024);
  EXPECT_GT(b_frames, 0u);
  EXPECT_EQ(a_->counters().rx_auth_failed, 0u);
  EXPECT_EQ(b_->counters().rx_auth_failed, 0u);
  EXPECT_EQ(a_->qp(qa_)->counters().tx_rtx, 0u);
}

TEST_F(AuthPair, FlippedBitInARealPacketIsRefusedAndCounted) {
  ASSERT_EQ(post_write(1024), 0);
  const std::vector<Frame> frames = pull_all(*a_, now_, 1);
  ASSERT_EQ(frames.size(), 1u);
  const Frame& real = frames[0];
  const std::size_t n = real.bytes.size();
  // One bit in the BTH (PSN), in the RETH (VA), in the payload and in the tag itself.
  std::size_t refused = 0;
  for (const std::size_t byte : {std::size_t{11}, std::size_t{20}, n / 2, n - 1}) {
    Frame f = real;
    f.bytes[byte] ^= 0x10;
    deliver(*b_, f, 1, now_);
    ++refused;
    EXPECT_EQ(b_->counters().rx_auth_failed, refused) << "flip in byte " << byte;
  }
  EXPECT_TRUE(dst_untouched());
  EXPECT_TRUE(pull_all(*b_, now_, 1).empty());
  // A trimmed copy (header only) cannot carry the tag: refused too.
  Frame trimmed = real;
  trimmed.bytes.resize(real.bytes.size() - 1024 - engine::kMacSize);
  engine::RxMeta m = rx_meta(1, 0, real.ev.value);
  m.trimmed = true;
  b_->receive(trimmed.bytes, m, now_);
  EXPECT_EQ(b_->counters().rx_auth_failed, refused + 1);
  // The untouched packet still goes through and the write completes.
  deliver(*b_, real, 1, now_);
  EXPECT_EQ(b_->counters().rx_auth_failed, refused + 1);
  ASSERT_TRUE(run(100));
  EXPECT_TRUE(std::equal(src_.begin(), src_.begin() + 1024, dst_.begin()));
}

}  // namespace
}  // namespace mrc::test
