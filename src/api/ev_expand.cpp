#include "api/ev_expand.hpp"

#include <bit>
#include <limits>

namespace mrc::api {
namespace {

bool get_bit(const EvBytes& b, std::uint32_t i) {
  return (b[i / 8] >> (7 - i % 8)) & 1u;
}

void set_bit(EvBytes& b, std::uint32_t i, bool v) {
  const auto m = static_cast<std::uint8_t>(1u << (7 - i % 8));
  b[i / 8] = static_cast<std::uint8_t>(v ? (b[i / 8] | m) : (b[i / 8] & ~m));
}

std::uint64_t sum(std::span<const std::uint32_t> w) {
  std::uint64_t s = 0;
  for (const std::uint32_t x : w) s += x;
  return s;
}

std::string field_error(std::size_t i, const char* what) {
  return "field " + std::to_string(i) + ": " + what;
}

}  // namespace

bool ev_fmt_mode_valid(std::uint32_t mode) {
  return mode == static_cast<std::uint32_t>(EvFmtMode::kStev) ||
         mode == static_cast<std::uint32_t>(EvFmtMode::kSrv6) ||
         mode == static_cast<std::uint32_t>(EvFmtMode::kUdp);
}

std::uint32_t ev_fmt_max_width(EvFmtMode mode) {
  switch (mode) {
    case EvFmtMode::kStev:
      return 32;
    case EvFmtMode::kUdp:
      return 16;
    case EvFmtMode::kSrv6:
      break;
  }
  return kEvBits;
}

std::string check_format(EvFmtMode mode, std::span<const std::uint32_t> fmt_widths) {
  if (fmt_widths.empty()) return "a format needs at least one field";
  for (std::size_t i = 0; i < fmt_widths.size(); ++i)
    if (fmt_widths[i] == 0 || fmt_widths[i] > 32) return field_error(i, "format width must be 1..32");
  if (sum(fmt_widths) > ev_fmt_max_width(mode))
    return "format fields total " + std::to_string(sum(fmt_widths)) + " bits, the mode allows " +
           std::to_string(ev_fmt_max_width(mode));
  return {};
}

std::string check_fields(std::span<const std::uint32_t> fmt_widths, std::span<const EvField> fields) {
  if (fields.empty()) return "a profile needs at least one field";
  if (fields.size() > fmt_widths.size()) return "more profile fields than format fields";
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const EvField& f = fields[i];
    total += f.width;
    if (f.width == 0 || f.width > 32) return field_error(i, "width must be 1..32");
    // Q-EV-4: the packer would silently drop the high bits.
    if (f.width > fmt_widths[i]) return field_error(i, "wider than its format field");
    const std::uint64_t limit = std::uint64_t{1} << f.width;
    if (f.init_val >= limit) return field_error(i, "init_val does not fit in width");
    if (f.mask >= limit) return field_error(i, "mask has bits above width");
    if (f.mask != 0) {
      if (f.max_val >= (std::uint64_t{1} << std::popcount(f.mask)))
        return field_error(i, "max_val does not fit in popcount(mask) bits");
      if (f.min_val > f.max_val) return field_error(i, "min_val above max_val");
    }
  }
  if (total > sum(fmt_widths)) return "profile fields wider than the format";
  return {};
}

std::uint32_t raw_bits(std::span<const EvField> fields) {
  std::uint32_t n = 0;
  for (const EvField& f : fields) n += static_cast<std::uint32_t>(std::popcount(f.mask));
  return n;
}

bool expand(std::span<const std::uint32_t> fmt_widths, std::span<const EvField> fields, const EvBytes& raw,
            EvBytes& out) {
  out.fill(0);
  std::uint32_t cursor = 0, dst = 0;
  if (fields.size() > fmt_widths.size() || raw_bits(fields) > kEvBits) return false;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const EvField& f = fields[i];
    std::uint32_t v = f.init_val;
    if (f.mask != 0) {
      const auto n = static_cast<std::uint32_t>(std::popcount(f.mask));
      std::uint32_t x = 0;
      for (std::uint32_t k = 0; k < n; ++k)
        x = (x << 1) | static_cast<std::uint32_t>(get_bit(raw, cursor + k));
      cursor += n;
      // Scatter: lowest set mask bit takes the least significant bit of x.
      std::uint32_t k = 0;
      for (std::uint32_t b = 0; b < f.width; ++b) {
        if (!((f.mask >> b) & 1u)) continue;
        v = (v & ~(1u << b)) | (((x >> k) & 1u) << b);
        ++k;
      }
    }
    const std::uint32_t w = fmt_widths[i];
    if (w > kEvBits - dst) return false;  // a format check_format would refuse
    for (std::uint32_t b = 0; b < w; ++b) {
      const std::uint32_t bit = w - 1 - b;  // MSB first; bits above 31 are left-fill zeros
      set_bit(out, dst + b, bit < 32 && ((v >> bit) & 1u));
    }
    dst += w;
  }
  for (std::uint32_t i = cursor; i < kEvBits; ++i)
    if (get_bit(raw, i)) return false;
  return true;
}

