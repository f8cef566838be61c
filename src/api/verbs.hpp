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

struct DeviceTuning;
/// Opens a software device; `listed` is its entry of ibv_get_device_list (nullptr: the device
/// makes its own ibv_device); `tuning`: the tools' settings (device_tuning.hpp). nullptr + errno
/// (and the endpoint's message in *err when given).
mrc_device* open_device(const mrc_device_config* config, ibv_device* listed,
                        const DeviceTuning* tuning = nullptr, std::string* err = nullptr);
/// Fills the ibv_context of a device: the verbs CQ/QP ops of verbs_qp.cpp, no extended verbs, no
/// command fd, an async fd of -1.
void init_verbs_context(VerbsContext& v, ibv_device* dev);
/// "a,b,c@port" -> addresses and port (0 when absent).
bool parse_device_spec(std::string_view spec, std::vector<std::string>& addrs, std::uint16_t& port);

// ---- verbs CQs, QPs and completion channels of a software device (verbs_qp.cpp, D52) ----
/// ibv_comp_channel first: the application's pointer converts back. `mrc` is made at the first CQ
/// that uses the channel and shares its eventfd.
struct VerbsChannel {
  ibv_comp_channel ibv;
  mrc_comp_channel* mrc;
};
struct VerbsCq {
  ibv_cq ibv;
  mrc_cq* mrc;
};
struct VerbsQp {
  ibv_qp ibv;
  mrc_qp* mrc;
};
/// Sets the context ops the inline verbs of <infiniband/verbs.h> call (poll_cq, post_send, ...).
void set_verbs_ops(ibv_context& c);
/// Destroys the mrc_context the verbs calls made for this device, if they made it and it is idle
/// (ibv_close_device).
void release_verbs_context(mrc_device& d);
/// The largest IB MTU (256..4096 payload bytes) that fits every plane's interface MTU.
ibv_mtu fitting_mtu(mrc_device& d);

/// The real libibverbs' definition of a verbs call (the next object after libmrc: libibverbs under
/// `mrc exec`'s LD_PRELOAD or when a program links libmrc first), or nullptr when none is loaded.
void* real_verbs(const char* name, const char* version);

}  // namespace mrc::api

/// The real libibverbs' `fn` (symbol version `ver`), looked up once per call site.
#define MRC_REAL_VERBS(fn, ver)                                                                    \
  ([] {                                                                                            \
    static const auto real_fn = reinterpret_cast<decltype(&fn)>(::mrc::api::real_verbs(#fn, ver)); \
    return real_fn;                                                                                \
  }())
