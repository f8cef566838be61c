// libFuzzer target for the profile-file parser of `mrc ctl` (src/api/profile_toml.cpp).
//
// Every input is checked as the TOML text of a profile file. It must check or be refused with a
// ProfileTomlError ("file:line: what"); any other exception, a crash, a hang or an unbounded
// allocation is a bug. A file that checks is then applied, as `mrc ctl --offline` does, to an
// in-process profile store with the ports it names (the store may refuse; it must not fail).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "api/ctl.hpp"
#include "api/ctl_service.hpp"
#include "api/profile_store.hpp"
#include "api/profile_toml.hpp"

namespace {

using namespace mrc::api;

void apply(mrc_ctl_context* c, const ProfileFile& f) {
  for (const FmtDef& d : f.fmts) {
    std::vector<mrc_ctl_ev_fmt_field> widths = d.widths;
    mrc_ctl_ev_fmt_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_fmt_mode = d.mode;
    if (mrc_ctl_modify_ev_fmt_profile(c, d.id, &a,
                                      MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE) != 0)
      continue;
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    a.ev_fmt_op.fmt_fields = widths.data();
    a.ev_fmt_op.fmt_field_count = static_cast<int>(widths.size());
    mrc_ctl_modify_ev_fmt_profile(c, d.id, &a, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_OP);
  }
  for (const EvDef& d : f.evps) {
    std::vector<mrc_ctl_ev_field> fields = d.fields;
    mrc_ctl_ev_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_mode = d.mode;
    std::uint32_t mask = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE;
    if (d.mode != MRC_CTL_EV_MODE_AUTO) {
      a.ev_fmt_profile_id = d.fmt_id;
      a.ev_count = d.count;
      a.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
      a.ev_fields_op.fields = fields.data();
      a.ev_fields_op.field_count = static_cast<int>(fields.size());
      mask |= MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
    }
    if (mrc_ctl_modify_ev_profile(c, d.id, &a, mask) != 0) continue;
    for (const auto& [ops, op] :
         {std::pair{d.evs, MRC_CTL_EV_OP_REPLACE_EV}, std::pair{d.deny, MRC_CTL_EV_OP_MODIFY_EV_STATE}}) {
      if (ops.empty()) continue;
      std::vector<mrc_ctl_ev_op_entry> entries = ops;
      a = {};
      a.ev_op.op = op;
      a.ev_op.entries = entries.data();
      a.ev_op.entry_count = static_cast<int>(entries.size());
      mrc_ctl_modify_ev_profile(c, d.id, &a, MRC_CTL_EV_PROFILE_EV_OP);
    }
    a = {};
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    a.ev_min_active = d.min_active;
    a.ev_event_mask = d.event_mask;
    mrc_ctl_modify_ev_profile(
        c, d.id, &a,
        MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK);
  }
  for (const CcDef& d : f.ccs) {
    mrc_ctl_cc_nscc_cfg cfg = d.cfg;
    mrc_ctl_cc_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.algorithm = d.algorithm == "none" ? nullptr : d.algorithm.c_str();
    if (mrc_ctl_modify_cc_profile(c, d.id, &a, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM) != 0)
      continue;
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    a.cc_config = &cfg;
    mrc_ctl_modify_cc_profile(c, d.id, &a,
                              MRC_CTL_CC_PROFILE_STATE | (a.algorithm ? MRC_CTL_CC_PROFILE_CONFIG : 0));
  }
}

}  // namespace

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
  apply(c, f);
  mrc_ctl_close(c);
  return 0;
}
