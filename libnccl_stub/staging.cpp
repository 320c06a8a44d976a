#include "staging.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "env.h"
#include "errors.h"
#include "reduce.h"

namespace fakegpu::stub {
namespace {

// Staging segments are named to the coordinator beside fakegpu's device-memory segments, whose
// ids count up from zero, so they take a range of their own.
constexpr uint64_t kFirstStagingSegment = uint64_t{1} << 62;
constexpr size_t kSmallestBlock = 4096;

// Blocks come in powers of two, so a block freed by one operation fits the next of a similar
// size; a job that repeats its operations stops growing the pool after the first round.
size_t block_size(size_t bytes) {
  size_t size = kSmallestBlock;
  while (size < bytes) size <<= 1;
  return size;
}

class StagingPool {
 public:
  StagingBlock take(size_t bytes) {
    if (bytes == 0) return {};
    const size_t size = block_size(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        StagingBlock block = it->second;
        free_.erase(it);
        return block;
      }
    }
    return grow(size);
  }

  void give_back(const StagingBlock& block) {
    if (!block.data) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_.emplace(block.capacity, block);
  }

 private:
  // A new block, never unmapped: the coordinator may have mapped it too, and blocks are reused.
  StagingBlock grow(size_t size) {
    int fd = memfd_create("fakegpu-staging", MFD_CLOEXEC);
    void* base = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) == 0)
      base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      // Not shareable (no memfd): private memory still works, with the data in the frames.
      if (fd >= 0) close(fd);
      fd = -1;
      base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base == MAP_FAILED)
        throw NcclError(ncclSystemError, "cannot map a staging buffer of " + std::to_string(size) +
                                             " bytes: " + std::strerror(errno));
    }
    if (!cuda().pin(base, size)) {
      static std::once_flag reported;
      std::call_once(reported, [] {
        warn("cudaHostRegister refused a staging buffer: copies between device memory and the staging "
             "buffers will not overlap with the host");
      });
    }
    StagingBlock block{static_cast<uint8_t*>(base), size, {}};
    std::lock_guard<std::mutex> lock(mu_);
    block.segment = CudaBridge::Segment{next_id_++, 0, size, fd};
    ++blocks_;
    bytes_ += size;
    info(wire::kSubsysAlloc, "Staging pool: new " + std::to_string(size) + "-byte block (" + std::to_string(blocks_) +
                                 " blocks, " + std::to_string(bytes_) + " bytes in all)");
    return block;
  }

  std::mutex mu_;
  std::multimap<size_t, StagingBlock> free_;  // by capacity
  uint64_t next_id_ = kFirstStagingSegment;
  size_t blocks_ = 0, bytes_ = 0;
};

StagingPool& pool() {
  static auto* instance = new StagingPool;  // never destroyed: streams may still use its blocks at exit
  return *instance;
}

}  // namespace

bool needs_staging() {
  static const bool forced = env::get(env::kForceStaging);  // checked at init
  return forced || !cuda().host_accessible();
}

namespace {
// A device scalar is staged after the send data, 8-byte aligned, in the same page-locked block.
size_t scalar_offset(const CollectiveCall& c) { return (c.send_bytes + 7) / 8 * 8; }
}  // namespace

StagingSet::StagingSet(const std::vector<CollectiveCall>& calls) {
  entries_.reserve(calls.size());
  try {
    for (const CollectiveCall& c : calls) {
      entries_.emplace_back();
      Entry& e = entries_.back();
      e.send = pool().take(c.device_scalar ? scalar_offset(c) + sizeof(uint64_t) : c.send_bytes);
      e.recv = pool().take(c.recv_bytes);
      if (c.device_scalar) e.scalar = reinterpret_cast<uint64_t*>(e.send.data + scalar_offset(c));
    }
  } catch (...) {
    give_back();  // the destructor does not run for a half-built object
    throw;
  }
}

StagingSet::~StagingSet() { give_back(); }

void StagingSet::give_back() {
  for (Entry& e : entries_) {
    pool().give_back(e.send);
    pool().give_back(e.recv);
  }
  entries_.clear();
}

void stage_inputs(const std::vector<CollectiveCall>& calls, StagingSet& staging, std::optional<cudaStream_t> stream) {
  const CudaBridge& cu = cuda();
  auto to_host = [&](void* dst, const void* src, size_t bytes) {
    stream ? cu.copy_to_host_async(dst, src, bytes, *stream) : cu.copy_to_host(dst, src, bytes);
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].send_bytes) to_host(staging[i].send.data, calls[i].sendbuff, calls[i].send_bytes);
    if (calls[i].device_scalar) to_host(staging[i].scalar, calls[i].device_scalar, dtype_size(calls[i].desc.dtype));
  }
}

void unstage_outputs(const std::vector<CollectiveCall>& calls, StagingSet& staging, std::optional<cudaStream_t> stream) {
  const CudaBridge& cu = cuda();
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!calls[i].recv_bytes) continue;
    if (stream)
      cu.copy_to_device_async(calls[i].recvbuff, staging[i].recv.data, calls[i].recv_bytes, *stream);
    else
      cu.copy_to_device(calls[i].recvbuff, staging[i].recv.data, calls[i].recv_bytes);
  }
}

}  // namespace fakegpu::stub
