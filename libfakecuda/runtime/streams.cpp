#include "streams.h"

#include <cuda_runtime.h>

#include <new>
#include <string>

#include "activity.h"
#include "env.h"
#include "log_once.h"

namespace fakegpu::cuda {
namespace {
thread_local ModelClock* t_running_clock = nullptr;
}

TimeMode time_mode() {
  static const TimeMode mode = [] {
    std::string v;
    try {
      v = env::get(env::kTimeMode);
    } catch (const env::SettingError&) {
      return TimeMode::kModeled;  // not reached: the runtime has no devices then (devices.cpp)
    }
    if (v == "paced") return TimeMode::kPaced;
    if (v == "wall") return TimeMode::kWall;
    return TimeMode::kModeled;
  }();
  return mode;
}

void ModelClock::raise_to(int64_t ns) {
  int64_t cur = ns_.load(std::memory_order_acquire);
  while (cur < ns && !ns_.compare_exchange_weak(cur, ns, std::memory_order_acq_rel)) {
  }
}

ModelClock* running_clock() { return t_running_clock; }

ModelClock& host_clock() {
  static auto* clock = new ModelClock;  // never destroyed: streams may still run at exit
  return *clock;
}

void run_timed(ModelClock& clock, const std::function<void()>& work, int64_t cost_ns, WorkKind kind,
               int64_t not_before_ns, WallTime paced_from) {
  const auto wall_start = paced_from == WallTime{} ? std::chrono::steady_clock::now() : paced_from;
  clock.raise_to(not_before_ns);
  const int64_t modeled_start = clock.now_ns();
  {
    // Restored however the work ends: on the legacy stream a throw lands in the caller's thread.
    struct RunningClock {
      ModelClock* outer = t_running_clock;
      explicit RunningClock(ModelClock* c) { t_running_clock = c; }
      ~RunningClock() { t_running_clock = outer; }
    } running(&clock);
    work();
  }
  if (kind.tracked && cost_ns > 0) {
    const int64_t start = clock.now_ns();
    record_activity(clock, kind.kind, start, start + cost_ns);
  }
  clock.advance(cost_ns);
  if (time_mode() == TimeMode::kPaced) {
    int64_t modeled = clock.now_ns() - modeled_start;
    if (modeled > 0) std::this_thread::sleep_until(wall_start + std::chrono::nanoseconds(modeled));
  }
}

Stream::Stream(int device, bool blocking) : device_(device), blocking_(blocking), worker_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_one();
  worker_.join();
}

std::function<void()> as_host_function(std::function<void()> fn) {
  static const bool serial = env::get(env::kSerialHostFunctions);
  if (!serial) return fn;
  return [fn = std::move(fn)] {
    // Recursive: a host function may run another's first part on its own thread.
    static std::recursive_mutex one_at_a_time;
    std::lock_guard<std::recursive_mutex> lock(one_at_a_time);
    fn();
  };
}

void wait_for_flag(const uint32_t* flag, uint32_t value) {
  // A GPU polls the word; a short sleep is this runtime's poll. Signed difference: the values
  // may wrap around.
  while (static_cast<int32_t>(__atomic_load_n(flag, __ATOMIC_ACQUIRE) - value) < 0)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
}

std::function<void()> in_sequence(std::function<void()> first, std::function<void()> second) {
  return [first = std::move(first), second = std::move(second)] {
    first();
    second();
  };
}

void Stream::enqueue(std::function<void()> task, int64_t cost_ns, WorkKind kind) {
  const int64_t not_before = host_clock().now_ns();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(task), false, cost_ns, kind, not_before});
    parked_ = false;  // the worker goes on to this work, whatever waits ahead of it
  }
  work_.notify_one();
}

void Stream::start_or_enqueue(std::function<void()> start, std::function<void()> finish,
                              std::function<bool()> ready) {
  const int64_t not_before = host_clock().now_ns();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!queue_.empty() || busy_ || stopping_) {
      queue_.push_back({in_sequence(std::move(start), std::move(finish)), false, 0, kUntracked, not_before});
      parked_ = false;
      work_.notify_one();
      return;
    }
    busy_ = true;
  }
  const WallTime started = std::chrono::steady_clock::now();
  run_item({std::move(start), false, 0, kUntracked, not_before});
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  // Ahead of anything queued while `start` ran: that came after this call.
  queue_.push_front({std::move(finish), false, 0, kUntracked, not_before, std::move(ready), started});
  parked_ = queue_.size() == 1 && !stopping_;
  if (!parked_) work_.notify_one();
  drained_.notify_all();  // a thread synchronising meanwhile runs the parked work itself
}

