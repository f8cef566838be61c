#include "sim/roce.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <queue>
#include <vector>

namespace mrc::sim {
namespace {

using engine::QpRemote;
using engine::SendWr;
using engine::TrafficClass;
using engine::TxPacket;

// A tiny star network for the tests: every host has one NIC port (serialising at `rate_bps`) and a
// link of `delay` to one switch; the switch has, per destination host, an egress port with a strict-
// priority control FIFO and an unbounded (lossless) data FIFO with RED-style ECN marking on dequeue.
// Time in nanoseconds; serialisation rounded up.
struct NetConfig {
  double rate_bps = 100e9;
  Duration delay = 1_us;
  std::uint32_t wire_overhead = 46;
  std::uint64_t kmin = 0, kmax = 0;  ///< kmax == 0: no marking
  double pmax = 1.0;
  std::uint64_t seed = 7;
};

struct Pkt {
  std::vector<std::uint8_t> bytes;
  std::uint32_t src = 0, dst = 0;
  TrafficClass tc = TrafficClass::kData;
  bool ce = false;
  std::uint8_t op() const { return bytes[0]; }
  std::uint32_t psn() const {
    return (std::uint32_t{bytes[9]} << 16) | (std::uint32_t{bytes[10]} << 8) | bytes[11];
  }
  std::uint32_t wire(std::uint32_t overhead) const {
    return static_cast<std::uint32_t>(bytes.size()) + overhead;
  }
};

struct TxLog {
  Time t;
  std::uint32_t src, psn;
  std::uint8_t op;
  TrafficClass tc;
  std::uint32_t ev;
};

class Net {
 public:
  explicit Net(const NetConfig& c) : cfg_(c), rng_(c.seed) {}

  std::uint32_t add(RoceNic& nic) {
    hosts_.push_back(&nic);
    host_busy_.push_back(false);
    egress_.emplace_back();
    return static_cast<std::uint32_t>(hosts_.size() - 1);
  }
  /// Return true to lose the packet (after it left the sender).
  std::function<bool(const Pkt&)> drop;
  /// Return true to set ECN-CE (in addition to the RED marking).
  std::function<bool(const Pkt&)> mark;
  std::vector<TxLog> log;
  std::vector<std::pair<Time, Pkt>> delivered;  // (time, packet) for control packets
  Time now = 0;
  std::uint64_t peak_queue = 0;

  void kick(std::uint32_t h) { service(h); }

  void run_until(Time end) {
    for (;;) {
      Time tm = kNever;
      for (RoceNic* n : hosts_) tm = std::min(tm, n->next_deadline());
      const Time te = events_.empty() ? kNever : events_.top().t;
      const Time t = std::min(tm, te);
      if (t == kNever || t > end) break;
      now = std::max(now, t);
      if (tm <= te) {
        for (std::uint32_t h = 0; h < hosts_.size(); ++h) {
          if (hosts_[h]->next_deadline() <= now) {
            hosts_[h]->on_timer(now);
            service(h);
          }
        }
        continue;
      }
      const Ev e = events_.top();
      events_.pop();
      switch (e.kind) {
        case kHostFree:
          host_busy_[e.node] = false;
          service(e.node);
          break;
        case kSwitchArrive:
          enqueue(e.pkt);
          break;
        case kEgressFree:
          egress_[e.node].busy = false;
          start(e.node);
          break;
        case kHostArrive: {
          Pkt& p = pool_[e.pkt];
          engine::RxMeta m;
          m.peer = p.src;
          m.ecn_ce = p.ce;
          if (p.tc == TrafficClass::kControl) delivered.emplace_back(now, p);
          hosts_[p.dst]->receive(p.bytes, m, now);
          std::vector<std::uint8_t>().swap(p.bytes);  // delivered: release the copy
          service(p.dst);
          break;
        }
      }
    }
    now = std::max(now, end);
  }

