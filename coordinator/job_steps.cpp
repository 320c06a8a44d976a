// The ranks' activity logs (wire::RankActivity) and the report's step figures built from them:
// per rank and step, compute, communication, and communication no computation hid; for the
// job, each step as its slowest rank took it.
#include <algorithm>

#include "job.h"
#include "step_figures.h"

namespace fakegpu::coord {

using nlohmann::json;

void Job::handle_rank_activity(Client& client, const wire::RankActivity& msg) {
  client.activity_dropped += msg.dropped;
  const size_t room = kMaxActivity - std::min(kMaxActivity, client.activity.size());
  const size_t kept = std::min(room, msg.slices.size());
  client.activity.insert(client.activity.end(), msg.slices.begin(), msg.slices.begin() + static_cast<std::ptrdiff_t>(kept));
  client.activity_dropped += msg.slices.size() - kept;
}

namespace {

constexpr size_t kMaxStepsListed = 100;  // per rank and for the job; the rest only count

json figures_json(const StepFigures& f) {
  return {{"start_us", f.start_us},
          {"time_us", f.time_us()},
          {"compute_us", f.compute_us},
          {"comm_us", f.comm_us},
          {"exposed_comm_us", f.exposed_comm_us}};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

}  // namespace

json Job::steps_report() const {
  struct Rank {
    int global_rank;
    RankSteps steps;
    uint64_t dropped;
  };
  std::vector<Rank> ranks;
  std::map<const Client*, RankSteps> figured;  // a representative's, once for all its stand-ins
  for (const auto& [id, c] : clients_) {
    const Client& source = figures_of(c);
    if (source.activity.empty()) continue;
    auto it = figured.find(&source);
    if (it == figured.end()) it = figured.emplace(&source, step_figures(source.activity)).first;
    ranks.push_back({c.global_rank, it->second, source.activity_dropped});
  }
  if (ranks.empty()) return nullptr;
  std::stable_sort(ranks.begin(), ranks.end(), [](const Rank& a, const Rank& b) { return a.global_rank < b.global_rank; });

  json per_rank = json::array();
  size_t steps = SIZE_MAX;
  for (const Rank& r : ranks) {
    steps = std::min(steps, r.steps.steps.size());
    StepFigures mean;
    json listed = json::array();
    for (const StepFigures& f : r.steps.steps) {
      mean.end_us += f.time_us(), mean.compute_us += f.compute_us, mean.comm_us += f.comm_us;
      mean.exposed_comm_us += f.exposed_comm_us;
      if (listed.size() < kMaxStepsListed) listed.push_back(figures_json(f));
    }
    const double n = std::max<double>(1, static_cast<double>(r.steps.steps.size()));
    json entry = {{"global_rank", r.global_rank},
                  {"marked_by", step_marks_name(r.steps.marks)},
                  {"steps", r.steps.steps.size()},
                  {"mean", {{"time_us", mean.end_us / n},
                            {"compute_us", mean.compute_us / n},
                            {"comm_us", mean.comm_us / n},
                            {"exposed_comm_us", mean.exposed_comm_us / n}}},
                  {"per_step", listed}};
    if (r.dropped) entry["activity_slices_lost"] = r.dropped;
    per_rank.push_back(std::move(entry));
  }
  // The job's n-th step is every rank's n-th: it lasts as long as the slowest rank's.
  json job_steps = json::array();
  std::vector<double> times;
  for (size_t i = 0; i < steps; ++i) {
    const Rank* slowest = &ranks.front();
    for (const Rank& r : ranks)
      if (r.steps.steps[i].time_us() > slowest->steps.steps[i].time_us()) slowest = &r;
    const StepFigures& f = slowest->steps.steps[i];
    if (i > 0 || steps == 1) times.push_back(f.time_us());  // the first step also holds the set-up
    if (job_steps.size() < kMaxStepsListed) {
      json entry = figures_json(f);
      entry["step"] = i + 1;
      entry["slowest_rank"] = slowest->global_rank;
      job_steps.push_back(std::move(entry));
    }
  }
  return {{"marked_by", step_marks_name(ranks.front().steps.marks)},
          {"count", steps},
          {"median_time_us", median(times)},
          {"per_step", job_steps},
          {"ranks", per_rank}};
}

}  // namespace fakegpu::coord
