// Rack (time-based loss detection, D43) on its own, over a SentPackets tracker filled by hand.
#include "engine/rack.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace mrc::engine {
namespace {

constexpr std::uint32_t kPsn0 = 0xFFFFFA;  // the 24-bit PSN wraps inside the tests
constexpr Duration kUs = 1000;

/// `n` packets in flight, packet i sent at i us.
struct Flight {
  SentPackets sp;
  explicit Flight(std::uint32_t n) {
    sp.init(64, 64);
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint32_t psn = psn_add(kPsn0, static_cast<std::int32_t>(i));
      TxRec& r = sp.rec(psn);
      r = TxRec{};
      r.sent = i * kUs;
      r.flags = kValid | kInFlight;
      sp.push(psn);
    }
  }
  std::uint32_t psn(std::uint32_t i) const { return psn_add(kPsn0, static_cast<std::int32_t>(i)); }
  /// Runs detect(); returns the indices declared lost (taken out of flight).
  std::vector<std::uint32_t> detect(Rack& rack, Duration reorder, Time now) {
    std::vector<std::uint32_t> lost;
    rack.detect(sp, reorder, now, [&](std::uint32_t p) {
      lost.push_back(static_cast<std::uint32_t>(psn_diff(p, kPsn0)));
      sp.remove(p);
    });
    return lost;
  }
};

