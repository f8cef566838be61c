// Wire form of controller requests (shared by the client and the dispatcher): JSON objects, EVs as
// 64-digit hex strings, framed on the control socket by a 4-byte big-endian length.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/profile_store.hpp"

namespace mrc::api {

inline constexpr std::uint32_t kCtlMaxMessage = 64u << 20;

std::string ev_hex(const EvBytes& b);
/// Throws std::invalid_argument unless `s` is 1..64 hex digits (shorter strings fill the left).
EvBytes ev_from_hex(const std::string& s);

nlohmann::json to_json(const EvField& f);
EvField field_from_json(const nlohmann::json& j);
nlohmann::json to_json(const EvOpEntry& e);
EvOpEntry entry_from_json(const nlohmann::json& j);
nlohmann::json to_json(const mrc_ctl_cc_nscc_cfg& c);
mrc_ctl_cc_nscc_cfg nscc_from_json(const nlohmann::json& j);

/// Whole-message socket I/O: false on EOF, error or a message over kCtlMaxMessage.
bool send_msg(int fd, const std::string& msg);
bool recv_msg(int fd, std::string& msg);

}  // namespace mrc::api
