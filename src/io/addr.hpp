// Addresses of the software endpoint: an IPv4 or IPv6 address, its RoCEv2 GID form, and the
// interface that holds it.
#pragma once
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace mrc::io {

/// An IPv4 or IPv6 address (no port).
struct IpAddr {
  int family = AF_INET;
  std::array<std::uint8_t, 16> bytes{};  ///< IPv4 uses the first 4
  static bool parse(std::string_view text, IpAddr& out);
  /// The address a RoCEv2 GID names in `family`: IPv4 takes only IPv4-mapped GIDs (::ffff:a.b.c.d).
  static bool from_gid(const std::uint8_t gid[16], int family, IpAddr& out);
  /// The RoCEv2 GID of this address (IPv4 as ::ffff:a.b.c.d).
  void to_gid(std::uint8_t gid[16]) const;
  std::string str() const;
  friend bool operator==(const IpAddr&, const IpAddr&) = default;
};

/// The interface index holding `a`: the interface with exactly that address, else the one whose
/// subnet holds it with the longest prefix (a bound address need not be listed, e.g. 127.0.0.2 on
/// lo's 127.0.0.0/8). 0 if none.
int interface_of(const IpAddr& a);

}  // namespace mrc::io
