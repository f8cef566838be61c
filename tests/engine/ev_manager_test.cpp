// Unit tests of the per-QP EV manager (docs/protocol.md §4.5): active/backup split, selection,
// SKIP / ASSUMED_BAD / DENIED transitions, probing, the ev_min_active floor, port up/down, the
// transition sink, and what it holds (D54: the shared table until its first change, side tables).
#include "engine/ev_manager.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "common/rng.hpp"
#include "engine/ev_sets.hpp"
#include "packet_util.hpp"

namespace mrc::test {
namespace {

using engine::Ev;
using engine::EvCause;
using engine::EvManager;
using engine::EvState;

constexpr std::uint16_t kNone = EvManager::kNone;
constexpr Duration kSkip = 10'000;
constexpr Duration kProbe = 40'000;

struct Logged {
  EvManager::Transition t;
  Time now;
};

/// An EvManager plus everything its sink reported.
class Evm {
 public:
  /// `ports` ports, `active` active and `backup` backup EVs per port (engine::make_ev_set layout:
  /// slot = k * ports + port, actives first).
  Evm(std::uint32_t ports, std::uint32_t active, std::uint32_t backup, std::uint32_t min_active = 1,
      std::uint32_t threshold = 3)
      : ports_(ports) {
    evs_ = engine::make_ev_set(ports, active, backup);
    EvManager::Params p;
    p.min_active = min_active;
    p.probe_success_threshold = threshold;
    p.skip_duration = kSkip;
    p.probe_interval = kProbe;
    ok_ = m.init(evs_, ports * active, ports, p, 42, &Evm::sink, this);
  }

  static void sink(void* ctx, const EvManager::Transition& t, Time now) {
    static_cast<Evm*>(ctx)->log.push_back(Logged{t, now});
  }

  /// Slot of the k-th EV of `port` (k counts actives first, then backups).
  std::uint16_t slot(std::uint32_t port, std::uint32_t k) const {
    return static_cast<std::uint16_t>(k * ports_ + port);
  }
  std::uint32_t active_slots(std::uint8_t port) const {
    std::uint32_t n = 0;
    for (std::uint16_t s = 0; s < m.size(); ++s) n += m.ev(s).port == port && m.is_active(s);
    return n;
  }

  EvManager m;
  std::vector<Logged> log;
  bool ok_ = false;

