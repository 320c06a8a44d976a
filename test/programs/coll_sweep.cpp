// Sweeps every collective over every natively supported data type and reduction op, in place
// and out of place, for several counts, and runs the point-to-point patterns: ring, all-to-all
// built from send/recv, a pipeline, and one pair exchanging while the other ranks stay idle.
// Every element is compared with a reference computed here, folding ranks in order 0..N-1.
//
// Usage (one process per rank, RANK and WORLD_SIZE set): coll_sweep ID_FILE [--big]
//        coll_sweep ID_FILE --mismatch   (rank 0 and the others disagree on a count)
#include <nccl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

int g_rank = -1, g_world = 0;
long g_failures = 0;

#define CHECK_NCCL(call)                                                                                     \
  do {                                                                                                       \
    ncclResult_t r_ = (call);                                                                                \
    if (r_ != ncclSuccess) {                                                                                 \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, #call, ncclGetLastError(nullptr));           \
      std::exit(2);                                                                                          \
    }                                                                                                        \
  } while (0)

// Values are small integers, so float sums are exact in any order and products stay small.
template <typename T>
T value(int rank, size_t i, ncclRedOp_t op) {
  if (op == ncclProd) return static_cast<T>((rank + i) % 3 == 0 ? 2 : 1);
  long v = static_cast<long>((rank * 31 + i * 7) % 53);
  if (std::is_signed_v<T>) v -= 20;
  return static_cast<T>(v);
}

// Integer arithmetic is done unsigned, and at least as wide as unsigned, so it wraps like the GPU.
template <typename T, bool = std::is_integral_v<T>>
struct Arith {
  using type = T;
};
template <typename T>
struct Arith<T, true> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};

template <typename T>
T combine(ncclRedOp_t op, T a, T b) {
  using W = typename Arith<T>::type;
  switch (op) {
    case ncclSum:
    case ncclAvg: return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
    case ncclProd: return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a;
  }
}

// The reduction of element i over ranks 0..world-1, in rank order.
template <typename T>
T reduced(ncclRedOp_t op, size_t i) {
  T acc = value<T>(0, i, op);
  for (int r = 1; r < g_world; ++r) acc = combine(op, acc, value<T>(r, i, op));
  if (op == ncclAvg) acc = static_cast<T>(acc / static_cast<T>(g_world));
  return acc;
}

template <typename T>
void expect_equal(const T* got, size_t i, T want, const std::string& what) {
  if (got[i] == want) return;
  if (++g_failures <= 10)
    std::fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", g_rank, what.c_str(), i,
                 static_cast<double>(got[i]), static_cast<double>(want));
}

// Device buffers of count * world elements, refilled before each call.
template <typename T>
struct Buffers {
  T* send = nullptr;
  T* recv = nullptr;
  size_t elems;
  explicit Buffers(size_t count) : elems(count * g_world + 1) {
    cudaMalloc(reinterpret_cast<void**>(&send), elems * sizeof(T));
    cudaMalloc(reinterpret_cast<void**>(&recv), elems * sizeof(T));
  }
  ~Buffers() {
    cudaFree(send);
    cudaFree(recv);
  }
  void fill(ncclRedOp_t op, int rank) {
    for (size_t i = 0; i < elems; ++i) send[i] = value<T>(rank, i, op);
    std::memset(static_cast<void*>(recv), 0x7b, elems * sizeof(T));
  }
};

template <typename T>
void sweep_reductions(ncclComm_t comm, ncclDataType_t dt, const char* tname, size_t count, cudaStream_t s) {
  Buffers<T> b(count);
  const int root = static_cast<int>(count % g_world);
  for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      std::string tag = std::string(tname) + " op " + std::to_string(op) + " count " + std::to_string(count) +
                        (in_place ? " in-place" : "");
      b.fill(op, g_rank);
      T* out = in_place ? b.send : b.recv;
      CHECK_NCCL(ncclAllReduce(b.send, out, count, dt, op, comm, s));
      cudaStreamSynchronize(s);
      for (size_t i = 0; i < count; ++i) expect_equal(out, i, reduced<T>(op, i), "AllReduce " + tag);

      b.fill(op, g_rank);
      CHECK_NCCL(ncclReduce(b.send, out, count, dt, op, root, comm, s));
      cudaStreamSynchronize(s);
      if (g_rank == root)
        for (size_t i = 0; i < count; ++i) expect_equal(out, i, reduced<T>(op, i), "Reduce " + tag);

      // ReduceScatter in place receives into the rank's own slice of the send buffer.
      b.fill(op, g_rank);
      T* rs_out = in_place ? b.send + g_rank * count : b.recv;
      CHECK_NCCL(ncclReduceScatter(b.send, rs_out, count, dt, op, comm, s));
      cudaStreamSynchronize(s);
      for (size_t i = 0; i < count; ++i)
        expect_equal(rs_out, i, reduced<T>(op, g_rank * count + i), "ReduceScatter " + tag);
    }
  }
}

