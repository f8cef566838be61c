// Plane link watch: rtnetlink link messages (RTMGRP_LINK) parsed into link states, and the
// RTM_GETLINK request that asks for one interface's state.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace mrc::io {

/// One interface's link state, as an rtnetlink link message reports it.
struct LinkState {
  int ifindex = 0;
  bool up = false;  ///< IFF_UP and IFF_RUNNING (the kernel's "operationally up or unknown")
};

/// The link states in `bytes`, a datagram read from an rtnetlink socket: one per RTM_NEWLINK
/// (up from its flags) and RTM_DELLINK (down) message, in order. Other messages are skipped; a
/// malformed message ends the parse (what came before it is kept).
std::vector<LinkState> parse_link_messages(std::span<const std::uint8_t> bytes);

/// Asks the kernel, on rtnetlink socket `fd`, for interface `ifindex`'s link state (RTM_GETLINK);
/// the answer is queued on `fd` before this returns. False if the request could not be sent.
bool request_link_state(int fd, int ifindex);

}  // namespace mrc::io
