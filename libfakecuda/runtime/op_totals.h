// Per-operator totals of what the PyTorch hook priced (fake_torch_bridge.h's record_op), by
// operator name, for the report's table of operators: the NCCL stub takes them through the
// bridge table (fake_cuda_bridge.h) and sends them to the coordinator with the activity log.
#pragma once

#include <cstddef>

#include "op_facts.h"

namespace fakegpu::cuda {

void count_op(const char* name, const fakegpu_op_facts& op, const fakegpu_op_cost& cost, bool measured = false);
// Copies up to `max` totals into `out`, largest GPU time first; returns how many there are in all.
size_t copy_op_totals(fakegpu_op_total* out, size_t max);

}  // namespace fakegpu::cuda
