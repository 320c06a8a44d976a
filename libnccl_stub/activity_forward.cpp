#include "activity_forward.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "client.h"
#include "cuda_bridge.h"
#include "errors.h"
#include "export.h"

namespace fakegpu::stub {

void forward_activity(Client& client, size_t min_pending) {
  const CudaBridge& cu = cuda();
  try {
    // Every collective calls this, and mostly there is nothing to send yet: the buffer is made
    // once per thread, because making (and zeroing) a frame's worth of slices on each call cost
    // several times a small collective itself.
    thread_local std::unique_ptr<wire::ActivitySlice[]> taken(new wire::ActivitySlice[wire::RankActivity::kMaxSlices]);
    uint64_t dropped = 0;
    while (size_t n = cu.take_activity(taken.get(), wire::RankActivity::kMaxSlices, std::max<size_t>(min_pending, 1),
                                       &dropped)) {
      wire::RankActivity msg;
      msg.slices.assign(taken.get(), taken.get() + n);
      msg.dropped = std::exchange(dropped, 0);
      client.post(msg);
      min_pending = 1;  // the rest goes too
    }
  } catch (const std::exception& e) {
    warn(std::string("could not send this rank's activity to the coordinator: ") + e.what());
  }
}

void forward_operator_totals(Client& client) {
  try {
    const std::vector<fakegpu_op_total> totals = cuda().operator_totals(wire::RankOperators::kMaxRows);
    if (totals.empty()) return;
    wire::RankOperators msg;
    for (const fakegpu_op_total& t : totals) {
      msg.rows.push_back({std::string(t.name, strnlen(t.name, sizeof t.name)), t.calls, t.kernels, t.gpu_us, t.host_us,
                          t.bound_us[FAKEGPU_BOUND_MEMORY], t.bound_us[FAKEGPU_BOUND_COMPUTE],
                          t.bound_us[FAKEGPU_BOUND_LAUNCH], t.bound_us[FAKEGPU_BOUND_HOST],
                          static_cast<uint8_t>(t.kind), t.measured_us});
    }
    client.post(msg);
  } catch (const std::exception& e) {
    warn(std::string("could not send this rank's operator totals to the coordinator: ") + e.what());
  }
}

namespace {

wire::MemoryParts parts_of(const uint64_t (&bytes)[FAKEGPU_MEMORY_PART_COUNT]) {
  return {bytes[FAKEGPU_MEMORY_CONTEXT], bytes[FAKEGPU_MEMORY_PROGRAM], bytes[FAKEGPU_MEMORY_NCCL],
          bytes[FAKEGPU_MEMORY_LIBRARIES]};
}

}  // namespace

void forward_memory(Client& client) {
  try {
    const CudaBridge& cu = cuda();
    for (const fakegpu_memory_figures& f : cu.memory_figures()) {
      wire::RankMemory msg;
      msg.device = f.device;
      msg.capacity = f.capacity;
      msg.in_use = parts_of(f.in_use);
      msg.peak = f.peak;
      msg.peak_parts = parts_of(f.peak_parts);
      msg.peak_us = f.peak_us;
      msg.peak_step = f.peak_step;
      msg.failures = f.failures;
      msg.failed_bytes = f.failed_bytes;
      msg.failed_parts = parts_of(f.failed_parts);
      msg.failed_us = f.failed_us;
      msg.failed_step = f.failed_step;
      msg.failed_part = static_cast<uint8_t>(f.failed_part);
      msg.torch_peak_allocated = f.torch_peak_allocated;
      msg.torch_peak_reserved = f.torch_peak_reserved;
      msg.torch_oom_bytes = f.torch_oom_bytes;
      for (uint64_t bytes : f.torch_oom_largest)
        if (bytes) msg.torch_oom_largest.push_back({bytes});
      for (const fakegpu_memory_sample& s : cu.memory_samples(f.device, wire::RankMemory::kMaxSamples))
        msg.samples.push_back({s.us, s.bytes});
      client.post(msg);
    }
  } catch (const std::exception& e) {
    warn(std::string("could not send this rank's GPU memory figures to the coordinator: ") + e.what());
  }
}

}  // namespace fakegpu::stub

// For fakegpu's Python hook, at exit and at each step mark: sends what the runtime logged so
// far and its operator totals, connecting to the coordinator if this process has not yet (a job
// without NCCL).
NCCL_EXPORT void fakegpu_nccl_flush_activity() {
  using namespace fakegpu::stub;
  try {
    Client& client = *Client::get(coordinator_endpoint());
    forward_activity(client, 0);
    forward_operator_totals(client);
    forward_memory(client);
  } catch (const std::exception& e) {
    warn(std::string("fakegpu_nccl_flush_activity: ") + e.what());
  }
}

// For fakegpu's Python hook under FAKEGPU_REPRESENTATIVE: names a process group the program made
// (its name and global ranks; none for the whole world), so that the coordinator knows whom the
// communicators of ranks no process runs hold. Returns 0, or 1 when it could not be sent.
NCCL_EXPORT int fakegpu_nccl_describe_group(const char* name, int nranks, const int32_t* ranks) {
  using namespace fakegpu::stub;
  try {
    if (!name || nranks < 0 || (nranks > 0 && !ranks)) throw std::invalid_argument("no name, or a negative count");
    fakegpu::wire::GroupRanks msg;
    msg.name = name;
    msg.ranks.assign(ranks, ranks + nranks);
    Client::get(coordinator_endpoint())->post(msg);
    return 0;
  } catch (const std::exception& e) {
    warn(std::string("fakegpu_nccl_describe_group: ") + e.what());
    return 1;
  }
}
