// Where the coordinator's numbers meet NCCL's enums. Error codes, data types and reduction
// operators cross the wire as plain numbers equal to NCCL's; the asserts stop the build when
// the two drift apart. An error code from the coordinator becomes an ncclResult_t only through
// error_from_reply, which refuses numbers NCCL does not define.
#pragma once

#include <string>

#include "endpoint.h"
#include "errors.h"
#include "nccl.h"
#include "reduce.h"
#include "wire.h"

namespace fakegpu::stub {

template <typename Ours, typename Nccls>
constexpr bool same_number(Ours ours, Nccls nccls) {
  return static_cast<long>(ours) == static_cast<long>(nccls);
}

static_assert(same_number(wire::Status::kSuccess, ncclSuccess) &&
                  same_number(wire::Status::kUnhandledCudaError, ncclUnhandledCudaError) &&
                  same_number(wire::Status::kSystemError, ncclSystemError) &&
                  same_number(wire::Status::kInternalError, ncclInternalError) &&
                  same_number(wire::Status::kInvalidArgument, ncclInvalidArgument) &&
                  same_number(wire::Status::kInvalidUsage, ncclInvalidUsage) &&
                  same_number(wire::Status::kRemoteError, ncclRemoteError) &&
                  same_number(wire::Status::kInProgress, ncclInProgress) &&
                  same_number(static_cast<int>(wire::Status::kInProgress) + 1, ncclNumResults),
              "wire::Status must be numbered exactly as ncclResult_t");

static_assert(same_number(DataType::kInt8, ncclInt8) && same_number(DataType::kUint8, ncclUint8) &&
                  same_number(DataType::kInt32, ncclInt32) && same_number(DataType::kUint32, ncclUint32) &&
                  same_number(DataType::kInt64, ncclInt64) && same_number(DataType::kUint64, ncclUint64) &&
                  same_number(DataType::kFloat16, ncclFloat16) && same_number(DataType::kFloat32, ncclFloat32) &&
                  same_number(DataType::kFloat64, ncclFloat64) && same_number(DataType::kBfloat16, ncclBfloat16) &&
                  same_number(DataType::kFloat8e4m3, ncclFloat8e4m3) &&
                  same_number(DataType::kFloat8e5m2, ncclFloat8e5m2) && same_number(kNumDataTypes, ncclNumTypes),
              "DataType must be numbered exactly as ncclDataType_t");

// Every ncclRedOpCreatePreMulSum operator travels as kPreMulSum, the first number past NCCL's
// built-in operators.
static_assert(same_number(RedOp::kSum, ncclSum) && same_number(RedOp::kProd, ncclProd) &&
                  same_number(RedOp::kMax, ncclMax) && same_number(RedOp::kMin, ncclMin) &&
                  same_number(RedOp::kAvg, ncclAvg) && same_number(RedOp::kPreMulSum, ncclNumOps) &&
                  same_number(kNumRedOps, ncclNumOps + 1),
              "RedOp must be numbered as ncclRedOp_t, with kPreMulSum right after NCCL's own operators");

static_assert(kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES && sizeof(ncclUniqueId) == kUniqueIdBytes,
              "fakegpu's unique id layout must fill ncclUniqueId exactly");

// The error an ErrorReply stands for. A code that is no NCCL error (a success, or a number from
// a coordinator of another build) is reported as an internal error saying so, never cast.
inline NcclError error_from_reply(const wire::ErrorReply& reply) {
  if (reply.code > ncclSuccess && reply.code < ncclNumResults)
    return NcclError(static_cast<ncclResult_t>(reply.code), reply.message);
  return NcclError(ncclInternalError, "the fakegpu coordinator sent unknown error code " + std::to_string(reply.code) +
                                          " with the message: " + reply.message);
}

}  // namespace fakegpu::stub
