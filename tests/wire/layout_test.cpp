// Exact byte layouts: encoder output against hand-written byte arrays (docs/wire-format.md tables).
// The expected ICRC values were computed independently (Python zlib.crc32 over 8 x 0xFF, the header
// stack with BTH byte 4 = 0xFF, payload, pad).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "wire/wire_test_util.hpp"

namespace mrc::wire {
namespace {

using test::encode_vec;

std::vector<std::uint8_t> headers_of(const Packet& p, std::uint32_t payload_len) {
  std::vector<std::uint8_t> buf(kMaxHeaderSize, 0xEE);
  Error err = Error::kBufferTooSmall;
  const std::size_t n = encode_headers(p, payload_len, buf, &err);
  EXPECT_EQ(err, Error::kOk);
  buf.resize(n);
  return buf;
}

TEST(WireLayout, HeaderSizes) {
  EXPECT_EQ(header_size(Opcode::kWriteFirst, false), 32u);
  EXPECT_EQ(header_size(Opcode::kWriteMiddle, true), 36u);
  EXPECT_EQ(header_size(Opcode::kWriteLast, false), 32u);
  EXPECT_EQ(header_size(Opcode::kWriteOnly, true), 36u);
  EXPECT_EQ(header_size(Opcode::kWriteLastImm, false), 36u);
  EXPECT_EQ(header_size(Opcode::kWriteOnlyImm, true), 40u);
  EXPECT_EQ(header_size(Opcode::kAck, true), 16u);  // has_tseth is ignored for control opcodes
  EXPECT_EQ(header_size(Opcode::kSack, false), 48u);
  EXPECT_EQ(header_size(Opcode::kNack, false), 32u);
  EXPECT_EQ(header_size(Opcode::kProbe, false), 28u);
  EXPECT_EQ(header_size(Opcode::kEndpointRequest, false), 28u);
  EXPECT_EQ(header_size(Opcode::kEndpointResponse, false), 48u);
  EXPECT_EQ(header_size(static_cast<Opcode>(0x04), false), 0u);
  for (Opcode op : test::kAllOpcodes) {
    EXPECT_LE(header_size(op, true), kMaxHeaderSize);
    EXPECT_EQ(header_size(op, true) % 4, 0u);
  }
}

TEST(WireLayout, OpcodeClasses) {
  int known = 0;
  for (int v = 0; v < 256; ++v) {
    const auto b = static_cast<std::uint8_t>(v);
    const auto op = static_cast<Opcode>(b);
    known += is_known(b) ? 1 : 0;
    EXPECT_EQ(is_data(op), v >= 0xC6 && v <= 0xCB) << v;
    EXPECT_EQ(has_imm(op), v == 0xC9 || v == 0xCB) << v;
    EXPECT_EQ(is_last(op), v == 0xC8 || v == 0xC9 || v == 0xCA || v == 0xCB) << v;
    EXPECT_EQ(is_first(op), v == 0xC6 || v == 0xCA || v == 0xCB) << v;
  }
  EXPECT_EQ(known, 12);
  for (Opcode op : test::kAllOpcodes) EXPECT_TRUE(is_known(static_cast<std::uint8_t>(op)));
}

TEST(WireLayout, DataPacketBthMethTsethRethImm) {
  const std::array<std::uint8_t, 5> payload = {'h', 'e', 'l', 'l', 'o'};
  Packet p;
  p.bth.opcode = Opcode::kWriteOnlyImm;
  p.bth.se = true;
  p.bth.pkey = 0x8001;
  p.bth.dest_qp = 0x123456;
  p.bth.ack_req = true;
  p.bth.rtx = true;
  p.bth.psn = 0xABCDEF;
  p.meth = {0x1122, 0x3344};
  p.has_tseth = true;
  p.tseth = {0xBEEF, true};
  p.reth = {0x0102030405060708ull, 0xCAFEBABE, 0x00010000};
  p.imm = 0xDEADBEEF;
  p.payload = payload;

  const std::vector<std::uint8_t> expected = {
      // BTH: opcode, M|SE|PadCnt=3|TVer=0 (M = bit 7, F3), P_Key, resv8, DestQP, A|R|RTX|TS|0000, PSN
      0xCB, 0x70, 0x80, 0x01, 0x00, 0x12, 0x34, 0x56, 0xB0, 0xAB, 0xCD, 0xEF,
      // METH: RQMSN, MSN
      0x11, 0x22, 0x33, 0x44,
      // TSETH: tx_timestamp, tsr|reserved|ftype=1
      0xBE, 0xEF, 0x80, 0x01,
      // RETH: VA, R_Key, DMA length
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xCA, 0xFE, 0xBA, 0xBE, 0x00, 0x01, 0x00, 0x00,
      // ImmDt
      0xDE, 0xAD, 0xBE, 0xEF,
      // payload, 3 pad bytes, ICRC (0x283D1FB8, little-endian)
      'h', 'e', 'l', 'l', 'o', 0x00, 0x00, 0x00, 0xB8, 0x1F, 0x3D, 0x28};
  EXPECT_EQ(encode_vec(p), expected);
  EXPECT_EQ(headers_of(p, 5), std::vector<std::uint8_t>(expected.begin(), expected.begin() + 40));

  Packet d;
  ASSERT_EQ(decode(expected, d, {.verify_icrc = true}), Error::kOk);
  EXPECT_EQ(d.icrc, 0x283D1FB8u);
  EXPECT_EQ(d.bth.pad_cnt, 3);
  EXPECT_TRUE(d.bth.ts);
  EXPECT_TRUE(test::same_fields(d, test::expected_after_decode(p)));
}

TEST(WireLayout, BthBitsOneAtATime) {
  Packet p;
  p.bth.opcode = Opcode::kAck;
  p.bth.pkey = 0;
  auto bth = [&] {
    auto h = headers_of(p, 0);
    return std::vector<std::uint8_t>(h.begin(), h.begin() + 12);
  };
  EXPECT_EQ(bth(), (std::vector<std::uint8_t>{0xD1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  p.bth.se = true;
  EXPECT_EQ(bth()[1], 0x40);  // Keysight lists MigReq before SE; MRC-Client: M = bit 7 (F3)
  p.bth.se = false;
  p.bth.m = true;
  EXPECT_EQ(bth()[1], 0x80);
  p.bth.m = false;
  p.bth.tver = 0xF;  // the encoder writes any 4-bit TVer (decode only accepts kTver)
  EXPECT_EQ(bth()[1], 0x0F);
  p.bth.tver = kTver;
  p.bth.ack_req = true;
  EXPECT_EQ(bth()[8], 0x80);
  p.bth.ack_req = false;
  p.bth.rtx = true;
  EXPECT_EQ(bth()[8], 0x20);
  p.bth.rtx = false;
  p.has_tseth = true;  // ignored for control opcodes: TS stays clear
  p.bth.ts = true;     // ignored: TS follows has_tseth
  EXPECT_EQ(bth()[8], 0x00);
  p.bth.dest_qp = 0xFFFFFF;
  p.bth.psn = 0xFFFFFF;
  p.bth.pkey = 0xFFFF;
  EXPECT_EQ(bth(),
            (std::vector<std::uint8_t>{0xD1, 0, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0xFF}));

  // PadCnt from the payload length.
  Packet w;
  w.bth.opcode = Opcode::kWriteMiddle;
  for (std::uint32_t len = 0; len < 12; ++len) {
    EXPECT_EQ((headers_of(w, len)[1] >> 4) & 3, static_cast<int>((4 - len % 4) % 4)) << len;
  }
  w.has_tseth = true;
  EXPECT_EQ(headers_of(w, 0)[8], 0x10);
}

TEST(WireLayout, AckAeth) {
  Packet p;
  p.bth.opcode = Opcode::kAck;
  p.bth.dest_qp = 0x000102;
  p.bth.psn = 0x030405;
  p.aeth = {aeth::kNakRemoteAccessError, 0xA1B2C3};
  EXPECT_EQ(headers_of(p, 0), (std::vector<std::uint8_t>{0xD1, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x01, 0x02, 0x00,
                                                         0x03, 0x04, 0x05, 0x62, 0xA1, 0xB2, 0xC3}));
}

TEST(WireLayout, SackSethAndCcState) {
  Packet p;
  p.bth.opcode = Opcode::kSack;
  p.bth.dest_qp = 0x11;
  Seth& s = p.seth;
  s.m = SackMode::kAlwaysSkip;
  s.pr = true;
  s.ack_psn_offset = -2;
  s.entropy = 0x89ABCDEF;
  s.svc_time = 0x0102;
  s.probe_id = 0x0304;
  s.cack_psn = 0x00FFFE;
  s.cc_type = 0x5;
  s.cc_flags = cc_flags::kRtxEcho | cc_flags::kSvcTime;
  s.mpr = 8;
  s.sack_offset = -300;
  s.sack_bitmap = 0x8000000000000001ull;
  s.cc = {0x1234, 0x7FFF, true, 0x45, 0xABCDEF};

  const std::vector<std::uint8_t> expected = {
      // BTH
      0xDC, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00,
      // SETH: type|next, next0|m=10|rrr|pr|r, pr=1: probe_id in the ack_psn_offset bytes (F2), entropy
      0x00, 0x42, 0x03, 0x04, 0x89, 0xAB, 0xCD, 0xEF,
      // Source / Destination PDCID (0: svc_time only with ext), reserved, cack_psn
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFE,
      // cc_type|cc_flags (0 without ext), mpr, sack_offset=-300, sack_bitmap
      0x50, 0x08, 0xFE, 0xD4, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
      // CC_STATE: tx_timestamp, r|ooo_count, r_c|rcv_cwnd_pen, rcvd_bytes
      0x12, 0x34, 0x7F, 0xFF, 0xC5, 0xAB, 0xCD, 0xEF,
      // ICRC little-endian
      0xE7, 0x55, 0xE8, 0x7C};
  EXPECT_EQ(encode_vec(p), expected);

  Packet d;
  ASSERT_EQ(decode(expected, d, {.verify_icrc = true}), Error::kOk);
  EXPECT_EQ(d.seth.probe_id, 0x0304);
  EXPECT_EQ(d.seth.ack_psn_offset, 0);
  EXPECT_EQ(d.seth.sack_offset, -300);
  EXPECT_TRUE(test::same_fields(d, test::expected_after_decode(p)));

  // With the project's extension: svc_time in the Source PDCID slot, cc_flags in byte 16.
  std::vector<std::uint8_t> with_ext = expected;
  with_ext[12 + 8] = 0x01;
  with_ext[12 + 9] = 0x02;
  with_ext[12 + 16] = 0x53;
  const std::array<std::uint8_t, 4> ext_icrc = {0xB2, 0xD3, 0xEC, 0x0F};
  std::copy(ext_icrc.begin(), ext_icrc.end(), with_ext.end() - 4);
  EXPECT_EQ(encode_vec(p, true), with_ext);
  ASSERT_EQ(decode(with_ext, d, {.verify_icrc = true, .ext = true}), Error::kOk);
  EXPECT_TRUE(test::same_fields(d, test::expected_after_decode(p, true)));
  // A non-probe SACK carries ack_psn_offset there.
  s.pr = false;
  EXPECT_EQ(headers_of(p, 0)[14], 0xFF);
  EXPECT_EQ(headers_of(p, 0)[15], 0xFE);

  // m values and the pr bit in isolation.
  s = Seth{};
  s.m = SackMode::kSkipOnce;
  EXPECT_EQ(headers_of(p, 0)[13], 0x20);
  s.m = SackMode::kNone;
  s.pr = true;
  EXPECT_EQ(headers_of(p, 0)[13], 0x02);
}

TEST(WireLayout, NackNeth) {
  Packet p;
  p.bth.opcode = Opcode::kNack;
  p.bth.dest_qp = 0x000AB0;
  p.bth.psn = 0x000001;
  p.neth = {NackReason::kPsnOorWindow, 0x77, 0x01020304, 0x123456, 0x1, cc_flags::kEcnEcho, 0xA5A5};
  const std::vector<std::uint8_t> expected = {0xDD, 0x00, 0xFF, 0xFF, 0x00, 0x00,
                                              0x0A, 0xB0, 0x00, 0x00, 0x00, 0x01,  // BTH
                                              0x00, 0x00, 0x0B, 0x77,   // type|next|rsvd, reason, vendor
                                              0x01, 0x02, 0x03, 0x04,   // entropy
                                              0x00, 0x00, 0x00, 0x00,   // spdcid, dpdcid (reserved)
                                              0x00, 0x12, 0x34, 0x56,   // reserved, nack_psn
                                              0x10, 0x00, 0xA5, 0xA5};  // cc_type|flags, rsvd, tx_ts
  EXPECT_EQ(headers_of(p, 0), expected);                                // cc_flags only with ext
}

TEST(WireLayout, ProbePeth) {
  Packet p;
  p.bth.opcode = Opcode::kProbe;
  p.peth = {0x9A, 0xBEEF, 0x1357, true};
  const auto h = headers_of(p, 0);
  EXPECT_EQ(std::vector<std::uint8_t>(h.begin() + 12, h.end()),
            (std::vector<std::uint8_t>{0x00, 0x00, 0x00, 0x9A, 0xBE, 0xEF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                       0x13, 0x57, 0x80, 0x01}));
}

TEST(WireLayout, EndpointRequestErth) {
  Packet p;
  p.bth.opcode = Opcode::kEndpointRequest;
  p.bth.dest_qp = kEpQpn;
  p.bth.psn = 0x00BEEF;  // request id in PSN[15:0]
  p.erth.op = EpOp::kEvProbe;
  p.erth.vendor_info = 0x11;
  p.erth.port_status_mask = 0x000000F5;
  p.erth.entropy = 0xC0FFEE01;
  p.erth.tx_timestamp = 0x2468;
  p.erth.tsr = false;
  const auto h = headers_of(p, 0);
  EXPECT_EQ(h, (std::vector<std::uint8_t>{0xD8, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
                                          0xBE, 0xEF, 0x00, 0x01, 0x00, 0x11, 0x00, 0x00, 0x00, 0xF5,
                                          0x00, 0x00, 0x00, 0x00, 0x24, 0x68, 0x00, 0x01}));  // reserved word
}

TEST(WireLayout, EndpointResponseEeth) {
  Packet p;
  p.bth.opcode = Opcode::kEndpointResponse;
  p.eeth.op = EpOp::kPortStatusUpdate;
  p.eeth.vendor_info = 0x22;
  p.eeth.entropy = 0x0A0B0C0D;
  p.eeth.svc_time_ns = 0x00001388;
  p.eeth.tx_timestamp = 0xFEDC;
  p.eeth.svc_time_valid = true;
  p.eeth.port_status_valid = true;
  p.eeth.port_status_mask = 0x80000001;
  // Without ext: op and tx_timestamp only, everything else reserved (Keysight, MRC-Client; F1).
  auto h = headers_of(p, 0);
  ASSERT_EQ(h.size(), 48u);
  std::vector<std::uint8_t> eeth(36, 0);
  eeth[28] = 0xFE;
  eeth[29] = 0xDC;
  EXPECT_EQ(std::vector<std::uint8_t>(h.begin() + 12, h.end()), eeth);
  p.eeth.op = EpOp::kEvProbe;
  EXPECT_EQ(headers_of(p, 0)[13], 0x01);  // op in bits 1-0 (F11)
  p.eeth.op = EpOp::kPortStatusUpdate;
  // With ext: the project's fields in the reserved bytes.
  std::vector<std::uint8_t> out(kMaxHeaderSize);
  Error err = Error::kBadField;
  ASSERT_EQ(encode_headers(p, 0, out, &err, {.ext = true}), 48u);
  const std::vector<std::uint8_t> ext = {
      0x00, 0x00, 0xC0, 0x22,                          // prologue|op=0, svc_time_valid|mask_valid, vendor
      0x0A, 0x0B, 0x0C, 0x0D,                          // entropy
      0x00, 0x00, 0x13, 0x88,                          // svc_time_ns
      0x80, 0x00, 0x00, 0x01,                          // port_status_mask
      0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0,  // reserved (12 bytes)
      0xFE, 0xDC, 0x00, 0x00,                          // tx_timestamp, reserved
      0x00, 0x00, 0x00, 0x00};                         // reserved
  EXPECT_EQ(std::vector<std::uint8_t>(out.begin() + 12, out.begin() + 48), ext);
}

}  // namespace
}  // namespace mrc::wire
