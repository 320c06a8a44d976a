// The data movement of every collective, done directly between the ranks' buffers: reductions
// fold rank by rank in cache-sized chunks; gathers and scatters are chunked copies. Both run on
// the executor's threads. Nothing is allocated per operation.
#pragma once

#include <cstdint>
#include <vector>

#include "executor.h"
#include "wire.h"

namespace fakegpu::coord {

struct KernelRank {
  const uint8_t* in = nullptr;  // the rank's send data (may be null when it sends nothing)
  uint8_t* out = nullptr;       // where its result goes (null when it receives nothing, or nobody reads it)
  uint64_t scalar = 0;          // its PreMulSum scalar
};

// Runs one collective (not Send/Recv). ranks is indexed by communicator rank.
void run_collective(const wire::Collective& call, const std::vector<KernelRank>& ranks, Executor& executor);

// dst <- src, split across the executor's threads when large.
void copy_parallel(uint8_t* dst, const uint8_t* src, size_t bytes, Executor& executor);

// Bytes per chunk: small enough that a chunk of every input and the accumulator stay in cache.
constexpr size_t kChunkBytes = 64 * 1024;

}  // namespace fakegpu::coord
