// Sweeps every collective over every natively supported data type and reduction op, in place
// and out of place, for several counts, and runs the point-to-point patterns: ring, all-to-all
// built from send/recv, a pipeline, and one pair exchanging while the other ranks stay idle.
// Every element is compared with a reference computed here, folding ranks in order 0..N-1.
//
// Usage (one process per rank, RANK and WORLD_SIZE set): coll_sweep ID_FILE [--big]
//        coll_sweep ID_FILE --mismatch   (rank 0 and the others disagree on a count)
#include <nccl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "share_id.h"
#include "small_float.h"
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

// How the test computes references for one element type R: S is what sits in memory, and the
// arithmetic is stated here independently of fakegpu's kernels, following NCCL's rules:
// integers wrap; half and bfloat16 round to the type after each operation; fp8 computes in half
// and rounds to fp8; avg of a floating type multiplies each input by 1/n, of an integer type
// divides the sum by n.
template <typename T>
struct NativeRef {
  using S = T;
  static constexpr bool kFloating = std::is_floating_point_v<T>;
  static S from_int(long v) { return static_cast<S>(v); }
  static double show(S v) { return static_cast<double>(v); }
  static S add(S a, S b) { return static_cast<S>(static_cast<W>(a) + static_cast<W>(b)); }
  static S mul(S a, S b) { return static_cast<S>(static_cast<W>(a) * static_cast<W>(b)); }
  static bool less(S a, S b) { return a < b; }
  static S div(S a, int n) { return static_cast<S>(a / n); }
  static S inverse(int n) {
    if constexpr (std::is_same_v<T, double>) return 1.0 / n;
    else return static_cast<S>(static_cast<float>(1.0 / n));
  }

 private:
  // Integer arithmetic is done unsigned and at least as wide as unsigned, so it wraps.
  template <typename U, bool = std::is_integral_v<U>>
  struct Wide {
    using type = U;
  };
  template <typename U>
  struct Wide<U, true> {
    using type = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, std::make_unsigned_t<U>>;
  };
  using W = typename Wide<T>::type;
};

template <typename Storage, double (*Decode)(Storage), Storage (*Encode)(double), bool kViaHalf>
struct NarrowRef {
  using S = Storage;
  static constexpr bool kFloating = true;
  static S round(double v) { return Encode(kViaHalf ? fakegpu::half_to_double(fakegpu::double_to_half(v)) : v); }
  static S from_int(long v) { return Encode(static_cast<double>(v)); }
  static double show(S v) { return Decode(v); }
  static S add(S a, S b) { return round(Decode(a) + Decode(b)); }
  static S mul(S a, S b) { return round(Decode(a) * Decode(b)); }
  static bool less(S a, S b) { return Decode(a) < Decode(b); }
  static S div(S a, int n) { return round(Decode(a) / n); }
  static S inverse(int n) { return round(static_cast<float>(1.0 / n)); }
};
using HalfRef = NarrowRef<uint16_t, fakegpu::half_to_double, fakegpu::double_to_half, false>;
using Bf16Ref = NarrowRef<uint16_t, fakegpu::bf16_to_double, fakegpu::double_to_bf16, false>;
using E4m3Ref = NarrowRef<uint8_t, fakegpu::e4m3_to_double, fakegpu::double_to_e4m3, true>;
using E5m2Ref = NarrowRef<uint8_t, fakegpu::e5m2_to_double, fakegpu::double_to_e5m2, true>;

// Values are small integers, so float sums are exact in any order and products stay small.
template <typename R>
typename R::S value(int rank, size_t i, ncclRedOp_t op) {
  if (op == ncclProd) return R::from_int((rank + i) % 3 == 0 ? 2 : 1);
  long v = static_cast<long>((rank * 31 + i * 7) % 53);
  if (std::is_signed_v<typename R::S> || R::kFloating) v -= 20;
  return R::from_int(v);
}

