#include "rendezvous.h"

#include <algorithm>
#include <utility>

namespace fakegpu::coord {

void Rendezvous::expect(int nranks, std::vector<int> excluded) {
  arrivals_.resize(nranks);
  excluded_ = std::move(excluded);
}

bool Rendezvous::is_excluded(int rank) const { return std::binary_search(excluded_.begin(), excluded_.end(), rank); }

bool Rendezvous::arrive(int rank, const Arrival& arrival) {
  arrivals_[rank] = arrival;
  if (arrived_ == 0) first_at_ = arrival.at;
  return ++arrived_ == nranks() - static_cast<int>(excluded_.size());
}

std::vector<int> Rendezvous::arrived_ranks() const {
  std::vector<int> ranks;
  for (int r = 0; r < nranks(); ++r)
    if (arrivals_[r]) ranks.push_back(r);
  return ranks;
}

std::vector<int> Rendezvous::missing_ranks() const {
  std::vector<int> ranks;
  for (int r = 0; r < nranks(); ++r)
    if (!arrivals_[r] && !is_excluded(r)) ranks.push_back(r);
  return ranks;
}

void Rendezvous::fail(const std::string& why) {
  failure_ = why;
  failed_at_ = Clock::now();
}

const char* regroup_call(Regroup kind) { return kind == Regroup::kSplit ? "ncclCommSplit" : "ncclCommShrink"; }

}  // namespace fakegpu::coord
