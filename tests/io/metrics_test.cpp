#include "io/metrics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "io/io_harness.hpp"

namespace mrc::iotest {
namespace {

bool name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

/// Checks one sample line: name{label="value",...} integer
bool valid_sample(const std::string& l) {
  std::size_t i = 0;
  if (l.empty() || !name_char(l[0], true)) return false;
  while (i < l.size() && name_char(l[i], i == 0)) ++i;
  if (i < l.size() && l[i] == '{') {
    ++i;
    while (i < l.size() && l[i] != '}') {
      const std::size_t start = i;
      while (i < l.size() && name_char(l[i], i == start) && l[i] != ':') ++i;
      if (i == start || i + 1 >= l.size() || l[i] != '=' || l[i + 1] != '"') return false;
      i += 2;
      while (i < l.size() && l[i] != '"') ++i;
      if (i >= l.size()) return false;
      ++i;
      if (i < l.size() && l[i] == ',') ++i;
    }
    if (i >= l.size()) return false;
    ++i;
  }
  if (i >= l.size() || l[i] != ' ') return false;
  ++i;
  if (i >= l.size()) return false;
  for (; i < l.size(); ++i)
    if (l[i] < '0' || l[i] > '9') return false;
  return true;
}

/// Moves `bytes` in 64 KiB writes, application-driven.
void move(IoPair& p, std::size_t bytes) {
  const std::uint32_t msg = 1u << 16;
  const std::size_t n = bytes / msg;
  std::size_t posted = 0, done = 0;
  for (std::size_t spin = 0; done < n && spin < 10'000'000; ++spin) {
    while (posted < n && posted - done < 16 && p.a->post_send(p.qa, p.wr(posted, posted * msg, msg)) == 0)
      ++posted;
    p.a->progress(0);
    p.b->progress(0);
    engine::Completion c;
    while (p.a->poll_completion(c)) ++done;
  }
  ASSERT_EQ(done, n);
}

TEST(Metrics, JsonParsesAndHoldsTheCounters) {
  IoPair p;
  ASSERT_TRUE(p.open(4, 4 << 20, 51));
  move(p, 4 << 20);
  const std::string text = io::metrics_json(*p.a).dump(2);
  const nlohmann::json j = nlohmann::json::parse(text);  // throws (fails the test) if malformed
  const auto& qc = p.a->engine().qp(p.qa)->counters();
  ASSERT_EQ(j["qps"].size(), 1u);
  EXPECT_EQ(j["qps"][0]["qpn"].get<std::uint32_t>(), p.qa);
  EXPECT_EQ(j["qps"][0]["state"], "RTS");
  EXPECT_EQ(j["qps"][0]["counters"]["tx_data"].get<std::uint64_t>(), qc.tx_data);
  EXPECT_EQ(j["qps"][0]["counters"]["bytes_acked"].get<std::uint64_t>(), qc.bytes_acked);
  EXPECT_GE(qc.bytes_acked, 4u << 20);
  const auto& ev = j["qps"][0]["ev"];
  EXPECT_EQ(ev["evs"].size(), 4u * 10u);  // 8 active + 2 backups per plane
  EXPECT_EQ(ev["count_by_state"]["GOOD"].get<std::uint32_t>() +
                ev["count_by_state"]["SKIP"].get<std::uint32_t>() +
                ev["count_by_state"]["ASSUMED_BAD"].get<std::uint32_t>() +
                ev["count_by_state"]["DENIED"].get<std::uint32_t>(),
            40u);
  ASSERT_EQ(j["planes"].size(), 4u);
  std::uint64_t plane_tx = 0;
  for (const auto& pl : j["planes"]) plane_tx += pl["tx_packets"].get<std::uint64_t>();
  EXPECT_EQ(plane_tx, qc.tx_data + qc.tx_rtx + qc.tx_probe);
  std::uint64_t ev_tx = 0;
  for (const auto& e : j["ev_tx"]) ev_tx += e["packets"].get<std::uint64_t>();
  EXPECT_EQ(ev_tx, plane_tx);
  EXPECT_EQ(j["endpoint"]["rx_bad_packet"], 0);
}

TEST(Metrics, PrometheusTextIsWellFormed) {
  IoPair p;
  ASSERT_TRUE(p.open(2, 1 << 20, 52));
  move(p, 1 << 20);
  const std::string text = io::metrics_prometheus(*p.a, "host=\"a\"");
  std::istringstream in(text);
  std::string line;
  std::set<std::string> typed;
  std::size_t samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(typed.insert(name).second) << "duplicate TYPE for " << name;
    }
    if (line[0] == '#') {
      EXPECT_TRUE(line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) << line;
      if (line.rfind("# TYPE ", 0) == 0) {
        const std::string type = line.substr(line.rfind(' ') + 1);
        EXPECT_TRUE(type == "counter" || type == "gauge") << line;
      }
    } else {
      EXPECT_TRUE(valid_sample(line)) << line;
      ++samples;
    }
  }
  EXPECT_GT(samples, 50u);
  EXPECT_FALSE(valid_sample("bad name 1"));
  EXPECT_FALSE(valid_sample("x{a=\"1\" 2"));
  EXPECT_FALSE(valid_sample("x{a=\"1\"} -2"));
  EXPECT_TRUE(valid_sample("x{a=\"1\",b=\"\"} 2"));
  const auto& qc = p.a->engine().qp(p.qa)->counters();
  const std::string want = "mrc_qp_tx_data_total{host=\"a\",qpn=\"" + std::to_string(p.qa) + "\"} " +
                           std::to_string(qc.tx_data) + "\n";
  EXPECT_NE(text.find(want), std::string::npos) << want;
  EXPECT_NE(text.find("mrc_ev_state{host=\"a\",qpn="), std::string::npos);
  EXPECT_NE(text.find("mrc_plane_tx_packets_total{host=\"a\",plane=\"1\"}"), std::string::npos);
}

}  // namespace
}  // namespace mrc::iotest