void Stream::kick() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!parked_) return;
    parked_ = false;
  }
  work_.notify_one();
}

void Stream::enqueue_marker(std::function<void()> mark) {
  const int64_t not_before = host_clock().now_ns();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty() && !busy_) {
      // Nothing ahead of it: the worker would run it at once, so run it here, sparing its wakeup.
      run_item({std::move(mark), true, 0, kUntracked, not_before});
      return;
    }
    queue_.push_back({std::move(mark), true, 0, kUntracked, not_before});
    parked_ = false;
  }
  work_.notify_one();
}

void Stream::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return !busy_ && (stopping_ || (!queue_.empty() && !parked_)); });
    if (queue_.empty()) return;  // stopping, with nothing left to do
    run_head(lock);
  }
}

void Stream::run_head(std::unique_lock<std::mutex>& lock) {
  Item item = std::move(queue_.front());
  queue_.pop_front();
  parked_ = false;
  if (item.marker) {
    run_item(item);  // under the lock: see enqueue_marker
  } else {
    busy_ = true;
    lock.unlock();
    run_item(item);
    item.fn = nullptr;  // what the work holds goes now, before the stream can look idle
    lock.lock();
    busy_ = false;
  }
  if (queue_.empty()) drained_.notify_all();
}

void Stream::run_item(const Item& item) {
  int code = 0;
  try {
    run_timed(clock_, item.fn, item.cost_ns, item.kind, item.not_before_ns, item.started);
  } catch (cudaError_t e) {
    code = e;
  } catch (const std::bad_alloc&) {
    code = cudaErrorMemoryAllocation;
  } catch (...) {
    code = cudaErrorUnknown;
  }
  if (code == 0) return;
  const std::string what = "work queued on a stream failed with CUDA error " + std::to_string(code) +
                           "; synchronising with the stream reports it from now on";
  log_once("stream work", what.c_str());
  // Markers run under the stream's lock; other work does not.
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (!item.marker) lock.lock();
  if (error_ == 0) error_ = code;
}

int Stream::error() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty() && !busy_) return;
    if (parked_ && !busy_)
      run_head(lock);
    else
      drained_.wait(lock);
  }
}

bool Stream::idle() {
  std::unique_lock<std::mutex> lock(mu_);
  if (parked_ && !busy_) {
    // Polling for parked work (NCCL's documented wait: cudaStreamQuery in a loop). Waking the
    // worker would set one more thread spinning for the core; run it here once it would not
    // wait. The stream counts as busy meanwhile, so nobody else takes it. Without a probe,
    // nothing says when it would not wait: the worker takes it.
    if (!queue_.front().ready) {
      lock.unlock();
      kick();
      return false;
    }
    busy_ = true;
    const std::function<bool()>& probe = queue_.front().ready;  // stays put: the stream is ours
    lock.unlock();
    const bool ready = probe();
    lock.lock();
    busy_ = false;
    if (ready) run_head(lock);  // still at the head: only a thread that saw the stream free takes it
    if (!queue_.empty() && !parked_) work_.notify_one();  // work queued meanwhile
    if (queue_.empty() || parked_) drained_.notify_all();  // a synchronising thread may take it
  }
  return queue_.empty() && !busy_;
}

uint64_t Event::record() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++recorded_;
}

void Event::complete(uint64_t generation, int64_t modeled_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation <= completed_) return;
    completed_ = generation;
    time_ = std::chrono::steady_clock::now();
    modeled_ns_ = modeled_ns;
    history_.emplace_back(generation, modeled_ns);
    if (history_.size() > kHistory) history_.pop_front();
  }
  cv_.notify_all();
}

bool Event::query() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= recorded_;
}

bool Event::completed(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= generation;
}

void Event::synchronize() { wait_for(last_recorded()); }

void Event::wait_for(uint64_t generation) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_ >= generation; });
}

uint64_t Event::last_recorded() {
  std::lock_guard<std::mutex> lock(mu_);
  return recorded_;
}

bool Event::ever_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ > 0 && completed_ >= recorded_;
}

std::chrono::steady_clock::time_point Event::completed_at() {
  std::lock_guard<std::mutex> lock(mu_);
  return time_;
}

int64_t Event::modeled_at() {
  std::lock_guard<std::mutex> lock(mu_);
  return modeled_ns_;
}

int64_t Event::modeled_at(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  // That recording, or, if a later one completed first and it was never timed, the one before.
  for (auto it = history_.rbegin(); it != history_.rend(); ++it)
    if (it->first <= generation) return it->second;
  return history_.empty() ? modeled_ns_ : history_.front().second;  // older than what is kept
}

}  // namespace fakegpu::cuda
