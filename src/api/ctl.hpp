// In-process controller handles for C++ callers (tests, single-process tools): an
// mrc_ctl_context on a CtlService that the caller owns, running the same dispatcher as the
// control socket.
#pragma once
#include "api/ctl_service.hpp"
#include "mrc/mrc_ctl.h"

namespace mrc::api {

/// `privileged` = false makes an application-like handle (EPERM on every modify). The service
/// must outlive the handle (mrc_ctl_close).
mrc_ctl_context* ctl_open_embedded(CtlService& service, bool privileged);

}  // namespace mrc::api
