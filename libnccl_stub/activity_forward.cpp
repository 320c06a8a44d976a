#include "activity_forward.h"

#include <algorithm>
#include <vector>

#include "client.h"
#include "cuda_bridge.h"
#include "errors.h"
#include "export.h"

namespace fakegpu::stub {

void forward_activity(Client& client, size_t min_pending) {
  const CudaBridge& cu = cuda();
  try {
    wire::RankActivity msg;
    msg.slices.resize(wire::RankActivity::kMaxSlices);
    while (size_t n = cu.take_activity(msg.slices.data(), msg.slices.size(), std::max<size_t>(min_pending, 1),
                                       &msg.dropped)) {
      msg.slices.resize(n);
      client.post(msg);
      msg.slices.resize(wire::RankActivity::kMaxSlices);
      msg.dropped = 0;
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
