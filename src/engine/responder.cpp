// Responder: window and key checks, direct placement, the PSN record, WRITE_IMM order and the SACK
// decisions of the receive side (responder.hpp).
#include "engine/responder.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mrc::engine {

Responder::Responder(Endpoint& ep, std::uint32_t qpn, const QpConfig& cfg, QpCounters& ctr)
    : ep_(ep), qpn_(qpn), cfg_(cfg), ctr_(ctr), sack_threshold_(ep.config().tun.sack_bytes_threshold) {
  refresh();
  rq_.reserve(cfg.rq_depth);  // receive WRs may be posted from INIT on
}

int Responder::set_advertised_mpr(std::uint8_t units) {
  if (units == 0 || units > cfg_.mpr_dest) return EINVAL;
  mpr_adv_ = units;
  refresh();
  return 0;
}

void Responder::deliver_wimms() {
  while (!rq_.empty()) {
    WimmSlot& s = wimm_[wimm_head_];
    // A WRITE_IMM completes once it and every earlier PSN has been placed.
    if (!s.valid || !psn_lt(s.last_psn, rcvd_.epsn())) return;
    Completion c;
    c.wr_id = rq_.front();
    c.qpn = qpn_;
    c.is_recv = true;
    c.opcode = WcOpcode::kRecvRdmaWithImm;
    c.byte_len = s.byte_len;
    c.imm = s.imm;
    c.has_imm = true;
    ep_.push_completion(c);
    rq_.pop_front();
    s.valid = false;
    ++rq_next_deliver_;
    wimm_head_ = (wimm_head_ + 1) % static_cast<std::uint32_t>(wimm_.size());
  }
}

bool Responder::grow_wimms(std::uint32_t ahead) {
  const std::uint32_t max = cfg_.max_wimm_dest;
  if (ahead >= max) return false;
  auto n = static_cast<std::uint32_t>(std::max<std::size_t>(wimm_.size(), kWimmFirst));
  while (n <= ahead) n *= 2;
  n = std::min(n, max);
  // The slots in order from the next immediate to deliver, which moves to slot 0.
  std::vector<WimmSlot> g(n);
  for (std::size_t i = 0; i < wimm_.size(); ++i) g[i] = wimm_[(wimm_head_ + i) % wimm_.size()];
  wimm_.swap(g);
  wimm_head_ = 0;
  return true;
}

int Responder::post_recv(std::uint64_t wr_id) {
  if (rq_.full()) return ENOMEM;
  rq_.push_back(wr_id);
  if (!wimm_.empty()) deliver_wimms();  // a WRITE_IMM that arrived first completes now
  return 0;
}

void Responder::flush_recvs() {
  while (!rq_.empty()) {
    Completion c;
    c.wr_id = rq_.front();
    c.qpn = qpn_;
    c.is_recv = true;
    c.opcode = WcOpcode::kRecvRdmaWithImm;
    c.status = WcStatus::kFlushed;
    ep_.push_completion(c);
    rq_.pop_front();
  }
}

}  // namespace mrc::engine