 private:
  enum Kind { kHostFree, kSwitchArrive, kEgressFree, kHostArrive };
  struct Ev {
    Time t;
    std::uint64_t seq;
    Kind kind;
    std::uint32_t node;
    std::size_t pkt;
    bool operator>(const Ev& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  struct Egress {
    std::deque<std::size_t> ctrl, data;
    std::uint64_t data_bytes = 0;
    bool busy = false;
  };

  Duration ser(std::uint32_t bytes) const {
    return static_cast<Duration>(std::ceil(static_cast<double>(bytes) * 8e9 / cfg_.rate_bps));
  }
  void schedule(Time t, Kind k, std::uint32_t node, std::size_t pkt) {
    events_.push(Ev{t, seq_++, k, node, pkt});
  }

  void service(std::uint32_t h) {
    if (host_busy_[h]) return;
    if (!hosts_[h]->poll_tx(tx_, now, 1)) return;
    Pkt p;
    p.bytes.assign(tx_.header, tx_.header + tx_.header_len);
    if (tx_.payload_len > 0) p.bytes.insert(p.bytes.end(), tx_.payload, tx_.payload + tx_.payload_len);
    p.bytes.insert(p.bytes.end(), tx_.trailer, tx_.trailer + tx_.trailer_len);
    p.src = h;
    p.dst = tx_.peer;
    p.tc = tx_.tc;
    EXPECT_EQ(tx_.wire_size(), p.bytes.size());
    EXPECT_EQ(tx_.port, 0u);
    log.push_back(TxLog{now, h, p.psn(), p.op(), p.tc, tx_.ev.value});
    const Duration s = ser(p.wire(cfg_.wire_overhead));
    host_busy_[h] = true;
    schedule(now + s, kHostFree, h, 0);
    if (drop && drop(p)) return;
    pool_.push_back(std::move(p));
    schedule(now + s + cfg_.delay, kSwitchArrive, 0, pool_.size() - 1);
  }

  void enqueue(std::size_t i) {
    Pkt& p = pool_[i];
    Egress& e = egress_[p.dst];
    if (p.tc == TrafficClass::kControl) {
      e.ctrl.push_back(i);
    } else {
      e.data.push_back(i);
      e.data_bytes += p.wire(cfg_.wire_overhead);
      peak_queue = std::max(peak_queue, e.data_bytes);
    }
    start(p.dst);
  }

  void start(std::uint32_t port) {
    Egress& e = egress_[port];
    if (e.busy || (e.ctrl.empty() && e.data.empty())) return;
    std::size_t i;
    if (!e.ctrl.empty()) {
      i = e.ctrl.front();
      e.ctrl.pop_front();
    } else {
      i = e.data.front();
      e.data.pop_front();
      Pkt& p = pool_[i];
      e.data_bytes -= p.wire(cfg_.wire_overhead);
      if (cfg_.kmax > 0) {  // RED on dequeue, on what is left behind
        double prob = 0;
        if (e.data_bytes >= cfg_.kmax)
          prob = 1;
        else if (e.data_bytes > cfg_.kmin)
          prob = cfg_.pmax * static_cast<double>(e.data_bytes - cfg_.kmin) /
                 static_cast<double>(cfg_.kmax - cfg_.kmin);
        if (rng_.chance(prob)) p.ce = true;
      }
      if (mark && mark(p)) p.ce = true;
    }
    e.busy = true;
    const Duration s = ser(pool_[i].wire(cfg_.wire_overhead));
    schedule(now + s, kEgressFree, port, 0);
    schedule(now + s + cfg_.delay, kHostArrive, 0, i);
  }

  NetConfig cfg_;
  Rng rng_;
  std::vector<RoceNic*> hosts_;
  std::vector<bool> host_busy_;
  std::vector<Egress> egress_;
  std::vector<Pkt> pool_;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  TxPacket tx_;
};

/// Two NICs with one connected QP pair (host 0 = requester A, host 1 = responder B).
struct Pair {
  explicit Pair(const RoceConfig& ca, const RoceConfig& cb, const NetConfig& nc = {})
      : a(ca), b(cb), net(nc) {
    net.add(a);
    net.add(b);
    qa = a.create_qp();
    qb = b.create_qp();
    EXPECT_EQ(a.connect_qp(qa, QpRemote{1, qb, 0, 0, 8, 128}, 0), 0);
    EXPECT_EQ(b.connect_qp(qb, QpRemote{0, qa, 0, 0, 8, 128}, 0), 0);
  }
  RoceNic a, b;
  Net net;
  std::uint32_t qa = 0, qb = 0;
};

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t salt) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>((i * 131 + salt + (i >> 8)) & 0xFF);
  return v;
}

SendWr write_wr(std::uint64_t id, const std::uint8_t* src, std::uint32_t lkey, std::uint8_t* dst,
                std::uint32_t rkey, std::uint32_t len) {
  SendWr wr;
  wr.wr_id = id;
  wr.local_addr = reinterpret_cast<std::uintptr_t>(src);
  wr.lkey = lkey;
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(dst);
  wr.rkey = rkey;
  wr.length = len;
  return wr;
}

std::vector<engine::Completion> drain(RoceNic& n) {
  std::vector<engine::Completion> v;
  engine::Completion c;
  while (n.poll_completion(c)) v.push_back(c);
  return v;
}

// --- wire format -------------------------------------------------------------------------------------

TEST(RoceNic, WireFormatAndFixedEntropy) {
  RoceConfig cfg;
  RoceNic a(cfg);
  const std::uint32_t q = a.create_qp(), q2 = a.create_qp();
  ASSERT_EQ(a.connect_qp(q, QpRemote{5, 0x123456, 0xFFFFFE, 0, 8, 128}, 0), 0);
  SendWr wr;
  wr.wr_id = 1;
  wr.length = 10000;  // 4096 + 4096 + 1808
  wr.with_imm = true;
  wr.imm = 0xA1B2C3D4;
  wr.remote_addr = 0x1122334455667788ULL;
  wr.rkey = 0x99;
  ASSERT_EQ(a.post_send(q, wr, 0), 0);
  TxPacket t;
  const std::uint8_t ops[3] = {RoceNic::kOpWriteFirst, RoceNic::kOpWriteMiddle, RoceNic::kOpWriteLastImm};
  const std::uint16_t hl[3] = {28, 12, 16};
  const std::uint32_t pl[3] = {4096, 4096, 1808};
  const std::uint32_t psn[3] = {0xFFFFFE, 0xFFFFFF, 0};  // 24-bit wrap
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(a.poll_tx(t, 0, 1));
    EXPECT_EQ(t.header[0], ops[i]);
    EXPECT_EQ(t.header_len, hl[i]);
    EXPECT_EQ(t.payload_len, pl[i]);
    EXPECT_EQ(t.trailer_len, 4);
    EXPECT_EQ(t.wire_size(), hl[i] + pl[i] + 4u);
    EXPECT_EQ(t.psn, psn[i]);
    EXPECT_EQ(t.header[5], 0x12);
    EXPECT_EQ(t.header[7], 0x56);
    EXPECT_EQ(t.ev.value, a.entropy(q));
    EXPECT_EQ(t.ev.port, 0);
    EXPECT_EQ(t.peer, 5u);
    EXPECT_EQ(t.tc, TrafficClass::kData);
    EXPECT_EQ(t.header[8] & 0x80, i == 2 ? 0x80 : 0);  // AckReq on the last packet
  }
  EXPECT_FALSE(a.poll_tx(t, 0, 1));  // nothing left
  EXPECT_FALSE(a.poll_tx(t, 0, 0));  // and a busy port never gets anything
  // Entropy: fixed per QP, drawn from the seed.
  cfg.seed = 2;
  RoceNic other(cfg);
  const std::uint32_t o = other.create_qp(), o2 = other.create_qp();
  EXPECT_FALSE(a.entropy(q) == other.entropy(o) && a.entropy(q2) == other.entropy(o2));
  EXPECT_NE(a.entropy(q), a.entropy(q2));
  RoceConfig same;
  RoceNic again(same);
  EXPECT_EQ(again.entropy(again.create_qp()), a.entropy(q));
  EXPECT_FALSE(RoceNic::kTrimmable);
  EXPECT_TRUE(RoceNic::kLossless);
}

// --- reliable, in-order delivery ---------------------------------------------------------------------

TEST(RoceNic, ByteExactInOrderWithImm) {
  Pair p(RoceConfig{}, RoceConfig{});
  auto src = pattern(1 << 20, 3);
  std::vector<std::uint8_t> dst(1 << 20, 0);
  const std::uint32_t lk = p.a.add_region(src.data(), src.size());
  const std::uint32_t rk = p.b.add_region(dst.data(), dst.size());
  const std::uint32_t lens[4] = {300000, 1, 4096, 700000};
  std::uint32_t off = 0;
  std::uint32_t pkts = 0;
  for (std::uint32_t i = 0; i < 4; ++i) {
    SendWr wr = write_wr(100 + i, src.data() + off, lk, dst.data() + off, rk, lens[i]);
    wr.with_imm = i == 3;
    wr.imm = 77;
    ASSERT_EQ(p.a.post_send(p.qa, wr, 0), 0);
    off += lens[i];
    pkts += (lens[i] + 4095) / 4096;
  }
  ASSERT_LE(off, src.size());
  p.net.kick(0);
  p.net.run_until(10_ms);
  auto ca = drain(p.a);
  ASSERT_EQ(ca.size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ca[i].wr_id, 100 + i);
    EXPECT_EQ(ca[i].status, engine::WcStatus::kSuccess);
    EXPECT_EQ(ca[i].byte_len, lens[i]);
  }
  auto cb = drain(p.b);
  ASSERT_EQ(cb.size(), 1u);
  EXPECT_TRUE(cb[0].is_recv);
  EXPECT_EQ(cb[0].imm, 77u);
  EXPECT_EQ(cb[0].byte_len, lens[3]);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + off, dst.begin()));
  EXPECT_TRUE(std::all_of(dst.begin() + off, dst.end(), [](std::uint8_t x) { return x == 0; }));
  const auto& a = p.a.qp_counters(p.qa);
  const auto& b = p.b.qp_counters(p.qb);
  EXPECT_EQ(a.tx_data, pkts);
  EXPECT_EQ(a.tx_rtx, 0u);
  EXPECT_EQ(b.rx_data, pkts);
  EXPECT_EQ(b.rx_out_of_order, 0u);
  EXPECT_EQ(b.tx_ack, pkts);  // one ACK per packet
  EXPECT_EQ(a.rx_ack, pkts);
  EXPECT_EQ(b.bytes_received, off);
  EXPECT_EQ(a.bytes_acked, off);
  // The data went out in PSN order, back to back at line rate.
  std::uint32_t expect = 0;
  Time prev = 0;
  bool first = true;
  for (const TxLog& l : p.net.log) {
    if (l.src != 0) continue;
    EXPECT_EQ(l.psn, expect++);
    if (!first && l.psn >= 2 && l.psn < 73) {  // message 0: 4096 + 12 + 4 + 46 B = 332.64 ns
      EXPECT_EQ(l.t - prev, 333u);
    }
    prev = l.t;
    first = false;
  }
  EXPECT_EQ(p.a.outstanding(p.qa), 0u);
  EXPECT_EQ(p.a.next_deadline(), kNever);  // RTO disarmed when everything is acknowledged
}

