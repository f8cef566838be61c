// The one internal entry point of libmrc for this project's tools (`mrc perf`): opens an ordinary
// libmrc software device with the test-harness settings the public API has no call for (receive
// impairment, GSO, EV placement mode and SRv6 paths, maximum packet size, the wire-extension offer,
// pcap capture), and reads the device's endpoint counters. Not installed and not exported from
// libmrc.so (libmrc.map exports the C API only); everything else a tool does with the device goes
// through mrc.h / mrc_ctl.h on the ibv_context it gets back.
#pragma once
#include <infiniband/verbs.h>

#include <functional>
#include <string>

#include "io/udp_endpoint.hpp"
#include "mrc/mrc.h"

struct mrc_device;

namespace mrc::api {

struct DeviceTuning {
  /// Starting point of the device's endpoint configuration: everything but the plane addresses, the
  /// UDP port and the engine seed, which come from mrc_device_config as for any device.
  io::UdpConfig udp;
  /// The tool owns the device and is its controller: mrc_ctl.h calls on its own context may modify
  /// profiles without uid 0 / CAP_NET_ADMIN (the control socket still checks its peers).
  bool owner_controls = false;
  /// Prefix of the warning printed when the control socket cannot be served ("libmrc: NAME").
  std::string warn_prefix;
};

/// mrc_open_device with `tuning` (nullptr: the public defaults, MRC_WIRE_EXT). On failure nullptr with
/// errno and, when `err` is given, the endpoint's own message (e.g. which address did not bind).
ibv_context* open_tuned_device(const mrc_device_config& config, const DeviceTuning* tuning, std::string* err);

/// Runs `fn` on the endpoint of one of our devices (false if `c` is not one) inside
/// UdpEndpoint::execute(), so it reads counters and metrics without racing the progress thread.
/// For statistics (and a pcap writer set before traffic): a tool must not drive QPs through it.
bool with_endpoint(ibv_context* c, const std::function<void(io::UdpEndpoint&)>& fn);

}  // namespace mrc::api
