#include "activity_forward.h"

#include <algorithm>
#include <memory>
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

}  // namespace fakegpu::stub

// For fakegpu's Python hook, at exit and at each step mark: sends what the runtime logged so
// far, connecting to the coordinator if this process has not yet (a job without NCCL).
NCCL_EXPORT void fakegpu_nccl_flush_activity() {
  using namespace fakegpu::stub;
  try {
    forward_activity(*Client::get(coordinator_endpoint()), 0);
  } catch (const std::exception& e) {
    warn(std::string("fakegpu_nccl_flush_activity: ") + e.what());
  }
}
