// Where the coordinator moves an operation's data. A large reduction must not stop the event
// loop: while it runs, other clients, control rings, status queries and timeouts are served.
#pragma once

#include <asio.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace fakegpu::coord {

class DataPlane {
 public:
  virtual ~DataPlane() = default;
  // Runs `work` (which must not throw and must own what it touches), then `then` on the
  // thread that owns the Job, in the order the work was given.
  virtual void run(std::function<void()> work, std::function<void()> then) = 0;
};

// Both at once, on the caller's thread: for tests and tools that drive a Job directly.
class InlineDataPlane : public DataPlane {
 public:
  void run(std::function<void()> work, std::function<void()> then) override {
    work();
    then();
  }
};

// One thread that runs the work in order (each piece may fan out over the Executor's pool) and
// posts each `then` back to the event loop.
class ThreadDataPlane : public DataPlane {
 public:
  explicit ThreadDataPlane(asio::io_context& io);
  // Finishes the work already given; `then`s not yet run are dropped with the event loop.
  ~ThreadDataPlane() override;
  void run(std::function<void()> work, std::function<void()> then) override;

 private:
  void loop();

  asio::io_context& io_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<std::function<void()>, std::function<void()>>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace fakegpu::coord
