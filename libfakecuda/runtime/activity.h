// The log of what each stream did on the modeled clock (kernels, copies, collectives) and of
// the program's step marks. fakegpu's NCCL library takes it in batches and sends it to the
// coordinator (wire::RankActivity), which turns it into step figures and trace slices.
#pragma once

#include <cstddef>
#include <cstdint>

#include "streams.h"
#include "wire.h"

namespace fakegpu::cuda {

// A stream's track id, the same for its work and for the collectives queued on it.
inline uint64_t track_of(const ModelClock& clock) { return reinterpret_cast<uintptr_t>(&clock); }

// Records work of one kind on the clock's stream over [start_ns, end_ns]; work that follows
// the previous slice of that stream and kind without a gap extends it.
void record_activity(const ModelClock& clock, wire::ActivityKind kind, int64_t start_ns, int64_t end_ns);

// For fakegpu's NCCL, through the bridge: a collective that became ready at ready_us ended at
// end_us on the stream with this clock.
void collective_done(ModelClock& clock, double ready_us, double end_us);
// For fakegpu's NCCL, through the bridge: moves up to `max` recorded slices, oldest first, into
// `out`. Returns 0 while fewer than `min_pending` wait and none is a step mark. *dropped (when
// not nullptr) gets the slices lost since the last call.
size_t take_activity(wire::ActivitySlice* out, size_t max, size_t min_pending, uint64_t* dropped);

}  // namespace fakegpu::cuda