TEST(Rack, NothingIsLostBeforeALaterPacketIsDelivered) {
  Flight f(8);
  Rack rack;
  EXPECT_TRUE(f.detect(rack, 2 * kUs, 1'000 * kUs).empty());  // the tail probe's job
  EXPECT_EQ(rack.timer(), kNever);
}

TEST(Rack, APacketSentBeforeTheNewestDeliveredIsLostOneReorderWindowLate) {
  Flight f(8);
  Rack rack;
  // Packet 5 (sent at 5 us) delivered with a 10 us RTT: packets 0-4 are expected by sent + 10 us
  // and lost a reorder window (2 us) later: packet 0 at 12 us, packet 4 at 16 us.
  f.sp.remove(f.psn(5));
  rack.on_delivered(5 * kUs, 10 * kUs);
  EXPECT_TRUE(f.detect(rack, 2 * kUs, 11 * kUs).empty());
  EXPECT_EQ(rack.timer(), 12 * kUs);  // the reorder timer for packet 0
  EXPECT_EQ(f.detect(rack, 2 * kUs, 14 * kUs), (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_EQ(rack.timer(), 15 * kUs);
  EXPECT_EQ(f.detect(rack, 2 * kUs, 100 * kUs), (std::vector<std::uint32_t>{3, 4}));
  EXPECT_EQ(rack.timer(), kNever);  // 6 and 7 were sent after the newest delivered packet
  EXPECT_EQ(f.sp.oldest(), f.psn(6));
}

TEST(Rack, OnlyANewerSendTimeMovesTheReference) {
  Rack rack;
  rack.on_delivered(5 * kUs, 10 * kUs);
  rack.on_delivered(3 * kUs, 4 * kUs);  // an older packet's delivery: reordering, not a reference
  EXPECT_EQ(rack.newest_delivered_sent(), 5 * kUs);
  EXPECT_EQ(rack.rtt(), 10 * kUs);
  // That older packet came 3 us behind the expectation only if its RTT exceeds RACK's.
  EXPECT_EQ(rack.excess(3 * kUs, 13 * kUs), 3 * kUs);
  EXPECT_EQ(rack.excess(3 * kUs, 9 * kUs), 0u);
  EXPECT_EQ(rack.excess(6 * kUs, 20 * kUs), 0u);  // sent after the reference: no reordering shown
  rack.on_delivered(7 * kUs, 2 * kUs);
  EXPECT_EQ(rack.newest_delivered_sent(), 7 * kUs);
  EXPECT_EQ(rack.rtt(), 2 * kUs);
}

TEST(Rack, AWiderReorderWindowWaitsLonger) {
  for (Duration reorder : {0 * kUs, 3 * kUs, 9 * kUs}) {
    Flight f(4);
    Rack rack;
    f.sp.remove(f.psn(3));
    rack.on_delivered(3 * kUs, 5 * kUs);
    EXPECT_TRUE(f.detect(rack, reorder, 5 * kUs + reorder - 1).empty()) << reorder;
    EXPECT_EQ(f.detect(rack, reorder, 5 * kUs + reorder), (std::vector<std::uint32_t>{0})) << reorder;
  }
}

TEST(Rack, APacketOnALivePathWaitsForTheSlowestPath) {
  // D63: packets 0-3 in flight, packet 4 (sent at 4 us) delivered after 5 us: RACK alone expects
  // packet 0 by 5 us + a 1 us window = 6 us. The slowest recent SACK took 20 us: a packet whose
  // path delivered a later packet (alive) waits until 20 us; one whose path did not keeps 6 us.
  Rack rack;
  rack.on_ack(1 * kUs, 21 * kUs, 100 * kUs);  // an acknowledgement 20 us after its newest packet
  EXPECT_EQ(rack.slowest_rtt(), 20 * kUs);
  EXPECT_EQ(rack.rtt(), 20 * kUs);  // and RACK's reference, until a newer packet is delivered
  for (bool alive : {false, true}) {
    Flight f(5);
    f.sp.remove(f.psn(4));
    rack.on_delivered(4 * kUs, 5 * kUs);
    ASSERT_EQ(rack.rtt(), 5 * kUs);
    const Duration slow_wait = 20 * kUs;
    auto detect = [&](Time now) {
      std::vector<std::uint32_t> lost;
      rack.detect(
          f.sp, 1 * kUs, slow_wait, now,
          [&](std::uint32_t p) {
            lost.push_back(static_cast<std::uint32_t>(psn_diff(p, kPsn0)));
            f.sp.remove(p);
          },
          [&](const TxRec&) { return alive; });
      return lost;
    };
    const Time due = alive ? 20 * kUs : 6 * kUs;  // packet 0 was sent at 0
    EXPECT_TRUE(detect(due - 1).empty()) << alive;
    EXPECT_EQ(rack.timer(), due) << alive;
    EXPECT_EQ(detect(due), (std::vector<std::uint32_t>{0})) << alive;
  }
  // A slow wait shorter than RACK's own changes nothing.
  Flight f(2);
  f.sp.remove(f.psn(1));
  rack.on_delivered(5 * kUs, 5 * kUs);
  rack.detect(
      f.sp, 1 * kUs, 2 * kUs, 5 * kUs, [&](std::uint32_t) { ADD_FAILURE(); },
      [](const TxRec&) { return true; });
  EXPECT_EQ(rack.timer(), 6 * kUs);
}

TEST(Rack, AProbeAnswerMovesTheReferenceButKeepsTheDataRtt) {
  // D83: packet 3's SACK says the data takes 10 us; an EV probe sent at 6 us is answered after
  // 4 us (a small control packet overtakes the data). Every packet sent before the probe is
  // judged from then on, by the data's 10 us: packet 0 is lost at 0 + 10 + 2 us, not at
  // 0 + 4 + 2 us (the probe's RTT declared packets lost that were still on their way).
  Flight f(8);
  Rack rack;
  f.sp.remove(f.psn(3));
  rack.on_delivered(3 * kUs, 10 * kUs);
  rack.on_probe_answered(6 * kUs, 4 * kUs);
  EXPECT_EQ(rack.newest_delivered_sent(), 6 * kUs);
  EXPECT_EQ(rack.rtt(), 10 * kUs);
  EXPECT_TRUE(f.detect(rack, 2 * kUs, 11 * kUs).empty());
  EXPECT_EQ(rack.timer(), 12 * kUs);
  EXPECT_EQ(f.detect(rack, 2 * kUs, 16 * kUs), (std::vector<std::uint32_t>{0, 1, 2, 4}));
  EXPECT_EQ(rack.timer(), 17 * kUs);  // packet 5, sent before the probe
  EXPECT_EQ(f.detect(rack, 2 * kUs, 17 * kUs), (std::vector<std::uint32_t>{5}));
  EXPECT_EQ(rack.timer(), kNever);  // 6 and 7 were not sent before the probe

  // A longer probe RTT than the data's (a congested path) is kept; an older probe moves nothing.
  rack.on_probe_answered(7 * kUs, 12 * kUs);
  EXPECT_EQ(rack.rtt(), 12 * kUs);
  rack.on_probe_answered(5 * kUs, 30 * kUs);
  EXPECT_EQ(rack.newest_delivered_sent(), 7 * kUs);
  EXPECT_EQ(rack.rtt(), 12 * kUs);
}

TEST(Rack, WithNoDataReferenceAProbeAnswerGivesItsOwnRtt) {
  Flight f(4);
  Rack rack;
  rack.on_probe_answered(2 * kUs, 5 * kUs);
  EXPECT_EQ(rack.rtt(), 5 * kUs);
  EXPECT_EQ(f.detect(rack, 1 * kUs, 7 * kUs), (std::vector<std::uint32_t>{0, 1}));  // 0 + 5 + 1, 1 + 5 + 1
  EXPECT_EQ(rack.timer(), kNever);
}

}  // namespace
}  // namespace mrc::engine
