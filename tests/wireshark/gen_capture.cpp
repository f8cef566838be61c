// Builds a pcap with one MRC packet of every opcode (encoded by the real codec, mrc::wire::encode) plus a
// few special frames, and writes the values a correct dissector must show, in the exact text form
// `tshark -T fields` prints them, so check_dissector.sh can compare field by field.
//
// Usage: mrc_gen_capture OUT.pcap EXPECTED_MRC.tsv EXPECTED_IB.tsv
//   EXPECTED_MRC.tsv: header line = field names, then one line per frame (tab-separated; empty = absent),
//                     for `tshark -X lua_script:tools/wireshark/mrc.lua`.
//   EXPECTED_IB.tsv:  same for the built-in RoCEv2 dissector without the script.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "io/pcap.hpp"
#include "wire/packet.hpp"

namespace {

using namespace mrc;
using Row = std::map<std::string, std::string>;

// --- the text forms tshark 4.0 uses for -T fields ---------------------------------------------------
std::string hex(std::uint64_t v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%0*" PRIx64, digits, v);
  return b;
}
std::string dec(std::int64_t v) {
  return std::to_string(v);
}
std::string boolean(bool b) {
  return b ? "1" : "0";  // tshark 4.0 prints FT_BOOLEAN as 1/0 with -T fields
}

// Columns of EXPECTED_MRC.tsv (order = tshark -e order).
const std::vector<std::string> kMrcColumns = {"frame.time_epoch",
                                              "ip.src",
                                              "ipv6.src",
                                              "ipv6.flow",
                                              "ip.checksum.status",
                                              "udp.checksum.status",
                                              "udp.dstport",
                                              "mrc.opcode",
                                              "mrc.se",
                                              "mrc.m",
                                              "mrc.padcnt",
                                              "mrc.tver",
                                              "mrc.pkey",
                                              "mrc.qpn",
                                              "mrc.a",
                                              "mrc.rtx",
                                              "mrc.ts",
                                              "mrc.psn",
                                              "mrc.request_id",
                                              "mrc.meth.rqmsn",
                                              "mrc.meth.msn",
                                              "mrc.tseth.tx_timestamp",
                                              "mrc.tseth.tsr",
                                              "mrc.reth.va",
                                              "mrc.reth.rkey",
                                              "mrc.reth.dma_len",
                                              "mrc.immdt",
                                              "mrc.aeth.syndrome",
                                              "mrc.aeth.msn",
                                              "mrc.sack.m",
                                              "mrc.sack.pr",
                                              "mrc.sack.ack_psn_offset",
                                              "mrc.sack.psn",
                                              "mrc.sack.entropy",
                                              "mrc.sack.svc_time",
                                              "mrc.sack.probe_id",
                                              "mrc.sack.cack_psn",
                                              "mrc.sack.cc_type",
                                              "mrc.sack.cc_flags",
                                              "mrc.sack.cc_flags.rtx_echo",
                                              "mrc.sack.cc_flags.svc_time_valid",
                                              "mrc.sack.cc_flags.ecn_echo",
                                              "mrc.sack.cc_flags.dup_echo",
                                              "mrc.sack.mpr",
                                              "mrc.sack.offset",
                                              "mrc.sack.base_psn",
                                              "mrc.sack.bitmap",
                                              "mrc.sack.bitmap_count",
                                              "mrc.sack.received",
                                              "mrc.cc.tx_timestamp",
                                              "mrc.cc.ooo_count",
                                              "mrc.cc.restore_cwnd",
                                              "mrc.cc.rcv_cwnd_pen",
                                              "mrc.cc.rcvd_bytes",
                                              "mrc.nack.reason",
                                              "mrc.nack.vendor_info",
                                              "mrc.nack.entropy",
                                              "mrc.nack.psn",
                                              "mrc.nack.cc_type",
                                              "mrc.nack.cc_flags",
                                              "mrc.nack.cc_flags.ecn_echo",
                                              "mrc.nack.tx_timestamp",
                                              "mrc.peth.vendor_info",
                                              "mrc.peth.probe_id",
                                              "mrc.peth.tx_timestamp",
                                              "mrc.peth.tsr",
                                              "mrc.erth.op",
                                              "mrc.erth.vendor_info",
                                              "mrc.erth.port_status_mask",
                                              "mrc.erth.entropy",
                                              "mrc.erth.tx_timestamp",
                                              "mrc.erth.tsr",
                                              "mrc.eeth.op",
                                              "mrc.eeth.svc_time_valid",
                                              "mrc.eeth.vendor_info",
                                              "mrc.eeth.entropy",
                                              "mrc.eeth.svc_time_ns",
                                              "mrc.eeth.port_status_mask",
                                              "mrc.eeth.tx_timestamp",
                                              "mrc.payload_len",
                                              "mrc.trimmed",
                                              "mrc.icrc",
                                              "mrc.icrc.good",
                                              "infiniband.bth.opcode",
                                              "infiniband.reth.va"};

// Columns of EXPECTED_IB.tsv (built-in dissector, no script).
const std::vector<std::string> kIbColumns = {
    "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",    "infiniband.bth.p_key",
    "infiniband.reth.va",    "infiniband.reth.r_key", "infiniband.reth.dmalen"};

struct Frame {
  io::FrameInfo info;
  std::vector<std::uint8_t> bytes;  // the UDP payload
  Row mrc;                          // expected with the script
  Row ib;                           // expected without it
};

std::uint32_t mask24(std::uint32_t v) {
  return v & 0xFFFFFF;
}

void bth_expect(const wire::Packet& p, std::uint8_t pad, Row& r) {
  r["mrc.opcode"] = hex(static_cast<std::uint8_t>(p.bth.opcode), 2);
  r["mrc.se"] = boolean(p.bth.se);
  r["mrc.m"] = boolean(p.bth.m);
  r["mrc.padcnt"] = dec(pad);
  r["mrc.tver"] = dec(p.bth.tver);
  r["mrc.pkey"] = hex(p.bth.pkey, 4);
  r["mrc.qpn"] = hex(p.bth.dest_qp, 6);
  r["mrc.a"] = boolean(p.bth.ack_req);
  r["mrc.rtx"] = boolean(p.bth.rtx);
  r["mrc.ts"] = boolean(p.has_tseth && wire::is_data(p.bth.opcode));
  r["mrc.psn"] = dec(p.bth.psn);
}

void ext_expect(const wire::Packet& p, Row& r) {
  using wire::Opcode;
  if (wire::is_data(p.bth.opcode)) {
    r["mrc.meth.rqmsn"] = dec(p.meth.rqmsn);
    r["mrc.meth.msn"] = dec(p.meth.msn);
    if (p.has_tseth) {
      r["mrc.tseth.tx_timestamp"] = dec(p.tseth.tx_timestamp);
      r["mrc.tseth.tsr"] = boolean(p.tseth.tsr);
    }
    r["mrc.reth.va"] = hex(p.reth.va, 16);
    r["mrc.reth.rkey"] = hex(p.reth.rkey, 8);
    r["mrc.reth.dma_len"] = dec(p.reth.dma_len);
    if (wire::has_imm(p.bth.opcode)) r["mrc.immdt"] = hex(p.imm, 8);
    return;
  }
  switch (p.bth.opcode) {
    case Opcode::kAck:
      r["mrc.aeth.syndrome"] = hex(p.aeth.syndrome, 2);
      r["mrc.aeth.msn"] = dec(mask24(p.aeth.msn));
      break;
    case Opcode::kSack: {
      const wire::Seth& s = p.seth;
      r["mrc.sack.m"] = dec(static_cast<int>(s.m));
      r["mrc.sack.pr"] = boolean(s.pr);
      if (s.pr) {  // bytes 2-3 hold the probe id instead (F2)
        r["mrc.sack.probe_id"] = dec(s.probe_id);
      } else {
        r["mrc.sack.ack_psn_offset"] = dec(s.ack_psn_offset);
        r["mrc.sack.psn"] =
            dec(mask24(s.cack_psn + static_cast<std::uint32_t>(std::int32_t{s.ack_psn_offset})));
      }
      r["mrc.sack.entropy"] = hex(s.entropy, 8);
      r["mrc.sack.svc_time"] = dec(s.svc_time);
      r["mrc.sack.cack_psn"] = dec(mask24(s.cack_psn));
      r["mrc.sack.cc_type"] = dec(s.cc_type);
      r["mrc.sack.cc_flags"] = hex(s.cc_flags, 2);
      r["mrc.sack.cc_flags.rtx_echo"] = boolean((s.cc_flags & wire::cc_flags::kRtxEcho) != 0);
      r["mrc.sack.cc_flags.svc_time_valid"] = boolean((s.cc_flags & wire::cc_flags::kSvcTime) != 0);
      r["mrc.sack.cc_flags.ecn_echo"] = boolean((s.cc_flags & wire::cc_flags::kEcnEcho) != 0);
      r["mrc.sack.cc_flags.dup_echo"] = boolean((s.cc_flags & wire::cc_flags::kDupEcho) != 0);
      r["mrc.sack.mpr"] = dec(s.mpr);
      r["mrc.sack.offset"] = dec(s.sack_offset);
      const std::uint32_t base = mask24(s.cack_psn + static_cast<std::uint32_t>(std::int32_t{s.sack_offset}));
      r["mrc.sack.base_psn"] = dec(base);
      r["mrc.sack.bitmap"] = hex(s.sack_bitmap, 16);
      std::string list;
      int count = 0;
      for (std::uint32_t i = 0; i < 64; ++i) {
        if (((s.sack_bitmap >> i) & 1u) == 0) continue;
        if (!list.empty()) list += ',';
        list += std::to_string(mask24(base + i));
        ++count;
      }
      r["mrc.sack.bitmap_count"] = dec(count);
      r["mrc.sack.received"] = list;
      r["mrc.cc.tx_timestamp"] = dec(s.cc.tx_timestamp);
      r["mrc.cc.ooo_count"] = dec(s.cc.ooo_count);
      r["mrc.cc.restore_cwnd"] = boolean(s.cc.restore_cwnd);
      r["mrc.cc.rcv_cwnd_pen"] = dec(s.cc.rcv_cwnd_pen);
      r["mrc.cc.rcvd_bytes"] = dec(mask24(s.cc.rcvd_bytes));
      break;
    }
    case Opcode::kNack: {
      const wire::Neth& n = p.neth;
      r["mrc.nack.reason"] = hex(static_cast<std::uint8_t>(n.reason), 2);
      r["mrc.nack.vendor_info"] = hex(n.vendor_info, 2);
      r["mrc.nack.entropy"] = hex(n.entropy, 8);
      r["mrc.nack.psn"] = dec(mask24(n.nack_psn));
      r["mrc.nack.cc_type"] = dec(n.cc_type);
      r["mrc.nack.cc_flags"] = hex(n.cc_flags, 2);
      r["mrc.nack.cc_flags.ecn_echo"] = boolean((n.cc_flags & wire::cc_flags::kEcnEcho) != 0);
      r["mrc.nack.tx_timestamp"] = dec(n.tx_timestamp);
      break;
    }
    case Opcode::kProbe:
      r["mrc.peth.vendor_info"] = hex(p.peth.vendor_info, 2);
      r["mrc.peth.probe_id"] = dec(p.peth.probe_id);
      r["mrc.peth.tx_timestamp"] = dec(p.peth.tx_timestamp);
      r["mrc.peth.tsr"] = boolean(p.peth.tsr);
      break;
    case Opcode::kEndpointRequest:
      r["mrc.request_id"] = dec(p.bth.psn & 0xFFFF);
      r["mrc.erth.op"] = dec(static_cast<int>(p.erth.op));
      r["mrc.erth.vendor_info"] = hex(p.erth.vendor_info, 2);
      r["mrc.erth.port_status_mask"] = hex(p.erth.port_status_mask, 8);
      r["mrc.erth.entropy"] = hex(p.erth.entropy, 8);
      r["mrc.erth.tx_timestamp"] = dec(p.erth.tx_timestamp);
      r["mrc.erth.tsr"] = boolean(p.erth.tsr);
      break;
    case Opcode::kEndpointResponse:
      r["mrc.eeth.op"] = dec(static_cast<int>(p.eeth.op));
      r["mrc.eeth.svc_time_valid"] = boolean(p.eeth.svc_time_valid);
      r["mrc.eeth.vendor_info"] = hex(p.eeth.vendor_info, 2);
      r["mrc.eeth.entropy"] = hex(p.eeth.entropy, 8);
      r["mrc.eeth.svc_time_ns"] = dec(p.eeth.svc_time_ns);
      r["mrc.eeth.port_status_mask"] = hex(p.eeth.port_status_mask, 8);
      r["mrc.eeth.tx_timestamp"] = dec(p.eeth.tx_timestamp);
      break;
    default:
      break;
  }
}

// Encodes `p` with the real codec and fills in what both dissectors must show.
Frame make_frame(const wire::Packet& p) {
  Frame f;
  f.bytes.resize(wire::kMaxPacketSize);
  wire::Error err = wire::Error::kOk;
  // With the project's wire extensions (what the engine sends by default; the dissector's
  // "ext" preference is on by default too).
  const std::size_t n = wire::encode(p, f.bytes, &err, {.ext = true});
  if (n == 0) {
    std::cerr << "encode failed: " << wire::to_string(err) << "\n";
    std::exit(2);
  }
  f.bytes.resize(n);
  // Sanity: the codec reads back what it wrote, ICRC included.
  wire::Packet back;
  if (wire::decode(f.bytes, back, {.verify_icrc = true}) != wire::Error::kOk) {
    std::cerr << "decode of an encoded packet failed\n";
    std::exit(2);
  }
  const auto pad = static_cast<std::uint8_t>((4 - p.payload.size() % 4) % 4);
  bth_expect(p, wire::is_data(p.bth.opcode) ? pad : 0, f.mrc);
  ext_expect(p, f.mrc);
  if (wire::is_data(p.bth.opcode))
    f.mrc["mrc.payload_len"] = dec(static_cast<std::int64_t>(p.payload.size()));
  f.mrc["mrc.icrc"] = hex(back.icrc, 8);
  f.mrc["mrc.icrc.good"] = boolean(true);
  // Without the script, Wireshark's RoCEv2 dissector still shows the BTH of every MRC packet.
  f.ib["infiniband.bth.opcode"] = dec(static_cast<std::uint8_t>(p.bth.opcode));
  f.ib["infiniband.bth.destqp"] = hex(p.bth.dest_qp, 6);
  f.ib["infiniband.bth.psn"] = dec(p.bth.psn);
  f.ib["infiniband.bth.p_key"] = dec(p.bth.pkey);
  return f;
}

wire::Packet data_packet(wire::Opcode op, std::uint32_t qpn, std::uint32_t psn,
                         std::span<const std::uint8_t> pl) {
  wire::Packet p;
  p.bth.opcode = op;
  p.bth.dest_qp = qpn;
  p.bth.psn = psn;
  p.meth = {static_cast<std::uint16_t>(psn & 0xFF), static_cast<std::uint16_t>(psn & 0xFFF)};
  p.reth = {0x1122334455660000ull + psn, 0xCAFE0000u + (psn & 0xFFFF), 4096};
  p.payload = pl;
  return p;
}

bool write_tsv(const std::string& path, const std::vector<std::string>& cols,
               const std::vector<Frame>& frames, Row Frame::*which) {
  std::ofstream out(path);
  if (!out) return false;
  for (std::size_t i = 0; i < cols.size(); ++i) out << (i ? "\t" : "") << cols[i];
  out << "\n";
  for (const Frame& f : frames) {
    const Row& r = f.*which;
    for (std::size_t i = 0; i < cols.size(); ++i) {
      auto it = r.find(cols[i]);
      out << (i ? "\t" : "") << (it == r.end() ? "" : it->second);
    }
    out << "\n";
  }
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " OUT.pcap EXPECTED_MRC.tsv EXPECTED_IB.tsv\n";
    return 1;
  }
  using wire::Opcode;
  std::vector<std::uint8_t> pl256(256), pl257(257), pl13(13), pl100(100), pl2{0xAB, 0xCD};
  for (std::size_t i = 0; i < pl256.size(); ++i) pl256[i] = static_cast<std::uint8_t>(i);
  for (std::size_t i = 0; i < pl257.size(); ++i) pl257[i] = static_cast<std::uint8_t>(255 - i % 256);
  for (std::size_t i = 0; i < pl13.size(); ++i) pl13[i] = static_cast<std::uint8_t>(0x30 + i);
  for (std::size_t i = 0; i < pl100.size(); ++i) pl100[i] = static_cast<std::uint8_t>(i * 7);

