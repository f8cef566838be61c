// PathBlame (src/engine/path_blame.hpp): which confirmed losses blame their EV (D43, D57), on a
// model of one QP spraying round-robin over 128 EVs whose acknowledgements arrive one round trip
// (128 packets) after the send and whose loss confirmations two round trips after it, as in the
// engine. Random loss on every EV must blame (almost) none; dead EVs must be blamed at their
// second loss even when they are many (D57) and by their third with random loss everywhere; a gray
// EV must be caught (D58).
#include "engine/path_blame.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <vector>

#include "common/rng.hpp"

namespace mrc::engine {
namespace {

struct Model {
  static constexpr std::uint32_t kEvs = 128;
  static constexpr std::uint64_t kAckDelay = 128, kConfirmDelay = 256;

  std::vector<double> loss = std::vector<double>(kEvs, 0.0);
  std::vector<EvManager::LossHistory> hist = std::vector<EvManager::LossHistory>(kEvs);
  std::vector<std::uint32_t> lost = std::vector<std::uint32_t>(kEvs, 0);       ///< losses confirmed on it
  std::vector<std::uint32_t> blamed_at = std::vector<std::uint32_t>(kEvs, 0);  ///< confirmed losses then
  std::vector<bool> retired = std::vector<bool>(kEvs, false);
  PathBlame blame;
  Rng rng{3};
  std::uint64_t sent = 0;
  std::uint32_t blames = 0;
  struct Due {
    std::uint64_t at;
    std::uint32_t ev;
    bool lost;
  };
  std::deque<Due> acks, confirms;  // each in time order

  void settle(std::uint64_t now) {
    while (!acks.empty() && acks.front().at <= now) {
      EvManager::LossHistory& h = hist[acks.front().ev];
      if (h.streak != 0) {  // what EvManager::on_delivered reports
        h.streak = 0;
        blame.on_survived(h);
      }
      acks.pop_front();
    }
    while (!confirms.empty() && confirms.front().at <= now) {
      const std::uint32_t e = confirms.front().ev;
      confirms.pop_front();
      ++lost[e];
      if (!retired[e] && blame.on_confirmed_loss(hist[e], sent, active())) {
        retired[e] = true;
        blamed_at[e] = lost[e];
        ++blames;
      }
    }
  }
  std::uint32_t active() const {
    std::uint32_t n = 0;
    for (bool r : retired) n += !r;
    return n;
  }
  void run(std::uint64_t packets) {
    std::uint32_t e = 0;
    for (std::uint64_t i = 0; i < packets; ++i) {
      settle(i);
      do e = (e + 1) % kEvs;
      while (retired[e]);
      ++sent;
      const bool drop = rng.uniform() < loss[e];
      if (drop)
        confirms.push_back({i + kConfirmDelay, e, true});
      else
        acks.push_back({i + kAckDelay, e, false});
    }
    settle(packets + kConfirmDelay);
  }
};

TEST(PathBlame, RandomLossOnEveryEvBlamesNone) {
  // 400,000 packets. At 0.1 % and 1 % no EV is blamed. At 5 % a run of four losses in a row on one
  // EV (probability 0.05^3 per loss) passes the streak test now and then: at most one blame per
  // 5,000 losses.
  for (double p : {0.001, 0.01, 0.05}) {
    Model m;
    for (double& l : m.loss) l = p;
    m.run(400'000);
    std::uint64_t losses = 0;
    for (std::uint32_t n : m.lost) losses += n;
    std::printf("loss %.3f: %u EVs blamed, %llu losses\n", p, m.blames,
                static_cast<unsigned long long>(losses));
    if (p < 0.05)
      EXPECT_EQ(m.blames, 0u) << "loss " << p;
    else
      EXPECT_LE(m.blames * 5000, losses) << "loss " << p;
    EXPECT_TRUE(m.blame.lossy(m.sent)) << "loss " << p;
  }
}

TEST(PathBlame, ManyDeadEvsAreEachBlamedAtTheirSecondLoss) {
  // 16 dead EVs of 128 (1/8 of the packets lost): before D57 their own losses made the reference
  // rate ~12 %, and each was blamed only at its fourth loss or later.
  Model m;
  for (std::uint32_t e = 0; e < Model::kEvs; e += 8) m.loss[e] = 1.0;
  m.run(50'000);
  EXPECT_EQ(m.blames, 16u);
  for (std::uint32_t e = 0; e < Model::kEvs; ++e) {
    if (m.loss[e] == 1.0)
      EXPECT_EQ(m.blamed_at[e], 2u) << "EV " << e;
    else
      EXPECT_FALSE(m.retired[e]) << "EV " << e;
  }
  EXPECT_FALSE(m.blame.lossy(m.sent));  // dead paths are not random loss
}

TEST(PathBlame, DeadEvsUnderRandomLossAreBlamedByTheirThirdLoss) {
  Model m;
  for (double& l : m.loss) l = 0.01;
  for (std::uint32_t e = 5; e < Model::kEvs; e += 32) m.loss[e] = 1.0;
  m.run(200'000);
  EXPECT_EQ(m.blames, 4u);
  for (std::uint32_t e = 5; e < Model::kEvs; e += 32) {
    EXPECT_GE(m.blamed_at[e], 2u) << "EV " << e;
    EXPECT_LE(m.blamed_at[e], 3u) << "EV " << e;
  }
}

TEST(PathBlame, AGrayEvIsCaught) {
  // 5 % on one EV, nothing elsewhere: caught after a few of its losses; 2 % among 0.1 %: too.
  Model m;
  m.loss[17] = 0.05;
  m.run(400'000);
  EXPECT_EQ(m.blames, 1u);
  EXPECT_TRUE(m.retired[17]);
  EXPECT_LE(m.blamed_at[17], 3u);

  Model n;
  for (double& l : n.loss) l = 0.001;
  n.loss[40] = 0.02;
  n.run(2'000'000);
  EXPECT_TRUE(n.retired[40]);
  EXPECT_EQ(n.blames, 1u);
}

TEST(PathBlame, OneLossNeverBlames) {
  Model m;
  m.loss[3] = 1.0;
  m.run(128 * 1 + 1);  // EV 3 carries one packet
  EXPECT_EQ(m.lost[3], 1u);
  EXPECT_EQ(m.blames, 0u);
}

}  // namespace
}  // namespace mrc::engine
