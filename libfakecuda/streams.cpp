#include "streams.h"

namespace fakegpu::cuda {

Stream::Stream(int device, bool blocking) : device_(device), blocking_(blocking), worker_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_one();
  worker_.join();
}

void Stream::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(task), false});
  }
  work_.notify_one();
}

void Stream::enqueue_marker(std::function<void()> mark) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(mark), true});
  }
  work_.notify_one();
}

void Stream::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, with nothing left to do
    Item item = std::move(queue_.front());
    queue_.pop_front();
    if (item.marker) {
      item.fn();
    } else {
      busy_ = true;
      lock.unlock();
      item.fn();
      lock.lock();
      busy_ = false;
    }
    if (queue_.empty()) drained_.notify_all();
  }
}

void Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

bool Stream::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !busy_;
}

uint64_t Event::record() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++recorded_;
}

void Event::complete(uint64_t generation) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation <= completed_) return;
    completed_ = generation;
    time_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
}

bool Event::query() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= recorded_;
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

}  // namespace fakegpu::cuda