  std::vector<Frame> frames;
  {  // WRITE_FIRST with TSETH
    auto p = data_packet(Opcode::kWriteFirst, 0x00ABCD, 0x123456, pl256);
    p.has_tseth = true;
    p.tseth = {0xBEEF, false};
    frames.push_back(make_frame(p));
  }
  {  // WRITE_MIDDLE, retransmission, 3 pad bytes
    auto p = data_packet(Opcode::kWriteMiddle, 0x00ABCD, 0x123457, pl257);
    p.bth.rtx = true;
    frames.push_back(make_frame(p));
  }
  {  // WRITE_LAST, AckReq, 2 pad bytes
    auto p = data_packet(Opcode::kWriteLast, 0x00ABCD, 0x123458, pl2);
    p.bth.ack_req = true;
    frames.push_back(make_frame(p));
  }
  {  // WRITE_LAST_IMM with TSETH (tsr)
    auto p = data_packet(Opcode::kWriteLastImm, 0xFEDCBA, 0xFFFFFF, pl13);
    p.imm = 0xDEADBEEF;
    p.has_tseth = true;
    p.tseth = {7, true};
    frames.push_back(make_frame(p));
  }
  {  // WRITE_ONLY, empty payload
    auto p = data_packet(Opcode::kWriteOnly, 0x000101, 0, {});
    p.reth.dma_len = 0;
    frames.push_back(make_frame(p));
  }
  {  // WRITE_ONLY_IMM with payload, SE and M set, non-default P_Key
    auto p = data_packet(Opcode::kWriteOnlyImm, 0x0A0B0C, 4242, pl100);
    p.bth.se = true;
    p.bth.m = true;
    p.bth.pkey = 0x8001;
    p.imm = 0x01020304;
    p.meth = {65535, 12345};
    p.reth = {0xFFFFFFFF00000000ull, 0x12345678, 100};
    frames.push_back(make_frame(p));
  }
  {  // Transport ACK used as NAK
    wire::Packet p;
    p.bth.opcode = Opcode::kAck;
    p.bth.dest_qp = 0x00ABCE;
    p.bth.psn = 77;
    p.aeth = {wire::aeth::kNakRemoteAccessError, 0xABCDEF};
    frames.push_back(make_frame(p));
  }
  {  // endpoint request: EV probe
    wire::Packet p;
    p.bth.opcode = Opcode::kEndpointRequest;
    p.bth.dest_qp = wire::kEpQpn;
    p.bth.psn = 0x4242;
    p.erth = {wire::EpOp::kEvProbe, 0x5A, 0x0000000F, 0x0001BEEF, 31000, true};
    frames.push_back(make_frame(p));
  }
  {  // endpoint response
    wire::Packet p;
    p.bth.opcode = Opcode::kEndpointResponse;
    p.bth.dest_qp = 0x000777;
    p.bth.psn = 0x4242;
    p.eeth = {wire::EpOp::kPortStatusUpdate, 0xA5, 0x0001BEEF, 123456789, 31000, true, true, 0x80000003};
    frames.push_back(make_frame(p));
  }
  {  // SACK with a known bitmap (PSN wrap around 2^24 between cack_psn and the bitmap base)
    wire::Packet p;
    p.bth.opcode = Opcode::kSack;
    p.bth.dest_qp = 0x00ABCE;
    p.bth.psn = 0;
    wire::Seth& s = p.seth;
    s.m = wire::SackMode::kSkipOnce;
    s.pr = true;
    s.ack_psn_offset = -5;
    s.entropy = 0x00C0FFEE;
    s.svc_time = 1000;
    s.probe_id = 99;
    s.cack_psn = 0xFFFFF0;
    s.cc_type = 3;
    s.cc_flags = wire::cc_flags::kRtxEcho | wire::cc_flags::kEcnEcho;
    s.mpr = 4;
    s.sack_offset = 7;
    s.sack_bitmap = 0x8000000000000105ull;
    s.cc = {0x1234, 0x7FFF, true, 127, 0x00ABCDEF};
    frames.push_back(make_frame(p));
  }
  {  // NACK TRIMMED
    wire::Packet p;
    p.bth.opcode = Opcode::kNack;
    p.bth.dest_qp = 0x00ABCE;
    p.neth = {wire::NackReason::kTrimmed, 0x11, 0xFACE0001, 0x123457, 2, wire::cc_flags::kEcnEcho, 4321};
    frames.push_back(make_frame(p));
  }
  {  // reliability probe
    wire::Packet p;
    p.bth.opcode = Opcode::kProbe;
    p.bth.dest_qp = 0x00ABCD;
    p.bth.psn = 0x123459;
    p.bth.ack_req = true;
    p.peth = {0x22, 65535, 500, true};
    frames.push_back(make_frame(p));
  }
  {  // NACK UNEXP_EVENT (over IPv6 below)
    wire::Packet p;
    p.bth.opcode = Opcode::kNack;
    p.bth.dest_qp = 0x00ABCE;
    p.neth = {wire::NackReason::kUnexpEvent, 0, 0x00000001, 0, 0, 0, 0};
    frames.push_back(make_frame(p));
  }
  {  // SACK with every cc_flags bit and zero bitmap
    wire::Packet p;
    p.bth.opcode = Opcode::kSack;
    p.bth.dest_qp = 0x000001;
    wire::Seth& s = p.seth;
    s.m = wire::SackMode::kAlwaysSkip;
    s.cack_psn = 100;
    s.cc_flags = 0xF;
    s.sack_offset = -3;
    frames.push_back(make_frame(p));
  }
  {  // Same NACK as above with a corrupted ICRC: the dissector must flag it.
    Frame f = frames[10];
    f.bytes.back() ^= 0x01;
    f.mrc["mrc.icrc"] = hex(static_cast<std::uint32_t>(f.bytes[f.bytes.size() - 4]) |
                                static_cast<std::uint32_t>(f.bytes[f.bytes.size() - 3]) << 8 |
                                static_cast<std::uint32_t>(f.bytes[f.bytes.size() - 2]) << 16 |
                                static_cast<std::uint32_t>(f.bytes[f.bytes.size() - 1]) << 24,
                            8);
    f.mrc["mrc.icrc.good"] = boolean(false);
    frames.push_back(f);
  }
  {  // Trimmed WRITE_ONLY: header stack only (encode_headers), no payload and no ICRC on the wire.
    auto p = data_packet(Opcode::kWriteOnly, 0x00ABCD, 0x12345A, pl256);
    Frame f = make_frame(p);
    f.bytes.resize(wire::header_size(p.bth.opcode, false));
    f.mrc.erase("mrc.payload_len");
    f.mrc.erase("mrc.icrc");
    f.mrc.erase("mrc.icrc.good");
    f.mrc["mrc.trimmed"] = boolean(true);
    f.info.dscp = 46;
    frames.push_back(f);
  }
  {  // A plain RoCEv2 RDMA WRITE Only (IBTA opcode 0x0A) + RETH: not MRC, must go to the built-in dissector.
    Frame f;
    const std::uint8_t roce[] = {
        0x0A, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11,  // BTH: opcode, P_Key, QP 0x11
        0x80, 0x00, 0x04, 0xD2,                          // A, PSN 1234
        0x00, 0x00, 0x7F, 0x00, 0x12, 0x34, 0x56, 0x78,  // RETH VA
        0x00, 0x00, 0x10, 0x01,                          // R_Key
        0x00, 0x00, 0x00, 0x08,                          // DMA length 8
        1,    2,    3,    4,    5,    6,    7,    8,     // payload
        0,    0,    0,    0};                            // ICRC (not checked)
    f.bytes.assign(std::begin(roce), std::end(roce));
    f.ib = {{"infiniband.bth.opcode", "10"},
            {"infiniband.bth.destqp", "0x000011"},
            {"infiniband.bth.psn", "1234"},
            {"infiniband.bth.p_key", "65535"},
            {"infiniband.reth.va", "0x00007f0012345678"},
            {"infiniband.reth.r_key", "0x00001001"},
            {"infiniband.reth.dmalen", "8"}};
    f.mrc["infiniband.bth.opcode"] = "10";
    f.mrc["infiniband.reth.va"] = "0x00007f0012345678";
    frames.push_back(f);
  }

