// This implementation's layout of mrc_qp_attr.vendor_cfg (MRC_QP_VENDOR_CFG, docs/api.md "QP vendor
// configuration"): the per-QP settings OCP's API has no attribute for, which `mrc perf` exchanges
// out of band. A buffer whose first byte is not kVendorCfgMagic is not ours and is ignored, so a
// program that leaves vendor_cfg zero (or fills it for another vendor) gets the default behaviour.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>

#include "engine/auth.hpp"
#include "mrc/mrc.h"

namespace mrc::api {

inline constexpr std::uint8_t kVendorCfgMagic = 0xA1;  ///< high nibble 0xA: ours; low nibble: version 1

enum VendorCfgFlags : std::uint8_t {
  kVcAuth = 1 << 0,        ///< MAC-authenticated packets with tx_key / rx_key (applied at RTR)
  kVcWireExtSet = 1 << 1,  ///< the connection's wire-extension agreement is given (applied at RTR)
  kVcWireExtOn = 1 << 2,   ///< ... and it is "on" (D45)
  kVcActiveEvs = 1 << 3,   ///< the first active_evs EVs of the EV profile are active, the rest backups (INIT)
  kVcCcLineRate = 1 << 4,  ///< NSCC's line rate (BDP, window cap) in bits/s (INIT)
  kVcKnownFlags = 0x1F,
};

/// Byte offsets (integers little-endian).
inline constexpr std::size_t kVcOffFlags = 1, kVcOffActiveEvs = 4, kVcOffLineRate = 8, kVcOffTxKey = 16,
                             kVcOffRxKey = 32, kVcUsed = 48;

struct VendorCfg {
  std::uint8_t flags = 0;
  std::uint32_t active_evs = 0;
  std::uint64_t line_rate_bps = 0;
  engine::MacKey tx_key{}, rx_key{};
};

/// Writes `c` into a vendor_cfg buffer (the unused bytes zero).
inline void encode_vendor_cfg(const VendorCfg& c, std::uint8_t (&out)[MRC_MAX_VENDOR_CFG_SIZE]) {
  std::memset(out, 0, sizeof out);
  out[0] = kVendorCfgMagic;
  out[kVcOffFlags] = c.flags;
  for (int i = 0; i < 4; ++i) out[kVcOffActiveEvs + i] = static_cast<std::uint8_t>(c.active_evs >> (8 * i));
  for (int i = 0; i < 8; ++i) out[kVcOffLineRate + i] = static_cast<std::uint8_t>(c.line_rate_bps >> (8 * i));
  const auto tx = c.tx_key.bytes(), rx = c.rx_key.bytes();
  std::memcpy(out + kVcOffTxKey, tx.data(), tx.size());
  std::memcpy(out + kVcOffRxKey, rx.data(), rx.size());
}

enum class VendorCfgParse { kNone, kOk, kInvalid };

/// kNone: not ours (ignored); kInvalid: ours with an unknown flag or a reserved byte set.
inline VendorCfgParse decode_vendor_cfg(const std::uint8_t (&in)[MRC_MAX_VENDOR_CFG_SIZE], VendorCfg& c) {
  if (in[0] != kVendorCfgMagic) return VendorCfgParse::kNone;
  c = VendorCfg{};
  c.flags = in[kVcOffFlags];
  if ((c.flags & ~kVcKnownFlags) != 0 || in[2] != 0 || in[3] != 0) return VendorCfgParse::kInvalid;
  for (std::size_t i = kVcUsed; i < MRC_MAX_VENDOR_CFG_SIZE; ++i)
    if (in[i] != 0) return VendorCfgParse::kInvalid;
  for (int i = 0; i < 4; ++i) c.active_evs |= std::uint32_t{in[kVcOffActiveEvs + i]} << (8 * i);
  for (int i = 0; i < 8; ++i) c.line_rate_bps |= std::uint64_t{in[kVcOffLineRate + i]} << (8 * i);
  c.tx_key = engine::MacKey::from_bytes(std::span<const std::uint8_t, 16>(in + kVcOffTxKey, 16));
  c.rx_key = engine::MacKey::from_bytes(std::span<const std::uint8_t, 16>(in + kVcOffRxKey, 16));
  if ((c.flags & kVcActiveEvs) && c.active_evs == 0) return VendorCfgParse::kInvalid;
  if ((c.flags & kVcCcLineRate) && c.line_rate_bps == 0) return VendorCfgParse::kInvalid;
  if ((c.flags & kVcWireExtOn) && !(c.flags & kVcWireExtSet)) return VendorCfgParse::kInvalid;
  return VendorCfgParse::kOk;
}

}  // namespace mrc::api
