#include "kernels.h"

#include <algorithm>
#include <cstring>

#include "coll_shape.h"
#include "reduce.h"

namespace fakegpu::coord {
namespace {

using wire::CollType;

// One contiguous copy, split into chunks for the pool.
struct Copy {
  const uint8_t* src;
  uint8_t* dst;
  size_t bytes;
};

void run_copies(const std::vector<Copy>& copies, Executor& executor) {
  std::vector<std::pair<size_t, size_t>> tasks;  // (copy index, chunk start)
  for (size_t c = 0; c < copies.size(); ++c)
    // In place, the data is already where it belongs; no destination, nobody reads it (a stand-in).
    if (copies[c].src != copies[c].dst && copies[c].dst)
      for (size_t at = 0; at < copies[c].bytes; at += kChunkBytes) tasks.emplace_back(c, at);
  executor.parallel_for(tasks.size(), [&](size_t t) {
    const Copy& c = copies[tasks[t].first];
    size_t at = tasks[t].second;
    std::memcpy(c.dst + at, c.src + at, std::min(kChunkBytes, c.bytes - at));
  });
}

// Reduces elements [from, from + elems) of every rank's input and writes the result to each of
// `outs` (at offset 0 of each). Rank order is fixed (0, 1, 2, ...), so results do not depend
// on timing.
void reduce_region(const wire::Collective& call, const std::vector<KernelRank>& ranks, uint64_t from,
                   uint64_t elems, const std::vector<uint8_t*>& outs, Executor& executor) {
  const auto dtype = static_cast<DataType>(call.dtype);
  const auto op = static_cast<RedOp>(call.op);
  const size_t elem = dtype_size(call.dtype);
  const size_t chunk_elems = kChunkBytes / elem;
  const int nranks = static_cast<int>(ranks.size());

  executor.parallel_for((elems + chunk_elems - 1) / chunk_elems, [&](size_t task) {
    // Per-thread scratch, allocated once for the thread's lifetime.
    thread_local std::vector<uint8_t> acc_buf(kChunkBytes), tmp_buf(kChunkBytes);
    thread_local std::vector<const uint8_t*> ins;
    thread_local std::vector<uint64_t> scalars;
    const uint64_t first = task * chunk_elems;
    const size_t n = std::min<uint64_t>(chunk_elems, elems - first);
    const size_t in_at = (from + first) * elem;
    ins.resize(nranks);
    scalars.resize(nranks);
    for (int r = 0; r < nranks; ++r) {
      ins[r] = ranks[r].in + in_at;
      scalars[r] = ranks[r].scalar;
    }
    reduce_contributions(dtype, op, ins.data(), scalars.data(), nranks, n, acc_buf.data(), tmp_buf.data());
    for (uint8_t* out : outs) std::memcpy(out + first * elem, acc_buf.data(), n * elem);
  });
}

}  // namespace

void copy_parallel(uint8_t* dst, const uint8_t* src, size_t bytes, Executor& executor) {
  run_copies({{src, dst, bytes}}, executor);
}

void run_collective(const wire::Collective& call, const std::vector<KernelRank>& ranks, Executor& executor) {
  const int nranks = static_cast<int>(ranks.size());
  const size_t chunk = call.count * dtype_size(call.dtype);  // the call's count, in bytes
  const int root = call.root;
  std::vector<Copy> copies;
  switch (call.coll) {
    case CollType::kAllReduce: {
      std::vector<uint8_t*> outs;
      for (const auto& r : ranks)
        if (r.out) outs.push_back(r.out);
      if (!outs.empty()) reduce_region(call, ranks, 0, call.count, outs, executor);
      return;
    }
    case CollType::kReduce:
      if (ranks[root].out) reduce_region(call, ranks, 0, call.count, {ranks[root].out}, executor);
      return;
    case CollType::kReduceScatter:
      for (int r = 0; r < nranks; ++r)
        if (ranks[r].out) reduce_region(call, ranks, r * call.count, call.count, {ranks[r].out}, executor);
      return;
    case CollType::kBroadcast:
      for (int r = 0; r < nranks; ++r) copies.push_back({ranks[root].in, ranks[r].out, chunk});
      break;
    case CollType::kScatter:
      for (int r = 0; r < nranks; ++r) copies.push_back({ranks[root].in + r * chunk, ranks[r].out, chunk});
      break;
    case CollType::kGather:
      if (ranks[root].out)
        for (int j = 0; j < nranks; ++j) copies.push_back({ranks[j].in, ranks[root].out + j * chunk, chunk});
      break;
    case CollType::kAllGather:
      for (int r = 0; r < nranks; ++r)
        if (ranks[r].out)
          for (int j = 0; j < nranks; ++j) copies.push_back({ranks[j].in, ranks[r].out + j * chunk, chunk});
      break;
    case CollType::kAlltoAll:
      for (int r = 0; r < nranks; ++r)
        if (ranks[r].out)
          for (int j = 0; j < nranks; ++j)
            copies.push_back({ranks[j].in + r * chunk, ranks[r].out + j * chunk, chunk});
      break;
    case CollType::kSend:
    case CollType::kRecv: return;  // matched pairwise, never here
  }
  run_copies(copies, executor);
}

}  // namespace fakegpu::coord
