// Algorithm names as the controller API spells them (mrc_ctl.h `algorithms[]`).
#include "cc/cc.hpp"

namespace mrc::cc {

namespace {
constexpr std::string_view kNsccName = "uet-1.0-nscc";
}  // namespace

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kNscc:
      return kNsccName;
    case Algorithm::kNone:
      break;
  }
  return {};  // kNone: the controller API's NULL algorithm
}

bool algorithm_from_name(std::string_view name, Algorithm& out) {
  if (name.empty()) {  // NULL / empty name disables congestion control
    out = Algorithm::kNone;
    return true;
  }
  if (name == kNsccName) {
    out = Algorithm::kNscc;
    return true;
  }
  return false;  // unknown name: `out` is left untouched
}

}  // namespace mrc::cc
