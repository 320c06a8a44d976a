#include "reduce.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "small_float.h"

namespace fakegpu {
namespace {

// Native types compute in themselves; integer arithmetic goes through unsigned so it wraps as
// on the GPU instead of being undefined.
template <typename T>
struct Native {
  using Storage = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
  static T add(T a, T b) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wide(a) + wide(b));
    else return a + b;
  }
  static T mul(T a, T b) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wide(a) * wide(b));
    else return a * b;
  }
  template <typename U = T>
  static auto wide(U v) {
    using Unsigned = std::make_unsigned_t<U>;
    using Wide = std::conditional_t<(sizeof(Unsigned) < sizeof(unsigned)), unsigned, Unsigned>;
    return static_cast<Wide>(static_cast<Unsigned>(v));
  }
};

// Half and bfloat16: compute in float, round back to the type once per operation (exact: see
// small_float.h).
template <float (*Decode)(uint16_t), uint16_t (*Encode)(float)>
struct Narrow {
  using Storage = uint16_t;
  static float load(uint16_t v) { return Decode(v); }
  static uint16_t store(float v) { return Encode(v); }
  static float add(float a, float b) { return a + b; }
  static float mul(float a, float b) { return a * b; }
};
using Half = Narrow<half_to_float, float_to_half>;
using Bf16 = Narrow<bf16_to_float, float_to_bf16>;

// 8-bit floats compute in half: the result is rounded to half, then to the 8-bit type.
template <double (*Decode)(uint8_t), uint8_t (*Encode)(double)>
struct Fp8 {
  using Storage = uint8_t;
  static double load(uint8_t v) { return Decode(v); }
  static uint8_t store(double v) { return Encode(half_to_double(double_to_half(v))); }
  static double add(double a, double b) { return a + b; }
  static double mul(double a, double b) { return a * b; }
};
using E4m3 = Fp8<e4m3_to_double, double_to_e4m3>;
using E5m2 = Fp8<e5m2_to_double, double_to_e5m2>;

template <typename Fn>
void dispatch(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kInt8: fn(Native<int8_t>{}); break;
    case DataType::kUint8: fn(Native<uint8_t>{}); break;
    case DataType::kInt32: fn(Native<int32_t>{}); break;
    case DataType::kUint32: fn(Native<uint32_t>{}); break;
    case DataType::kInt64: fn(Native<int64_t>{}); break;
    case DataType::kUint64: fn(Native<uint64_t>{}); break;
    case DataType::kFloat16: fn(Half{}); break;
    case DataType::kFloat32: fn(Native<float>{}); break;
    case DataType::kFloat64: fn(Native<double>{}); break;
    case DataType::kBfloat16: fn(Bf16{}); break;
    case DataType::kFloat8e4m3: fn(E4m3{}); break;
    case DataType::kFloat8e5m2: fn(E5m2{}); break;
  }
}

// Element access through memcpy: buffers need not be aligned to their element type (data that
// came over the socket sits right after the message fields), and memcpy of one element
// compiles to a plain load or store.
template <typename S>
S get(const void* base, size_t i) {
  S v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + i * sizeof(S), sizeof(S));
  return v;
}
template <typename S>
void put(void* base, size_t i, S v) {
  std::memcpy(static_cast<uint8_t*>(base) + i * sizeof(S), &v, sizeof(S));
}

template <typename A, typename Op>
void elementwise(void* acc, const void* src, size_t n, Op op) {
  using S = typename A::Storage;
  for (size_t i = 0; i < n; ++i) put<S>(acc, i, A::store(op(A::load(get<S>(acc, i)), A::load(get<S>(src, i)))));
}

}  // namespace

