#include "io/addr.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <bit>
#include <cstddef>
#include <cstring>

namespace mrc::io {

int interface_of(const IpAddr& a) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  const std::size_t n = a.family == AF_INET ? 4 : 16;
  const std::size_t off =
      a.family == AF_INET ? offsetof(sockaddr_in, sin_addr) : offsetof(sockaddr_in6, sin6_addr);
  int best = 0, best_bits = -1;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != a.family) continue;
    const auto* addr = reinterpret_cast<const std::uint8_t*>(i->ifa_addr) + off;
    int bits = 0;
    bool in = true;
    for (std::size_t k = 0; k < n && in; ++k) {
      const std::uint8_t mask =
          i->ifa_netmask != nullptr ? reinterpret_cast<const std::uint8_t*>(i->ifa_netmask)[off + k] : 0xFF;
      in = ((addr[k] ^ a.bytes[k]) & mask) == 0;
      bits += std::popcount(mask);
    }
    if (std::memcmp(addr, a.bytes.data(), n) == 0) bits = 1000;  // exact beats any prefix
    if (in && bits > best_bits) {
      const unsigned idx = ::if_nametoindex(i->ifa_name);
      if (idx != 0) {
        best = static_cast<int>(idx);
        best_bits = bits;
      }
    }
  }
  ::freeifaddrs(list);
  return best;
}

bool IpAddr::parse(std::string_view text, IpAddr& out) {
  const std::string s(text);
  IpAddr a;
  if (::inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET;
  } else if (::inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET6;
  } else {
    return false;
  }
  out = a;
  return true;
}

namespace {
constexpr std::uint8_t kV4MappedGid[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
}  // namespace

bool IpAddr::from_gid(const std::uint8_t gid[16], int family, IpAddr& out) {
  IpAddr a;
  a.family = family;
  if (family == AF_INET) {
    if (std::memcmp(gid, kV4MappedGid, sizeof kV4MappedGid) != 0) return false;
    std::memcpy(a.bytes.data(), gid + 12, 4);
  } else {
    std::memcpy(a.bytes.data(), gid, 16);
  }
  out = a;
  return true;
}

void IpAddr::to_gid(std::uint8_t gid[16]) const {
  if (family == AF_INET) {
    std::memcpy(gid, kV4MappedGid, sizeof kV4MappedGid);
    std::memcpy(gid + 12, bytes.data(), 4);
  } else {
    std::memcpy(gid, bytes.data(), 16);
  }
}

std::string IpAddr::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family, bytes.data(), buf, sizeof buf);
  return buf;
}
}  // namespace mrc::io
