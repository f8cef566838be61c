// libmrc's software verbs devices: the ibv_* entry points of <infiniband/verbs.h> that MRC programs
// call for devices, PDs and MRs (verbs.cpp), over the devices of MRC_DEVICES or mrc_open_device.
#pragma once
#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mrc/mrc.h"

struct mrc_device;

namespace mrc::api {

struct VerbsContext;

/// Opens a software device; `listed` is its entry of ibv_get_device_list (nullptr: the device
/// makes its own ibv_device). nullptr + errno.
mrc_device* open_device(const mrc_device_config* config, ibv_device* listed);
/// Fills the ibv_context of a device: ops that fail with ENOSYS (MRC QPs and CQs are mrc_*
/// objects), no extended verbs, no command fd, an async fd of -1.
void init_verbs_context(VerbsContext& v, ibv_device* dev);
/// "a,b,c@port" -> addresses and port (0 when absent).
bool parse_device_spec(std::string_view spec, std::vector<std::string>& addrs, std::uint16_t& port);

}  // namespace mrc::api
