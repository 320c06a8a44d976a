// Streams as ordered asynchronous queues, each drained by its own worker thread, and events
// that mark points in them. The legacy default stream runs work inline after waiting for the
// device's blocking streams, which gives CUDA's implicit synchronisation with them.
//
// Every stream also keeps a modeled clock: the time the work queued on it would have taken on
// the modeled GPU. Copies and collectives advance it (collectives by the coordinator's modeled
// duration); events record it; waiting on an event raises the waiter's clock to the event's.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "wire.h"

namespace fakegpu::cuda {

// FAKEGPU_TIME_MODE: modeled (default): events report modeled time; paced: as modeled, and
// each piece of work also takes at least its modeled time in wall time, so wall-clock
// benchmarks see modeled speeds; wall: events report wall time and nothing is paced.
enum class TimeMode { kModeled, kPaced, kWall };
TimeMode time_mode();

class ModelClock {
 public:
  int64_t now_ns() const { return ns_.load(std::memory_order_acquire); }
  void advance(int64_t ns) { ns_.fetch_add(ns, std::memory_order_acq_rel); }
  void raise_to(int64_t ns);

 private:
  std::atomic<int64_t> ns_{0};
};

// The modeled time the host has seen: raised by the calls that wait for the GPU
// (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, cudaMemcpy). Work the
// host queues afterwards cannot start before it, on any stream.
ModelClock& host_clock();

// What a piece of work is, for the activity log; kUntracked work (host functions, markers)
// is not logged by itself.
struct WorkKind {
  bool tracked = false;
  wire::ActivityKind kind = wire::ActivityKind::kKernel;
};
constexpr WorkKind kUntracked{};
constexpr WorkKind kKernelWork{true, wire::ActivityKind::kKernel};
constexpr WorkKind kCopyWork{true, wire::ActivityKind::kCopy};

// Runs one piece of work against a clock: the work (and anything it calls, such as a host
// function that reports a collective's modeled time) advances that clock, plus `cost_ns`,
// starting no earlier than `not_before_ns`. In paced mode it returns no sooner than the work's
// modeled time after it started, or after `paced_from` when given (the first part of work in
// two parts started it).
using WallTime = std::chrono::steady_clock::time_point;
void run_timed(ModelClock& clock, const std::function<void()>& work, int64_t cost_ns, WorkKind kind = kUntracked,
               int64_t not_before_ns = 0, WallTime paced_from = {});
// `first` then `second`, as one piece of work (work in two parts queued whole).
std::function<void()> in_sequence(std::function<void()> first, std::function<void()> second);
// The clock of the work running on this thread; nullptr outside stream work.
ModelClock* running_clock();
// A host function (cudaLaunchHostFunc and the like) as the streams run it. With
// FAKEGPU_SERIAL_HOST_FUNCTIONS=1 host functions run one at a time across every stream, as
// NVIDIA's runtime runs them on its one callback thread, so that a host function that blocks
// holds up every other stream's, as it would there.
std::function<void()> as_host_function(std::function<void()> fn);
// Returns once (int32_t)(*flag - value) >= 0: a stream's wait on host memory
// (cuStreamWaitValue32), raised by another thread.
void wait_for_flag(const uint32_t* flag, uint32_t value);

class Stream {
 public:
  Stream(int device, bool blocking);
  ~Stream();  // finishes queued work first
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void enqueue(std::function<void()> task, int64_t cost_ns = 0, WorkKind kind = kUntracked);
  // Work in two parts, such as a collective: `start` posts it, `finish` waits for its end.
  // When nothing is queued on the stream or running from it, `start` runs now, on the calling
  // thread, and `finish` becomes the stream's next work, parked: the worker is not woken for it.
  // Whoever needs the stream first runs it: synchronize() on its own thread; idle() too, once
  // `ready` says `finish` would not wait (without `ready`, idle() hands it to the worker); the
  // worker once more work is queued or kick() is called. Otherwise both queue as one piece of
  // work. Either way they run in the stream's order and on its clock. On a busy host this
  // saves the two thread switches that dominate a small collective: waking the worker, and the
  // worker waking the thread that synchronises.
  void start_or_enqueue(std::function<void()> start, std::function<void()> finish, std::function<bool()> ready);
  // Hands parked work to the worker, for a caller that will wait for it some other way.
  void kick();
  // A marker (an event completing) runs under the stream's lock once the work before it is
  // done, so nobody can see the stream idle with the event still pending, or the reverse. On a
  // drained stream it runs at once, on the calling thread. It must not block.
  void enqueue_marker(std::function<void()> mark);
  // Waits until the stream is drained, running parked work (start_or_enqueue) itself: a thread
  // that would only sleep meanwhile might as well do it. Other work stays the worker's: it may
  // be a kernel or host function that expects the worker's thread.
  void synchronize();
  // Whether the stream is drained. Parked work whose `ready` holds runs here first, on the
  // caller's thread; parked work that would still wait stays for the caller's next look or
  // whoever synchronises, and parked work without `ready` goes to the worker.
  bool idle();
  // The first error the stream's work raised (a cudaError_t; 0 for none). It stays: like an
  // asynchronous error on a GPU, later synchronisations with the stream report it too.
  int error();
  int device() const { return device_; }
  bool blocking() const { return blocking_; }
  ModelClock& clock() { return clock_; }

