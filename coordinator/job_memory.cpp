// The ranks' GPU memory (wire::RankMemory) and the report's memory section: per rank, the peak
// in use with its parts and when it came, PyTorch's own peaks beside it, and an out-of-memory
// error with what held the GPU then.
#include <algorithm>
#include <utility>
#include <vector>

#include "fake_cuda_bridge.h"
#include "job.h"

namespace fakegpu::coord {

using nlohmann::json;

void Job::handle_rank_memory(Client& client, wire::RankMemory msg) {
  const int32_t device = msg.device;
  client.memory[device] = std::move(msg);  // figures so far: the latest replace the last
}

const wire::RankMemory* Job::rank_gpu_memory(const Client& client) {
  const wire::RankMemory* best = nullptr;
  for (const auto& [device, m] : client.memory)
    if (!best || m.peak > best->peak) best = &m;
  return best;
}

namespace {

json parts(const wire::MemoryParts& p) {
  return {{"context", p.context}, {"program", p.program}, {"nccl", p.nccl}, {"libraries", p.libraries}};
}

const char* part_name(uint8_t part) {
  switch (part) {
    case FAKEGPU_MEMORY_CONTEXT: return "context";
    case FAKEGPU_MEMORY_PROGRAM: return "program";
    case FAKEGPU_MEMORY_NCCL: return "nccl";
    default: return "libraries";
  }
}

json rank_entry(int global_rank, const wire::RankMemory& m) {
  json j = {{"global_rank", global_rank},
            {"device", m.device},
            {"capacity", m.capacity},
            {"peak", {{"bytes", m.peak}, {"at_us", m.peak_us}, {"step", m.peak_step}, {"parts", parts(m.peak_parts)}}},
            {"in_use_at_end", parts(m.in_use)}};
  if (m.torch_peak_reserved || m.torch_peak_allocated)
    j["pytorch"] = {{"max_allocated", m.torch_peak_allocated}, {"max_reserved", m.torch_peak_reserved}};
  if (m.torch_oom_bytes) {
    json largest = json::array();
    for (const wire::LiveBlock& b : m.torch_oom_largest) largest.push_back(b.bytes);
    j["out_of_memory"] = {{"requested_bytes", m.torch_oom_bytes},
                          {"raised", "torch.OutOfMemoryError"},
                          {"at_us", m.failed_us},
                          {"step", m.failed_step},
                          {"in_use", parts(m.failed_parts)},
                          {"largest_live_blocks", largest}};
  } else if (m.failures) {
    // Refusals a PyTorch job retried past (its allocator frees its cache and tries again) are
    // not errors; a C program sees each one as cudaErrorMemoryAllocation.
    j["refused_allocations"] = {{"count", m.failures},
                                {"last_bytes", m.failed_bytes},
                                {"last_part", part_name(m.failed_part)},
                                {"at_us", m.failed_us},
                                {"step", m.failed_step},
                                {"in_use", parts(m.failed_parts)}};
  }
  return j;
}

}  // namespace

json Job::memory_report() const {
  std::vector<std::pair<int, wire::RankMemory>> gpus;  // (global rank, its GPU), by rank
  for (const auto& [id, c] : clients_)
    if (wire::RankMemory m; report_memory(c, &m)) gpus.emplace_back(c.global_rank, std::move(m));
  if (gpus.empty()) return nullptr;
  std::stable_sort(gpus.begin(), gpus.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // The rank closest to its GPU's capacity decides whether the job fits.
  auto fill = [](const wire::RankMemory& m) { return double(m.peak) / double(m.capacity); };
  auto fullest = std::max_element(gpus.begin(), gpus.end(),
                                  [&](const auto& a, const auto& b) { return fill(a.second) < fill(b.second); });
  json ranks = json::array(), out_of_memory = json::array();
  for (const auto& [rank, m] : gpus) {
    ranks.push_back(rank_entry(rank, m));
    if (m.torch_oom_bytes) out_of_memory.push_back(rank);
  }
  return {{"ranks", ranks},
          {"fullest_rank", fullest->first},
          {"fits", out_of_memory.empty()},
          {"out_of_memory_ranks", out_of_memory}};
}

}  // namespace fakegpu::coord
