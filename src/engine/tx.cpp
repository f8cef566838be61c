#include "engine/tx.hpp"

#include <cstring>

namespace mrc::engine {

bool encode_tx(TxPacket& out, const wire::Packet& p, bool with_icrc, const MacKey* mac) {
  const auto payload_len = static_cast<std::uint32_t>(p.payload.size());
  wire::EncodeOptions opt;
  opt.ext = out.wire_ext;
  out.header_len = static_cast<std::uint16_t>(wire::encode_headers(
      p, payload_len, std::span<std::uint8_t>(out.header, sizeof(out.header)), nullptr, opt));
  if (out.header_len == 0) return false;
  out.payload = p.payload.data();
  out.payload_len = payload_len;
  const auto pad = static_cast<std::uint8_t>((4 - (payload_len & 3)) & 3);
  std::memset(out.trailer, 0, sizeof(out.trailer));
  out.psn = p.bth.psn;
  if (mac != nullptr) {
    // Authenticated QP: the tag takes the ICRC's place (least-significant byte first as well).
    const std::uint64_t tag =
        packet_mac(*mac, std::span<const std::uint8_t>(out.header, out.header_len), p.payload, pad);
    for (std::size_t i = 0; i < kMacSize; ++i)
      out.trailer[pad + i] = static_cast<std::uint8_t>(tag >> (8 * i));
    out.trailer_len = static_cast<std::uint8_t>(pad + kMacSize);
    return true;
  }
  const std::uint32_t crc =
      with_icrc ? wire::icrc(std::span<const std::uint8_t>(out.header, out.header_len), p.payload, pad) : 0;
  // The ICRC goes on the wire least-significant byte first, as RoCEv2 does.
  for (int i = 0; i < 4; ++i) out.trailer[pad + i] = static_cast<std::uint8_t>(crc >> (8 * i));
  out.trailer_len = static_cast<std::uint8_t>(pad + 4);
  return true;
}

}  // namespace mrc::engine
