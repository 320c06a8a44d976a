#include "reduce.h"

#include <algorithm>
#include <type_traits>

namespace fakegpu {
namespace {

// Unsigned arithmetic so that signed overflow wraps as on the GPU instead of being UB.
template <typename T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Promote narrow types to unsigned int so the product itself cannot overflow a signed int.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <typename T>
void reduce_typed(RedOp op, T* acc, const T* src, size_t n) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      for (size_t i = 0; i < n; ++i) acc[i] = wrap_add(acc[i], src[i]);
      break;
    case RedOp::kProd:
      for (size_t i = 0; i < n; ++i) acc[i] = wrap_mul(acc[i], src[i]);
      break;
    case RedOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], src[i]);
      break;
    case RedOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], src[i]);
      break;
  }
}

template <typename T>
void divide_typed(T* acc, size_t n, int nranks) {
  for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] / static_cast<T>(nranks));
}

template <typename Fn>
void dispatch_native(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kInt8: fn(int8_t{}); break;
    case DataType::kUint8: fn(uint8_t{}); break;
    case DataType::kInt32: fn(int32_t{}); break;
    case DataType::kUint32: fn(uint32_t{}); break;
    case DataType::kInt64: fn(int64_t{}); break;
    case DataType::kUint64: fn(uint64_t{}); break;
    case DataType::kFloat32: fn(float{}); break;
    case DataType::kFloat64: fn(double{}); break;
    default: break;
  }
}

bool is_native(DataType dtype) {
  return dtype != DataType::kFloat16 && dtype != DataType::kBfloat16 && dtype != DataType::kFloat8e4m3 &&
         dtype != DataType::kFloat8e5m2;
}

}  // namespace

size_t dtype_size(int dtype) {
  static const size_t sizes[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return dtype >= 0 && dtype < kNumDataTypes ? sizes[dtype] : 0;
}

const char* dtype_name(int dtype) {
  static const char* names[kNumDataTypes] = {"int8",    "uint8",   "int32",    "uint32",      "int64",      "uint64",
                                             "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return dtype >= 0 && dtype < kNumDataTypes ? names[dtype] : "invalid";
}

const char* redop_name(int op) {
  static const char* names[kNumRedOps] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < kNumRedOps ? names[op] : "invalid";
}

bool reduction_supported(DataType dtype, RedOp op) {
  return is_native(dtype) && static_cast<int>(op) < kNumRedOps;
}

void reduce_into(DataType dtype, RedOp op, void* acc, const void* src, size_t count) {
  dispatch_native(dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_typed(op, static_cast<T*>(acc), static_cast<const T*>(src), count);
  });
}

void finish_reduction(DataType dtype, RedOp op, void* acc, size_t count, int nranks) {
  if (op != RedOp::kAvg) return;
  dispatch_native(dtype, [&](auto tag) { divide_typed(static_cast<decltype(tag)*>(acc), count, nranks); });
}

}  // namespace fakegpu
