// libFuzzer target for the QP vendor configuration (src/api/vendor_cfg.hpp: decode_vendor_cfg,
// what mrc_modify_qp reads from mrc_qp_attr.vendor_cfg, docs/api.md).
//
// The input fills the 128-byte buffer (zero-padded, truncated). A buffer the decoder accepts must
// hold only what the layout allows, and encoding the decoded values must give the same bytes back;
// a buffer without the magic byte is never ours.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "api/vendor_cfg.hpp"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fuzz_vendor_cfg: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t in[MRC_MAX_VENDOR_CFG_SIZE] = {};
  std::memcpy(in, data, size < sizeof in ? size : sizeof in);
  mrc::api::VendorCfg c;
  const mrc::api::VendorCfgParse r = mrc::api::decode_vendor_cfg(in, c);
  if (in[0] != mrc::api::kVendorCfgMagic) {
    if (r != mrc::api::VendorCfgParse::kNone) die("a buffer without the magic was taken as ours");
    return 0;
  }
  if (r == mrc::api::VendorCfgParse::kNone) die("a buffer with the magic was ignored");
  if (r != mrc::api::VendorCfgParse::kOk) return 0;
  if ((c.flags & ~mrc::api::kVcKnownFlags) != 0) die("an unknown flag was accepted");
  if ((c.flags & mrc::api::kVcWireExtOn) && !(c.flags & mrc::api::kVcWireExtSet))
    die("WIRE_EXT_ON without WIRE_EXT_SET was accepted");
  std::uint8_t out[MRC_MAX_VENDOR_CFG_SIZE];
  mrc::api::encode_vendor_cfg(c, out);
  if (std::memcmp(in, out, sizeof in) != 0) die("encode(decode(buffer)) differs from the buffer");
  return 0;
}
