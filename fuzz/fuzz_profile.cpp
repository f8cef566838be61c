// libFuzzer target for the profile-file parser of `mrc ctl` (src/api/profile_toml.cpp).
//
// Every input is checked as the TOML text of a profile file. It must check or be refused with a
// ProfileTomlError ("file:line: what"); any other exception, a crash, a hang or an unbounded
// allocation is a bug. A file that checks is then applied, as `mrc ctl --offline` does, to an
// in-process profile store with the ports it names, with the one apply function `mrc ctl` uses
// (api::apply_profiles: the store may refuse, the file is then rolled back; it must not fail).
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/ctl.hpp"
#include "api/ctl_service.hpp"
#include "api/profile_store.hpp"
#include "api/profile_toml.hpp"

using namespace mrc::api;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ProfileFile f;
  try {
    f = parse_profiles(text, "fuzz.toml");
  } catch (const ProfileTomlError&) {
    return 0;
  }
  ProfileStore store;
  store.set_num_ports(f.ports_needed > 0 ? f.ports_needed : 1);
  CtlService service(store, nullptr, false);
  mrc_ctl_context* c = ctl_open_embedded(service, true);
  if (c == nullptr) return 0;
  (void)apply_profiles(c, f);  // the store may refuse (and then rolls back); it must not fail
  mrc_ctl_close(c);
  return 0;
}
