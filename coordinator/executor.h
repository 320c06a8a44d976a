// A fixed pool of threads for the data plane. parallel_for splits work into tasks and runs them
// on the pool and the calling thread; small jobs run inline, without waking anyone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace fakegpu::coord {

class Executor {
 public:
  // threads: total threads working on a job, the caller included; 0 picks the core count.
  explicit Executor(unsigned threads = 0);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs task(i) for i in [0, tasks), returning when all are done.
  void parallel_for(size_t tasks, const std::function<void(size_t)>& task);
  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

 private:
  // One parallel_for. Workers that wake late still hold it, so it outlives the call safely.
  struct Job {
    const std::function<void(size_t)>* task;
    size_t tasks;
    std::atomic<size_t> next{0};
    std::atomic<size_t> finished{0};
  };
  void worker_loop();
  void run_tasks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::shared_ptr<Job> job_;  // the current job, null between jobs
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

}  // namespace fakegpu::coord
