// Driving an Endpoint by hand: craft packets with the codec, feed them in, pull out what it sends
// and decode it. Used by tests that bypass PathNet to control every byte.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <span>
#include <vector>

#include "engine/endpoint.hpp"
#include "wire/packet.hpp"

// Readable gtest output for engine enums (found by argument-dependent lookup).
namespace mrc::engine {
inline void PrintTo(EvState s, std::ostream* os) {
  *os << to_string(s);
}
inline void PrintTo(EvCause c, std::ostream* os) {
  *os << to_string(c);
}
inline void PrintTo(WcStatus s, std::ostream* os) {
  *os << to_string(s);
}
inline void PrintTo(QpState s, std::ostream* os) {
  *os << to_string(s);
}
inline void PrintTo(const Ev& ev, std::ostream* os) {
  *os << "Ev{" << ev.value << ", port " << static_cast<int>(ev.port) << "}";
}
}  // namespace mrc::engine

namespace mrc::wire {
inline void PrintTo(Opcode op, std::ostream* os) {
  *os << "0x" << std::hex << static_cast<int>(op) << std::dec;
}
inline void PrintTo(NackReason r, std::ostream* os) {
  *os << "0x" << std::hex << static_cast<int>(r) << std::dec;
}
}  // namespace mrc::wire

namespace mrc::test {

/// Headers + payload + pad + ICRC of `p`, as a driver would put it in a datagram.
inline std::vector<std::uint8_t> encode_packet(const wire::Packet& p) {
  std::vector<std::uint8_t> buf(wire::kMaxHeaderSize + p.payload.size() + 8);
  wire::Error err = wire::Error::kOk;
  const std::size_t n = wire::encode(p, buf, &err);
  EXPECT_NE(n, 0u) << wire::to_string(err);
  buf.resize(n);
  return buf;
}

/// One packet an endpoint handed to its driver, flattened.
struct Frame {
  std::vector<std::uint8_t> bytes;
  std::uint8_t port = 0;
  engine::Ev ev;
  std::uint32_t peer = 0;
  std::uint32_t qpn = 0;
  engine::TrafficClass tc = engine::TrafficClass::kData;
  std::uint32_t psn = 0;

  /// Decodes (ICRC checked); the payload view points into `bytes`.
  wire::Error decode(wire::Packet& out) const {
    wire::DecodeOptions o;
    o.verify_icrc = true;
    return wire::decode(bytes, out, o);
  }
};

inline Frame flatten(const engine::TxPacket& tx) {
  Frame f;
  f.bytes.resize(tx.wire_size());
  std::memcpy(f.bytes.data(), tx.header, tx.header_len);
  if (tx.payload_len > 0) std::memcpy(f.bytes.data() + tx.header_len, tx.payload, tx.payload_len);
  std::memcpy(f.bytes.data() + tx.header_len + tx.payload_len, tx.trailer, tx.trailer_len);
  f.port = tx.port;
  f.ev = tx.ev;
  f.peer = tx.peer;
  f.qpn = tx.qpn;
  f.tc = tx.tc;
  f.psn = tx.psn;
  return f;
}

/// Everything `ep` wants to send now on the ports in `mask`.
inline std::vector<Frame> pull_all(engine::Endpoint& ep, Time now, std::uint32_t mask,
                                   std::size_t max = 100000) {
  std::vector<Frame> out;
  engine::TxPacket tx;
  while (out.size() < max && ep.poll_tx(tx, now, mask)) out.push_back(flatten(tx));
  return out;
}

/// A SACK from the responder: cumulative ack `cack`, trigger cack + `trigger`, bitmap `bitmap`
/// from cack + `sack_offset`, reflected EV `entropy`, to QP `dest_qp`.
inline wire::Packet make_sack(std::uint32_t cack, std::int16_t trigger, std::uint64_t bitmap = 0,
                              std::int16_t sack_offset = 1, std::uint8_t cc_flags = wire::cc_flags::kSvcTime,
                              std::uint32_t dest_qp = 0, std::uint32_t entropy = 0) {
  wire::Packet k;
  k.bth.opcode = wire::Opcode::kSack;
  k.bth.dest_qp = dest_qp;
  k.bth.psn = cack;
  k.seth.cack_psn = cack;
  k.seth.ack_psn_offset = trigger;
  k.seth.sack_offset = sack_offset;
  k.seth.sack_bitmap = bitmap;
  k.seth.cc_flags = cc_flags;
  k.seth.entropy = entropy;
  return k;
}

inline engine::RxMeta rx_meta(std::uint32_t peer, std::uint8_t port, std::uint32_t ev) {
  engine::RxMeta m;
  m.peer = peer;
  m.port = port;
  m.ev = ev;
  return m;
}

/// Hands `f` to `ep` as if it had arrived from node `from` on the frame's port and EV.
inline void deliver(engine::Endpoint& ep, const Frame& f, std::uint32_t from, Time now) {
  ep.receive(f.bytes, rx_meta(from, f.port, f.ev.value), now);
}

}  // namespace mrc::test
