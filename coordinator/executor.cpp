#include "executor.h"

#include <algorithm>

namespace fakegpu::coord {

Executor::Executor(unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

// Claims and runs tasks of the job until none are left.
void Executor::run_tasks(Job& job) {
  size_t done = 0;
  for (size_t i; (i = job.next.fetch_add(1)) < job.tasks;) {
    (*job.task)(i);
    ++done;
  }
  if (done && job.finished.fetch_add(done) + done == job.tasks) {
    std::lock_guard<std::mutex> lock(mu_);
    done_.notify_all();
  }
}

void Executor::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    if (job) run_tasks(*job);
  }
}

void Executor::parallel_for(size_t tasks, const std::function<void(size_t)>& task) {
  if (tasks == 0) return;
  if (tasks == 1 || workers_.empty()) {
    for (size_t i = 0; i < tasks; ++i) task(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->task = &task;
  job->tasks = tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = job;
    ++generation_;
  }
  wake_.notify_all();
  run_tasks(*job);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return job->finished.load() == tasks; });
  job_.reset();
}

}  // namespace fakegpu::coord
