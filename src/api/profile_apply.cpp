// Applying a checked profile file to an endpoint through the controller API, all or nothing:
// `mrc ctl apply` and the profile fuzz target run this one function (src/api/profile_toml.hpp).
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/ctl.hpp"
#include "api/profile_toml.hpp"

namespace mrc::api {
namespace {

/// The first refusal; unwinds to apply_profiles, which rolls back.
struct Refused {
  int rc;
  std::string message;
};

/// Why the last call failed, in the endpoint's words (errno text only when it gave none).
std::string why_text(mrc_ctl_context* c, int rc) {
  const char* w = mrc_ctl_last_error(c);
  return w != nullptr && *w != '\0' ? std::string(w) : std::string(std::strerror(rc));
}

void check(mrc_ctl_context* c, int rc, const std::string& what) {
  if (rc != 0) throw Refused{rc, what + ": " + why_text(c, rc)};
}

/// The line a store error is about: "field N: ..." is that field, "entry N: ..." that EV or deny
/// entry; otherwise the first of `keys` whose name the message uses and the entry has.
std::uint32_t blame(const EvDef& d, const std::string& why,
                    std::initializer_list<std::pair<const char*, const char*>> keys) {
  if (why.rfind("field ", 0) == 0 && why.size() > 6 && std::isdigit(static_cast<unsigned char>(why[6]))) {
    const std::size_t i = std::strtoul(why.c_str() + 6, nullptr, 10);
    if (d.at.keys.count("fields") != 0 && i < d.field_lines.size()) return d.field_lines[i];
  }
  for (const auto& [word, key] : keys)
    if (why.find(word) != std::string::npos)
      if (d.at.keys.count(key) != 0) return d.at.key(key);
  return d.at.line;
}

/// Moves an existing profile back to INIT so the file defines it from scratch.
template <typename Attr, typename Modify, typename Query>
void reset_profile(mrc_ctl_context* c, std::uint64_t id, Modify modify, Query query,
                   const std::string& what) {
  Attr a{};
  if (query(c, id, &a, 1u << 1) != 0) return;  // CUR_STATE; ENOENT: nothing to reset
  if (a.cur_profile_state == MRC_CTL_PROFILE_ONLINE) {
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    check(c, modify(c, id, &a, 1u << 0), what + " to OFFLINE");
  }
  if (a.cur_profile_state != MRC_CTL_PROFILE_INIT) {
    a.profile_state = MRC_CTL_PROFILE_INIT;
    check(c, modify(c, id, &a, 1u << 0), what + " to INIT");
  }
}

void apply_all(mrc_ctl_context* c, const ProfileFile& f, const std::function<void(const EvDef&)>& ev_online) {
  // A store refusal, at the line it is about.
  const auto refused = [&](int rc, std::uint32_t line, const std::string& what) {
    if (rc != 0) throw Refused{rc, f.at(line) + ": " + what + ": " + why_text(c, rc)};
  };
  // Tear down what the file redefines: EV profiles first (their formats are busy while ONLINE).
  const auto ev_modify = [](mrc_ctl_context* h, std::uint64_t id, mrc_ctl_ev_profile_attr* a,
                            std::uint32_t m) { return mrc_ctl_modify_ev_profile(h, id, a, m); };
  const auto ev_query = [](mrc_ctl_context* h, std::uint64_t id, mrc_ctl_ev_profile_attr* a,
                           std::uint32_t m) { return mrc_ctl_query_ev_profile(h, id, a, m); };
  const auto fmt_modify = [](mrc_ctl_context* h, std::uint64_t id, mrc_ctl_ev_fmt_profile_attr* a,
                             std::uint32_t m) { return mrc_ctl_modify_ev_fmt_profile(h, id, a, m); };
  const auto fmt_query = [](mrc_ctl_context* h, std::uint64_t id, mrc_ctl_ev_fmt_profile_attr* a,
                            std::uint32_t m) { return mrc_ctl_query_ev_fmt_profile(h, id, a, m); };
  const auto cc_modify = [](mrc_ctl_context* h, std::uint64_t id, mrc_ctl_cc_profile_attr* a,
                            std::uint32_t m) { return mrc_ctl_modify_cc_profile(h, id, a, m); };
  const auto cc_query = [](mrc_ctl_context* h, std::uint64_t id, mrc_ctl_cc_profile_attr* a,
                           std::uint32_t m) { return mrc_ctl_query_cc_profile(h, id, a, m); };
  for (const EvDef& d : f.evps)
    reset_profile<mrc_ctl_ev_profile_attr>(c, d.id, ev_modify, ev_query,
                                           f.at(d.at.line) + ": EV profile " + std::to_string(d.id));
  for (const FmtDef& d : f.fmts)
    reset_profile<mrc_ctl_ev_fmt_profile_attr>(c, d.id, fmt_modify, fmt_query,
                                               f.at(d.at.line) + ": EV format " + std::to_string(d.id));
  for (const CcDef& d : f.ccs)
    reset_profile<mrc_ctl_cc_profile_attr>(c, d.id, cc_modify, cc_query,
                                           f.at(d.at.line) + ": CC profile " + std::to_string(d.id));

  for (const FmtDef& d : f.fmts) {
    const std::string what = "EV format " + std::to_string(d.id);
    std::vector<mrc_ctl_ev_fmt_field> widths = d.widths;
    mrc_ctl_ev_fmt_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_fmt_mode = d.mode;
    refused(mrc_ctl_modify_ev_fmt_profile(c, d.id, &a,
                                          MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE),
            d.at.key("mode"), what);
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    a.ev_fmt_op.fmt_fields = widths.data();
    a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
    a.ev_fmt_op.fmt_field_count = static_cast<int>(widths.size());
    refused(
        mrc_ctl_modify_ev_fmt_profile(c, d.id, &a, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_OP),
        d.at.key("widths"), what);
  }

  for (const EvDef& d : f.evps) {
    const std::string what = "EV profile " + std::to_string(d.id);
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
    if (int rc = mrc_ctl_modify_ev_profile(c, d.id, &a, mask); rc != 0)
      refused(rc,
              blame(d, why_text(c, rc),
                    {{"format profile", "format"},
                     {"field", "fields"},
                     {"format", "format"},
                     {"ev_count", "count"},
                     {"ev_count", "evs"},
                     {"EVs are free", "count"},
                     {"EVs are free", "evs"},
                     {"SRv6", "fields"},
                     {"generate", "fields"}}),
              what);
    // EV array operations: a failure names the entry it stopped at.
    const auto ev_op = [&](std::vector<mrc_ctl_ev_op_entry> ops, mrc_ctl_ev_op op,
                           const std::vector<std::uint32_t>& lines, const char* key) {
      if (ops.empty()) return;
      a = {};
      a.ev_op.op = op;
      a.ev_op.entries = ops.data();
      a.ev_op.entry_count = static_cast<int>(ops.size());
      const int rc = mrc_ctl_modify_ev_profile(c, d.id, &a, MRC_CTL_EV_PROFILE_EV_OP);
      if (rc == 0) return;
      const std::string why = why_text(c, rc);
      // "entry N: rest" names the entry (REPLACE_EV / MODIFY_EV_STATE stop at the first failure).
      if (why.rfind("entry ", 0) == 0) {
        char* end = nullptr;
        const std::size_t i = std::strtoul(why.c_str() + 6, &end, 10);
        if (end != why.c_str() + 6 && std::strncmp(end, ": ", 2) == 0 && i < lines.size())
          throw Refused{rc, f.at(lines[i]) + ": " + what + ": " + key + ": " + (end + 2)};
      }
      refused(rc, d.at.key(key), what + ": " + key);
    };
    ev_op(d.evs, MRC_CTL_EV_OP_REPLACE_EV, d.ev_lines, "evs");
    ev_op(d.deny, MRC_CTL_EV_OP_MODIFY_EV_STATE, d.deny_lines, "deny");
    a = {};
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    a.ev_min_active = d.min_active;
    a.ev_event_mask = static_cast<int>(d.event_mask);
    if (int rc = mrc_ctl_modify_ev_profile(
            c, d.id, &a,
            MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK);
        rc != 0)
      refused(rc,
              blame(d, why_text(c, rc),
                    {{"min_active", "min_active"},
                     {"event mask", "event_mask"},
                     {"format profile", "format"},
                     {"field", "fields"},
                     {"format", "format"},
                     {"explicit entry", "evs"},
                     {"generate", "fields"}}),
              what);
    if (ev_online) ev_online(d);
  }

  for (const CcDef& d : f.ccs) {
    const std::string what = "CC profile " + std::to_string(d.id);
    mrc_ctl_cc_nscc_cfg cfg = d.cfg;
    mrc_ctl_cc_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.algorithm = d.algorithm == "none" ? nullptr : d.algorithm.c_str();
    refused(mrc_ctl_modify_cc_profile(c, d.id, &a, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            d.at.key("algorithm"), what);
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    a.cc_config = &cfg;
    if (int rc = mrc_ctl_modify_cc_profile(
            c, d.id, &a, MRC_CTL_CC_PROFILE_STATE | (a.algorithm ? MRC_CTL_CC_PROFILE_CONFIG : 0));
        rc != 0) {
      // The NSCC checks start with the setting's name (ProfileStore::nscc_from_ctl).
      const std::string why = why_text(c, rc);
      const std::string key = why.substr(0, why.find(' '));
      refused(rc, d.at.keys.count(key) != 0 ? d.at.key(key) : d.at.line, what);
    }
  }
}

}  // namespace

ApplyResult apply_profiles(mrc_ctl_context* c, const ProfileFile& f,
                           const std::function<void(const EvDef&)>& ev_online) {
  std::vector<std::uint64_t> fmt_ids, ev_ids, cc_ids;
  for (const FmtDef& d : f.fmts) fmt_ids.push_back(d.id);
  for (const EvDef& d : f.evps) ev_ids.push_back(d.id);
  for (const CcDef& d : f.ccs) cc_ids.push_back(d.id);
  if (const int rc = ctl_save_profiles(c, fmt_ids, ev_ids, cc_ids); rc != 0)
    return {rc, f.file + ": cannot save the profiles it names before changing them: " + why_text(c, rc)};
  try {
    apply_all(c, f, ev_online);
  } catch (const Refused& r) {
    ApplyResult out{r.rc, r.message};
    if (const int rc = ctl_restore_profiles(c, true); rc != 0)
      out.message += " (rolling the file back failed: " + why_text(c, rc) + ")";
    else
      out.message += " (nothing was changed)";
    return out;
  }
  (void)ctl_restore_profiles(c, false);  // drop the saved copy
  return {};
}

}  // namespace mrc::api
