// EV expansion (docs/protocol.md §7.5): how an EV profile's fields turn a raw EV (the value a
// controller gives or the generator produces) into the expanded EV placed on the wire, the
// validation rules of a profile against its format, and the deterministic enumeration of
// generated EVs (docs/decisions.md D32).
//
// EVs are byte strings (mrc_ctl_ev_t, 32 bytes), read and written MSB-first from byte 0 bit 7:
// the API edge is big-endian whatever the host is (Q-EV-1, worked example 4).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace mrc::api {

inline constexpr std::size_t kEvBytes = 32;
inline constexpr std::uint32_t kEvBits = 8 * kEvBytes;
using EvBytes = std::array<std::uint8_t, kEvBytes>;

/// Wire placement of the expanded EV (bit values as enum mrc_ctl_ev_fmt_mode).
enum class EvFmtMode : std::uint8_t { kStev = 1, kSrv6 = 2, kUdp = 4 };
bool ev_fmt_mode_valid(std::uint32_t mode);
/// Bits the expanded EV may occupy in this mode: STEV 32 (UDP source port + flow label),
/// UDP 16 (source port), SRv6 256 (destination address + one SRH segment).
std::uint32_t ev_fmt_max_width(EvFmtMode mode);

/// One EV profile field (struct mrc_ctl_ev_field).
struct EvField {
  std::uint32_t width = 0;
  std::uint32_t init_val = 0;
  std::uint32_t min_val = 0;
  std::uint32_t max_val = 0;
  std::uint32_t mask = 0;
  friend bool operator==(const EvField&, const EvField&) = default;
};

/// Checks format field widths against the mode: "" or the rule broken. Each width is 1..32 and
/// the sum fits the mode's width (E2BIG at the API).
std::string check_format(EvFmtMode mode, std::span<const std::uint32_t> fmt_widths);

/// Checks profile fields against their format (docs/protocol.md §7.5 rules plus Q-EV-4): "" or the rule
/// broken.
std::string check_fields(std::span<const std::uint32_t> fmt_widths, std::span<const EvField> fields);

/// Raw EV bits the fields consume (sum of popcount(mask)).
std::uint32_t raw_bits(std::span<const EvField> fields);

/// Expands `raw` through fields that passed check_fields() into `out` (zero beyond the format).
/// False when `raw` has a bit set past the bits the fields consume (or the format overflows).
bool expand(std::span<const std::uint32_t> fmt_widths, std::span<const EvField> fields, const EvBytes& raw,
            EvBytes& out);

/// Number of distinct generated tuples: product over masked fields of (max_val - min_val + 1),
/// saturated at UINT64_MAX. Fields without a mask are fixed and contribute a factor 1.
std::uint64_t generated_space(std::span<const EvField> fields);

/// The raw EV of tuple `index` (mixed radix over masked fields, last field fastest; each value
/// min_i + digit_i written as a popcount(mask_i)-bit big-endian slot). index < generated_space().
EvBytes generated_raw(std::span<const EvField> fields, std::uint64_t index);

struct GeneratedEv {
  EvBytes raw;
  EvBytes expanded;
  std::uint8_t port = 0;  ///< 1-based
};

/// Up to `count` generated EVs: tuples in index order, expanded; a tuple whose expanded EV on the
/// port it would get is denied is skipped; ports go round-robin (ascending) over `port_mask`
/// (bit N = port N). Fewer than `count` when the space runs out.
std::vector<GeneratedEv> generate(std::span<const std::uint32_t> fmt_widths, std::span<const EvField> fields,
                                  std::uint32_t count, std::uint64_t port_mask,
                                  const std::function<bool(const EvBytes&, std::uint8_t port)>& denied);

/// The 32-bit wire form of a UDP/STEV expanded EV: its first 4 bytes, big-endian (UDP source port
/// in the high 16 bits, STEV flow label in the low 16).
std::uint32_t ev_value_be32(const EvBytes& expanded);

/// The uSID path of an expanded SRv6 EV for an endpoint whose locator block is `block_bits` long
/// (docs/decisions.md D28, D37): the 16-bit uSIDs of the destination (bytes 0-15) after the block,
/// up to the first zero uSID (end of carrier). "" or why it cannot be sent: an SRH segment
/// (bytes 16-31 not all zero; the endpoint sends no SRH), no uSID, set bits after the end of
/// carrier, or block_bits not a multiple of 16 below 128. The block itself comes from the peer's
/// address when the carrier is built.
std::string srv6_usids(const EvBytes& expanded, std::uint32_t block_bits, std::vector<std::uint16_t>& out);

}  // namespace mrc::api
