#include "io/impair.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "common/small_file.hpp"
#include "wire/packet.hpp"

namespace mrc::io {
namespace {

bool parse_percent(std::string_view v, double& out) {
  if (!v.empty() && v.back() == '%') v.remove_suffix(1);
  double x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  // !(x >= 0 && x <= 100) also refuses "nan".
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || !(x >= 0 && x <= 100)) return false;
  out = x / 100.0;
  return true;
}

bool parse_duration(std::string_view v, Duration& out) {
  double x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || !(x >= 0)) return false;  // also "nan"
  const std::string_view unit(r.ptr, static_cast<std::size_t>(v.data() + v.size() - r.ptr));
  double mult = 1000.0;
  if (unit == "ns") {
    mult = 1;
  } else if (unit == "us" || unit.empty()) {
    mult = 1000.0;
  } else if (unit == "ms") {
    mult = 1e6;
  } else if (unit == "s") {
    mult = 1e9;
  } else {
    return false;
  }
  // At most kMaxImpairDelay: "inf" or 1e30us would not fit a Duration (the cast is undefined), and
  // now + delay must not wrap.
  const double ns = x * mult;
  if (!(ns <= static_cast<double>(kMaxImpairDelay))) return false;
  out = static_cast<Duration>(ns);
  return true;
}

bool parse_uint(std::string_view v, std::uint64_t& out) {
  const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  return r.ec == std::errc() && r.ptr == v.data() + v.size();
}

}  // namespace

bool parse_impair(std::string_view spec, ImpairConfig& out, std::string& err) {
  ImpairConfig c = out;
  std::size_t i = 0;
  while (i < spec.size()) {
    // One item: up to a separator. Comments run to the end of the line.
    if (spec[i] == '#') {
      while (i < spec.size() && spec[i] != '\n') ++i;
      continue;
    }
    if (spec[i] == ',' || spec[i] == ';' || spec[i] == ' ' || spec[i] == '\t' || spec[i] == '\n' ||
        spec[i] == '\r') {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < spec.size() && spec[j] != ',' && spec[j] != ';' && spec[j] != ' ' && spec[j] != '\t' &&
           spec[j] != '\n' && spec[j] != '\r' && spec[j] != '#')
      ++j;
    const std::string_view item = spec.substr(i, j - i);
    i = j;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      err = "impair: expected key=value, got '" + std::string(item) + "'";
      return false;
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view val = item.substr(eq + 1);
    bool ok = true;
    std::uint64_t u = 0;
    if (key == "drop") {
      ok = parse_percent(val, c.drop);
    } else if (key == "dup" || key == "duplicate") {
      ok = parse_percent(val, c.duplicate);
    } else if (key == "reorder") {
      ok = parse_percent(val, c.reorder);
    } else if (key == "trim") {
      ok = parse_percent(val, c.trim);
    } else if (key == "trim_lasthop") {
      ok = parse_percent(val, c.trim_lasthop);
    } else if (key == "delay") {
      ok = parse_duration(val, c.delay);
    } else if (key == "jitter") {
      ok = parse_duration(val, c.jitter);
    } else if (key == "reorder_delay") {
      ok = parse_duration(val, c.reorder_delay);
    } else if (key == "seed") {
      ok = parse_uint(val, c.seed);
    } else if (key == "hold_slots") {
      ok = parse_uint(val, u) && u > 0 && u <= (1u << 20);
      c.hold_slots = static_cast<std::uint32_t>(u);
    } else {
      err = "impair: unknown key '" + std::string(key) + "'";
      return false;
    }
    if (!ok) {
      err = "impair: bad value '" + std::string(val) + "' for " + std::string(key);
      return false;
    }
  }
  out = c;
  return true;
}

bool load_impair_file(const std::string& path, ImpairConfig& out, std::string& err) {
  // A line of key=value pairs: a larger file is the wrong one.
  std::string text;
  if (!read_small_file(path, "an impairment file of key=value pairs", kImpairFileMaxBytes, text, err)) {
    err = "impair: " + err;
    return false;
  }
  return parse_impair(text, out, err);
}

std::string to_string(const ImpairConfig& c) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "drop=%g%%,dup=%g%%,reorder=%g%%,trim=%g%%,trim_lasthop=%g%%,delay=%lluns,jitter=%lluns,"
                "reorder_delay=%lluns,seed=%llu",
                c.drop * 100, c.duplicate * 100, c.reorder * 100, c.trim * 100, c.trim_lasthop * 100,
                static_cast<unsigned long long>(c.delay), static_cast<unsigned long long>(c.jitter),
                static_cast<unsigned long long>(c.reorder_delay), static_cast<unsigned long long>(c.seed));
  return buf;
}

std::size_t trimmed_length(std::span<const std::uint8_t> pkt) {
  wire::Packet p;
  if (wire::decode(pkt, p) != wire::Error::kOk || p.payload.empty()) return 0;
  return static_cast<std::size_t>(p.payload.data() - pkt.data());
}

Impairment::Impairment(const ImpairConfig& cfg, std::size_t max_packet)
    : cfg_(cfg), max_packet_(max_packet), rng_(cfg.seed) {
  if (cfg_.holds()) {
    pool_.resize(std::size_t{cfg_.hold_slots} * max_packet_);
    free_.reserve(cfg_.hold_slots);
    for (std::uint32_t s = cfg_.hold_slots; s > 0; --s) free_.push_back(s - 1);
    heap_.reserve(cfg_.hold_slots);
  }
}

bool Impairment::hold(std::span<const std::uint8_t> pkt, const engine::RxMeta& meta, Time at) {
  if (free_.empty() || pkt.size() > max_packet_) {
    ++stats_.hold_overflow;
    return false;
  }
  const std::uint32_t slot = free_.back();
  free_.pop_back();
  std::memcpy(pool_.data() + std::size_t{slot} * max_packet_, pkt.data(), pkt.size());
  heap_.push_back(Held{at, seq_++, slot, static_cast<std::uint32_t>(pkt.size()), meta});
  std::push_heap(heap_.begin(), heap_.end(), later);
  return true;
}

void Impairment::pop_front() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  heap_.pop_back();
}

}  // namespace mrc::io