// Each rank's PreMulSum scalar.
template <typename R>
typename R::S premul_scalar(int rank) {
  return R::from_int(rank % 3 + 1);
}

// The reduction of element i over ranks 0..world-1, folded in rank order. op may be a
// PreMulSum operator (any value >= ncclNumOps).
template <typename R>
typename R::S reduced(ncclRedOp_t op, size_t i) {
  using S = typename R::S;
  auto contribution = [&](int r) {
    S x = value<R>(r, i, op);
    if (op == ncclAvg && R::kFloating) return R::mul(x, R::inverse(g_world));
    if (op >= ncclNumOps) return R::mul(x, premul_scalar<R>(r));
    return x;
  };
  S acc = contribution(0);
  for (int r = 1; r < g_world; ++r) {
    S x = contribution(r);
    switch (op) {
      case ncclProd: acc = R::mul(acc, x); break;
      case ncclMax: acc = R::less(acc, x) ? x : acc; break;
      case ncclMin: acc = R::less(x, acc) ? x : acc; break;
      default: acc = R::add(acc, x); break;
    }
  }
  if (op == ncclAvg && !R::kFloating) acc = R::div(acc, g_world);
  return acc;
}

// The call's name and its tag come apart so that nothing is built per element: with millions
// of elements, a string made for each comparison dominated the run (and timed out under ASan).
template <typename R>
void expect_equal(const typename R::S* got, size_t i, typename R::S want, const char* call,
                  const std::string& tag = {}) {
  if (std::memcmp(&got[i], &want, sizeof want) == 0) return;
  if (++g_failures <= 10)
    std::fprintf(stderr, "rank %d: %s%s%s: element %zu is %g, expected %g\n", g_rank, call, tag.empty() ? "" : " ",
                 tag.c_str(), i, R::show(got[i]), R::show(want));
}

// Device buffers of count * world elements, refilled before each call.
template <typename R>
struct Buffers {
  using S = typename R::S;
  S* send = nullptr;
  S* recv = nullptr;
  size_t elems;
  explicit Buffers(size_t count) : elems(count * g_world + 1) {
    cudaMalloc(reinterpret_cast<void**>(&send), elems * sizeof(S));
    cudaMalloc(reinterpret_cast<void**>(&recv), elems * sizeof(S));
  }
  ~Buffers() {
    cudaFree(send);
    cudaFree(recv);
  }
  void fill(ncclRedOp_t op, int rank) {
    for (size_t i = 0; i < elems; ++i) send[i] = value<R>(rank, i, op);
    std::memset(static_cast<void*>(recv), 0x7b, elems * sizeof(S));
  }
};

// A PreMulSum operator with this rank's scalar, held in host memory or in device memory.
template <typename R>
ncclRedOp_t make_premulsum(ncclComm_t comm, ncclDataType_t dt, bool on_device, typename R::S** device_scalar) {
  typename R::S scalar = premul_scalar<R>(g_rank);
  ncclRedOp_t op;
  if (on_device) {
    cudaMalloc(reinterpret_cast<void**>(device_scalar), sizeof scalar);
    cudaMemcpy(*device_scalar, &scalar, sizeof scalar, cudaMemcpyHostToDevice);
    CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, *device_scalar, dt, ncclScalarDevice, comm));
  } else {
    CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, dt, ncclScalarHostImmediate, comm));
  }
  return op;
}

