// The peer mailbox: ranks (threads here, processes in a job) reduce among themselves with the
// coordinator's arithmetic, agree on a modeled start, and notice calls that differ.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "peer_exchange.h"
#include "reduce.h"
#include "wire.h"

namespace fakegpu {
namespace {

using State = PeerExchange::State;

// Every rank's mapping of one new area, as the coordinator hands it out.
std::vector<std::unique_ptr<PeerExchange>> mailboxes(int nranks) {
  const int fd = PeerExchange::create(nranks);
  std::vector<std::unique_ptr<PeerExchange>> out;
  for (int r = 0; r < nranks; ++r) out.push_back(PeerExchange::map(dup(fd), nranks, PeerExchange::bytes_for(nranks)));
  close(fd);
  return out;
}

PeerCall allreduce_call(uint64_t seq, DataType dtype, RedOp op, uint64_t count) {
  PeerCall c;
  c.seq = seq;
  c.count = count;
  c.coll = static_cast<uint8_t>(wire::CollType::kAllReduce);
  c.dtype = static_cast<uint8_t>(dtype);
  c.op = static_cast<uint8_t>(op);
  return c;
}

State wait_decided(PeerExchange& m, uint64_t seq) {
  State s;
  while ((s = m.state(seq)) == State::kPending) sched_yield();
  return s;
}

struct Case {
  int nranks;
  DataType dtype;
  RedOp op;
  uint64_t count;
};

class PeerExchangeReduce : public ::testing::TestWithParam<Case> {};

// Each rank contributes distinct bytes; every rank gets exactly what reduce_contributions gives
// for the same inputs in rank order, over rounds that reuse both slot sets many times.
TEST_P(PeerExchangeReduce, EveryRankGetsTheCoordinatorsResult) {
  const Case c = GetParam();
  const size_t bytes = c.count * dtype_size(static_cast<int>(c.dtype));
  auto boxes = mailboxes(c.nranks);
  constexpr uint64_t kRounds = 50;
  std::vector<std::vector<std::vector<uint8_t>>> inputs(kRounds + 1);
  std::vector<std::vector<uint8_t>> expected(kRounds + 1);
  for (uint64_t seq = 1; seq <= kRounds; ++seq) {
    std::vector<const uint8_t*> ins;
    std::vector<uint64_t> scalars;
    for (int r = 0; r < c.nranks; ++r) {
      std::vector<uint8_t> in(bytes);
      for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>((seq * 31 + r * 7 + i * 3) % 61);
      inputs[seq].push_back(std::move(in));
    }
    for (int r = 0; r < c.nranks; ++r) {
      ins.push_back(inputs[seq][r].data());
      scalars.push_back(0x3c00 + r);  // half-sized scalars; read only by PreMulSum
    }
    expected[seq].resize(bytes);
    std::vector<uint8_t> scratch(bytes);
    reduce_contributions(c.dtype, c.op, ins.data(), scalars.data(), c.nranks, c.count, expected[seq].data(),
                         scratch.data());
  }
  std::vector<int> wrong(c.nranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.nranks; ++r)
    threads.emplace_back([&, r] {
      for (uint64_t seq = 1; seq <= kRounds; ++seq) {
        PeerCall call = allreduce_call(seq, c.dtype, c.op, c.count);
        call.scalar = 0x3c00 + r;
        boxes[r]->arrive(r, call, inputs[seq][r].data(), bytes);
        if (wait_decided(*boxes[r], seq) != State::kDone) {
          ++wrong[r];
          continue;
        }
        std::vector<uint8_t> got(bytes);
        boxes[r]->take(seq, got.data(), bytes);
        wrong[r] += got != expected[seq];
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < c.nranks; ++r) EXPECT_EQ(wrong[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    RanksTypesOps, PeerExchangeReduce,
    ::testing::Values(Case{2, DataType::kFloat32, RedOp::kSum, 1}, Case{3, DataType::kFloat32, RedOp::kAvg, 5},
                      Case{8, DataType::kFloat16, RedOp::kSum, 2048}, Case{8, DataType::kBfloat16, RedOp::kMax, 7},
                      Case{5, DataType::kInt8, RedOp::kAvg, 4096}, Case{4, DataType::kFloat16, RedOp::kPreMulSum, 9},
                      Case{16, DataType::kFloat64, RedOp::kProd, 512}, Case{6, DataType::kFloat8e4m3, RedOp::kMin, 33}));

PeerCall call_of(wire::CollType coll, uint64_t seq, uint64_t count, int root = -1) {
  PeerCall c = allreduce_call(seq, DataType::kInt32, RedOp::kSum, count);
  c.coll = static_cast<uint8_t>(coll);
  c.op = 0;
  c.root = root;
  return c;
}

// A Broadcast reads only the root's input; an AllGather hands every rank every slot in rank
// order; rounds of the three kinds alternate over the same slots.
TEST(PeerExchange, BroadcastAndAllGatherMoveTheRightSlots) {
  constexpr int kRanks = 5;
  auto boxes = mailboxes(kRanks);
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    const bool gather = seq % 2 == 0;
    const int root = static_cast<int>(seq % kRanks);
    std::vector<std::vector<int32_t>> in(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      in[r] = {r * 100 + int(seq), r * 100 + 50};
      if (gather)
        boxes[r]->arrive(r, call_of(wire::CollType::kAllGather, seq, 2), in[r].data(), 8);
      else
        boxes[r]->arrive(r, call_of(wire::CollType::kBroadcast, seq, 2, root), r == root ? in[r].data() : nullptr,
                         r == root ? 8 : 0);
    }
    for (int r = 0; r < kRanks; ++r) {
      SCOPED_TRACE("seq " + std::to_string(seq) + " rank " + std::to_string(r));
      ASSERT_EQ(boxes[r]->state(seq), State::kDone);
      std::vector<int32_t> got(gather ? 2 * kRanks : 2, -1);
      boxes[r]->take(seq, got.data(), got.size() * sizeof(int32_t));
      std::vector<int32_t> want;
      if (gather)
        for (int k = 0; k < kRanks; ++k) want.insert(want.end(), in[k].begin(), in[k].end());
      else
        want = in[root];
      EXPECT_EQ(got, want);
    }
  }
}

TEST(PeerExchange, ABroadcastWhoseRanksDisagreeOnTheRootFails) {
  auto boxes = mailboxes(3);
  const int32_t v[2] = {1, 2};
  for (int r = 0; r < 3; ++r) boxes[r]->arrive(r, call_of(wire::CollType::kBroadcast, 1, 2, r == 1 ? 2 : 0), v, 8);
  EXPECT_EQ(boxes[0]->state(1), State::kFailed);
}

TEST(PeerExchange, TheStartIsTheLatestReadyTimeOrClock) {
  auto boxes = mailboxes(3);
  const float one = 1;
  const double ready[] = {10, 40, 25};
  const double clock[] = {30, 30, 30};
  for (int r = 0; r < 3; ++r) {
    PeerCall call = allreduce_call(7, DataType::kFloat32, RedOp::kSum, 1);
    call.ready_us = ready[r];
    call.clock_us = clock[r];
    boxes[r]->arrive(r, call, &one, sizeof one);
  }
  float sum = 0;
  ASSERT_EQ(boxes[0]->state(7), State::kDone);
  EXPECT_EQ(boxes[0]->take(7, &sum, sizeof sum), 40);
  EXPECT_EQ(sum, 3);
  // The communicator's clock wins when every stream reached the call earlier.
  for (int r = 0; r < 3; ++r) {
    PeerCall call = allreduce_call(8, DataType::kFloat32, RedOp::kSum, 1);
    call.ready_us = 1;
    call.clock_us = 55.5;
    boxes[r]->arrive(r, call, &one, sizeof one);
  }
  EXPECT_EQ(boxes[2]->take(8, &sum, sizeof sum), 55.5);
}

TEST(PeerExchange, CallsThatDifferAreAMismatchForEveryRank) {
  auto boxes = mailboxes(4);
  const float data[2] = {1, 2};
  for (int r = 0; r < 4; ++r)
    boxes[r]->arrive(r, allreduce_call(3, DataType::kFloat32, RedOp::kSum, r == 2 ? 2 : 1), data,
                     (r == 2 ? 2 : 1) * sizeof(float));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(boxes[r]->state(3), State::kFailed) << "rank " << r;
  // The next round with the other slot set, then this one again, work as before.
  for (uint64_t seq : {4, 5}) {
    for (int r = 0; r < 4; ++r) boxes[r]->arrive(r, allreduce_call(seq, DataType::kFloat32, RedOp::kMax, 2), data, 8);
    float got[2] = {};
    ASSERT_EQ(boxes[1]->state(seq), State::kDone);
    boxes[1]->take(seq, got, sizeof got);
    EXPECT_EQ(got[1], 2);
  }
}

TEST(PeerExchange, ARoundARankGaveUpOnFailsForTheOthers) {
  auto boxes = mailboxes(3);
  const float one = 1;
  for (int r = 0; r < 2; ++r) boxes[r]->arrive(r, allreduce_call(5, DataType::kFloat32, RedOp::kSum, 1), &one, 4);
  boxes[0]->give_up(5);  // its call failed while it waited
  boxes[2]->arrive(2, allreduce_call(5, DataType::kFloat32, RedOp::kSum, 1), &one, 4);
  EXPECT_EQ(boxes[2]->state(5), State::kFailed) << "the last rank must not get a result rank 0 never saw";
  // The round's next use is unaffected.
  for (int r = 0; r < 3; ++r) boxes[r]->arrive(r, allreduce_call(7, DataType::kFloat32, RedOp::kSum, 1), &one, 4);
  EXPECT_EQ(boxes[1]->state(7), State::kDone);
  // The last rank's go-ahead is asked, and only its: a refusal fails the round.
  int asked = 0;
  for (int r = 0; r < 3; ++r)
    boxes[r]->arrive(r, allreduce_call(9, DataType::kFloat32, RedOp::kSum, 1), &one, 4, [&] { return ++asked, false; });
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(boxes[0]->state(9), State::kFailed);
}

TEST(PeerExchange, AResultOverwrittenBeforeItWasReadIsAnError) {
  auto boxes = mailboxes(2);
  const float one = 1;
  for (uint64_t seq : {10, 12})  // the same slot set twice, with nobody reading round 10
    for (int r = 0; r < 2; ++r) boxes[r]->arrive(r, allreduce_call(seq, DataType::kFloat32, RedOp::kSum, 1), &one, 4);
  float got = 0;
  EXPECT_EQ(boxes[0]->state(10), State::kPending);  // the set now holds round 12
  EXPECT_THROW(boxes[0]->take(10, &got, sizeof got), PeerExchangeError);
  EXPECT_EQ(boxes[0]->take(12, &got, sizeof got), 0);  // the clock: no stream time was given
  EXPECT_EQ(got, 2);
}

TEST(PeerExchange, ASleepingRankIsWokenByTheLastArrival) {
  auto boxes = mailboxes(2);
  const float one = 1;
  boxes[0]->arrive(0, allreduce_call(1, DataType::kFloat32, RedOp::kSum, 1), &one, 4);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    boxes[1]->arrive(1, allreduce_call(1, DataType::kFloat32, RedOp::kSum, 1), &one, 4);
  });
  const auto start = std::chrono::steady_clock::now();
  while (boxes[0]->state(1) == State::kPending) boxes[0]->sleep(1, std::chrono::seconds(30));
  const auto waited = std::chrono::steady_clock::now() - start;
  late.join();
  EXPECT_LT(waited, std::chrono::seconds(20)) << "slept through the wakeup until the timeout";
}

TEST(PeerExchange, BadSizesAreRefused) {
  EXPECT_THROW(PeerExchange::create(1), PeerExchangeError);
  EXPECT_THROW(PeerExchange::create(PeerExchange::kMaxRanks + 1), PeerExchangeError);
  const int fd = PeerExchange::create(4);
  EXPECT_THROW(PeerExchange::map(dup(fd), 5, PeerExchange::bytes_for(5)), PeerExchangeError);
  EXPECT_THROW(PeerExchange::map(dup(fd), 4, PeerExchange::bytes_for(4) + 1), PeerExchangeError);
  auto box = PeerExchange::map(fd, 4, PeerExchange::bytes_for(4));
  std::vector<uint8_t> big(PeerExchange::kSlotBytes + 1);
  EXPECT_THROW(box->arrive(0, allreduce_call(1, DataType::kUint8, RedOp::kSum, big.size()), big.data(), big.size()),
               PeerExchangeError);
  EXPECT_THROW(box->arrive(4, allreduce_call(1, DataType::kUint8, RedOp::kSum, 1), big.data(), 1), PeerExchangeError);
}

}  // namespace
}  // namespace fakegpu