TEST(RoceNic, CoalescedAcks) {
  RoceConfig cb;
  cb.ack_every = 4;
  Pair p(RoceConfig{}, cb);
  for (int i = 0; i < 2; ++i) {
    SendWr wr;
    wr.wr_id = static_cast<std::uint64_t>(i);
    wr.length = 10 * 4096;
    ASSERT_EQ(p.a.post_send(p.qa, wr, 0), 0);
  }
  p.net.kick(0);
  p.net.run_until(5_ms);
  EXPECT_EQ(drain(p.a).size(), 2u);
  // Per 10-packet message: after packets 4, 8 and the last one.
  EXPECT_EQ(p.b.qp_counters(p.qb).tx_ack, 6u);
  EXPECT_EQ(p.b.qp_counters(p.qb).rx_data, 20u);
}

// --- go-back-N -----------------------------------------------------------------------------------------

struct LossRun {
  std::vector<TxLog> data;  // requester's data transmissions
  RoceQpCounters a, b;
  bool exact = false;
  std::size_t completions = 0;
  Time done = 0;
};

LossRun run_with_losses(std::uint32_t drop_psn, bool drop_nak, RoceConfig ca = {}) {
  ca.rto = 100_us;
  Pair p(ca, RoceConfig{});
  auto src = pattern(100 * 4096, 9);
  std::vector<std::uint8_t> dst(src.size(), 0);
  const std::uint32_t lk = p.a.add_region(src.data(), src.size());
  const std::uint32_t rk = p.b.add_region(dst.data(), dst.size());
  bool dropped_data = false, dropped_nak = false;
  p.net.drop = [&](const Pkt& k) {
    if (k.src == 0 && !dropped_data && k.psn() == drop_psn) return dropped_data = true;
    if (k.src == 1 && drop_nak && !dropped_nak && k.op() == RoceNic::kOpAck && k.bytes[12] == 0x60)
      return dropped_nak = true;
    return false;
  };
  EXPECT_EQ(p.a.post_send(p.qa, write_wr(1, src.data(), lk, dst.data(), rk, 100 * 4096), 0), 0);
  p.net.kick(0);
  LossRun r;
  for (Time t = 0; t < 20_ms && r.completions == 0; t += 1_us) {
    p.net.run_until(t);
    r.completions += drain(p.a).size();
    r.done = t;
  }
  for (const TxLog& l : p.net.log)
    if (l.src == 0) r.data.push_back(l);
  r.a = p.a.qp_counters(p.qa);
  r.b = p.b.qp_counters(p.qb);
  r.exact = src == dst;
  return r;
}

