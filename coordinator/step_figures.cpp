#include "step_figures.h"

#include <algorithm>
#include <optional>

namespace fakegpu::coord {
namespace {

using wire::ActivityKind;
using Intervals = std::vector<std::pair<double, double>>;  // sorted, disjoint

Intervals union_of(const std::vector<wire::ActivitySlice>& slices, ActivityKind kind) {
  Intervals all;
  for (const auto& s : slices)
    if (s.kind == kind && s.end_us > s.start_us) all.emplace_back(s.start_us, s.end_us);
  std::sort(all.begin(), all.end());
  Intervals merged;
  for (const auto& [a, b] : all) {
    if (!merged.empty() && a <= merged.back().second)
      merged.back().second = std::max(merged.back().second, b);
    else
      merged.emplace_back(a, b);
  }
  return merged;
}

Intervals intersection(const Intervals& x, const Intervals& y) {
  Intervals out;
  for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    const double a = std::max(x[i].first, y[j].first), b = std::min(x[i].second, y[j].second);
    if (a < b) out.emplace_back(a, b);
    (x[i].second < y[j].second ? i : j)++;
  }
  return out;
}

// Length of the intervals' part inside [from, to].
double measure(const Intervals& v, double from, double to) {
  auto it = std::lower_bound(v.begin(), v.end(), from, [](const auto& iv, double t) { return iv.second < t; });
  double sum = 0;
  for (; it != v.end() && it->first < to; ++it) sum += std::max(0.0, std::min(it->second, to) - std::max(it->first, from));
  return sum;
}

}  // namespace

const char* step_marks_name(StepMarks marks) {
  switch (marks) {
    case StepMarks::kRanges: return "NVTX step ranges";
    case StepMarks::kEnds: return "optimizer steps";
    case StepMarks::kNone: return "none";
  }
  return "unknown";
}

RankSteps step_figures(const std::vector<wire::ActivitySlice>& slices) {
  std::vector<std::pair<double, bool>> marks;  // (time, begins)
  double last_end = 0;
  for (const auto& s : slices) {
    if (s.kind == ActivityKind::kStepBegin || s.kind == ActivityKind::kStepEnd)
      marks.emplace_back(s.start_us, s.kind == ActivityKind::kStepBegin);
    else
      last_end = std::max(last_end, s.end_us);
  }
  // At equal times an end sorts before a begin: back-to-back ranges stay apart.
  std::sort(marks.begin(), marks.end());
  RankSteps out;
  const bool ranges = std::any_of(marks.begin(), marks.end(), [](const auto& m) { return m.second; });
  out.marks = ranges ? StepMarks::kRanges : marks.empty() ? StepMarks::kNone : StepMarks::kEnds;
  std::vector<std::pair<double, double>> spans;
  if (out.marks == StepMarks::kNone) {
    if (last_end > 0) spans.emplace_back(0, last_end);
  } else if (ranges) {
    // Each begin pairs with the first end after it; nested or unmatched marks are left out.
    std::optional<double> open;
    for (const auto& [t, begins] : marks) {
      if (begins && !open) open = t;
      if (!begins && open) spans.emplace_back(*open, t), open.reset();
    }
  } else {
    double from = 0;
    for (const auto& [t, begins] : marks) spans.emplace_back(from, t), from = t;
  }
  const Intervals compute = union_of(slices, ActivityKind::kKernel);
  const Intervals comm = union_of(slices, ActivityKind::kCollective);
  const Intervals hidden = intersection(comm, compute);
  for (const auto& [from, to] : spans) {
    StepFigures f;
    f.start_us = from, f.end_us = to;
    f.compute_us = measure(compute, from, to);
    f.comm_us = measure(comm, from, to);
    f.exposed_comm_us = f.comm_us - measure(hidden, from, to);
    out.steps.push_back(f);
  }
  return out;
}

}  // namespace fakegpu::coord
