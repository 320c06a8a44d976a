// Inits, splits and shrinks are rendezvous: their ranks wait for each other before a
// communicator can be made, can time out and deadlock, and show in the status like any
// operation. One Rendezvous keeps the bookkeeping they share: who has arrived (and how to answer
// them), who is still missing, and whether it failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace fakegpu::coord {

using ClientId = uint64_t;

class Rendezvous {
 public:
  using Clock = std::chrono::steady_clock;
  struct Arrival {
    ClientId client = 0;
    uint64_t request_id = 0;
    Clock::time_point at;
    int cuda_device = 0;  // an init's
    int color = 0;        // a split's
    int key = 0;
    ClientId follows = 0;  // an init's stood-in rank (FAKEGPU_REPRESENTATIVE): the process that posted it
  };

  // Waits for `nranks` ranks, but for the `excluded` ones (sorted), which never come.
  void expect(int nranks, std::vector<int> excluded = {});
  // Whether expect() has been called: the first rank to arrive sets the size.
  bool sized() const { return !arrivals_.empty(); }
  int nranks() const { return static_cast<int>(arrivals_.size()); }
  const std::vector<int>& excluded() const { return excluded_; }
  bool is_excluded(int rank) const;

  bool has_arrived(int rank) const { return arrivals_[rank].has_value(); }
  const Arrival& arrival(int rank) const { return *arrivals_[rank]; }
  const std::vector<std::optional<Arrival>>& arrivals() const { return arrivals_; }
  // Records a rank's arrival; true when it was the last one expected.
  bool arrive(int rank, const Arrival& arrival);
  // The ranks that came, and those still expected, in rank order.
  std::vector<int> arrived_ranks() const;
  std::vector<int> missing_ranks() const;
  // Whether any of the clients that arrived satisfies `pred`.
  template <typename Pred>
  bool any_arrival(Pred pred) const {
    for (const auto& a : arrivals_)
      if (a && pred(*a)) return true;
    return false;
  }

  // Ranks have come and wait for the others: it has not failed, nor is it untouched.
  bool waiting() const { return failure_.empty() && arrived_ > 0; }
  Clock::time_point first_at() const { return first_at_; }

  // Marks it failed. The arrivals stay, so a rank arriving late is told the failure rather
  // than taken for a repeat; the caller tells those that already came.
  void fail(const std::string& why);
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }
  Clock::time_point failed_at() const { return failed_at_; }

 private:
  std::vector<std::optional<Arrival>> arrivals_;  // by rank
  std::vector<int> excluded_;
  int arrived_ = 0;
  std::string failure_;
  Clock::time_point first_at_, failed_at_;
};

// A split or a shrink of a communicator, regrouping its ranks into new communicators.
enum class Regroup : uint8_t { kSplit, kShrink };
const char* regroup_call(Regroup kind);  // "ncclCommSplit", "ncclCommShrink"

// Which regrouping: the parent communicator's n-th split or shrink. Splits sort before shrinks.
struct RegroupKey {
  Regroup kind;
  uint64_t parent;
  uint64_t index;
  bool operator<(const RegroupKey& o) const {
    return std::tie(kind, parent, index) < std::tie(o.kind, o.parent, o.index);
  }
};

}  // namespace fakegpu::coord
