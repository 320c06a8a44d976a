// Element types and reduction operators, numbered exactly as ncclDataType_t / ncclRedOp_t.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fakegpu {

enum class DataType : uint8_t {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
};
constexpr int kNumDataTypes = 12;

enum class RedOp : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr int kNumRedOps = 5;

// 0 for a value that is not a valid data type.
size_t dtype_size(int dtype);
const char* dtype_name(int dtype);
const char* redop_name(int op);

// Whether reduce_into / finish_reduction handle this pair yet.
bool reduction_supported(DataType dtype, RedOp op);

// acc[i] = acc[i] (op) src[i] for count elements. Integer arithmetic wraps.
void reduce_into(DataType dtype, RedOp op, void* acc, const void* src, size_t count);
// Applies what must happen once all nranks contributions are in (avg divides by nranks).
void finish_reduction(DataType dtype, RedOp op, void* acc, size_t count, int nranks);

}  // namespace fakegpu
