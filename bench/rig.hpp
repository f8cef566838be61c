// A requester Endpoint (A) and a responder Endpoint (B) wired back to back without a network model,
// driven in batches so that each half of the data path can be measured on its own.
//
// One batch of kBatch packets goes through four steps:
//   send     A.poll_tx x kBatch                      (requester send path)
//   to_wire  serialise A's packets into wire buffers (the "network": a 4 KiB copy per packet)
//   receive  B.receive + drain B.poll_tx per packet  (responder placement + SACK generation)
//   ack      feed B's SACKs to A, collect completions, post more work
// The benchmarks time one step and run the others untimed. Virtual time advances kStep per packet
// and kOneWay per direction, so NSCC sees an uncongested path (RTT ~ base RTT) and keeps its window
// at max_cwnd, which holds a whole batch: the send step never stalls on the window.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/endpoint.hpp"
#include "engine/ev_sets.hpp"
#include "engine/qp.hpp"
#include "wire/packet.hpp"

namespace mrc::bench {

inline constexpr std::uint32_t kPayload = 4096;  ///< PMTU: payload bytes per data packet
inline constexpr std::uint32_t kBatch = 128;     ///< packets per batch (fits NSCC max_cwnd)
inline constexpr std::uint32_t kPlanes = 4;      ///< ports (planes)
inline constexpr std::uint32_t kAllPorts = (1u << kPlanes) - 1;
inline constexpr std::size_t kRegion = 1u << 20;      ///< registered region = one message (256 packets)
inline constexpr std::size_t kSlot = kPayload + 128;  ///< wire buffer per packet (headers + trailer)
inline constexpr std::uint32_t kSackCap = 2 * kBatch + 16;
inline constexpr Duration kStep = 10;       ///< ns of virtual time per packet
inline constexpr Duration kOneWay = 5'000;  ///< ns one-way delay A <-> B
inline constexpr Duration kBaseRtt = 10'000;
inline constexpr std::uint32_t kPeerA = 1;  ///< B's handle for A
inline constexpr std::uint32_t kPeerB = 2;  ///< A's handle for B

/// Header stack of a data packet without TSETH/ImmDt (BTH + METH + RETH): where the payload starts.
inline std::size_t data_header_size() {
  return wire::header_size(wire::Opcode::kWriteMiddle, false);
}

class Rig {
 public:
  explicit Rig(bool icrc) : src_(kRegion), dst_(kRegion), wire_(kBatch * kSlot) {
    engine::EndpointConfig ec;
    ec.num_ports = kPlanes;
    ec.icrc = icrc;
    ec.seed = 11;
    a_ = std::make_unique<engine::Endpoint>(ec);
    ec.seed = 12;
    b_ = std::make_unique<engine::Endpoint>(ec);
    for (std::size_t i = 0; i < src_.size(); ++i) src_[i] = static_cast<std::uint8_t>(i * 131 + (i >> 12));
    mra_ = a_->memory().register_region(src_.data(), src_.size(), engine::access::kAll);
    mrb_ = b_->memory().register_region(dst_.data(), dst_.size(), engine::access::kAll);

    engine::QpConfig qc;
    qc.pmtu = kPayload;
    qc.mpr = qc.mpr_dest = 8;  // 1024-PSN window
    qc.timeout = 10;           // RTO ~1 ms: never fires here
    qc.evs = engine::make_ev_set(kPlanes, 16, 4);
    qc.active_count = kPlanes * 16;
    qc.cc.algorithm = cc::Algorithm::kNscc;
    qc.cc.nscc = cc::NsccConfig::derive(kPlanes * 100'000'000'000ULL, kBaseRtt, kPayload + 64, true);
    qc.seed = 21;
    qa_ = a_->create_qp(qc);
    qc.seed = 22;
    qb_ = b_->create_qp(qc);
    constexpr std::uint32_t kPsnAB = 0xFFF000, kPsnBA = 0x000100;  // A->B wraps 24 bits early on
    ok_ = qa_ != 0 && qb_ != 0 && mra_ != nullptr && mrb_ != nullptr &&
          a_->connect_qp(qa_, engine::QpRemote{kPeerB, qb_, kPsnAB, kPsnBA, 8, 128, {}, true}, now_) == 0 &&
          b_->connect_qp(qb_, engine::QpRemote{kPeerA, qa_, kPsnBA, kPsnAB, 8, 128, {}, true}, now_) == 0;
    if (!ok_) error_ = "setup failed";
    top_up();
  }

  // --- measured steps: inline, no allocation ------------------------------------------------------

  /// A produces packet `i` of the batch. False if the engine had nothing to send.
  bool send_one(std::uint32_t i) {
    const bool sent = a_->poll_tx(tx_[i], now_, kAllPorts);
    now_ += kStep;
    return sent;
  }

  /// B receives packet `i` of the batch (decode, checks, placement, bitmap) and emits whatever
  /// control packets (SACKs) it has, into preallocated slots.
  void receive_one(std::uint32_t i) {
    b_->receive(std::span<const std::uint8_t>(slot(i), wire_len_[i]), rx_meta_[i], now_);
    while (nsack_ < kSackCap && b_->poll_tx(sack_[nsack_], now_, kAllPorts)) ++nsack_;
    now_ += kStep;
  }

  // --- unmeasured steps -----------------------------------------------------------------------------

  void send_all() {
    for (std::uint32_t i = 0; i < kBatch; ++i)
      if (!send_one(i)) fail("requester stalled: poll_tx returned false inside a batch");
  }

  /// Checks that the batch is first transmissions of full data packets and serialises it.
  void to_wire() {
    for (std::uint32_t i = 0; i < kBatch; ++i) {
      const engine::TxPacket& t = tx_[i];
      if (t.tc != engine::TrafficClass::kData || t.payload_len != kPayload || t.qpn != qa_ ||
          t.peer != kPeerB)
        fail("requester emitted something other than a new 4 KiB data packet");
      std::uint8_t* b = slot(i);
      std::memcpy(b, t.header, t.header_len);
      std::memcpy(b + t.header_len, t.payload, t.payload_len);
      std::memcpy(b + t.header_len + t.payload_len, t.trailer, t.trailer_len);
      wire_len_[i] = t.wire_size();
      rx_meta_[i] = engine::RxMeta{};
      rx_meta_[i].port = t.port;
      rx_meta_[i].peer = kPeerA;
      rx_meta_[i].ev = t.ev.value;
    }
    sent_pkts_ += kBatch;
    now_ += kOneWay;
  }

  void receive_all() {
    for (std::uint32_t i = 0; i < kBatch; ++i) receive_one(i);
  }

  /// Delivers B's control packets to A, drains completions and keeps two batches of work posted.
  void ack() {
    if (nsack_ == kSackCap) fail("SACK buffer full");
    now_ += kOneWay;
    std::uint8_t buf[wire::kMaxHeaderSize + 8];
    for (std::uint32_t j = 0; j < nsack_; ++j) {
      const engine::TxPacket& t = sack_[j];
      if (t.tc != engine::TrafficClass::kControl || t.payload_len != 0 || t.peer != kPeerA)
        fail("responder emitted an unexpected packet");
      std::memcpy(buf, t.header, t.header_len);
      std::memcpy(buf + t.header_len, t.trailer, t.trailer_len);
      engine::RxMeta m;
      m.port = t.port;
      m.peer = kPeerB;
      m.ev = t.ev.value;
      a_->receive(std::span<const std::uint8_t>(buf, t.wire_size()), m, now_);
    }
    sacks_total_ += nsack_;
    nsack_ = 0;
    engine::Completion c;
    while (a_->poll_completion(c)) {
      if (c.status != engine::WcStatus::kSuccess) fail("send completion in error");
      ++completions_;
    }
    top_up();
  }

  /// One untimed round trip (warm-up).
  void cycle() {
    send_all();
    to_wire();
    receive_all();
    ack();
  }

  /// Final consistency checks: nothing was lost, retransmitted, refused or misplaced.
  bool verify() {
    const engine::QpCounters& ca = a_->qp(qa_)->counters();
    const engine::QpCounters& cb = b_->qp(qb_)->counters();
    if (ca.tx_data != sent_pkts_ || cb.rx_data != sent_pkts_) fail("packet count mismatch");
    if (ca.tx_rtx != 0 || ca.tx_probe != 0 || ca.timeouts != 0) fail("requester retransmitted or probed");
    if (cb.rx_dup != 0 || cb.rx_refused != 0 || cb.tx_nack != 0) fail("responder dropped or NACKed");
    if (a_->counters().rx_bad_packet != 0 || b_->counters().rx_bad_packet != 0) fail("bad packet");
    if (ca.bytes_acked != sent_pkts_ * kPayload) fail("not every packet was acknowledged");
    if (sent_pkts_ >= kRegion / kPayload && std::memcmp(src_.data(), dst_.data(), kRegion) != 0)
      fail("placed data differs");
    return ok_;
  }

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  void fail(const char* why) {
    if (ok_) error_ = why;
    ok_ = false;
  }
  std::uint64_t sacks_total() const { return sacks_total_; }
  std::uint64_t sent_pkts() const { return sent_pkts_; }
  engine::Endpoint& requester() { return *a_; }

 private:
  std::uint8_t* slot(std::uint32_t i) { return wire_.data() + static_cast<std::size_t>(i) * kSlot; }

  /// Posts 1 MiB RDMA WRITEs (src -> dst, whole region) until two batches are pending.
  void top_up() {
    constexpr std::uint64_t kMsgPkts = kRegion / kPayload;
    while (ok_ && posted_pkts_ - sent_pkts_ < 2 * kBatch) {
      engine::SendWr wr;
      wr.wr_id = ++wr_id_;
      wr.local_addr = reinterpret_cast<std::uintptr_t>(src_.data());
      wr.length = static_cast<std::uint32_t>(kRegion);
      wr.lkey = mra_->lkey;
      wr.remote_addr = reinterpret_cast<std::uintptr_t>(dst_.data());
      wr.rkey = mrb_->rkey;
      if (a_->post_send(qa_, wr, now_) != 0) fail("post_send failed");
      posted_pkts_ += kMsgPkts;
    }
  }

  std::unique_ptr<engine::Endpoint> a_, b_;
  std::vector<std::uint8_t> src_, dst_, wire_;
  const engine::MemoryRegion* mra_ = nullptr;
  const engine::MemoryRegion* mrb_ = nullptr;
  std::uint32_t qa_ = 0, qb_ = 0;
  Time now_ = 1'000;
  engine::TxPacket tx_[kBatch];
  std::uint32_t wire_len_[kBatch] = {};
  engine::RxMeta rx_meta_[kBatch];
  engine::TxPacket sack_[kSackCap];
  std::uint32_t nsack_ = 0;
  std::uint64_t posted_pkts_ = 0, sent_pkts_ = 0, sacks_total_ = 0, completions_ = 0, wr_id_ = 0;
  bool ok_ = true;
  std::string error_;
};

}  // namespace mrc::bench
