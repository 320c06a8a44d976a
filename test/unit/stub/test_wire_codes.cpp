// The stub's reading of the coordinator's error codes, compiled against fakegpu's nccl.h as the
// stub is (the asserts in wire_codes.h are checked by compiling this file too).
#include <gtest/gtest.h>

#include <string>

#include "wire_codes.h"

using namespace fakegpu;
using namespace fakegpu::stub;

TEST(StubWireCodes, NcclErrorCodesPassThrough) {
  for (ncclResult_t code : {ncclUnhandledCudaError, ncclSystemError, ncclInternalError, ncclInvalidArgument,
                            ncclInvalidUsage, ncclRemoteError, ncclInProgress}) {
    NcclError e = error_from_reply(wire::ErrorReply{static_cast<int32_t>(code), "rank 3 never arrived"});
    EXPECT_EQ(e.code(), code);
    EXPECT_STREQ(e.what(), "rank 3 never arrived");
  }
}

// A number outside ncclResult_t must not be cast into it; a success is no error either.
TEST(StubWireCodes, UnknownCodesBecomeInternalErrors) {
  for (int32_t code : {0, 8, -1, 1000}) {
    NcclError e = error_from_reply(wire::ErrorReply{code, "whatever it meant"});
    EXPECT_EQ(e.code(), ncclInternalError) << code;
    EXPECT_EQ(std::string(e.what()), "the fakegpu coordinator sent unknown error code " + std::to_string(code) +
                                         " with the message: whatever it meant");
  }
}
