// The job's modeled timeline follows the program: an operation starts when the last of its
// ranks' streams reaches it, and the ranks' activity logs become step figures and trace tracks.
#include "job_fixture.h"

namespace fakegpu::coord::testing {
namespace {

class JobTimelineTest : public JobTest {
 protected:
  // Each rank posts an all-reduce that its stream reached at ready[r]; returns the replies.
  std::vector<CollectiveDone> allreduce_at(uint64_t comm, uint64_t seq, const std::vector<double>& ready) {
    for (size_t r = 0; r < ready.size(); ++r) {
      Collective c = allreduce(comm, static_cast<int>(r), seq, 1024);
      c.flags = kNoPayload;
      c.ready_us = ready[r];
      c.track = 100 + r;
      post(ClientId(r + 1), c);
    }
    std::vector<CollectiveDone> done;
    for (size_t r = 0; r < ready.size(); ++r) {
      auto frames = out.take(ClientId(r + 1));
      EXPECT_EQ(frames.size(), 1u);
      EXPECT_EQ(frames.at(0).type, MsgType::kCollectiveDone);
      done.push_back(decode_fields<CollectiveDone>(frames.at(0).fields.data(), frames.at(0).fields.size()));
    }
    return done;
  }
};

TEST_F(JobTimelineTest, AnOperationStartsWhenItsLastRankIsReady) {
  for (int r = 0; r < 4; ++r) connect(ClientId(r + 1), r);
  uint64_t comm = init_comm(4);
  auto first = allreduce_at(comm, 0, {0, 100, 50, 10});
  for (const auto& d : first) {
    EXPECT_DOUBLE_EQ(d.start_us, 100) << "rank 1 reached the call last, at 100 us";
    EXPECT_GT(d.modeled_us, 0);
  }
  const double end = first[0].start_us + first[0].modeled_us;
  // Ranks that claim to be ready earlier still wait for the communicator's previous call.
  auto second = allreduce_at(comm, 1, {0, 0, 0, 0});
  for (const auto& d : second) EXPECT_DOUBLE_EQ(d.start_us, end);
  // A rank without a modeled clock (-1) leaves the others to decide.
  auto third = allreduce_at(comm, 2, {-1, 5000, -1, -1});
  for (const auto& d : third) EXPECT_DOUBLE_EQ(d.start_us, 5000);
}

TEST_F(JobTimelineTest, ActivityBecomesStepFiguresAndTraceTracks) {
  for (int r = 0; r < 2; ++r) connect(ClientId(r + 1), r);
  uint64_t comm = init_comm(2);
  allreduce_at(comm, 0, {40, 40});
  // Rank 0: two steps of 100 us; rank 1's second step is slower (150 us).
  for (int r = 0; r < 2; ++r) {
    RankActivity a;
    const double second_end = r == 0 ? 200 : 250;
    a.slices = {{7, 0, 40, 3, ActivityKind::kKernel},  {100u + r, 40, 90, 1, ActivityKind::kCollective},
                {7, 100, 100, 1, ActivityKind::kStepEnd}, {7, 100, second_end - 10, 5, ActivityKind::kKernel},
                {7, second_end, second_end, 1, ActivityKind::kStepEnd}};
    post(ClientId(r + 1), a);
    EXPECT_TRUE(out.take(ClientId(r + 1)).empty()) << "RankActivity has no reply";
  }
  nlohmann::json steps = job.report()["steps"];
  ASSERT_TRUE(steps.is_object()) << job.report().dump();
  EXPECT_EQ(steps["marked_by"], "optimizer steps");
  EXPECT_EQ(steps["count"], 2);
  EXPECT_DOUBLE_EQ(steps["per_step"][0]["time_us"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(steps["per_step"][0]["compute_us"].get<double>(), 40);
  EXPECT_DOUBLE_EQ(steps["per_step"][0]["exposed_comm_us"].get<double>(), 50);
  EXPECT_EQ(steps["per_step"][1]["slowest_rank"], 1);
  EXPECT_DOUBLE_EQ(steps["per_step"][1]["time_us"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(steps["median_time_us"].get<double>(), 125);
  EXPECT_DOUBLE_EQ(steps["ranks"][1]["mean"]["compute_us"].get<double>(), (40 + 140) / 2.0);

  // The trace: per rank a track for the compute stream (7) and one for the NCCL stream
  // (100 + rank), kernels on the first, the all-reduce on the second, and the step marks.
  nlohmann::json events = job.trace()["traceEvents"];
  std::map<std::pair<int, std::string>, int> tid_of_kind;
  int marks = 0;
  for (const auto& e : events) {
    if (e["ph"] == "i") ++marks;
    if (e["ph"] != "X") continue;
    const int tid = e["tid"].get<int>();
    tid_of_kind[{tid / 1000, e["cat"].get<std::string>().substr(0, 4)}] = tid;
  }
  EXPECT_EQ(marks, 4);
  for (int r = 0; r < 2; ++r) {
    const std::pair<int, std::string> compute{r, "comp"}, nccl{r, "comm"};
    ASSERT_TRUE(tid_of_kind.count(compute) && tid_of_kind.count(nccl)) << events.dump();
    EXPECT_NE(tid_of_kind[compute], tid_of_kind[nccl]) << "two streams, two tracks";
  }
}

}  // namespace
}  // namespace fakegpu::coord::testing
