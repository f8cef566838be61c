// Every header field of a decoded packet as (header, field, value), named as in
// docs/wire-format.md. Shared by `mrc decode` (JSON) and the interop tests (tests/wire/).
#pragma once
#include <cstdint>
#include <vector>

#include "wire/packet.hpp"

namespace mrc::wire {

struct FieldValue {
  enum class Kind : std::uint8_t { kUnsigned, kSigned, kBool };
  const char* header;  ///< "bth", "meth", "tseth", "reth", "immdt", "aeth", "seth", "cc_state", ...
  const char* name;    ///< the field's name in docs/wire-format.md
  Kind kind;
  std::uint64_t u = 0;
  std::int64_t i = 0;
  bool b = false;
};

/// The fields of `p` in wire order: the BTH, then the extension headers of its opcode (TSETH only if
/// present). The project's extension fields (EncodeOptions::ext) are listed only with `ext`. A SACK
/// lists probe_id instead of ack_psn_offset when pr = 1 (they share bytes 2-3).
std::vector<FieldValue> describe(const Packet& p, bool ext);

/// Name of an opcode as in docs/wire-format.md §1 ("WRITE_FIRST", ..., "PROBE"); "UNKNOWN" otherwise.
const char* opcode_name(Opcode op);

}  // namespace mrc::wire
