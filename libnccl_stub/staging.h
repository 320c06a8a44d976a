// Host copies of collective buffers, for device memory the host cannot touch (hybrid mode, over
// NVIDIA's runtime). Copies to and from them are queued on the call's stream around the host
// function that runs the collective, so that function never calls CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "cuda_bridge.h"
#include "group.h"

namespace fakegpu::stub {

// One buffer from the staging pool: host memory in a shareable segment of its own, so the
// coordinator on this host works on it in place, and page-locked where the runtime can, so the
// copies queued on streams are asynchronous (into pageable memory CUDA copies synchronously).
struct StagingBlock {
  uint8_t* data = nullptr;
  size_t capacity = 0;
  CudaBridge::Segment segment;  // offset 0; fd -1 where no shareable memory could be had
};

// The blocks a set of calls stages through. They go back to the pool when the set is destroyed:
// in steady state nothing is allocated per operation.
class StagingSet {
 public:
  struct Entry {
    StagingBlock send, recv;
    uint64_t* scalar = nullptr;  // where a PreMulSum scalar read from device memory lands
  };
  explicit StagingSet(const std::vector<CollectiveCall>& calls);
  ~StagingSet();
  StagingSet(const StagingSet&) = delete;
  StagingSet& operator=(const StagingSet&) = delete;
  Entry& operator[](size_t i) { return entries_[i]; }

 private:
  void give_back();
  std::vector<Entry> entries_;
};

// Staging is needed over a real CUDA runtime. FAKEGPU_FORCE_STAGING=1 takes the same path over
// fakegpu's runtime, so that it can be tested without a GPU.
bool needs_staging();

// Copies the calls' inputs (and device scalars) into the staging blocks, or their results back
// out: now, or queued on `stream` when one is given.
void stage_inputs(const std::vector<CollectiveCall>& calls, StagingSet& staging, std::optional<cudaStream_t> stream);
void unstage_outputs(const std::vector<CollectiveCall>& calls, StagingSet& staging, std::optional<cudaStream_t> stream);

}  // namespace fakegpu::stub
