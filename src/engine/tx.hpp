// Serialises a wire::Packet into a TxPacket (headers + zero-copy payload view + pad/ICRC or MAC trailer).
#pragma once
#include "engine/endpoint.hpp"

namespace mrc::engine {

/// False if the codec refused a field (an engine bug: the packet must not be sent). With `mac` the
/// trailer carries that key's tag instead of the ICRC (authenticated QP). The project's wire
/// extensions are written when `out.wire_ext` is set (Endpoint::poll_tx sets it from the config).
bool encode_tx(TxPacket& out, const wire::Packet& p, bool with_icrc, const MacKey* mac = nullptr);

}  // namespace mrc::engine