TEST(RoceNic, GoBackNFromTheNakedPsn) {
  const LossRun r = run_with_losses(20, false);
  ASSERT_EQ(r.completions, 1u);
  EXPECT_TRUE(r.exact);
  // The log is 0..H (first transmissions), then 20..99: go-back-N restarts exactly at the lost PSN.
  std::size_t i = 0;
  while (i + 1 < r.data.size() && r.data[i + 1].psn == r.data[i].psn + 1) ++i;
  const std::uint32_t h = r.data[i].psn;
  ASSERT_GT(h, 20u);
  ASSERT_LT(h, 99u);
  EXPECT_EQ(r.data[i + 1].psn, 20u);
  EXPECT_EQ(r.data[i + 1].tc, TrafficClass::kDataRtx);
  for (std::size_t k = i + 1; k < r.data.size(); ++k) EXPECT_EQ(r.data[k].psn, 20 + (k - i - 1));
  EXPECT_EQ(r.data.back().psn, 99u);
  EXPECT_EQ(r.data.size(), 100u + (h - 20 + 1));
  EXPECT_EQ(r.a.tx_rtx, h - 20 + 1);  // exact retransmissions: 20..H
  EXPECT_EQ(r.b.tx_nak, 1u);          // one NAK for the gap, however many packets fell into it
  EXPECT_EQ(r.a.rx_nak, 1u);
  EXPECT_EQ(r.b.rx_out_of_order, h - 20);  // 21..H dropped by the responder
  EXPECT_EQ(r.b.rx_duplicate, 0u);
  EXPECT_EQ(r.a.timeouts, 0u);
  // The NAK returns one RTT after PSN 21 arrived: RTT ~ 4 x 1 us + serialisations => ~14 packets.
  EXPECT_GE(h - 20, 12u);
  EXPECT_LE(h - 20, 16u);
}

