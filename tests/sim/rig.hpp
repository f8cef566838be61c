// Test rig: N sender endpoints writing into one receiver endpoint over a PathNet.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/rng.hpp"
#include "engine/endpoint.hpp"
#include "engine/ev_sets.hpp"
#include "sim/pathnet.hpp"

namespace mrc::sim::test {

struct RigOptions {
  PathNetConfig net;
  std::uint32_t senders = 1;
  std::uint64_t bytes = 1u << 20;  ///< per sender
  std::uint32_t active_per_plane = 8;
  std::uint32_t backup_per_plane = 2;
  cc::Algorithm cc = cc::Algorithm::kNscc;
  std::uint64_t seed = 1;
};

/// Node 0 .. senders-1 write `bytes` each into their own slice of node `senders`' buffer.
class Rig {
 public:
  explicit Rig(const RigOptions& o) : opt_(o), net_(o.net) {
    engine::EndpointConfig ec;
    ec.num_ports = o.net.planes;
    ec.tun.base_rtt_hint = net_.base_rtt();
    const std::uint32_t n = o.senders + 1;
    for (std::uint32_t i = 0; i < n; ++i) {
      ec.seed = o.seed * 1000 + i;
      eps_.push_back(std::make_unique<engine::Endpoint>(ec));
      nodes_.push_back(net_.add_node(*eps_.back()));
    }
    src_.resize(o.senders);
    Rng rng(o.seed);
    for (auto& s : src_) {
      s.resize(o.bytes);
      for (auto& b : s) b = static_cast<std::uint8_t>(rng.next());
    }
    dst_.assign(o.bytes * o.senders, 0);
    engine::Endpoint& rx = *eps_[o.senders];
    dst_mr_ = rx.memory().register_region(dst_.data(), dst_.size(), engine::access::kAll);

    engine::QpConfig qc;
    qc.evs = engine::make_ev_set(o.net.planes, o.active_per_plane, o.backup_per_plane);
    qc.active_count = o.net.planes * o.active_per_plane;
    qc.cc.algorithm = o.cc;
    const auto rate = static_cast<std::uint64_t>(o.net.port_rate_bps * o.net.planes);
    qc.cc.nscc = cc::NsccConfig::derive(rate, static_cast<std::uint32_t>(net_.base_rtt()), 4096 + 64, true);
    for (std::uint32_t s = 0; s < o.senders; ++s) {
      engine::Endpoint& tx = *eps_[s];
      src_mr_.push_back(tx.memory().register_region(src_[s].data(), src_[s].size(), engine::access::kAll));
      qc.seed = o.seed + s;
      const std::uint32_t qa = tx.create_qp(qc);
      const std::uint32_t qb = rx.create_qp(qc);
      engine::QpRemote ra;  // what the sender knows about the receiver
      ra.peer = nodes_[o.senders];
      ra.qpn = qb;
      ra.sq_psn = 1000 * (s + 1);
      ra.rq_psn = 5000 * (s + 1);
      engine::QpRemote rb;
      rb.peer = nodes_[s];
      rb.qpn = qa;
      rb.sq_psn = ra.rq_psn;
      rb.rq_psn = ra.sq_psn;
      ra.wire_ext = rb.wire_ext = true;
      ok_ = ok_ && qa != 0 && qb != 0 && tx.connect_qp(qa, ra, 0) == 0 && rx.connect_qp(qb, rb, 0) == 0;
      tx_qpn_.push_back(qa);
    }
    ok_ = ok_ && dst_mr_ != nullptr;
  }

  bool setup_ok() const { return ok_; }
  PathNet& net() { return net_; }
  engine::Endpoint& ep(std::uint32_t node) { return *eps_[node]; }
  std::uint32_t receiver() const { return opt_.senders; }
  std::uint32_t qpn(std::uint32_t sender) const { return tx_qpn_[sender]; }

  /// Posts the whole buffer of every sender as one RDMA WRITE.
  bool post_all() {
    for (std::uint32_t s = 0; s < opt_.senders; ++s) {
      engine::SendWr wr;
      wr.wr_id = 100 + s;
      wr.local_addr = reinterpret_cast<std::uint64_t>(src_[s].data());
      wr.length = static_cast<std::uint32_t>(opt_.bytes);
      wr.lkey = src_mr_[s]->lkey;
      wr.remote_addr = reinterpret_cast<std::uint64_t>(dst_.data() + s * opt_.bytes);
      wr.rkey = dst_mr_->rkey;
      if (eps_[s]->post_send(tx_qpn_[s], wr, net_.now()) != 0) return false;
      net_.kick(nodes_[s]);
    }
    return true;
  }

  /// Runs until every sender polled its completion (or `limit`); true if all succeeded.
  bool run_to_completion(Time limit) {
    done_.assign(opt_.senders, false);
    finish_.assign(opt_.senders, kNever);
    std::uint32_t remaining = opt_.senders;
    bool all_ok = true;
    net_.run_while(
        [&] {
          for (std::uint32_t s = 0; s < opt_.senders; ++s) {
            engine::Completion c;
            while (eps_[s]->poll_completion(c)) {
              if (c.status != engine::WcStatus::kSuccess) all_ok = false;
              if (!done_[s]) {
                done_[s] = true;
                finish_[s] = net_.now();
                --remaining;
              }
            }
          }
          return remaining > 0;
        },
        limit);
    return remaining == 0 && all_ok;
  }

  Time finish_time(std::uint32_t s) const { return finish_[s]; }
  bool data_ok() const {
    for (std::uint32_t s = 0; s < opt_.senders; ++s) {
      if (std::memcmp(src_[s].data(), dst_.data() + s * opt_.bytes, opt_.bytes) != 0) return false;
    }
    return true;
  }

 private:
  RigOptions opt_;
  PathNet net_;
  std::vector<std::unique_ptr<engine::Endpoint>> eps_;
  std::vector<std::uint32_t> nodes_;
  std::vector<std::vector<std::uint8_t>> src_;
  std::vector<std::uint8_t> dst_;
  std::vector<const engine::MemoryRegion*> src_mr_;
  const engine::MemoryRegion* dst_mr_ = nullptr;
  std::vector<std::uint32_t> tx_qpn_;
  std::vector<bool> done_;
  std::vector<Time> finish_;
  bool ok_ = true;
};

}  // namespace mrc::sim::test
