// Forwards the runtime's activity log (what each stream did on the modeled clock, and the
// program's step marks) to the coordinator, which builds the report's step figures from it.
#pragma once

#include <cstddef>

namespace fakegpu::stub {

class Client;

// Sends what the log holds once it holds min_pending slices or a step mark (min_pending 0:
// whatever it holds). Never throws: the figures are worth less than the job.
void forward_activity(Client& client, size_t min_pending);

// Sends the PyTorch hook's per-operator totals so far, which replace the ones sent before. Never
// throws either.
void forward_operator_totals(Client& client);

// Sends the runtime's figures of each GPU's memory so far (which replace the ones sent before):
// parts, peak, refused allocations, PyTorch's own peaks and its series over time. Never throws.
void forward_memory(Client& client);

// Collectives forward in batches of this many slices, so a step costs a frame or two.
constexpr size_t kActivityBatch = 1024;

}  // namespace fakegpu::stub