TEST(RoceNic, TimeoutRecoversWhenTheNakIsLost) {
  const LossRun r = run_with_losses(20, true);
  ASSERT_EQ(r.completions, 1u);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.b.tx_nak, 1u);  // the responder NAKs once per gap, even though 79 packets hit the gap
  EXPECT_EQ(r.a.rx_nak, 0u);
  EXPECT_EQ(r.a.timeouts, 1u);
  EXPECT_EQ(r.b.rx_out_of_order, 79u);  // 21..99
  // The whole message (33.6 us) went out before the 100 us RTO, so go-back-N resends 20..99.
  EXPECT_EQ(r.a.tx_rtx, 80u);
  ASSERT_EQ(r.data.size(), 180u);
  EXPECT_EQ(r.data[100].psn, 20u);
  EXPECT_GE(r.data[100].t, 100_us);
  EXPECT_GE(r.done, 100_us);
}

TEST(RoceNic, TailLossNeedsTheTimeout) {
  const LossRun r = run_with_losses(99, false);
  ASSERT_EQ(r.completions, 1u);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.b.tx_nak, 0u);  // nothing arrives after the gap: no NAK
  EXPECT_EQ(r.a.timeouts, 1u);
  EXPECT_EQ(r.a.tx_rtx, 1u);
}

