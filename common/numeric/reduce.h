// Element types and reduction operators, numbered exactly as ncclDataType_t / ncclRedOp_t
// (libnccl_stub/wire_codes.h asserts it), and the reductions themselves, with NCCL's arithmetic:
// - integers wrap;
// - half and bfloat16 round to the type after every operation; the 8-bit floats compute in
//   half and round to the 8-bit type (saturating), as NCCL's kernels do;
// - avg of a floating type multiplies each contribution by 1/n (in the type) and sums; avg of an
//   integer type sums and divides by n. PreMulSum multiplies each rank's contribution by that
//   rank's scalar, then sums.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fakegpu {

enum class DataType : uint8_t {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
};
constexpr int kNumDataTypes = 12;

// kPreMulSum is fakegpu's wire code for any ncclRedOpCreatePreMulSum operator.
enum class RedOp : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kPreMulSum = 5 };
constexpr int kNumRedOps = 6;

// 0 for a value that is not a valid data type.
size_t dtype_size(int dtype);
const char* dtype_name(int dtype);
const char* redop_name(int op);
bool is_floating(DataType dtype);

// How one reduction is carried out: each contribution is optionally scaled, the scaled
// contributions are folded with `fold`, and the result is optionally divided by n.
struct ReductionPlan {
  RedOp fold = RedOp::kSum;
  bool premultiply = false;
  bool post_divide = false;
};
ReductionPlan plan_reduction(DataType dtype, RedOp op);

// The scalar 1/n in the type, as raw little-endian bytes, for avg of a floating type.
uint64_t average_scalar(DataType dtype, int nranks);
// data[i] *= scalar, where scalar holds a value of the type as raw little-endian bytes.
void premultiply(DataType dtype, void* data, size_t count, uint64_t scalar);
// acc[i] = acc[i] (fold) src[i].
void reduce_into(DataType dtype, RedOp fold, void* acc, const void* src, size_t count);
// acc[i] /= nranks (integer division for integer types).
void post_divide(DataType dtype, void* acc, size_t count, int nranks);

// out = the n contributions ins[0..n) of `count` elements reduced in rank order (0, 1, 2, ...),
// each first scaled when the plan premultiplies (by 1/n for avg, by scalars[r] for PreMulSum;
// scalars may be null otherwise), the sum divided by n when the plan post-divides. The one
// definition the coordinator and ranks exchanging among themselves share, so a result is the
// same bits whichever path it took. scratch holds `count` elements; out overlaps no input.
void reduce_contributions(DataType dtype, RedOp op, const uint8_t* const* ins, const uint64_t* scalars, int n,
                          size_t count, uint8_t* out, uint8_t* scratch);

}  // namespace fakegpu
