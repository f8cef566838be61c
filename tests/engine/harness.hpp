// Two endpoints joined by the in-memory multi-plane network, one connected QP pair, and helpers
// to post writes and run until completions arrive.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "cc/nscc.hpp"
#include "common/rng.hpp"
#include "engine/endpoint.hpp"
#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "sim/pathnet.hpp"

namespace mrc::test {

struct PairOptions {
  std::uint32_t planes = 4;
  std::uint32_t paths = 16;
  sim::PathSpec path{};
  Duration delay_spread = 0;
  double port_rate_bps = 100e9;
  std::uint32_t active_per_port = 16;
  std::uint32_t backup_per_port = 4;
  std::uint64_t seed = 1;
  bool nscc = true;
  std::size_t buf_size = 1 << 20;
  std::uint32_t pmtu = 4096;
  std::uint8_t mpr = 8;
  std::uint16_t max_wimm = 128;
  std::uint16_t max_wimm_dest = 128;
  std::uint8_t timeout = 10;  // 1.05 ms
  std::uint8_t retry_linear = 7;
  std::uint8_t retry_exp = 25;
  bool icrc = true;
  bool auth = false;         ///< MAC-authenticated QPs (engine/auth.hpp), fixed test keys
  bool wire_ext = true;      ///< EndpointConfig::wire_ext of A
  bool wire_ext_b = true;    ///< B's; the connection agrees to the extensions only if both offer them (D45)
  bool failover_dup = true;  ///< Tunables::failover_dup of A (D56)
};

inline engine::QpConfig make_qp_config(const PairOptions& o, Duration base_rtt, std::uint64_t seed) {
  engine::QpConfig c;
  c.pmtu = o.pmtu;
  c.mpr = c.mpr_dest = o.mpr;
  c.max_wimm = o.max_wimm;
  c.max_wimm_dest = o.max_wimm_dest;
  c.timeout = o.timeout;
  c.retry_linear = o.retry_linear;
  c.retry_exp = o.retry_exp;
  c.evs = engine::make_ev_set(o.planes, o.active_per_port, o.backup_per_port);
  c.active_count = o.planes * o.active_per_port;
  c.seed = seed;
  c.cc.algorithm = o.nscc ? cc::Algorithm::kNscc : cc::Algorithm::kNone;
  c.cc.nscc = cc::NsccConfig::derive(static_cast<std::uint64_t>(o.port_rate_bps * o.planes),
                                     static_cast<std::uint32_t>(base_rtt), o.pmtu + 64, true);
  return c;
}

class Pair {
 public:
  static engine::QpRemote remote(std::uint32_t peer, std::uint32_t qpn, std::uint32_t sq_psn,
                                 std::uint32_t rq_psn, const PairOptions& o) {
    engine::QpRemote r;
    r.peer = peer;
    r.qpn = qpn;
    r.sq_psn = sq_psn;
    r.rq_psn = rq_psn;
    r.peer_mpr_dest = o.mpr;
    r.peer_max_wimm_dest = o.max_wimm_dest;
    r.wire_ext = o.wire_ext && o.wire_ext_b;  // what a driver's negotiation would conclude
    return r;
  }
  explicit Pair(const PairOptions& o) : opt_(o), net_(net_config(o)) {
    engine::EndpointConfig ec;
    ec.num_ports = o.planes;
    ec.icrc = o.icrc;
    ec.wire_ext = o.wire_ext;
    ec.seed = o.seed * 2 + 1;
    ec.tun.failover_dup = o.failover_dup;
    a_ = std::make_unique<engine::Endpoint>(ec);
    ec.seed = o.seed * 2 + 2;
    ec.wire_ext = o.wire_ext_b;
    b_ = std::make_unique<engine::Endpoint>(ec);
    na_ = net_.add_node(*a_);
    nb_ = net_.add_node(*b_);
    src_.resize(o.buf_size);
    dst_.resize(o.buf_size);
    Rng r(o.seed);
    for (auto& x : src_) x = static_cast<std::uint8_t>(r.next());
    mra_ = a_->memory().register_region(src_.data(), src_.size(), engine::access::kAll);
    mrb_ = b_->memory().register_region(dst_.data(), dst_.size(), engine::access::kAll);
    const Duration rtt = net_.base_rtt();
    qa_ = a_->create_qp(make_qp_config(o, rtt, o.seed * 7 + 1));
    qb_ = b_->create_qp(make_qp_config(o, rtt, o.seed * 7 + 2));
    Rng pr(o.seed ^ 0xABCDEF);
    const std::uint32_t psn_ab = static_cast<std::uint32_t>(pr.next()) & kPsnMask;
    const std::uint32_t psn_ba = static_cast<std::uint32_t>(pr.next()) & kPsnMask;
    psn_ab_ = psn_ab;
    engine::QpRemote ra = remote(nb_, qb_, psn_ab, psn_ba, o);
    engine::QpRemote rb = remote(na_, qa_, psn_ba, psn_ab, o);
    if (o.auth) {
      const engine::MacKey k_ab{0x0123456789abcdefull ^ o.seed, 0x1122334455667788ull};
      const engine::MacKey k_ba{0xfedcba9876543210ull ^ o.seed, 0x8877665544332211ull};
      ra.auth = engine::QpAuth{true, k_ab, k_ba};
      rb.auth = engine::QpAuth{true, k_ba, k_ab};
    }
    a_->connect_qp(qa_, ra, 0);
    b_->connect_qp(qb_, rb, 0);
  }