 private:
  std::uint32_t ports_;
  std::vector<Ev> evs_;
};

void expect_transition(const Logged& l, std::uint16_t slot, const Ev& ev, EvState from, EvState to,
                       EvCause cause, Time now) {
  EXPECT_EQ(l.t.slot, slot);
  EXPECT_EQ(l.t.ev, ev);
  EXPECT_EQ(l.t.from, from) << engine::to_string(l.t.from);
  EXPECT_EQ(l.t.to, to) << engine::to_string(l.t.to);
  EXPECT_EQ(l.t.cause, cause) << engine::to_string(l.t.cause);
  EXPECT_EQ(l.now, now);
}

// Expiries may be applied late (D65): then in the order of their times, each at its own time, an
// extension counted, and an EV that left SKIP some other way not returned by its old expiry.
TEST(EvManager, LateExpiriesKeepTheirTimesAndOrder) {
  Evm e(1, 4, 0, 1, 1);
  ASSERT_TRUE(e.ok_);
  const std::uint16_t a = e.slot(0, 0), b = e.slot(0, 1), c = e.slot(0, 2);
  e.m.on_skip_signal(a, EvCause::kEcnEcho, 1000);   // until 11,000
  e.m.on_skip_signal(b, EvCause::kEcnEcho, 2000);   // until 12,000
  e.m.on_skip_signal(c, EvCause::kTrimNack, 3000);  // until 13,000, but:
  e.m.on_failure(c, EvCause::kLoss, 4000);          // it left SKIP, and its expiry with it
  ASSERT_EQ(e.m.state(c), EvState::kAssumedBad);
  e.m.on_skip_signal(a, EvCause::kEcnEcho, 5000);  // extended: until 15,000
  e.m.on_probe_success(c, 6000);                   // back (one answered probe) ...
  ASSERT_EQ(e.m.state(c), EvState::kGood);
  e.m.on_skip_signal(c, EvCause::kEcnEcho, 7000);  // ... and skipped again: until 17,000
  e.log.clear();
  e.m.expire_skips(14'000);
  ASSERT_EQ(e.log.size(), 1u);  // b; not c at its old time
  expect_transition(e.log[0], b, e.m.ev(b), EvState::kSkip, EvState::kGood, EvCause::kSkipExpired, 12'000);
  e.m.expire_skips(20'000);
  ASSERT_EQ(e.log.size(), 3u);
  expect_transition(e.log[1], a, e.m.ev(a), EvState::kSkip, EvState::kGood, EvCause::kSkipExpired, 15'000);
  expect_transition(e.log[2], c, e.m.ev(c), EvState::kSkip, EvState::kGood, EvCause::kSkipExpired, 17'000);
  EXPECT_EQ(e.m.next_skip_expiry(), kNever);
  EXPECT_EQ(e.m.active_good(0), 4u);
}

TEST(EvManager, InitSplitsActiveAndBackupPerPort) {
  Evm e(2, 4, 2);
  ASSERT_TRUE(e.ok_);
  ASSERT_EQ(e.m.size(), 12u);
  for (std::uint16_t s = 0; s < 12; ++s) {
    EXPECT_EQ(e.m.is_active(s), s < 8) << s;
    EXPECT_EQ(e.m.state(s), EvState::kGood) << s;  // backups are GOOD too, just not used
    EXPECT_EQ(e.m.ev(s).port, s % 2) << s;
  }
  EXPECT_EQ(e.m.active_good(0), 4u);
  EXPECT_EQ(e.m.active_good(1), 4u);
  EXPECT_EQ(e.m.count(EvState::kGood), 12u);
  EXPECT_EQ(e.m.ports_with_good(), 0b11u);
  EXPECT_TRUE(e.log.empty());
  EXPECT_EQ(e.m.next_skip_expiry(), kNever);
  EXPECT_EQ(e.m.find(e.m.ev(5).value, 1), 5u);
  EXPECT_EQ(e.m.find(e.m.ev(5).value, 0), kNone);
}

TEST(EvManager, InitRejectsPortsOutOfRangeAndEmptySets) {
  EvManager m;
  EvManager::Params p;
  const std::vector<Ev> bad{{1, 0}, {2, 2}};
  EXPECT_FALSE(m.init(bad, 0, 2, p, 1, nullptr, nullptr));
  EXPECT_FALSE(m.init(std::span<const Ev>(), 0, 2, p, 1, nullptr, nullptr));
  const std::vector<Ev> good{{1, 0}, {2, 1}};
  EXPECT_FALSE(m.init(good, 0, 0, p, 1, nullptr, nullptr));  // no ports
  ASSERT_TRUE(m.init(good, 0, 2, p, 1, nullptr, nullptr));   // 0 = all active
  EXPECT_TRUE(m.is_active(0));
  EXPECT_TRUE(m.is_active(1));
}

TEST(EvManager, PickRoundRobinsPortsAndReturnsOnlyGoodActiveEvsOfMaskedPorts) {
  Evm e(4, 3, 2);
  ASSERT_TRUE(e.ok_);
  std::map<std::uint16_t, int> seen;
  std::uint8_t prev = 255;
  for (int i = 0; i < 4000; ++i) {
    const std::uint16_t s = e.m.pick(0xF);
    ASSERT_NE(s, kNone);
    ASSERT_TRUE(e.m.is_active(s)) << s;
    ASSERT_EQ(e.m.state(s), EvState::kGood);
    const std::uint8_t port = e.m.ev(s).port;
    if (prev != 255) {
      ASSERT_EQ(port, (prev + 1) % 4) << "pick " << i;
    }
    prev = port;
    ++seen[s];
  }
  EXPECT_EQ(seen.size(), 12u);                                        // every active EV, no backup
  for (const auto& [s, n] : seen) EXPECT_GT(n, 200) << "slot " << s;  // roughly uniform (1000/3 each)

  // A mask restricts the ports; round robin over what remains.
  prev = 255;
  for (int i = 0; i < 100; ++i) {
    const std::uint16_t s = e.m.pick(0b0101);
    ASSERT_NE(s, kNone);
    const std::uint8_t port = e.m.ev(s).port;
    ASSERT_TRUE(port == 0 || port == 2);
    if (prev != 255) {
      ASSERT_NE(port, prev);
    }
    prev = port;
  }
  for (int i = 0; i < 50; ++i) EXPECT_EQ(e.m.ev(e.m.pick(0b1000)).port, 3);
  EXPECT_EQ(e.m.pick(0), kNone);
  EXPECT_EQ(e.m.pick(1u << 7), kNone);  // no such port

  // Non-GOOD EVs are never picked.
  e.m.on_skip_signal(e.slot(1, 0), EvCause::kEcnEcho, 0);
  e.m.on_failure(e.slot(1, 1), EvCause::kLoss, 0);
  for (int i = 0; i < 1000; ++i) {
    const std::uint16_t s = e.m.pick(0b0010);
    ASSERT_NE(s, kNone);
    EXPECT_NE(s, e.slot(1, 0));
    EXPECT_NE(s, e.slot(1, 1));
    EXPECT_EQ(e.m.state(s), EvState::kGood);
    EXPECT_TRUE(e.m.is_active(s));
  }
}

TEST(EvManager, BurstRepeatsAPickUntilItEndsOrTheEvStopsBeingGoodOrEligible) {
  const std::vector<Ev> evs = engine::make_ev_set(4, 4, 1);
  EvManager m;
  EvManager::Params p;
  p.burst = 4;
  ASSERT_TRUE(m.init(evs, 16, 4, p, 7, nullptr, nullptr));
  // Runs of exactly 4 equal picks; consecutive runs move to the next port (round robin).
  std::set<std::uint16_t> seen;
  for (int run = 0; run < 200; ++run) {
    const std::uint16_t first = m.pick(0xF);
    ASSERT_NE(first, kNone);
    for (int k = 1; k < 4; ++k) ASSERT_EQ(m.pick(0xF), first) << "run " << run << " pick " << k;
    seen.insert(first);
  }
  EXPECT_EQ(seen.size(), 16u);  // still spread over every active EV

  // A burst ends early when its EV leaves GOOD ...
  const std::uint16_t s = m.pick(0xF);
  m.on_skip_signal(s, EvCause::kEcnEcho, 0);
  const std::uint16_t t = m.pick(0xF);
  ASSERT_NE(t, kNone);
  EXPECT_NE(t, s);
  // ... or when the caller no longer allows its port.
  const std::uint32_t others = 0xFu & ~(1u << m.ev(t).port);
  EXPECT_NE(m.ev(m.pick(others)).port, m.ev(t).port);
}

TEST(EvManager, PickProvenPrefersEvsThatDeliveredAfterTheLoss) {
  Evm e(2, 4, 1);  // ports 0 and 1, 4 active EVs each
  ASSERT_TRUE(e.ok_);
  // Two EVs delivered a packet sent at 100; the rest last delivered at 40.
  for (std::uint16_t s = 0; s < e.m.size(); ++s) e.m.on_delivered(s, 40);
  const std::uint16_t p0 = e.slot(0, 1), p1 = e.slot(1, 2);
  e.m.on_delivered(p0, 100);
  e.m.on_delivered(p1, 100);
  e.m.on_delivered(p1, 90);  // an older delivery does not move it back
  int proven = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::uint16_t s = e.m.pick_proven(0b11, 50);
    ASSERT_NE(s, kNone);
    ASSERT_TRUE(e.m.is_active(s));
    ASSERT_EQ(e.m.state(s), EvState::kGood);
    proven += s == p0 || s == p1;
  }
  // A plain pick finds one of the 2 in 8 a quarter of the time; four candidates find one in about
  // 1 - (3/4)^4 = 68 % of the picks.
  EXPECT_GT(proven, 600);
  EXPECT_LT(proven, 760);
  // Proof must be newer than the loss: with `since` past every delivery, any GOOD EV will do.
  for (int i = 0; i < 100; ++i) EXPECT_NE(e.m.pick_proven(0b11, 200), kNone);
  // The port mask still applies, and a failed EV is never chosen.
  e.m.on_failure(p1, EvCause::kLoss, 0);
  for (int i = 0; i < 200; ++i) {
    const std::uint16_t s = e.m.pick_proven(0b10, 50);
    ASSERT_NE(s, kNone);
    EXPECT_EQ(e.m.ev(s).port, 1);
    EXPECT_NE(s, p1);
  }
  EXPECT_EQ(e.m.pick_proven(0, 50), kNone);
}

TEST(EvManager, PickOnPortPrefersAGoodEvOfThatPort) {
  Evm e(2, 2, 0);
  for (int i = 0; i < 100; ++i) {
    const std::uint16_t s = e.m.pick_on_port(1);
    ASSERT_NE(s, kNone);
    EXPECT_EQ(e.m.ev(s).port, 1);
    EXPECT_EQ(e.m.state(s), EvState::kGood);
  }
}

TEST(EvManager, AFreshManagerReadsTheSharedTableUntilItsFirstStateChange) {
  // 128 EVs on one port (the simulator's htsim network).
  Evm e(1, 128, 0);
  ASSERT_TRUE(e.ok_);
  EXPECT_TRUE(e.m.shares_slots());
  EXPECT_EQ(e.m.heap_bytes(), 0u);
  // Packets sent and delivered with nothing lost add the delivery times (8 bytes an EV), once.
  for (Time t = 1; t <= 1000; ++t) EXPECT_FALSE(e.m.on_delivered(e.m.pick(1), t));
  EXPECT_TRUE(e.m.shares_slots());
  EXPECT_EQ(e.m.heap_bytes(), 128u * 8);
  // The first state change copies the slots (6 bytes an EV), the GOOD list (2 bytes an active EV)
  // and the port (8 bytes); the skipped EV adds its place in the SKIP list (16: the slot and its
  // expiry).
  const std::uint16_t s = e.m.pick(1);
  e.m.on_skip_signal(s, EvCause::kEcnEcho, 2000);
  EXPECT_EQ(e.m.state(s), EvState::kSkip);
  EXPECT_FALSE(e.m.shares_slots());
  EXPECT_EQ(e.m.heap_bytes(), 128u * 8 + 128 * 6 + 128 * 2 + 8 + 16);
  // A fresh manager with backups holds nothing of its own either, nor after a controller deny of
  // an EV it does not have.
  Evm b(4, 16, 4);
  EXPECT_EQ(b.m.heap_bytes(), 0u);
  EXPECT_EQ(b.m.set_denied(0xDEAD, 0, true, 0), 0u);
  EXPECT_TRUE(b.m.shares_slots());
  // ECN, a failure or a probe answer for a backup EV changes nothing, so copies nothing.
  const auto backup = static_cast<std::uint16_t>(b.m.size() - 1);
  ASSERT_FALSE(b.m.is_active(backup));
  b.m.on_skip_signal(backup, EvCause::kEcnEcho, 0);
  b.m.on_failure(backup, EvCause::kLoss, 0);
  b.m.on_probe_success(backup, 0);
  EXPECT_EQ(b.m.state(backup), EvState::kGood);
  EXPECT_TRUE(b.m.shares_slots());
  EXPECT_EQ(b.m.heap_bytes(), 0u);
  EXPECT_EQ(b.m.set_denied(b.m.ev(0).value, b.m.ev(0).port, true, 0), 1u);
  EXPECT_FALSE(b.m.shares_slots());
}

TEST(EvManager, ManagersOfOneTableChangeStateApart) {
  const std::vector<Ev> evs = engine::make_ev_set(2, 4, 1);
  const auto table = EvManager::make_table(evs, 8, 2);
  ASSERT_NE(table, nullptr);
  EXPECT_TRUE(EvManager::same_table(*table, evs, 8));
  EXPECT_FALSE(EvManager::same_table(*table, evs, 0));
  EXPECT_EQ(EvManager::make_table(evs, 8, 1), nullptr);  // port 1 does not exist
  EvManager::Params p;
  EvManager a, b;
  ASSERT_TRUE(a.init(table, p, 1, nullptr, nullptr));
  ASSERT_TRUE(b.init(table, p, 2, nullptr, nullptr));
  EXPECT_EQ(&a.ev(3), &b.ev(3));
  a.on_failure(2, EvCause::kLoss, 0);  // slot 2: port 0, active; its backup (slot 8) takes over
  a.on_skip_signal(3, EvCause::kEcnEcho, 0);
  EXPECT_EQ(a.state(2), EvState::kAssumedBad);
  EXPECT_EQ(a.state(3), EvState::kSkip);
  EXPECT_TRUE(a.is_active(8));
  EXPECT_EQ(b.state(2), EvState::kGood);
  EXPECT_EQ(b.state(3), EvState::kGood);
  EXPECT_FALSE(b.is_active(8));
  EXPECT_TRUE(b.shares_slots());
  EXPECT_EQ(b.active_good(0), 4u);
  EXPECT_EQ(a.active_good(0), 4u);  // 2 left, 8 came in
  EXPECT_EQ(a.active_good(1), 3u);  // 3 skipped
  for (int i = 0; i < 200; ++i) {
    const std::uint16_t s = b.pick(0b11);
    EXPECT_TRUE(s < 8) << s;  // b still picks among the 8 first-listed EVs
  }
}

TEST(EvManager, OnlyEvsThatFailOrHaveALossConfirmedGetASideTableEntry) {
  Evm e(2, 4, 1);
  const std::uint16_t skipped = e.slot(0, 0), lossy = e.slot(1, 0), failed = e.slot(1, 1);
  e.m.on_skip_signal(skipped, EvCause::kEcnEcho, 100);
  e.m.on_skip_signal(skipped, EvCause::kEcnEcho, 200);  // the same entry, extended
  EXPECT_EQ(e.m.skip_entries(), 1u);
  EXPECT_EQ(e.m.cold_entries(), 0u);  // a SKIP needs only its expiry
  e.m.expire_skips(100 + kSkip);
  EXPECT_EQ(e.m.state(skipped), EvState::kSkip);
  e.m.expire_skips(200 + kSkip);
  EXPECT_EQ(e.m.state(skipped), EvState::kGood);
  EXPECT_EQ(e.m.skip_entries(), 0u);
  e.m.on_skip_signal(skipped, EvCause::kTrimNack, 300);
  EXPECT_EQ(e.m.skip_entries(), 1u);  // skipped again
  EXPECT_EQ(e.m.next_skip_expiry(), 300 + kSkip);
  EvManager::LossHistory& h = e.m.loss_history(lossy);
  EXPECT_EQ(h.losses, 0);
  h.losses = 1;
  h.streak = 1;
  EXPECT_EQ(e.m.cold_entries(), 1u);
  e.m.on_failure(failed, EvCause::kLoss, 300);
  EXPECT_EQ(e.m.cold_entries(), 2u);
  EXPECT_EQ(e.m.next_probe_time(), 300 + kProbe);
  // Entries keep their values while the table grows, and a delivery ends the streak in one.
  for (std::uint32_t k = 0; k < 5; ++k) e.m.loss_history(e.slot(0, k)).sent_at = k;
  EXPECT_EQ(e.m.cold_entries(), 7u);
  EXPECT_EQ(e.m.skip_entries(), 1u);
  EXPECT_EQ(e.m.loss_history(lossy).losses, 1);
  EXPECT_EQ(e.m.loss_history(e.slot(0, 0)).sent_at, 0u);
  EXPECT_EQ(e.m.loss_history(e.slot(0, 4)).sent_at, 4u);
  EXPECT_TRUE(e.m.on_delivered(lossy, 400));
  EXPECT_EQ(e.m.loss_history(lossy).streak, 0);
  EXPECT_FALSE(e.m.on_delivered(lossy, 500));         // no streak left to end
  EXPECT_FALSE(e.m.on_delivered(e.slot(1, 2), 500));  // no entry at all
  EXPECT_EQ(e.m.cold_entries(), 7u);
  // A port going down gives its EVs an entry (the role to restore); the port's EVs come back.
  Evm d(2, 4, 1);
  d.m.set_port_usable(1, false, 0);
  EXPECT_EQ(d.m.cold_entries(), 5u);
  d.m.set_port_usable(1, true, 10);
  EXPECT_EQ(d.m.active_good(1), 4u);
  EXPECT_EQ(d.m.cold_entries(), 5u);
}

TEST(EvManager, EcnSkipLastsSkipDurationThenGood) {
  Evm e(2, 4, 2);
  const std::uint16_t s = e.slot(0, 2);
  e.m.on_skip_signal(s, EvCause::kEcnEcho, 1000);
  EXPECT_EQ(e.m.state(s), EvState::kSkip);
  EXPECT_TRUE(e.m.is_active(s));  // SKIP is temporary: no backup replaces it
  EXPECT_EQ(e.active_slots(0), 4u);
  EXPECT_EQ(e.m.active_good(0), 3u);
  EXPECT_EQ(e.m.stats().promotions, 0u);
  ASSERT_EQ(e.log.size(), 1u);
  expect_transition(e.log[0], s, e.m.ev(s), EvState::kGood, EvState::kSkip, EvCause::kEcnEcho, 1000);
  EXPECT_EQ(e.m.next_skip_expiry(), 1000 + kSkip);
  for (int i = 0; i < 500; ++i) ASSERT_NE(e.m.pick(0b01), s);

  e.m.expire_skips(1000 + kSkip - 1);
  EXPECT_EQ(e.m.state(s), EvState::kSkip);
  EXPECT_EQ(e.log.size(), 1u);
  e.m.expire_skips(1000 + kSkip);
  EXPECT_EQ(e.m.state(s), EvState::kGood);
  EXPECT_EQ(e.m.active_good(0), 4u);
  EXPECT_EQ(e.m.next_skip_expiry(), kNever);
  ASSERT_EQ(e.log.size(), 2u);
  expect_transition(e.log[1], s, e.m.ev(s), EvState::kSkip, EvState::kGood, EvCause::kSkipExpired,
                    1000 + kSkip);
  bool picked = false;
  for (int i = 0; i < 500 && !picked; ++i) picked = e.m.pick(0b01) == s;
  EXPECT_TRUE(picked);
}

TEST(EvManager, TrimSkipAndARepeatedSignalExtendsTheSkip) {
  Evm e(2, 4, 2);
  const std::uint16_t s = e.slot(1, 3);
  e.m.on_skip_signal(s, EvCause::kTrimNack, 0);
  e.m.on_skip_signal(s, EvCause::kTrimNack, 6000);  // extends to 16000; no new transition
  ASSERT_EQ(e.log.size(), 1u);
  expect_transition(e.log[0], s, e.m.ev(s), EvState::kGood, EvState::kSkip, EvCause::kTrimNack, 0);
  e.m.expire_skips(kSkip);
  EXPECT_EQ(e.m.state(s), EvState::kSkip);
  e.m.expire_skips(6000 + kSkip - 1);
  EXPECT_EQ(e.m.state(s), EvState::kSkip);
  e.m.expire_skips(6000 + kSkip);
  EXPECT_EQ(e.m.state(s), EvState::kGood);
  // Backups ignore skip signals (they carry no traffic).
  const std::uint16_t b = e.slot(1, 4);
  e.m.on_skip_signal(b, EvCause::kEcnEcho, 7000);
  EXPECT_EQ(e.m.state(b), EvState::kGood);
}

TEST(EvManager, FailurePromotesABackupOfTheSamePort) {
  Evm e(2, 4, 2);
  const std::uint16_t bad = e.slot(0, 1);
  e.m.on_failure(bad, EvCause::kLoss, 500);
  EXPECT_EQ(e.m.state(bad), EvState::kAssumedBad);
  EXPECT_FALSE(e.m.is_active(bad));
  EXPECT_TRUE(e.m.is_active(e.slot(0, 4)));  // first listed backup of port 0
  EXPECT_FALSE(e.m.is_active(e.slot(0, 5)));
  EXPECT_FALSE(e.m.is_active(e.slot(1, 4)));  // port 1's backups stay put
  EXPECT_FALSE(e.m.is_active(e.slot(1, 5)));
  EXPECT_EQ(e.m.active_good(0), 4u);
  EXPECT_EQ(e.m.active_good(1), 4u);
  EXPECT_EQ(e.m.stats().promotions, 1u);
  ASSERT_EQ(e.log.size(), 1u);
  expect_transition(e.log[0], bad, e.m.ev(bad), EvState::kGood, EvState::kAssumedBad, EvCause::kLoss, 500);
  for (int i = 0; i < 1000; ++i) ASSERT_NE(e.m.pick(0b11), bad);

  // A SKIP EV can fail too; the second backup takes its place, then the pool is empty.
  const std::uint16_t skipped = e.slot(0, 2);
  e.m.on_skip_signal(skipped, EvCause::kEcnEcho, 600);
  e.m.on_failure(skipped, EvCause::kTimeout, 700);
  EXPECT_EQ(e.m.state(skipped), EvState::kAssumedBad);
  EXPECT_TRUE(e.m.is_active(e.slot(0, 5)));
  EXPECT_EQ(e.m.active_good(0), 4u);
  expect_transition(e.log.back(), skipped, e.m.ev(skipped), EvState::kSkip, EvState::kAssumedBad,
                    EvCause::kTimeout, 700);
  e.m.expire_skips(600 + kSkip);  // its old skip deadline does not bring it back
  EXPECT_EQ(e.m.state(skipped), EvState::kAssumedBad);

  e.m.on_failure(e.slot(0, 3), EvCause::kAlwaysSkip, 800);  // no backup left: the set shrinks
  EXPECT_EQ(e.m.active_good(0), 3u);
  EXPECT_EQ(e.m.active_good(1), 4u);
  EXPECT_EQ(e.m.stats().promotions, 2u);
  // A second failure report for an EV already ASSUMED_BAD changes nothing.
  const std::size_t n = e.log.size();
  e.m.on_failure(bad, EvCause::kLoss, 900);
  EXPECT_EQ(e.log.size(), n);
}

TEST(EvManager, ProbeSuccessThresholdResurrectsAndAFailureResetsTheCount) {
  Evm e(2, 4, 2, 1, 3);
  const std::uint16_t s = e.slot(0, 1);
  e.m.on_failure(s, EvCause::kLoss, 0);
  EXPECT_EQ(e.m.next_probe_time(), kProbe);
  EXPECT_EQ(e.m.next_probe_due(kProbe - 1), kNone);
  EXPECT_EQ(e.m.next_probe_due(kProbe), s);
  e.m.probe_sent(s, kProbe);
  EXPECT_EQ(e.m.next_probe_due(kProbe), kNone);
  EXPECT_EQ(e.m.next_probe_time(), 2 * kProbe);

  e.m.on_probe_success(s, 1);
  e.m.on_probe_success(s, 2);
  EXPECT_EQ(e.m.state(s), EvState::kAssumedBad);  // 2 < 3
  e.m.on_probe_failure(s, 3);
  e.m.on_probe_success(s, 3);
  e.m.on_probe_success(s, 4);
  EXPECT_EQ(e.m.state(s), EvState::kAssumedBad);  // count restarted after the failure
  EXPECT_EQ(e.log.size(), 1u);
  e.m.on_probe_success(s, 5);
  EXPECT_EQ(e.m.state(s), EvState::kGood);
  ASSERT_EQ(e.log.size(), 2u);
  expect_transition(e.log[1], s, e.m.ev(s), EvState::kAssumedBad, EvState::kGood, EvCause::kProbeSuccess, 5);
  // Port 0's active set is full again (a backup replaced it): the resurrected EV is a backup now.
  EXPECT_FALSE(e.m.is_active(s));
  EXPECT_EQ(e.active_slots(0), 4u);
  EXPECT_EQ(e.m.active_good(0), 4u);
  for (int i = 0; i < 500; ++i) ASSERT_NE(e.m.pick(0b01), s);
  // Not probed any more.
  EXPECT_EQ(e.m.next_probe_due(kNever - 1), kNone);
  // ... and it is the next backup to be promoted.
  e.m.on_failure(e.slot(0, 2), EvCause::kLoss, 10);
  EXPECT_TRUE(e.m.is_active(s));
  EXPECT_EQ(e.m.active_good(0), 4u);
}

TEST(EvManager, ResurrectedEvRejoinsTheActiveSetWhenThePortHasRoom) {
  Evm e(2, 4, 0, 1, 2);
  const std::uint16_t s = e.slot(1, 0);
  e.m.on_failure(s, EvCause::kTimeout, 0);
  EXPECT_EQ(e.m.active_good(1), 3u);
  e.m.on_probe_success(s, 1);
  e.m.on_probe_success(s, 2);
  EXPECT_EQ(e.m.state(s), EvState::kGood);
  EXPECT_TRUE(e.m.is_active(s));
  EXPECT_EQ(e.m.active_good(1), 4u);
}

TEST(EvManager, NextProbeTimeIsNeverOnceNothingIsAssumedBad) {
  // The owner arms a timer for next_probe_time(); a stale value makes the QP wake up (and stay in
  // the transmit scheduler) for probes that do not exist.
  Evm e(2, 4, 2, 1, 1);
  const std::uint16_t s = e.slot(0, 0);
  e.m.on_failure(s, EvCause::kLoss, 0);
  ASSERT_NE(e.m.next_probe_time(), kNever);
  e.m.on_probe_success(s, 1);
  ASSERT_EQ(e.m.state(s), EvState::kGood);
  EXPECT_EQ(e.m.count(EvState::kAssumedBad), 0u);
  EXPECT_EQ(e.m.next_probe_time(), kNever);
}

TEST(EvManager, DeniedNeverReturnsByItselfAndAllowReturnsIt) {
  Evm e(2, 4, 2);
  const std::uint16_t s = e.slot(1, 0);
  const Ev ev = e.m.ev(s);
  EXPECT_EQ(e.m.set_denied(ev.value, 1, true, 100), 1u);
  EXPECT_EQ(e.m.state(s), EvState::kDenied);
  EXPECT_FALSE(e.m.is_active(s));
  EXPECT_TRUE(e.m.is_active(e.slot(1, 4)));  // replaced by a backup of the same port
  EXPECT_EQ(e.m.active_good(1), 4u);
  ASSERT_EQ(e.log.size(), 1u);
  expect_transition(e.log[0], s, ev, EvState::kGood, EvState::kDenied, EvCause::kController, 100);

  // Nothing automatic brings it back.
  e.m.expire_skips(kNever - 1);
  for (int i = 0; i < 10; ++i) e.m.on_probe_success(s, 200);
  EXPECT_NE(e.m.next_probe_due(kNever - 1), s);
  e.m.set_port_usable(1, false, 300);
  e.m.set_port_usable(1, true, 400);
  EXPECT_EQ(e.m.state(s), EvState::kDenied);
  for (int i = 0; i < 1000; ++i) ASSERT_NE(e.m.pick(0b11), s);
  for (const Logged& l : e.log)
    if (l.t.slot == s) {
      EXPECT_EQ(l.now, 100u) << "only the deny touched the denied EV";
    }

  EXPECT_EQ(e.m.set_denied(ev.value, 0, false, 500), 0u);  // wrong port: no match
  EXPECT_EQ(e.m.set_denied(ev.value, 1, false, 500), 1u);
  EXPECT_EQ(e.m.state(s), EvState::kGood);
  expect_transition(e.log.back(), s, ev, EvState::kDenied, EvState::kGood, EvCause::kController, 500);
  EXPECT_FALSE(e.m.is_active(s));  // the active set is full: it waits as a backup
  EXPECT_EQ(e.m.active_good(1), 4u);
}

TEST(EvManager, DenyingAnAssumedBadOrSkippedEvStopsItsProbesAndExpiry) {
  Evm e(2, 4, 2);
  const std::uint16_t bad = e.slot(0, 0), skip = e.slot(0, 1);
  e.m.on_failure(bad, EvCause::kLoss, 0);
  e.m.on_skip_signal(skip, EvCause::kEcnEcho, 0);
  e.m.set_denied(e.m.ev(bad).value, 0, true, 10);
  e.m.set_denied(e.m.ev(skip).value, 0, true, 10);
  EXPECT_EQ(e.m.state(bad), EvState::kDenied);
  EXPECT_EQ(e.m.state(skip), EvState::kDenied);
  EXPECT_EQ(e.m.next_probe_due(kNever - 1), kNone);
  e.m.expire_skips(kNever - 1);
  for (int i = 0; i < 5; ++i) e.m.on_probe_success(bad, 20);
  EXPECT_EQ(e.m.state(bad), EvState::kDenied);
  EXPECT_EQ(e.m.state(skip), EvState::kDenied);
  // Both backups of port 0 were promoted (one for the failure, one for the deny of the SKIP EV).
  EXPECT_EQ(e.m.active_good(0), 4u);
}

TEST(EvManager, MinActiveFloorTurnsFailuresIntoSkipsWhenNoBackupIsLeft) {
  // 2 ports x 3 active, no backups, floor 4: only two EVs may go ASSUMED_BAD.
  Evm e(2, 3, 0, 4);
  for (int round = 0; round < 3; ++round)
    for (std::uint16_t s = 0; s < e.m.size(); ++s) e.m.on_failure(s, EvCause::kLoss, 1000);
  EXPECT_EQ(e.m.count(EvState::kAssumedBad), 2u);
  // The last GOOD EV is never skipped (that would stall the QP with nowhere else to send).
  EXPECT_EQ(e.m.count(EvState::kSkip), 3u);
  EXPECT_EQ(e.m.count(EvState::kGood), 1u);
  EXPECT_GE(e.m.stats().floor_hits, 4u);
  for (const Logged& l : e.log) {
    if (l.t.to == EvState::kSkip) {
      EXPECT_EQ(l.t.from, EvState::kGood);
      EXPECT_EQ(l.t.cause, EvCause::kLoss);
    }
  }
  // The skipped ones come back after the skip duration.
  e.m.expire_skips(1000 + kSkip);
  EXPECT_EQ(e.m.count(EvState::kGood), 4u);
  EXPECT_EQ(e.m.active_good(0) + e.m.active_good(1), 4u);
}

TEST(EvManager, MinActiveFloorDoesNotApplyWhileBackupsRemain) {
  Evm e(1, 2, 2, 2);
  e.m.on_failure(0, EvCause::kLoss, 0);
  e.m.on_failure(1, EvCause::kLoss, 0);
  EXPECT_EQ(e.m.count(EvState::kAssumedBad), 2u);
  EXPECT_EQ(e.m.active_good(0), 2u);
  EXPECT_EQ(e.m.stats().floor_hits, 0u);
  e.m.on_failure(2, EvCause::kLoss, 0);  // now at the floor with no backup
  EXPECT_EQ(e.m.state(2), EvState::kSkip);
  EXPECT_EQ(e.m.stats().floor_hits, 1u);
}

TEST(EvManager, PortDownMakesEveryEvOfThePortAssumedBadAndPortUpRestoresThem) {
  Evm e(2, 4, 2);
  e.m.set_port_usable(1, false, 100);
  EXPECT_FALSE(e.m.port_usable(1));
  EXPECT_TRUE(e.m.port_usable(0));
  std::set<std::uint16_t> reported;
  for (const Logged& l : e.log) {
    EXPECT_EQ(l.t.from, EvState::kGood);
    EXPECT_EQ(l.t.to, EvState::kAssumedBad);
    EXPECT_EQ(l.t.cause, EvCause::kPortDown);
    EXPECT_EQ(l.t.ev.port, 1);
    EXPECT_EQ(l.now, 100u);
    reported.insert(l.t.slot);
  }
  EXPECT_EQ(reported.size(), 6u);  // 4 active + 2 backups
  for (std::uint16_t s = 0; s < e.m.size(); ++s)
    EXPECT_EQ(e.m.state(s), e.m.ev(s).port == 1 ? EvState::kAssumedBad : EvState::kGood) << s;
  EXPECT_EQ(e.m.ports_with_good(), 0b01u);
  for (int i = 0; i < 1000; ++i) {
    const std::uint16_t s = e.m.pick(0b11);
    ASSERT_NE(s, kNone);
    ASSERT_EQ(e.m.ev(s).port, 0);
  }
  EXPECT_EQ(e.m.pick(0b10), kNone);
  EXPECT_EQ(e.m.next_probe_due(kNever - 1), kNone);  // a down port is not probed
  // Failure signals for EVs of the down port are ignored.
  const std::size_t n = e.log.size();
  e.m.on_failure(e.slot(1, 0), EvCause::kTimeout, 150);
  e.m.on_skip_signal(e.slot(1, 1), EvCause::kEcnEcho, 150);
  e.m.on_probe_success(e.slot(1, 2), 150);
  EXPECT_EQ(e.log.size(), n);

  e.m.set_port_usable(1, true, 200);
  EXPECT_TRUE(e.m.port_usable(1));
  ASSERT_EQ(e.log.size(), n + 6);
  for (std::size_t i = n; i < e.log.size(); ++i) {
    EXPECT_EQ(e.log[i].t.from, EvState::kAssumedBad);
    EXPECT_EQ(e.log[i].t.to, EvState::kGood);
    EXPECT_EQ(e.log[i].t.cause, EvCause::kPortUp);
    EXPECT_EQ(e.log[i].now, 200u);
  }
  EXPECT_EQ(e.m.count(EvState::kGood), 12u);
  EXPECT_EQ(e.m.active_good(1), 4u);
  EXPECT_EQ(e.active_slots(1), 4u);
  std::set<std::uint8_t> ports;
  for (int i = 0; i < 10; ++i) ports.insert(e.m.ev(e.m.pick(0b11)).port);
  EXPECT_EQ(ports.size(), 2u);
}

TEST(EvManager, PortDownTakesSkippedEvsToo) {
  Evm e(2, 4, 2);
  const std::uint16_t s = e.slot(1, 2);
  e.m.on_skip_signal(s, EvCause::kEcnEcho, 0);
  e.m.set_port_usable(1, false, 10);
  EXPECT_EQ(e.m.state(s), EvState::kAssumedBad);
  e.m.expire_skips(kSkip);  // its skip deadline passes while the port is down
  EXPECT_EQ(e.m.state(s), EvState::kAssumedBad);
  EXPECT_EQ(e.m.pick(0b10), kNone);
}

TEST(EvManager, PortUpDoesNotResurrectEvsThatWereAssumedBadBeforeThePortWentDown) {
  // An EV whose path failed (ASSUMED_BAD by loss) may only return through probes (docs/protocol.md §4.5). A
  // flap of the local port says nothing about that path.
  Evm e(2, 4, 2);
  const std::uint16_t s = e.slot(0, 1);
  e.m.on_failure(s, EvCause::kLoss, 0);
  ASSERT_EQ(e.m.state(s), EvState::kAssumedBad);
  e.m.set_port_usable(0, false, 100);
  e.m.set_port_usable(0, true, 200);
  EXPECT_EQ(e.m.state(s), EvState::kAssumedBad);
  for (int i = 0; i < 1000; ++i)
    ASSERT_NE(e.m.pick(0b01), s) << "a failed path is used again after a port flap";
}

/// Random operation sequences: every transition reaches the sink, in a consistent chain, and the
/// manager's bookkeeping matches the per-slot states after every step.
TEST(EvManager, RandomOperationsKeepTheSinkAndTheBookkeepingConsistent) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Rng r(seed);
    const std::uint32_t ports = 1 + r.below(4), active = 1 + r.below(6), backup = r.below(4);
    Evm e(ports, active, backup, 1 + r.below(ports * active), 1 + r.below(3));
    ASSERT_TRUE(e.ok_);
    std::vector<EvState> known(e.m.size(), EvState::kGood);
    std::size_t consumed = 0;
    Time now = 0, last = 0;  // last: the time of the last call that applied the expiries due
    for (int step = 0; step < 400; ++step) {
      now += r.below(5000);
      bool applies = true;  // every call with a time but the query next_probe_due()
      const auto slot = static_cast<std::uint16_t>(r.below(static_cast<std::uint32_t>(e.m.size())));
      const auto port = static_cast<std::uint8_t>(r.below(ports));
      switch (r.below(9)) {
        case 0:
          e.m.on_skip_signal(slot, EvCause::kEcnEcho, now);
          break;
        case 1:
          e.m.on_failure(slot, EvCause::kLoss, now);
          break;
        case 2:
          e.m.on_probe_success(slot, now);
          break;
        case 3:
          e.m.on_probe_failure(slot, now);
          break;
        case 4:
          e.m.expire_skips(now);
          break;
        case 5:
          e.m.set_port_usable(port, r.chance(0.5), now);
          break;
        case 6:
          e.m.set_denied(e.m.ev(slot).value, e.m.ev(slot).port, r.chance(0.5), now);
          break;
        case 7: {
          const std::uint16_t due = e.m.next_probe_due(now);
          if (due != kNone) {
            ASSERT_EQ(e.m.state(due), EvState::kAssumedBad);
            ASSERT_TRUE(e.m.port_usable(e.m.ev(due).port));
            e.m.probe_sent(due, now);
          } else {
            applies = false;
          }
          break;
        }
        default:
          e.m.on_failure(slot, EvCause::kTimeout, now);
          break;
      }
      for (; consumed < e.log.size(); ++consumed) {
        const Logged& l = e.log[consumed];
        ASSERT_LT(l.t.slot, e.m.size());
        ASSERT_EQ(l.t.ev, e.m.ev(l.t.slot));
        ASSERT_EQ(l.t.from, known[l.t.slot]) << "seed " << seed << " step " << step;
        ASSERT_NE(l.t.from, l.t.to);
        // An expiry is applied late (at the next call) with its own time, which came after the
        // previous call; everything else happens at the call's time.
        if (l.t.cause == EvCause::kSkipExpired) {
          ASSERT_GT(l.now, last) << "seed " << seed << " step " << step;
          ASSERT_LE(l.now, now) << "seed " << seed << " step " << step;
        } else {
          ASSERT_EQ(l.now, now);
        }
        if (consumed > 0) {
          ASSERT_GE(l.now, e.log[consumed - 1].now) << "seed " << seed << " step " << step;
        }
        known[l.t.slot] = l.t.to;
      }
      if (applies) last = now;
      ASSERT_EQ(e.m.stats().transitions, e.log.size());
      for (std::uint16_t s = 0; s < e.m.size(); ++s) ASSERT_EQ(e.m.state(s), known[s]) << "seed " << seed;
      std::uint32_t good_mask = 0;
      for (std::uint8_t p = 0; p < ports; ++p) {
        std::uint32_t good = 0, act = 0;
        for (std::uint16_t s = 0; s < e.m.size(); ++s) {
          if (e.m.ev(s).port != p || !e.m.is_active(s)) continue;
          ++act;
          good += e.m.state(s) == EvState::kGood;
          ASSERT_NE(e.m.state(s), EvState::kDenied);
          ASSERT_NE(e.m.state(s), EvState::kAssumedBad);
        }
        ASSERT_LE(act, active) << "seed " << seed << " port " << int{p};
        if (!e.m.port_usable(p)) {
          ASSERT_EQ(act, 0u);
        }
        ASSERT_EQ(e.m.active_good(p), good) << "seed " << seed << " port " << int{p};
        if (e.m.port_usable(p) && good > 0) good_mask |= 1u << p;
      }
      ASSERT_EQ(e.m.ports_with_good(), good_mask) << "seed " << seed << " step " << step;
      const std::uint16_t pk = e.m.pick(0xFFFFFFFFu);
      if (good_mask == 0) {
        ASSERT_EQ(pk, kNone);
      } else {
        ASSERT_NE(pk, kNone);
        ASSERT_EQ(e.m.state(pk), EvState::kGood);
        ASSERT_TRUE(e.m.is_active(pk));
        ASSERT_TRUE(e.m.port_usable(e.m.ev(pk).port));
      }
    }
  }
}

}  // namespace
}  // namespace mrc::test
