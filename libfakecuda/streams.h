// Streams as ordered asynchronous queues, each drained by its own worker thread, and events
// that mark points in them. The legacy default stream runs work inline after waiting for the
// device's blocking streams, which gives CUDA's implicit synchronisation with them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace fakegpu::cuda {

class Stream {
 public:
  Stream(int device, bool blocking);
  ~Stream();  // finishes queued work first
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void enqueue(std::function<void()> task);
  // A marker (an event completing) runs under the stream's lock once the work before it is
  // done, so nobody can see the stream idle with the event still pending, or the reverse.
  void enqueue_marker(std::function<void()> mark);
  void synchronize();
  bool idle();
  int device() const { return device_; }
  bool blocking() const { return blocking_; }

 private:
  void run();
  const int device_;
  const bool blocking_;
  std::mutex mu_;
  std::condition_variable work_, drained_;
  struct Item {
    std::function<void()> fn;
    bool marker;
  };
  std::deque<Item> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

class Event {
 public:
  // Marks the event as pending until the work queued so far on the stream is done.
  uint64_t record();
  void complete(uint64_t generation);
  bool query();
  void synchronize();
  // Waits until the given recording has completed.
  void wait_for(uint64_t generation);
  uint64_t last_recorded();
  bool ever_completed();
  std::chrono::steady_clock::time_point completed_at();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ = 0, completed_ = 0;
  std::chrono::steady_clock::time_point time_{};
};

}  // namespace fakegpu::cuda