  static sim::PathNetConfig net_config(const PairOptions& o) {
    sim::PathNetConfig c;
    c.planes = o.planes;
    c.paths_per_plane = o.paths;
    c.port_rate_bps = o.port_rate_bps;
    c.path = o.path;
    c.delay_spread = o.delay_spread;
    c.mtu_wire_bytes = o.pmtu + 64;
    c.seed = o.seed;
    return c;
  }

  /// RDMA WRITE (optionally with immediate) of src[off, off+len) to dst[roff, roff+len).
  int write(std::uint64_t wr_id, std::size_t off, std::uint32_t len, std::size_t roff, bool imm = false,
            std::uint32_t imm_data = 0) {
    engine::SendWr wr;
    wr.wr_id = wr_id;
    wr.with_imm = imm;
    wr.imm = imm_data;
    wr.local_addr = reinterpret_cast<std::uintptr_t>(src_.data() + off);
    wr.length = len;
    wr.lkey = mra_->lkey;
    wr.remote_addr = reinterpret_cast<std::uintptr_t>(dst_.data() + roff);
    wr.rkey = mrb_->rkey;
    const int rc = a_->post_send(qa_, wr, net_.now());
    net_.kick(na_);
    return rc;
  }

  /// Runs until `n` send completions and `r` receive completions have been collected.
  bool run_until_completions(std::size_t n, std::size_t r, Time limit) {
    return net_.run_while(
        [&] {
          drain();
          return send_done_.size() < n || recv_done_.size() < r;
        },
        limit);
  }

  void drain() {
    engine::Completion c;
    while (a_->poll_completion(c)) send_done_.push_back(c);
    while (b_->poll_completion(c)) (c.is_recv ? recv_done_ : b_send_done_).push_back(c);
    engine::Event e;
    while (a_->poll_event(e)) a_events_.push_back(e);
    while (b_->poll_event(e)) b_events_.push_back(e);
  }

  bool same(std::size_t off, std::size_t len, std::size_t roff) const {
    return std::memcmp(src_.data() + off, dst_.data() + roff, len) == 0;
  }

  sim::PathNet& net() { return net_; }
  engine::Endpoint& a() { return *a_; }
  engine::Endpoint& b() { return *b_; }
  engine::Qp& qpa() { return *a_->qp(qa_); }
  engine::Qp& qpb() { return *b_->qp(qb_); }
  std::uint32_t node_a() const { return na_; }
  std::uint32_t node_b() const { return nb_; }
  std::uint32_t qpn_a() const { return qa_; }
  std::uint32_t qpn_b() const { return qb_; }
  const engine::MemoryRegion& mr_a() const { return *mra_; }
  const engine::MemoryRegion& mr_b() const { return *mrb_; }
  std::vector<std::uint8_t>& src() { return src_; }
  std::vector<std::uint8_t>& dst() { return dst_; }
  std::vector<engine::Completion>& send_done() { return send_done_; }
  std::vector<engine::Completion>& recv_done() { return recv_done_; }
  std::vector<engine::Event>& a_events() { return a_events_; }
  const PairOptions& options() const { return opt_; }
  std::vector<engine::Event>& b_events() { return b_events_; }
  /// First PSN of the a->b direction.
  std::uint32_t psn_ab() const { return psn_ab_; }

 private:
  PairOptions opt_;
  sim::PathNet net_;
  std::unique_ptr<engine::Endpoint> a_, b_;
  std::uint32_t na_ = 0, nb_ = 0, qa_ = 0, qb_ = 0, psn_ab_ = 0;
  std::vector<std::uint8_t> src_, dst_;
  const engine::MemoryRegion* mra_ = nullptr;
  const engine::MemoryRegion* mrb_ = nullptr;
  std::vector<engine::Completion> send_done_, recv_done_, b_send_done_;
  std::vector<engine::Event> a_events_, b_events_;
};

}  // namespace mrc::test