template <typename R>
void sweep_reductions(ncclComm_t comm, ncclDataType_t dt, const char* tname, size_t count, cudaStream_t s) {
  Buffers<R> b(count);
  const int root = static_cast<int>(count % g_world);
  for (int op_index = 0; op_index < 7; ++op_index) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      // Ops 0-4 are the built-ins; 5 and 6 are PreMulSum with a host and a device scalar.
      typename R::S* device_scalar = nullptr;
      ncclRedOp_t op = op_index < 5 ? static_cast<ncclRedOp_t>(op_index)
                                    : make_premulsum<R>(comm, dt, op_index == 6, &device_scalar);
      std::string tag = std::string(tname) + " op " + std::to_string(op_index) + " count " + std::to_string(count) +
                        (in_place ? " in-place" : "");
      b.fill(op, g_rank);
      auto* out = in_place ? b.send : b.recv;
      CHECK_NCCL(ncclAllReduce(b.send, out, count, dt, op, comm, s));
      cudaStreamSynchronize(s);
      for (size_t i = 0; i < count; ++i) expect_equal<R>(out, i, reduced<R>(op, i), "AllReduce", tag);

      b.fill(op, g_rank);
      CHECK_NCCL(ncclReduce(b.send, out, count, dt, op, root, comm, s));
      cudaStreamSynchronize(s);
      if (g_rank == root)
        for (size_t i = 0; i < count; ++i) expect_equal<R>(out, i, reduced<R>(op, i), "Reduce", tag);

      // ReduceScatter in place receives into the rank's own slice of the send buffer.
      b.fill(op, g_rank);
      auto* rs_out = in_place ? b.send + g_rank * count : b.recv;
      CHECK_NCCL(ncclReduceScatter(b.send, rs_out, count, dt, op, comm, s));
      cudaStreamSynchronize(s);
      for (size_t i = 0; i < count; ++i)
        expect_equal<R>(rs_out, i, reduced<R>(op, g_rank * count + i), "ReduceScatter", tag);
      if (op >= ncclNumOps) CHECK_NCCL(ncclRedOpDestroy(op, comm));
      cudaFree(device_scalar);
    }
  }
}

template <typename R>
void sweep_data_movement(ncclComm_t comm, ncclDataType_t dt, const char* tname, size_t count, cudaStream_t s) {
  using T = typename R::S;
  Buffers<R> b(count);
  const int root = static_cast<int>((count + 1) % g_world);
  const ncclRedOp_t tag_op = ncclSum;  // selects value()'s pattern
  for (int in_place = 0; in_place < 2; ++in_place) {
    std::string tag = std::string(tname) + " count " + std::to_string(count) + (in_place ? " in-place" : "");

    b.fill(tag_op, g_rank);
    T* out = in_place ? b.send : b.recv;
    CHECK_NCCL(ncclBroadcast(b.send, out, count, dt, root, comm, s));
    cudaStreamSynchronize(s);
    for (size_t i = 0; i < count; ++i) expect_equal<R>(out, i, value<R>(root, i, tag_op), "Broadcast", tag);

    // AllGather in place sends from the rank's own slice of the receive buffer.
    b.fill(tag_op, g_rank);
    if (in_place) std::memcpy(b.recv + g_rank * count, b.send, count * sizeof(T));
    CHECK_NCCL(ncclAllGather(in_place ? b.recv + g_rank * count : b.send, b.recv, count, dt, comm, s));
    cudaStreamSynchronize(s);
    for (int j = 0; j < g_world; ++j)
      for (size_t i = 0; i < count; ++i) expect_equal<R>(b.recv, j * count + i, value<R>(j, i, tag_op), "AllGather", tag);

    b.fill(tag_op, g_rank);
    if (in_place && g_rank == root) std::memcpy(b.recv + g_rank * count, b.send, count * sizeof(T));
    const T* gather_src = in_place && g_rank == root ? b.recv + g_rank * count : b.send;
    CHECK_NCCL(ncclGather(gather_src, b.recv, count, dt, root, comm, s));
    cudaStreamSynchronize(s);
    if (g_rank == root)
      for (int j = 0; j < g_world; ++j)
        for (size_t i = 0; i < count; ++i) expect_equal<R>(b.recv, j * count + i, value<R>(j, i, tag_op), "Gather", tag);

    b.fill(tag_op, g_rank);
    T* scatter_dst = in_place && g_rank == root ? b.send + g_rank * count : b.recv;
    CHECK_NCCL(ncclScatter(b.send, scatter_dst, count, dt, root, comm, s));
    cudaStreamSynchronize(s);
    for (size_t i = 0; i < count; ++i)
      expect_equal<R>(scatter_dst, i, value<R>(root, g_rank * count + i, tag_op), "Scatter", tag);

    if (!in_place) {  // NCCL defines no in-place AlltoAll
      b.fill(tag_op, g_rank);
      CHECK_NCCL(ncclAlltoAll(b.send, b.recv, count, dt, comm, s));
      cudaStreamSynchronize(s);
      for (int j = 0; j < g_world; ++j)
        for (size_t i = 0; i < count; ++i)
          expect_equal<R>(b.recv, j * count + i, value<R>(j, g_rank * count + i, tag_op), "AlltoAll", tag);
    }
  }
}

