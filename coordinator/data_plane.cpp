#include "data_plane.h"

namespace fakegpu::coord {

ThreadDataPlane::ThreadDataPlane(asio::io_context& io) : io_(io), thread_([this] { loop(); }) {}

ThreadDataPlane::~ThreadDataPlane() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void ThreadDataPlane::run(std::function<void()> work, std::function<void()> then) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(work), std::move(then));
  }
  wake_.notify_one();
}

void ThreadDataPlane::loop() {
  for (;;) {
    std::pair<std::function<void()>, std::function<void()>> next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, with nothing left to do
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    next.first();
    asio::post(io_, std::move(next.second));
  }
}

}  // namespace fakegpu::coord
