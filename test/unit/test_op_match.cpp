// The rules the ranks' calls of one operation must agree by, and a pending collective's
// bookkeeping as ranks join it.
#include <gtest/gtest.h>

#include "comm_state.h"
#include "op_match.h"
#include "reduce.h"

using namespace fakegpu;
using namespace fakegpu::coord;

namespace {

wire::Collective allreduce(int rank, uint64_t count) {
  wire::Collective c;
  c.rank = rank;
  c.coll = wire::CollType::kAllReduce;
  c.dtype = static_cast<uint8_t>(DataType::kFloat32);
  c.op = static_cast<uint8_t>(RedOp::kSum);
  c.count = count;
  return c;
}

}  // namespace

TEST(OpMatch, CallsAreDescribedAsTheyWereMade) {
  EXPECT_EQ(describe_call(allreduce(0, 4)), "AllReduce(count=4, float32, sum)");
  wire::Collective send = allreduce(0, 8);
  send.coll = wire::CollType::kSend;
  send.root = 3;
  EXPECT_EQ(describe_call(send), "Send(count=8, float32, peer=3)");
}

TEST(OpMatch, CollectiveMismatchesAreClassedAsTheFlightRecorderDoes) {
  const wire::Collective a = allreduce(0, 4);
  EXPECT_EQ(collective_mismatch(a, allreduce(1, 4)), nullptr) << "only the rank differs";
  wire::Collective b = allreduce(1, 4);
  b.coll = wire::CollType::kAllGather;
  EXPECT_STREQ(collective_mismatch(a, b), "COLLECTIVE_TYPE_MISMATCH");
  b = allreduce(1, 4);
  b.dtype = static_cast<uint8_t>(DataType::kInt32);
  EXPECT_STREQ(collective_mismatch(a, b), "COLLECTIVE_DTYPE_MISMATCH");
  EXPECT_STREQ(collective_mismatch(a, allreduce(1, 5)), "SIZE_OR_SYNTAX_MISMATCH");
  b = allreduce(1, 4);
  b.op = static_cast<uint8_t>(RedOp::kMax);
  EXPECT_STREQ(collective_mismatch(a, b), "SIZE_OR_SYNTAX_MISMATCH");
  b = allreduce(1, 4);
  b.flags = wire::kNoPayload;
  EXPECT_STREQ(collective_mismatch(a, b), "COLLECTIVE_STATE_MISMATCH");
}

TEST(OpMatch, ASendAndItsRecvMatchOnTypeCountAndPayload) {
  wire::Collective send = allreduce(0, 4), recv = allreduce(1, 4);
  send.coll = wire::CollType::kSend;
  recv.coll = wire::CollType::kRecv;
  EXPECT_EQ(p2p_mismatch(send, recv), nullptr);
  recv.count = 3;
  EXPECT_STREQ(p2p_mismatch(send, recv), "SIZE_OR_SYNTAX_MISMATCH");
  recv = send;
  recv.dtype = static_cast<uint8_t>(DataType::kFloat16);
  EXPECT_STREQ(p2p_mismatch(send, recv), "COLLECTIVE_DTYPE_MISMATCH");
  recv = send;
  recv.flags = wire::kNoPayload;
  EXPECT_STREQ(p2p_mismatch(send, recv), "COLLECTIVE_STATE_MISMATCH");
}

TEST(OpMatch, APendingCollectiveCompletesWithItsLastRank) {
  const auto now = std::chrono::steady_clock::now();
  PendingOp op;
  EXPECT_FALSE(op.opened());
  wire::Collective first = allreduce(2, 4);
  first.ready_us = 10;
  op.open(first, 3, now);
  ASSERT_TRUE(op.opened());
  EXPECT_FALSE(op.join(first, 7, now));
  EXPECT_TRUE(op.joined(2));
  EXPECT_FALSE(op.joined(0));
  wire::Collective late = allreduce(0, 4);
  late.ready_us = 25;
  late.track = 9;
  EXPECT_FALSE(op.join(late, 8, now));
  EXPECT_TRUE(op.join(allreduce(1, 4), 9, now));
  EXPECT_EQ(op.request_ids, (std::vector<uint64_t>{8, 9, 7}));
  EXPECT_EQ(describe_call(op.calls[0]), "AllReduce(count=4, float32, sum)");
  EXPECT_EQ(op.ready_us, 25) << "the operation starts when the last stream reaches it";
  EXPECT_EQ(op.readies, (std::vector<double>{25, -1, 10}));
  EXPECT_EQ(op.tracks[0], 9u);
}