TEST(RoceNic, RetryLimitMovesTheQpToError) {
  RoceConfig c;
  c.rto = 10_us;
  c.retry_limit = 3;
  Pair p(c, RoceConfig{});
  p.net.drop = [](const Pkt& k) { return k.src == 0; };  // a black hole
  SendWr wr;
  wr.wr_id = 9;
  wr.length = 8192;
  ASSERT_EQ(p.a.post_send(p.qa, wr, 0), 0);
  wr.wr_id = 10;
  ASSERT_EQ(p.a.post_send(p.qa, wr, 0), 0);
  p.net.kick(0);
  p.net.run_until(1_ms);
  auto c2 = drain(p.a);
  ASSERT_EQ(c2.size(), 2u);
  EXPECT_EQ(c2[0].status, engine::WcStatus::kRetryExceeded);
  EXPECT_EQ(c2[1].status, engine::WcStatus::kFlushed);
  EXPECT_TRUE(p.a.qp_error(p.qa));
  EXPECT_EQ(p.a.qp_counters(p.qa).timeouts, 4u);
  EXPECT_EQ(p.a.post_send(p.qa, wr, 0), EINVAL);
}

// --- DCQCN ---------------------------------------------------------------------------------------------

RoceConfig dcqcn_cfg() {
  RoceConfig c;
  c.dcqcn = true;
  return c;
}

