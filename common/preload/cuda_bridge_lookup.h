// Finding the bridge table of fakegpu's CUDA runtime (fake_cuda_bridge.h): the NCCL stub, the
// driver and cuBLAS all go through here, so they accept and refuse tables alike.
#pragma once

#include <cstddef>
#include <string>

#include "fake_cuda_bridge.h"
#include "wire.h"

namespace fakegpu {

// The activity log's records cross the bridge as they are, so both layouts must stay the same.
static_assert(sizeof(fakegpu_activity_slice) == sizeof(wire::ActivitySlice));
static_assert(offsetof(fakegpu_activity_slice, track) == offsetof(wire::ActivitySlice, track));
static_assert(offsetof(fakegpu_activity_slice, start_us) == offsetof(wire::ActivitySlice, start_us));
static_assert(offsetof(fakegpu_activity_slice, end_us) == offsetof(wire::ActivitySlice, end_us));
static_assert(offsetof(fakegpu_activity_slice, count) == offsetof(wire::ActivitySlice, count));
static_assert(offsetof(fakegpu_activity_slice, kind) == offsetof(wire::ActivitySlice, kind));
static_assert(sizeof(wire::ActivityKind) == sizeof(uint8_t));
inline fakegpu_activity_slice* bridge_slices(wire::ActivitySlice* slices) {
  return reinterpret_cast<fakegpu_activity_slice*>(slices);
}
inline wire::ActivitySlice* wire_slices(fakegpu_activity_slice* slices) {
  return reinterpret_cast<wire::ActivitySlice*>(slices);
}

// Checks what the runtime's fakegpu_cuda_bridge answered to FAKEGPU_CUDA_BRIDGE_VERSION: the
// table when its version and size are this build's, else nullptr with *why saying what did not
// match (nullptr itself means the runtime refused the version).
const fakegpu_cuda_bridge_table* accept_cuda_bridge(const fakegpu_cuda_bridge_table* table, std::string* why);

// The table of the fakegpu runtime loaded in the process. nullptr when the runtime is not
// fakegpu's (or none is loaded), and when it is fakegpu's but its table is refused: then one
// line on stderr, naming `who`, says why, and the caller goes on as over a foreign runtime.
const fakegpu_cuda_bridge_table* find_cuda_bridge(const char* who);

}  // namespace fakegpu
