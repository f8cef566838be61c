// Counters of a UdpEndpoint and its engine (per QP, per EV, per plane, impairment) as JSON and as
// Prometheus text exposition format. Call with the progress thread stopped or inside execute().
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "engine/endpoint.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

nlohmann::json to_json(const engine::QpCounters& c);
/// Everything: {"endpoint":{...}, "planes":[...], "ev_tx":[...], "impair":{...}, "qps":[...]}
nlohmann::json metrics_json(const UdpEndpoint& ep);
/// Prometheus text format (version 0.0.4); every sample carries the labels in `labels`
/// (e.g. `host="a"`, may be empty).
std::string metrics_prometheus(const UdpEndpoint& ep, const std::string& labels = "");

}  // namespace mrc::io
