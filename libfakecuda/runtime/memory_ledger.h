// What each device's memory holds, by part (fake_cuda_bridge.h's fakegpu_memory_part): the
// CUDA context, the program's allocations, communicators' buffers and libraries' own memory.
// Their sum is what cudaMemGetInfo, NVML and torch.cuda.mem_get_info report in use, and what a
// new allocation must fit beside. The ledger also keeps the peak with its parts, the time and
// step it came, the last allocation refused, and a coarse series of the total for the trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "fake_cuda_bridge.h"

namespace fakegpu::cuda {

class MemoryLedger {
 public:
  static MemoryLedger& instance();

  // Counts bytes of `part` against the device; false (and the refusal noted) when the total
  // would pass `capacity`.
  bool charge(int device, int part, uint64_t bytes, uint64_t capacity);
  void credit(int device, int part, uint64_t bytes);
  uint64_t used(int device) const;
  // A training step ends (the hook's step marks), for the step of the peak.
  void step_ends();
  void torch_peaks(int device, uint64_t allocated, uint64_t reserved);
  void torch_out_of_memory(int device, uint64_t bytes, const uint64_t* largest, int count);

  // Figures of up to `max` devices, by ordinal; returns how many devices there are.
  size_t figures(fakegpu_memory_figures* out, size_t max) const;
  size_t samples(int device, fakegpu_memory_sample* out, size_t max) const;

  // Points kept per device: when full, neighbouring points merge (keeping the larger), so the
  // series stays this long and its peaks survive.
  static constexpr size_t kMaxSamples = 2048;

 private:
  struct Device {
    fakegpu_memory_figures f{};
    std::vector<fakegpu_memory_sample> series;
    uint64_t total() const;  // every part in use
  };
  Device& device(int ordinal, uint64_t capacity);
  void sample(Device& d, double now_us);

  mutable std::mutex mu_;
  std::map<int, Device> devices_;
  int32_t steps_ = 1;  // the step under way, from 1
};

}  // namespace fakegpu::cuda