TEST(RoceNic, DcqcnDecreaseAndRecoveryStages) {
  Pair p(dcqcn_cfg(), dcqcn_cfg());
  const DcqcnParams& d = p.a.config().dcqcn_params;
  // Mark two data packets: PSN 10 and, well past the 50 us CNP interval, PSN 120.
  p.net.mark = [](const Pkt& k) { return k.src == 0 && (k.psn() == 10 || k.psn() == 120); };
  SendWr wr;
  wr.length = 64u << 20;  // enough to keep sending for the whole test
  ASSERT_EQ(p.a.post_send(p.qa, wr, 0), 0);
  p.net.kick(0);
  auto cnp_times = [&] {
    std::vector<Time> v;
    for (auto& [t, k] : p.net.delivered)
      if (k.op() == RoceNic::kOpCnp) v.push_back(t);
    return v;
  };
  p.net.run_until(200_us);
  auto cnps = cnp_times();
  ASSERT_EQ(cnps.size(), 2u);
  const Time t1 = cnps[0], t2 = cnps[1];
  ASSERT_GT(t2 - t1, 50_us);
  ASSERT_LT(t2 - t1, 300_us);
  EXPECT_EQ(p.b.qp_counters(p.qb).tx_cnp, 2u);
  EXPECT_EQ(p.a.qp_counters(p.qa).rx_cnp, 2u);

  // First CNP: alpha = 1, the rate halves (100G -> 50G). Second CNP: alpha decayed once per 1 us
  // period without a CNP, the rate drops by alpha / 2 and the target keeps the old rate.
  const double alpha2 = std::pow(1 - d.g, static_cast<double>((t2 - t1) / d.alpha_interval));
  const double r2 = 50e9 * (1 - alpha2 / 2);
  DcqcnState s = p.a.dcqcn_state(p.qa, t2);
  EXPECT_TRUE(s.active);
  EXPECT_EQ(s.decreases, 2u);
  EXPECT_EQ(s.increases, 0u);  // the 300 us timer has not fired since the first decrease
  EXPECT_NEAR(s.alpha, alpha2, 1e-12);
  EXPECT_NEAR(s.target_bps, 50e9, 1);
  EXPECT_NEAR(s.rate_bps, r2, 1);
  EXPECT_EQ(s.last_stage, DcqcnStage::kNone);
  // Pacing: between the CNPs A sent at ~50 Gb/s (4194 B every 671 ns), not at line rate.
  std::uint64_t bytes = 0;
  for (const TxLog& l : p.net.log)
    if (l.src == 0 && l.t >= t1 + 5_us && l.t < t2 - 5_us) bytes += 4194;
  const double gbps = static_cast<double>(bytes) * 8 / static_cast<double>(t2 - t1 - 10_us);
  EXPECT_NEAR(gbps, 50.0, 1.5);

  // Recovery: fast recovery (F = 1 step), then additive, then hyper increase, every 300 us.
  double rate = r2, target = 50e9;
  const DcqcnStage stages[4] = {DcqcnStage::kFastRecovery, DcqcnStage::kAdditive, DcqcnStage::kHyper,
                                DcqcnStage::kHyper};
  for (int k = 0; k < 4; ++k) {
    if (stages[k] == DcqcnStage::kAdditive) target += d.rate_ai_bps;
    if (stages[k] == DcqcnStage::kHyper) target += d.rate_hai_bps;
    rate = (rate + target) / 2;
    const Time at = t2 + static_cast<Time>(k + 1) * d.increase_interval;
    p.net.run_until(at - 1);
    EXPECT_EQ(p.a.dcqcn_state(p.qa, at - 1).increases, static_cast<std::uint64_t>(k)) << k;
    p.net.run_until(at);
    s = p.a.dcqcn_state(p.qa, at);
    EXPECT_EQ(s.last_stage, stages[k]) << k;
    EXPECT_EQ(s.increases, static_cast<std::uint64_t>(k + 1));
    EXPECT_NEAR(s.rate_bps, rate, 1) << k;
    EXPECT_NEAR(s.target_bps, target, 1) << k;
  }
  EXPECT_EQ(s.decreases, 2u);
  // With no further marks it climbs back to line rate and stops its timer.
  p.net.run_until(t2 + 400 * d.increase_interval);
  s = p.a.dcqcn_state(p.qa, p.net.now);
  EXPECT_EQ(s.rate_bps, 100e9);
  EXPECT_LT(s.alpha, 1e-6);
}

TEST(RoceNic, NotificationPointSendsAtMostOneCnpPer50us) {
  Pair p(dcqcn_cfg(), dcqcn_cfg());
  p.net.mark = [](const Pkt& k) { return k.src == 0; };  // every data packet is CE
  SendWr wr;
  wr.length = 64u << 20;
  ASSERT_EQ(p.a.post_send(p.qa, wr, 0), 0);
  p.net.kick(0);
  p.net.run_until(1_ms);
  std::vector<Time> t;
  for (auto& [at, k] : p.net.delivered)
    if (k.op() == RoceNic::kOpCnp) t.push_back(at);
  ASSERT_GE(t.size(), 10u);
  for (std::size_t i = 1; i < t.size(); ++i) EXPECT_GE(t[i] - t[i - 1], 50_us);
  EXPECT_LE(t.size(), 20u);
  const auto& b = p.b.qp_counters(p.qb);
  EXPECT_EQ(b.tx_cnp, t.size());
  EXPECT_GT(b.rx_ecn, 10 * b.tx_cnp);
  // The requester keeps decreasing: far below line rate, never below the minimum.
  const DcqcnState s = p.a.dcqcn_state(p.qa, p.net.now);
  EXPECT_LT(s.rate_bps, 20e9);
  EXPECT_GE(s.rate_bps, p.a.config().dcqcn_params.min_rate_bps);
}

struct FairRun {
  std::uint64_t bytes[2] = {0, 0};
  std::uint64_t cnps[2] = {0, 0};
  std::uint64_t hash = 0;
  std::uint64_t peak = 0;
};