 private:
  void run();
  const int device_;
  const bool blocking_;
  std::mutex mu_;
  std::condition_variable work_, drained_;
  struct Item {
    std::function<void()> fn;
    bool marker;
    int64_t cost_ns;
    WorkKind kind;
    int64_t not_before_ns;  // the host's modeled time when it queued the work
    std::function<bool()> ready = nullptr;  // parked work: whether it would run without waiting
    WallTime started{};  // parked work: when its first part began, which paced mode counts from
  };
  // Runs one piece of work; what it throws becomes the stream's error, never the thread's end.
  void run_item(const Item& item);
  // Takes the head of the queue and runs it on this thread, as the worker would; `lock` holds
  // mu_, and holds it again on return.
  void run_head(std::unique_lock<std::mutex>& lock);
  std::deque<Item> queue_;
  bool busy_ = false;  // work is running, from the worker or another thread; the worker waits for it
  bool parked_ = false;  // the head of the queue waits for someone to need it (start_or_enqueue)
  int error_ = 0;  // under mu_
  bool stopping_ = false;
  ModelClock clock_;
  std::thread worker_;  // last: it starts running at construction
};

class Event {
 public:
  explicit Event(bool timing) : timing_(timing) {}
  bool timing() const { return timing_; }  // false with cudaEventDisableTiming
  // Marks the event as pending until the work queued so far on the stream is done.
  uint64_t record();
  // The recording completed at this modeled time.
  void complete(uint64_t generation, int64_t modeled_ns);
  bool query();
  // Whether the given recording has completed.
  bool completed(uint64_t generation);
  void synchronize();
  // Waits until the given recording has completed.
  void wait_for(uint64_t generation);
  uint64_t last_recorded();
  bool ever_completed();
  std::chrono::steady_clock::time_point completed_at();
  // When the newest recording completed, on the modeled clock.
  int64_t modeled_at();
  // When the given recording completed. A stream that waits for one recording must not take a
  // later one's time: the event may be recorded again before the wait runs, and how often that
  // happens depends on thread timing, which must never show in modeled time.
  int64_t modeled_at(uint64_t generation);

 private:
  static constexpr size_t kHistory = 64;  // recordings whose times are kept
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ = 0, completed_ = 0;
  std::chrono::steady_clock::time_point time_{};
  int64_t modeled_ns_ = 0;
  std::deque<std::pair<uint64_t, int64_t>> history_;  // (generation, modeled ns), oldest first
  const bool timing_;
};

}  // namespace fakegpu::cuda