size_t dtype_size(int dtype) {
  static const size_t sizes[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return dtype >= 0 && dtype < kNumDataTypes ? sizes[dtype] : 0;
}

const char* dtype_name(int dtype) {
  static const char* names[kNumDataTypes] = {"int8",    "uint8",   "int32",   "uint32",     "int64",     "uint64",
                                             "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return dtype >= 0 && dtype < kNumDataTypes ? names[dtype] : "invalid";
}

const char* redop_name(int op) {
  static const char* names[kNumRedOps] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return op >= 0 && op < kNumRedOps ? names[op] : "invalid";
}

bool is_floating(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kFloat32 || dtype == DataType::kFloat64 ||
         dtype == DataType::kBfloat16 || dtype == DataType::kFloat8e4m3 || dtype == DataType::kFloat8e5m2;
}

ReductionPlan plan_reduction(DataType dtype, RedOp op) {
  switch (op) {
    case RedOp::kAvg: return is_floating(dtype) ? ReductionPlan{RedOp::kSum, true, false} : ReductionPlan{RedOp::kSum, false, true};
    case RedOp::kPreMulSum: return {RedOp::kSum, true, false};
    default: return {op, false, false};
  }
}

uint64_t average_scalar(DataType dtype, int nranks) {
  // NCCL computes 1/n in double and converts it to the type through float (through half for fp8).
  const double inv = static_cast<float>(1.0 / nranks);
  uint64_t bits = 0;
  switch (dtype) {
    case DataType::kFloat32: {
      float f = static_cast<float>(inv);
      std::memcpy(&bits, &f, sizeof f);
      break;
    }
    case DataType::kFloat64: {
      double d = 1.0 / nranks;
      std::memcpy(&bits, &d, sizeof d);
      break;
    }
    case DataType::kBfloat16: bits = double_to_bf16(inv); break;
    case DataType::kFloat8e4m3: bits = double_to_e4m3(half_to_double(double_to_half(inv))); break;
    case DataType::kFloat8e5m2: bits = double_to_e5m2(half_to_double(double_to_half(inv))); break;
    default: bits = double_to_half(inv); break;
  }
  return bits;
}

void premultiply(DataType dtype, void* data, size_t count, uint64_t scalar) {
  dispatch(dtype, [&](auto arith) {
    using A = decltype(arith);
    typename A::Storage s;
    std::memcpy(&s, &scalar, sizeof s);
    using S = typename A::Storage;
    const auto factor = A::load(s);
    for (size_t i = 0; i < count; ++i) put<S>(data, i, A::store(A::mul(A::load(get<S>(data, i)), factor)));
  });
}

void reduce_into(DataType dtype, RedOp fold, void* acc, const void* src, size_t count) {
  dispatch(dtype, [&](auto arith) {
    using A = decltype(arith);
    switch (fold) {
      case RedOp::kProd: elementwise<A>(acc, src, count, [](auto a, auto b) { return A::mul(a, b); }); break;
      case RedOp::kMax: elementwise<A>(acc, src, count, [](auto a, auto b) { return std::max(a, b); }); break;
      case RedOp::kMin: elementwise<A>(acc, src, count, [](auto a, auto b) { return std::min(a, b); }); break;
      default: elementwise<A>(acc, src, count, [](auto a, auto b) { return A::add(a, b); }); break;
    }
  });
}

void post_divide(DataType dtype, void* acc, size_t count, int nranks) {
  dispatch(dtype, [&](auto arith) {
    using A = decltype(arith);
    using S = typename A::Storage;
    using Value = decltype(A::load(S{}));
    // Integers divide by n as an int (an int8 cannot hold n = 128); floats divide in their type.
    using Divisor = std::conditional_t<std::is_integral_v<Value>, int, Value>;
    for (size_t i = 0; i < count; ++i) put<S>(acc, i, A::store(A::load(get<S>(acc, i)) / static_cast<Divisor>(nranks)));
  });
}

void reduce_contributions(DataType dtype, RedOp op, const uint8_t* const* ins, const uint64_t* scalars, int n,
                          size_t count, uint8_t* out, uint8_t* scratch) {
  const ReductionPlan plan = plan_reduction(dtype, op);
  const size_t bytes = count * dtype_size(static_cast<int>(dtype));
  const uint64_t avg = plan.premultiply && op == RedOp::kAvg ? average_scalar(dtype, n) : 0;
  auto scalar_of = [&](int r) { return op == RedOp::kAvg ? avg : scalars[r]; };
  std::memcpy(out, ins[0], bytes);
  if (plan.premultiply) premultiply(dtype, out, count, scalar_of(0));
  for (int r = 1; r < n; ++r) {
    const uint8_t* src = ins[r];
    if (plan.premultiply) {
      std::memcpy(scratch, src, bytes);  // never scale the contribution itself
      premultiply(dtype, scratch, count, scalar_of(r));
      src = scratch;
    }
    reduce_into(dtype, plan.fold, out, src, count);
  }
  if (plan.post_divide) post_divide(dtype, out, count, n);
}

}  // namespace fakegpu
