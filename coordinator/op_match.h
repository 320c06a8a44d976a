// Operation matching: the rules by which the calls of one operation, posted by different ranks,
// must agree, and how a disagreement is named (as PyTorch's flight recorder classes it).
#pragma once

#include <string>

#include "wire.h"

namespace fakegpu::coord {

// "AllReduce(count=4, int32, sum)": a call as mismatch and timeout messages name it.
std::string describe_call(const wire::Collective& c);

// How two ranks' calls of one collective differ ("COLLECTIVE_TYPE_MISMATCH", ...); null when
// they match. Whether data moves at all (FAKEGPU_PAYLOAD) is the ranks' state.
const char* collective_mismatch(const wire::Collective& a, const wire::Collective& b);

// How a Send and the Recv it meets differ; null when they match.
const char* p2p_mismatch(const wire::Collective& send, const wire::Collective& recv);

}  // namespace fakegpu::coord