// Two DCQCN flows into one 100G receiver port with DCQCN-paper RED marking (Kmin 5 KB, Kmax 200 KB,
// Pmax 1%); flow 1 starts at 0, flow 2 at 1 ms. Delivered bytes per flow in [from, end).
FairRun fair_run(bool dcqcn, Time from, Time end, std::uint64_t seed = 1) {
  RoceConfig c = dcqcn_cfg();
  c.dcqcn = dcqcn;
  c.seed = seed;
  NetConfig nc;
  nc.kmin = 5000;
  nc.kmax = 200000;
  nc.pmax = 0.01;
  nc.seed = seed;
  RoceNic s1(c), s2(c), r(c);
  Net net(nc);
  net.add(s1);
  net.add(s2);
  net.add(r);
  const std::uint32_t q1 = s1.create_qp(), q2 = s2.create_qp(), r1 = r.create_qp(), r2 = r.create_qp();
  EXPECT_EQ(s1.connect_qp(q1, QpRemote{2, r1, 0, 0, 8, 128}, 0), 0);
  EXPECT_EQ(s2.connect_qp(q2, QpRemote{2, r2, 0, 0, 8, 128}, 0), 0);
  EXPECT_EQ(r.connect_qp(r1, QpRemote{0, q1, 0, 0, 8, 128}, 0), 0);
  EXPECT_EQ(r.connect_qp(r2, QpRemote{1, q2, 0, 0, 8, 128}, 0), 0);
  SendWr wr;
  wr.length = 1u << 30;
  EXPECT_EQ(s1.post_send(q1, wr, 0), 0);
  net.kick(0);
  net.run_until(1_ms);
  EXPECT_EQ(s2.post_send(q2, wr, net.now), 0);
  net.kick(1);
  net.run_until(from);
  const std::uint64_t b1 = r.qp_counters(r1).bytes_received, b2 = r.qp_counters(r2).bytes_received;
  net.run_until(end);
  FairRun f;
  f.bytes[0] = r.qp_counters(r1).bytes_received - b1;
  f.bytes[1] = r.qp_counters(r2).bytes_received - b2;
  f.cnps[0] = r.qp_counters(r1).tx_cnp;
  f.cnps[1] = r.qp_counters(r2).tx_cnp;
  f.peak = net.peak_queue;
  for (const TxLog& l : net.log)
    f.hash = (f.hash ^ (l.t * 1000003 + l.src * 131 + l.psn * 7 + l.op + l.ev * 17)) * 0x100000001b3ULL;
  return f;
}

TEST(RoceNic, DcqcnTwoFlowsConvergeToSimilarRates) {
  const FairRun f = fair_run(true, 10_ms, 20_ms);
  EXPECT_GT(f.cnps[0], 10u);
  EXPECT_GT(f.cnps[1], 10u);
  const double g1 = static_cast<double>(f.bytes[0]) * 8 / 10e6,
               g2 = static_cast<double>(f.bytes[1]) * 8 / 10e6;
  // Together they fill the bottleneck (payload goodput of a 100G port: 100 x 4096 / 4158 = 98.5).
  EXPECT_GT(g1 + g2, 85.0);
  EXPECT_LT(g1 + g2, 100.0);
  EXPECT_NEAR(g1 / (g1 + g2), 0.5, 0.1) << g1 << " " << g2;
  std::printf("dcqcn 2 flows: %.2f %.2f Gb/s, cnps %llu %llu, peak queue %llu B\n", g1, g2,
              static_cast<unsigned long long>(f.cnps[0]), static_cast<unsigned long long>(f.cnps[1]),
              static_cast<unsigned long long>(f.peak));
  // Without CC the queue at the receiver grows without bound (lossless: nothing is dropped).
  const FairRun n = fair_run(false, 2_ms, 4_ms);
  EXPECT_GT(n.peak, 50 * f.peak / 10);
}

TEST(RoceNic, Deterministic) {
  const FairRun a = fair_run(true, 2_ms, 3_ms), b = fair_run(true, 2_ms, 3_ms);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.bytes[0], b.bytes[0]);
  EXPECT_EQ(a.bytes[1], b.bytes[1]);
  const FairRun c = fair_run(true, 2_ms, 3_ms, 2);
  EXPECT_NE(a.hash, c.hash);
}

}  // namespace
}  // namespace mrc::sim