template <typename R>
void sweep_type(ncclComm_t comm, ncclDataType_t dt, const char* tname, const std::vector<size_t>& counts,
                cudaStream_t s) {
  for (size_t count : counts) {
    sweep_reductions<R>(comm, dt, tname, count, s);
    sweep_data_movement<R>(comm, dt, tname, count, s);
  }
}

void point_to_point(ncclComm_t comm, cudaStream_t s) {
  const size_t n = 1031;
  using R = NativeRef<int32_t>;
  Buffers<R> b(n);
  auto check_from = [&](const int32_t* got, int peer, const char* what) {
    for (size_t i = 0; i < n; ++i) expect_equal<R>(got, i, value<R>(peer, i, ncclSum), what);
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
    for (size_t i = 0; i < n; ++i) expect_equal<R>(b.recv, j * n + i, value<R>(j, g_rank * n + i, ncclSum), "a2a p2p");

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

// Every data type: native ones at `native` counts, the 16- and 8-bit floats at `narrow` counts.
void sweep_every_type(ncclComm_t comm, const std::vector<size_t>& native, const std::vector<size_t>& narrow,
                      cudaStream_t s) {
  sweep_type<NativeRef<int8_t>>(comm, ncclInt8, "int8", native, s);
  sweep_type<NativeRef<uint8_t>>(comm, ncclUint8, "uint8", native, s);
  sweep_type<NativeRef<int32_t>>(comm, ncclInt32, "int32", native, s);
  sweep_type<NativeRef<uint32_t>>(comm, ncclUint32, "uint32", native, s);
  sweep_type<NativeRef<int64_t>>(comm, ncclInt64, "int64", native, s);
  sweep_type<NativeRef<uint64_t>>(comm, ncclUint64, "uint64", native, s);
  sweep_type<NativeRef<float>>(comm, ncclFloat32, "float32", native, s);
  sweep_type<NativeRef<double>>(comm, ncclFloat64, "float64", native, s);
  sweep_type<HalfRef>(comm, ncclFloat16, "float16", narrow, s);
  sweep_type<Bf16Ref>(comm, ncclBfloat16, "bfloat16", narrow, s);
  sweep_type<E4m3Ref>(comm, ncclFloat8e4m3, "float8e4m3", narrow, s);
  sweep_type<E5m2Ref>(comm, ncclFloat8e5m2, "float8e5m2", narrow, s);
}

// ncclGroupSimulateEnd runs nothing: the calls inside it must leave no trace, so an allreduce
// after it still matches across ranks and gives the right answer. It returns the modeled time:
// the calls of one communicator run one after another, so two allreduces take twice one.
float simulated_allreduces_us(int calls, const void* send, void* recv, ncclComm_t comm, cudaStream_t s) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < calls; ++i) CHECK_NCCL(ncclAllReduce(send, recv, 64, ncclFloat, ncclMax, comm, s));
  CHECK_NCCL(ncclGroupSimulateEnd(&info));
  return info.estimatedTime;
}

