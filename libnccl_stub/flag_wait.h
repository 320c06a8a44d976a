// Staged collectives whose end the stream waits for on a flag in host memory, instead of
// inside a host function.
//
// NVIDIA's runtime runs the host functions of every stream of a process on one thread. A
// collective that waited for its peers inside a host function would hold up every other
// stream's host functions meanwhile: a rank whose two streams each run a collective (FSDP's
// all-gathers and reduce-scatters) could wait in the first for peers that wait for its second.
// So the host function only posts the collective; a watcher thread raises a flag once the
// replies are in, and the stream waits on that flag (cuStreamWaitValue32), which holds up only
// its own stream, as an NCCL kernel does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "batch.h"

namespace fakegpu::stub {

// One word of the flag pool: where the host raises it, where the GPU reads it, and the value
// that releases this use of it.
struct HostFlag {
  uint32_t* host = nullptr;
  uint64_t device = 0;
  uint32_t value = 0;
};

// A free flag, or nothing when the runtime cannot wait on flags or every flag is in use (the
// caller then waits inside its host function, as before).
std::optional<HostFlag> take_flag();
// The flag is free again: its stream has passed the wait.
void give_back_flag(const HostFlag& flag);
// Raises the flag, from the watcher thread, once every reply to what the batch posted is in
// (where posting failed part way, the finishing host function reports the failure).
void raise_when_done(std::shared_ptr<PostedBatch> posted, const HostFlag& flag);

}  // namespace fakegpu::stub
