#include "activity.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "memory_ledger.h"
#include "runtime_state.h"
#include "stream_ops.h"

namespace fakegpu::cuda {
namespace {

using wire::ActivityKind;
using wire::ActivitySlice;

// Slices waiting to be taken. A job that never takes them (no NCCL) keeps at most kMaxPending
// and counts the rest.
class ActivityLog {
 public:
  static constexpr size_t kMaxPending = size_t{1} << 20;

  void record(uint64_t track, ActivityKind kind, int64_t start_ns, int64_t end_ns) {
    const double start = start_ns / 1e3, end = end_ns / 1e3;
    std::lock_guard<std::mutex> lock(mu_);
    const bool mark = kind == ActivityKind::kStepBegin || kind == ActivityKind::kStepEnd;
    auto last = last_.find({track, kind});
    if (!mark && last != last_.end()) {
      ActivitySlice& prev = pending_[last->second];
      if (start <= prev.end_us + 1e-3) {
        prev.end_us = std::max(prev.end_us, end);
        ++prev.count;
        return;
      }
    }
    if (pending_.size() >= kMaxPending) {
      ++dropped_;
      return;
    }
    if (mark) ++marks_;
    pending_.push_back({track, start, end, 1, kind});
    if (!mark) last_[{track, kind}] = pending_.size() - 1;
  }

  size_t take(ActivitySlice* out, size_t max, size_t min_pending, uint64_t* dropped) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.size() < std::max<size_t>(min_pending, 1) && marks_ == 0) return 0;
    const size_t n = std::min(max, pending_.size());
    std::copy(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n), out);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    last_.clear();  // indices moved; the next piece of work starts a new slice
    marks_ = static_cast<size_t>(std::count_if(pending_.begin(), pending_.end(), [](const ActivitySlice& s) {
      return s.kind == ActivityKind::kStepBegin || s.kind == ActivityKind::kStepEnd;
    }));
    if (dropped) *dropped = std::exchange(dropped_, 0);
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<ActivitySlice> pending_;
  std::map<std::pair<uint64_t, ActivityKind>, size_t> last_;  // each stream's latest slice per kind
  size_t marks_ = 0;  // step marks pending: a batch with one is sent without waiting to fill
  uint64_t dropped_ = 0;
};

ActivityLog& activity_log() {
  static auto* log = new ActivityLog;  // never destroyed: streams may still run at exit
  return *log;
}

}  // namespace

void record_activity(const ModelClock& clock, ActivityKind kind, int64_t start_ns, int64_t end_ns) {
  activity_log().record(track_of(clock), kind, start_ns, end_ns);
}

// The stream waits until the collective's end; its slice counts from ready_us, since a GPU's
// NCCL kernel occupies the stream while it waits for its peers.
void collective_done(ModelClock& clock, double ready_us, double end_us) {
  // Rounded up: the stream's next call must not look ready before this one ends.
  const auto end_ns = static_cast<int64_t>(std::ceil(end_us * 1e3));
  clock.raise_to(end_ns);
  record_activity(clock, ActivityKind::kCollective, static_cast<int64_t>(ready_us * 1e3), end_ns);
}

size_t take_activity(ActivitySlice* out, size_t max, size_t min_pending, uint64_t* dropped) {
  if (!out) return 0;
  return activity_log().take(out, max, min_pending, dropped);
}

}  // namespace fakegpu::cuda

using namespace fakegpu::cuda;

// Marks where a training step begins or ends (fakegpu's Python hook calls it on an optimizer
// step or an NVTX range): at the modeled time the stream reaches the mark.
FAKECUDA_API cudaError_t fakegpu_cuda_mark_step(cudaStream_t stream, int begin) {
  return guarded([&] {
    const ActivityKind kind = begin ? ActivityKind::kStepBegin : ActivityKind::kStepEnd;
    if (!begin) MemoryLedger::instance().step_ends();
    submit(stream, [kind] {
      const ModelClock& clock = *running_clock();
      record_activity(clock, kind, clock.now_ns(), clock.now_ns());
    });
  });
}
