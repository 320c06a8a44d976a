#include "flag_wait.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cuda_bridge.h"
#include "errors.h"

namespace fakegpu::stub {
namespace {

// More staged collectives in flight at once than this wait inside their host functions.
constexpr size_t kFlags = 1024;

class Watcher;
Watcher& watcher();

class FlagPool {
 public:
  std::optional<HostFlag> take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tried_) open();
    if (free_.empty()) return std::nullopt;
    const size_t i = free_.back();
    free_.pop_back();
    // A free word holds the value its last use waited for (raised before that stream passed):
    // this use waits for the next.
    return HostFlag{host_ + i, device_ + i * sizeof(uint32_t), __atomic_load_n(host_ + i, __ATOMIC_ACQUIRE) + 1};
  }

  void give_back(const HostFlag& flag) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(static_cast<size_t>(flag.host - host_));
  }

 private:
  void open() {
    tried_ = true;
    host_ = cuda().allocate_flags(kFlags, &device_);
    if (!host_) {
      info(wire::kSubsysInit, "Streams cannot wait on host flags here: staged collectives wait in their host functions");
      return;
    }
    watcher();  // its thread starts here, on the program's thread, not in a host function
    for (size_t i = kFlags; i-- > 0;) free_.push_back(i);
  }

  std::mutex mu_;
  bool tried_ = false;
  uint32_t* host_ = nullptr;
  uint64_t device_ = 0;
  std::vector<size_t> free_;
};

FlagPool& pool() {
  static auto* instance = new FlagPool;  // never destroyed: streams may wait on it at exit
  return *instance;
}

// One thread watches every posted batch, so that none of them waits behind another: a batch
// whose peers come late holds up no flag but its own.
class Watcher {
 public:
  Watcher() { std::thread([this] { run(); }).detach(); }

  void watch(std::shared_ptr<PostedBatch> posted, const HostFlag& flag) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.emplace_back(std::move(posted), flag);
    }
    wake_.notify_one();
  }

 private:
  void run() {
    // Polled: a reply has no wake-up of its own here. The pause grows while nothing lands.
    auto pause = std::chrono::microseconds(5);
    std::vector<std::pair<std::shared_ptr<PostedBatch>, HostFlag>> watching;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (watching.empty()) wake_.wait(lock, [this] { return !pending_.empty(); });
        for (auto& p : pending_) watching.push_back(std::move(p));
        pending_.clear();
      }
      bool any = false;
      for (size_t i = 0; i < watching.size();) {
        if (!done(*watching[i].first)) {
          ++i;
          continue;
        }
        __atomic_store_n(watching[i].second.host, watching[i].second.value, __ATOMIC_RELEASE);
        watching[i] = std::move(watching.back());
        watching.pop_back();
        any = true;
      }
      pause = any ? std::chrono::microseconds(5) : std::min(pause * 2, std::chrono::microseconds(500));
      if (!any && !watching.empty()) std::this_thread::sleep_for(pause);
    }
  }

  // A batch that cannot say (its reading failed) counts as done: finishing it reports why.
  static bool done(const PostedBatch& posted) noexcept {
    try {
      return posted.ready();
    } catch (...) {
      return true;
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::pair<std::shared_ptr<PostedBatch>, HostFlag>> pending_;
};

Watcher& watcher() {
  static auto* instance = new Watcher;  // never destroyed: its thread runs until exit
  return *instance;
}

}  // namespace

std::optional<HostFlag> take_flag() { return pool().take(); }

void give_back_flag(const HostFlag& flag) { pool().give_back(flag); }

void raise_when_done(std::shared_ptr<PostedBatch> posted, const HostFlag& flag) {
  watcher().watch(std::move(posted), flag);
}

}  // namespace fakegpu::stub