void simulate_then_run(ncclComm_t comm, cudaStream_t s) {
  using R = NativeRef<float>;
  Buffers<R> b(64);
  b.fill(ncclSum, g_rank);
  float one = simulated_allreduces_us(1, b.send, b.recv, comm, s);
  float two = simulated_allreduces_us(2, b.send, b.recv, comm, s);
  if (g_world > 1 && !(one > 0 && one < 1e6 && std::fabs(two - 2 * one) < 1e-3f * one)) {
    ++g_failures;
    std::fprintf(stderr, "rank %d: simulated one allreduce %g us, two %g us: expected 0 < one and two = 2 x one\n",
                 g_rank, one, two);
  }
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(b.send, b.recv, 64, ncclFloat, ncclMax, comm, s));
  if (g_world > 1) CHECK_NCCL(ncclSend(b.send, 64, ncclFloat, (g_rank + 1) % g_world, comm, s));
  CHECK_NCCL(ncclGroupSimulateEnd(&info));
  const auto* bytes = reinterpret_cast<const unsigned char*>(b.recv);
  for (size_t i = 0; i < 64 * sizeof(float); ++i)
    if (bytes[i] != 0x7b && ++g_failures <= 10)
      std::fprintf(stderr, "rank %d: the simulated allreduce wrote its receive buffer\n", g_rank);
  CHECK_NCCL(ncclAllReduce(b.send, b.recv, 64, ncclFloat, ncclSum, comm, s));
  cudaStreamSynchronize(s);
  for (size_t i = 0; i < 64; ++i) expect_equal<R>(b.recv, i, reduced<R>(ncclSum, i), "allreduce after simulate");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  g_rank = std::atoi(std::getenv("RANK"));
  g_world = std::atoi(std::getenv("WORLD_SIZE"));
  const bool big = argc > 2 && !std::strcmp(argv[2], "--big");
  const bool mismatch = argc > 2 && !std::strcmp(argv[2], "--mismatch");
  ncclUniqueId id;
  if (share_unique_id(argv[1], g_rank, &id) != 0) return 2;
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, g_world, id, g_rank));
  cudaStream_t s;
  cudaStreamCreate(&s);

  if (mismatch) {
    // Rank 0 reduces 10 elements, every other rank 11. The call returns at once (it is queued on
    // the stream); the failure arrives as the communicator's asynchronous error, naming who
    // called what.
    float* buf;
    cudaMalloc(reinterpret_cast<void**>(&buf), 16 * sizeof(float));
    ncclResult_t posted = ncclAllReduce(buf, buf, g_rank == 0 ? 10 : 11, ncclFloat, ncclSum, comm, s);
    cudaStreamSynchronize(s);
    ncclResult_t async = ncclSuccess;
    CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
    const char* msg = ncclGetLastError(comm);
    bool named = std::strstr(msg, "rank 0 called AllReduce(count=10") && std::strstr(msg, "called AllReduce(count=11");
    // Once failed, the communicator refuses further work with the same error.
    ncclResult_t after = ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, s);
    std::printf("rank %d: mismatch posted %d, async error %d, then %d, message names both calls: %s\n", g_rank,
                posted, async, after, named ? "yes" : "no");
    return posted == ncclSuccess && async == ncclInvalidUsage && after == ncclInvalidUsage && named ? 0 : 1;
  }

  sweep_every_type(comm, {0, 1, 7, 1000}, {0, 1, 7, 1000}, s);
  // With --big, 2^20 + 3 elements for every native type; the narrow floats (whose references
  // are slow to compute here) at a size that still spans several of the coordinator's chunks.
  if (big) sweep_every_type(comm, {(1u << 20) + 3}, {65539}, s);
  simulate_then_run(comm, s);
  point_to_point(comm, s);

  CHECK_NCCL(ncclCommDestroy(comm));
  if (g_failures) {
    std::fprintf(stderr, "rank %d: %ld wrong elements\n", g_rank, g_failures);
    return 1;
  }
  std::printf("rank %d/%d: sweep OK\n", g_rank, g_world);
  return 0;
}