template <typename T>
void sweep_data_movement(ncclComm_t comm, ncclDataType_t dt, const char* tname, size_t count, cudaStream_t s) {
  Buffers<T> b(count);
  const int root = static_cast<int>((count + 1) % g_world);
  const ncclRedOp_t tag_op = ncclSum;  // selects value()'s pattern
  for (int in_place = 0; in_place < 2; ++in_place) {
    std::string tag = std::string(tname) + " count " + std::to_string(count) + (in_place ? " in-place" : "");

    b.fill(tag_op, g_rank);
    T* out = in_place ? b.send : b.recv;
    CHECK_NCCL(ncclBroadcast(b.send, out, count, dt, root, comm, s));
    cudaStreamSynchronize(s);
    for (size_t i = 0; i < count; ++i) expect_equal(out, i, value<T>(root, i, tag_op), "Broadcast " + tag);

    // AllGather in place sends from the rank's own slice of the receive buffer.
    b.fill(tag_op, g_rank);
    if (in_place) std::memcpy(b.recv + g_rank * count, b.send, count * sizeof(T));
    CHECK_NCCL(ncclAllGather(in_place ? b.recv + g_rank * count : b.send, b.recv, count, dt, comm, s));
    cudaStreamSynchronize(s);
    for (int j = 0; j < g_world; ++j)
      for (size_t i = 0; i < count; ++i) expect_equal(b.recv, j * count + i, value<T>(j, i, tag_op), "AllGather " + tag);

    b.fill(tag_op, g_rank);
    if (in_place && g_rank == root) std::memcpy(b.recv + g_rank * count, b.send, count * sizeof(T));
    const T* gather_src = in_place && g_rank == root ? b.recv + g_rank * count : b.send;
    CHECK_NCCL(ncclGather(gather_src, b.recv, count, dt, root, comm, s));
    cudaStreamSynchronize(s);
    if (g_rank == root)
      for (int j = 0; j < g_world; ++j)
        for (size_t i = 0; i < count; ++i) expect_equal(b.recv, j * count + i, value<T>(j, i, tag_op), "Gather " + tag);

    b.fill(tag_op, g_rank);
    T* scatter_dst = in_place && g_rank == root ? b.send + g_rank * count : b.recv;
    CHECK_NCCL(ncclScatter(b.send, scatter_dst, count, dt, root, comm, s));
    cudaStreamSynchronize(s);
    for (size_t i = 0; i < count; ++i)
      expect_equal(scatter_dst, i, value<T>(root, g_rank * count + i, tag_op), "Scatter " + tag);

    if (!in_place) {  // NCCL defines no in-place AlltoAll
      b.fill(tag_op, g_rank);
      CHECK_NCCL(ncclAlltoAll(b.send, b.recv, count, dt, comm, s));
      cudaStreamSynchronize(s);
      for (int j = 0; j < g_world; ++j)
        for (size_t i = 0; i < count; ++i)
          expect_equal(b.recv, j * count + i, value<T>(j, g_rank * count + i, tag_op), "AlltoAll " + tag);
    }
  }
}

template <typename T>
void sweep_type(ncclComm_t comm, ncclDataType_t dt, const char* tname, const std::vector<size_t>& counts,
                cudaStream_t s) {
  for (size_t count : counts) {
    sweep_reductions<T>(comm, dt, tname, count, s);
    sweep_data_movement<T>(comm, dt, tname, count, s);
  }
}