std::uint64_t generated_space(std::span<const EvField> fields) {
  std::uint64_t n = 1;
  for (const EvField& f : fields) {
    if (f.mask == 0) continue;
    const std::uint64_t radix = std::uint64_t{f.max_val} - f.min_val + 1;
    if (n > std::numeric_limits<std::uint64_t>::max() / radix)
      return std::numeric_limits<std::uint64_t>::max();
    n *= radix;
  }
  return n;
}

EvBytes generated_raw(std::span<const EvField> fields, std::uint64_t index) {
  // Digits from the last field (fastest) backwards, then written in field order.
  std::vector<std::uint32_t> digit(fields.size(), 0);
  for (std::size_t i = fields.size(); i-- > 0;) {
    const EvField& f = fields[i];
    if (f.mask == 0) continue;
    const std::uint64_t radix = std::uint64_t{f.max_val} - f.min_val + 1;
    digit[i] = static_cast<std::uint32_t>(f.min_val + index % radix);
    index /= radix;
  }
  EvBytes raw{};
  std::uint32_t cursor = 0;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const auto n = static_cast<std::uint32_t>(std::popcount(fields[i].mask));
    for (std::uint32_t k = 0; k < n; ++k) set_bit(raw, cursor + k, (digit[i] >> (n - 1 - k)) & 1u);
    cursor += n;
  }
  return raw;
}

std::vector<GeneratedEv> generate(std::span<const std::uint32_t> fmt_widths, std::span<const EvField> fields,
                                  std::uint32_t count, std::uint64_t port_mask,
                                  const std::function<bool(const EvBytes&, std::uint8_t port)>& denied) {
  std::vector<std::uint8_t> ports;
  for (std::uint8_t p = 1; p < 64; ++p)
    if ((port_mask >> p) & 1u) ports.push_back(p);
  std::vector<GeneratedEv> out;
  if (ports.empty()) return out;
  out.reserve(count);
  const std::uint64_t space = generated_space(fields);
  for (std::uint64_t idx = 0; idx < space && out.size() < count; ++idx) {
    GeneratedEv g;
    g.raw = generated_raw(fields, idx);
    expand(fmt_widths, fields, g.raw, g.expanded);
    g.port = ports[out.size() % ports.size()];
    if (denied && denied(g.expanded, g.port)) continue;
    out.push_back(g);
  }
  return out;
}

std::uint32_t ev_value_be32(const EvBytes& e) {
  return (std::uint32_t{e[0]} << 24) | (std::uint32_t{e[1]} << 16) | (std::uint32_t{e[2]} << 8) | e[3];
}

std::string srv6_usids(const EvBytes& e, std::uint32_t block_bits, std::vector<std::uint16_t>& out) {
  out.clear();
  if (block_bits == 0 || block_bits % 16 != 0 || block_bits >= 128) return "bad SRv6 locator block length";
  for (std::size_t i = 16; i < kEvBytes; ++i)
    if (e[i] != 0) return "SRv6 EVs with an SRH segment cannot be sent (the endpoint sends no SRH)";
  bool ended = false;
  for (std::uint32_t b = block_bits / 8; b < 16; b += 2) {
    const auto usid = static_cast<std::uint16_t>(e[b] << 8 | e[b + 1]);
    if (usid == 0) {
      ended = true;
    } else if (ended) {
      return "SRv6 EV destination has bits after its end of carrier (a zero uSID)";
    } else {
      out.push_back(usid);
    }
  }
  if (out.empty()) return "SRv6 EV destination has no uSID after its locator block";
  return {};
}

}  // namespace mrc::api