  // Addresses, ports, timestamps: every third frame is IPv6 with a flow label.
  const io::IpAddress v4a = io::IpAddress::v4(10, 255, 0, 1), v4b = io::IpAddress::v4(10, 255, 0, 2);
  io::IpAddress v6a, v6b;
  io::IpAddress::parse("fd00:4d52:4300::1", v6a);
  io::IpAddress::parse("fd00:4d52:4300::2", v6b);
  const std::uint64_t t0 = 1'700'000'000'000'000'000ull;
  io::PcapWriter w;
  if (!w.open(argv[1], io::TimestampResolution::kNano)) {
    std::cerr << w.error() << "\n";
    return 1;
  }
  for (std::size_t i = 0; i < frames.size(); ++i) {
    Frame& f = frames[i];
    const bool v6 = i % 3 == 1;
    f.info.time_ns = t0 + i * 1'000'123ull;
    f.info.src = v6 ? v6a : v4a;
    f.info.dst = v6 ? v6b : v4b;
    f.info.src_port = static_cast<std::uint16_t>(49152 + i);
    f.info.dst_port = wire::kRoceUdpPort;
    f.info.flow_label = v6 ? static_cast<std::uint32_t>(0xABC00 + i) : 0;
    f.info.ecn = static_cast<std::uint8_t>(i % 4);
    char ts[40];
    std::snprintf(ts, sizeof ts, "%" PRIu64 ".%09" PRIu64, f.info.time_ns / std::uint64_t{1'000'000'000},
                  f.info.time_ns % std::uint64_t{1'000'000'000});
    f.mrc["frame.time_epoch"] = ts;
    f.mrc[v6 ? "ipv6.src" : "ip.src"] = f.info.src.to_string();
    if (v6) f.mrc["ipv6.flow"] = hex(f.info.flow_label, 6);
    // Assigned as std::string temporaries: g++ 12 -O3 reports a false -Wrestrict overlap for a
    // short literal assigned in a loop (operator=(const char*) -> _M_replace).
    const std::string good = "1";  // 1 = Good
    if (!v6) f.mrc["ip.checksum.status"] = good;
    f.mrc["udp.checksum.status"] = good;
    f.mrc["udp.dstport"] = std::to_string(wire::kRoceUdpPort);
    // Data packets: write them in the engine's header | payload | trailer form to exercise that path.
    const std::size_t hs =
        f.bytes.size() >= 32 && f.bytes[0] >= 0xC6 && f.bytes[0] <= 0xCB ? 32 : f.bytes.size();
    const std::span<const std::uint8_t> all(f.bytes);
    const std::size_t tail = all.size() > hs + 4 ? 4 : 0;
    const bool ok = w.write(f.info, all.first(hs), all.subspan(hs, all.size() - hs - tail), all.last(tail));
    if (!ok) {
      std::cerr << w.error() << "\n";
      return 1;
    }
  }
  if (!w.close()) {
    std::cerr << w.error() << "\n";
    return 1;
  }
  if (!write_tsv(argv[2], kMrcColumns, frames, &Frame::mrc) ||
      !write_tsv(argv[3], kIbColumns, frames, &Frame::ib)) {
    std::cerr << "cannot write the expected-value files\n";
    return 1;
  }
  std::cout << "wrote " << frames.size() << " frames to " << argv[1] << "\n";
  return 0;
}