void point_to_point(ncclComm_t comm, cudaStream_t s) {
  const size_t n = 1031;
  Buffers<int32_t> b(n);
  auto check_from = [&](const int32_t* got, int peer, const char* what) {
    for (size_t i = 0; i < n; ++i) expect_equal(got, i, value<int32_t>(peer, i, ncclSum), what);
  };
  const int next = (g_rank + 1) % g_world, prev = (g_rank + g_world - 1) % g_world;

  // Ring: everyone sends right and receives from the left, in one group.
  b.fill(ncclSum, g_rank);
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(b.send, n, ncclInt32, next, comm, s));
  CHECK_NCCL(ncclRecv(b.recv, n, ncclInt32, prev, comm, s));
  CHECK_NCCL(ncclGroupEnd());
  cudaStreamSynchronize(s);
  check_from(b.recv, prev, "ring");

  // All-to-all from send/recv: slice j goes to rank j.
  b.fill(ncclSum, g_rank);
  std::vector<int32_t> expect_src(n * g_world);
  CHECK_NCCL(ncclGroupStart());
  for (int j = 0; j < g_world; ++j) {
    CHECK_NCCL(ncclSend(b.send + j * n, n, ncclInt32, j, comm, s));
    CHECK_NCCL(ncclRecv(b.recv + j * n, n, ncclInt32, j, comm, s));
  }
  CHECK_NCCL(ncclGroupEnd());
  cudaStreamSynchronize(s);
  for (int j = 0; j < g_world; ++j)
    for (size_t i = 0; i < n; ++i) expect_equal(b.recv, j * n + i, value<int32_t>(j, g_rank * n + i, ncclSum), "a2a p2p");

  // Pipeline: stage r receives from r-1, then forwards to r+1; rank 0 starts it. No groups.
  b.fill(ncclSum, g_rank);
  if (g_rank > 0) CHECK_NCCL(ncclRecv(b.recv, n, ncclInt32, g_rank - 1, comm, s));
  const int32_t* forward = g_rank == 0 ? b.send : b.recv;
  if (g_rank + 1 < g_world) CHECK_NCCL(ncclSend(forward, n, ncclInt32, g_rank + 1, comm, s));
  cudaStreamSynchronize(s);
  if (g_rank > 0) check_from(b.recv, 0, "pipeline");

  // Only ranks 0 and 1 exchange; the others call nothing at all.
  if (g_world >= 2 && g_rank < 2) {
    b.fill(ncclSum, g_rank);
    const int peer = 1 - g_rank;
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(b.send, n, ncclInt32, peer, comm, s));
    CHECK_NCCL(ncclRecv(b.recv, n, ncclInt32, peer, comm, s));
    CHECK_NCCL(ncclGroupEnd());
    cudaStreamSynchronize(s);
    check_from(b.recv, peer, "pair exchange");
  }
}

void share_unique_id(const char* path, ncclUniqueId* id) {
  std::string tmp = std::string(path) + ".tmp";
  if (g_rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(id));
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(id, sizeof *id, 1, f) != 1 || std::fclose(f) != 0 || std::rename(tmp.c_str(), path) != 0)
      std::exit(2);
    return;
  }
  for (int tries = 0; tries < 60000; ++tries) {
    if (FILE* f = std::fopen(path, "rb")) {
      size_t got = std::fread(id, sizeof *id, 1, f);
      std::fclose(f);
      if (got == 1) return;
    }
    usleep(1000);
  }
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  g_rank = std::atoi(std::getenv("RANK"));
  g_world = std::atoi(std::getenv("WORLD_SIZE"));
  const bool big = argc > 2 && !std::strcmp(argv[2], "--big");
  const bool mismatch = argc > 2 && !std::strcmp(argv[2], "--mismatch");
  ncclUniqueId id;
  share_unique_id(argv[1], &id);
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, g_world, id, g_rank));
  cudaStream_t s;
  cudaStreamCreate(&s);

  if (mismatch) {
    // Rank 0 reduces 10 elements, every other rank 11: all must fail, and say who called what.
    std::vector<float> buf(16, 1.0f);
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), g_rank == 0 ? 10 : 11, ncclFloat, ncclSum, comm, s);
    const char* msg = ncclGetLastError(comm);
    bool named = std::strstr(msg, "rank 0 called AllReduce(count=10") && std::strstr(msg, "called AllReduce(count=11");
    std::printf("rank %d: mismatch result %d, message names both calls: %s\n", g_rank, r, named ? "yes" : "no");
    return r == ncclInvalidUsage && named ? 0 : 1;
  }

  const std::vector<size_t> counts = {0, 1, 7, 1000};
  sweep_type<int8_t>(comm, ncclInt8, "int8", counts, s);
  sweep_type<uint8_t>(comm, ncclUint8, "uint8", counts, s);
  sweep_type<int32_t>(comm, ncclInt32, "int32", counts, s);
  sweep_type<uint32_t>(comm, ncclUint32, "uint32", counts, s);
  sweep_type<int64_t>(comm, ncclInt64, "int64", counts, s);
  sweep_type<uint64_t>(comm, ncclUint64, "uint64", counts, s);
  sweep_type<float>(comm, ncclFloat32, "float32", counts, s);
  sweep_type<double>(comm, ncclFloat64, "float64", counts, s);
  if (big) {
    sweep_reductions<float>(comm, ncclFloat32, "float32", (1u << 20) + 3, s);
    sweep_data_movement<int32_t>(comm, ncclInt32, "int32", (1u << 20) + 3, s);
  }
  point_to_point(comm, s);

  CHECK_NCCL(ncclCommDestroy(comm));
  if (g_failures) {
    std::fprintf(stderr, "rank %d: %ld wrong elements\n", g_rank, g_failures);
    return 1;
  }
  std::printf("rank %d/%d: sweep OK\n", g_rank, g_world);
  return 0;
}
