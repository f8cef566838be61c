// Serialises a wire::Packet into a TxPacket (headers + zero-copy payload view + pad/ICRC trailer).
#pragma once
#include "engine/endpoint.hpp"

namespace mrc::engine {

/// False if the codec refused a field (an engine bug: the packet must not be sent).
bool encode_tx(TxPacket& out, const wire::Packet& p, bool with_icrc);

}  // namespace mrc::engine
