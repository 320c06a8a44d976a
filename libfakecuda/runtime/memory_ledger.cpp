#include "memory_ledger.h"

#include <algorithm>
#include <cstring>

#include "streams.h"

namespace fakegpu::cuda {
namespace {

double host_now_us() { return host_clock().now_ns() / 1e3; }

bool valid_part(int part) { return part >= 0 && part < FAKEGPU_MEMORY_PART_COUNT; }

}  // namespace

MemoryLedger& MemoryLedger::instance() {
  static auto* ledger = new MemoryLedger;  // never destroyed: CUDA calls may come from static destructors
  return *ledger;
}

uint64_t MemoryLedger::Device::total() const {
  uint64_t sum = 0;
  for (uint64_t bytes : f.in_use) sum += bytes;
  return sum;
}

MemoryLedger::Device& MemoryLedger::device(int ordinal, uint64_t capacity) {
  Device& d = devices_[ordinal];
  d.f.device = ordinal;
  if (capacity) d.f.capacity = capacity;
  return d;
}

void MemoryLedger::sample(Device& d, double now_us) {
  if (!d.series.empty() && d.series.back().us >= now_us) {
    d.series.back().bytes = d.total();
    return;
  }
  if (d.series.size() == kMaxSamples) {
    // Halve the series: each pair becomes one point at the first's time with the larger total.
    for (size_t i = 0; i < kMaxSamples / 2; ++i)
      d.series[i] = {d.series[2 * i].us, std::max(d.series[2 * i].bytes, d.series[2 * i + 1].bytes)};
    d.series.resize(kMaxSamples / 2);
  }
  d.series.push_back({now_us, d.total()});
}

bool MemoryLedger::charge(int ordinal, int part, uint64_t bytes, uint64_t capacity) {
  if (!valid_part(part)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = device(ordinal, capacity);
  const double now = host_now_us();
  if (d.total() + bytes > capacity) {
    d.f.failures++;
    d.f.failed_bytes = bytes;
    std::copy(std::begin(d.f.in_use), std::end(d.f.in_use), d.f.failed_parts);
    d.f.failed_us = now;
    d.f.failed_step = steps_;
    d.f.failed_part = part;
    return false;
  }
  d.f.in_use[part] += bytes;
  if (d.total() > d.f.peak) {
    d.f.peak = d.total();
    std::copy(std::begin(d.f.in_use), std::end(d.f.in_use), d.f.peak_parts);
    d.f.peak_us = now;
    d.f.peak_step = steps_;
  }
  sample(d, now);
  return true;
}

void MemoryLedger::credit(int ordinal, int part, uint64_t bytes) {
  if (!valid_part(part)) return;
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = device(ordinal, 0);
  bytes = std::min(bytes, d.f.in_use[part]);
  d.f.in_use[part] -= bytes;
  sample(d, host_now_us());
}

uint64_t MemoryLedger::used(int ordinal) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(ordinal);
  return it == devices_.end() ? 0 : it->second.total();
}

void MemoryLedger::step_ends() {
  std::lock_guard<std::mutex> lock(mu_);
  ++steps_;
}

void MemoryLedger::torch_peaks(int ordinal, uint64_t allocated, uint64_t reserved) {
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = device(ordinal, 0);
  d.f.torch_peak_allocated = std::max(d.f.torch_peak_allocated, allocated);
  d.f.torch_peak_reserved = std::max(d.f.torch_peak_reserved, reserved);
}

void MemoryLedger::torch_out_of_memory(int ordinal, uint64_t bytes, const uint64_t* largest, int count) {
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = device(ordinal, 0);
  d.f.torch_oom_bytes = bytes;
  std::fill(std::begin(d.f.torch_oom_largest), std::end(d.f.torch_oom_largest), 0);
  std::copy_n(largest, std::clamp(count, 0, FAKEGPU_MEMORY_LARGEST_BLOCKS), d.f.torch_oom_largest);
}

size_t MemoryLedger::figures(fakegpu_memory_figures* out, size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  for (const auto& [ordinal, d] : devices_)
    if (i < max) out[i++] = d.f;
  return devices_.size();
}

size_t MemoryLedger::samples(int ordinal, fakegpu_memory_sample* out, size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(ordinal);
  if (it == devices_.end()) return 0;
  const size_t n = std::min(max, it->second.series.size());
  std::copy_n(it->second.series.begin(), n, out);
  return n;
}

}  // namespace fakegpu::cuda
