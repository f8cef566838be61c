// Writes a small seed corpus for fuzz_decode: one valid packet per opcode plus a few variants
// (TSETH, immediate, odd payload length, header-only "trimmed" stacks). Usage: fuzz_gen_corpus DIR
#include <cstdint>
#include <cstdio>
#include <string>

#include "wire/packet.hpp"

namespace {

using namespace mrc::wire;

bool write_file(const std::string& path, const std::uint8_t* data, std::size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(data, 1, n, f) == n;
  return std::fclose(f) == 0 && ok;
}

Packet base(Opcode op) {
  Packet p;
  p.bth.opcode = op;
  p.bth.dest_qp = 0x000123;
  p.bth.psn = 0x00ABCD;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  static const std::uint8_t kPayload[7] = {1, 2, 3, 4, 5, 6, 7};
  std::uint8_t buf[kMaxHeaderSize + sizeof kPayload + 8];
  int written = 0;

  auto emit = [&](const char* name, const Packet& p, bool headers_only) {
    Error err = Error::kOk;
    const std::size_t n = headers_only
                              ? encode_headers(p, static_cast<std::uint32_t>(p.payload.size()), buf, &err)
                              : encode(p, buf, &err);
    if (n == 0 || !write_file(dir + "/" + name + ".bin", buf, n)) {
      std::fprintf(stderr, "%s: %s\n", name, to_string(err));
      return false;
    }
    ++written;
    return true;
  };

  bool ok = true;
  Packet p = base(Opcode::kWriteFirst);
  p.payload = std::span<const std::uint8_t>(kPayload, 4);
  ok &= emit("write_first", p, false);
  p = base(Opcode::kWriteMiddle);
  p.has_tseth = true;
  p.tseth = {0x1234, true};
  p.payload = kPayload;
  ok &= emit("write_middle_tseth", p, false);
  ok &= emit("write_middle_tseth_trimmed", p, true);
  p = base(Opcode::kWriteLast);
  ok &= emit("write_last_empty", p, false);
  p = base(Opcode::kWriteLastImm);
  p.imm = 0xDEADBEEF;
  p.payload = std::span<const std::uint8_t>(kPayload, 1);
  ok &= emit("write_last_imm", p, false);
  p = base(Opcode::kWriteOnly);
  p.payload = std::span<const std::uint8_t>(kPayload, 2);
  ok &= emit("write_only", p, false);
  p = base(Opcode::kWriteOnlyImm);
  p.has_tseth = true;
  p.payload = std::span<const std::uint8_t>(kPayload, 3);
  ok &= emit("write_only_imm_tseth", p, false);
  p = base(Opcode::kAck);
  p.aeth = {aeth::kNakRemoteAccessError, 7};
  ok &= emit("ack", p, false);
  p = base(Opcode::kSack);
  p.seth.m = SackMode::kSkipOnce;
  p.seth.pr = true;
  p.seth.cack_psn = 0x00ABCC;
  p.seth.sack_bitmap = 0x5;
  p.seth.cc.rcvd_bytes = 100;
  ok &= emit("sack", p, false);
  p = base(Opcode::kNack);
  p.neth.reason = NackReason::kTrimmed;
  p.neth.nack_psn = 0x00ABCD;
  ok &= emit("nack", p, false);
  p = base(Opcode::kProbe);
  p.peth.probe_id = 9;
  ok &= emit("probe", p, false);
  p = base(Opcode::kEndpointRequest);
  p.bth.dest_qp = kEpQpn;
  p.erth.op = EpOp::kPortStatusUpdate;
  p.erth.port_status_mask = 0xFF;
  ok &= emit("endpoint_request", p, false);
  p = base(Opcode::kEndpointResponse);
  p.eeth.svc_time_valid = true;
  p.eeth.svc_time_ns = 1000;
  ok &= emit("endpoint_response", p, false);

  std::printf("wrote %d seeds to %s\n", written, dir.c_str());
  return ok ? 0 : 1;
}
