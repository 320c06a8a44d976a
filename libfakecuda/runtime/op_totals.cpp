#include "op_totals.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fakegpu::cuda {
namespace {

// A program has a few hundred distinct operators; names beyond this many share one row.
constexpr size_t kMaxNames = 4096;
constexpr const char* kOthers = "(other operators)";

struct Totals {
  std::mutex mu;
  std::unordered_map<std::string, fakegpu_op_total> by_name;
};

Totals& totals() {
  static auto* t = new Totals;  // never destroyed: the stub may read it at exit
  return *t;
}

}  // namespace

void count_op(const char* name, const fakegpu_op_facts& op, const fakegpu_op_cost& cost, bool measured) {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.by_name.find(name);
  if (it == t.by_name.end()) {
    const char* key = t.by_name.size() < kMaxNames ? name : kOthers;
    it = t.by_name.try_emplace(key).first;
    if (it->second.calls == 0) {
      std::strncpy(it->second.name, key, FAKEGPU_OP_NAME_BYTES - 1);
      it->second.kind = op.kind;
    }
  }
  fakegpu_op_total& row = it->second;
  row.calls += 1;
  row.kernels += static_cast<uint64_t>(std::max(cost.kernels, 0));
  row.gpu_us += cost.gpu_us;
  row.host_us += cost.host_us;
  const int bound = cost.host_us > cost.gpu_us ? FAKEGPU_BOUND_HOST : std::clamp(cost.bound, 0, 2);
  row.bound_us[bound] += cost.gpu_us;
  if (measured) row.measured_us += cost.gpu_us;
}

size_t copy_op_totals(fakegpu_op_total* out, size_t max) {
  Totals& t = totals();
  std::vector<fakegpu_op_total> rows;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    rows.reserve(t.by_name.size());
    for (const auto& [name, row] : t.by_name) rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end(), [](const fakegpu_op_total& a, const fakegpu_op_total& b) {
    return a.gpu_us != b.gpu_us ? a.gpu_us > b.gpu_us : std::strcmp(a.name, b.name) < 0;
  });
  std::copy_n(rows.begin(), std::min(max, rows.size()), out);
  return rows.size();
}

}  // namespace fakegpu::cuda
