// The job's modeled timeline follows the program: an operation starts when the last of its
// ranks' streams reaches it, and the ranks' activity logs become step figures and trace tracks.
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "job_fixture.h"
#include "op_facts.h"

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
  // Each rank's modeled wait is how long its stream waited for the last one; each took part in 4 KiB.
  nlohmann::json ranks = job.report()["ranks"];
  const double waited[] = {100, 0, 50, 90};
  for (int r = 0; r < 4; ++r) {
    EXPECT_DOUBLE_EQ(ranks[r]["modeled_wait_us"].get<double>(), waited[r]) << ranks.dump();
    EXPECT_EQ(ranks[r]["bytes"], 4096);
  }
  const double end = first[0].start_us + first[0].modeled_us;
  // Ranks that claim to be ready earlier still wait for the communicator's previous call.
  auto second = allreduce_at(comm, 1, {0, 0, 0, 0});
  for (const auto& d : second) EXPECT_DOUBLE_EQ(d.start_us, end);
  // A rank without a modeled clock (-1) leaves the others to decide.
  auto third = allreduce_at(comm, 2, {-1, 5000, -1, -1});
  for (const auto& d : third) EXPECT_DOUBLE_EQ(d.start_us, 5000);
}

TEST_F(JobTimelineTest, AGroupedRingOfSendsRunsSideBySide) {
  for (int r = 0; r < 4; ++r) connect(ClientId(r + 1), r);
  uint64_t comm = init_comm(4);
  auto post_p2p = [&](int from, int to, uint64_t seq, double ready) {
    for (CollType kind : {CollType::kSend, CollType::kRecv}) {
      const int me = kind == CollType::kSend ? from : to;
      Collective c = allreduce(comm, me, seq, 1 << 20);
      c.coll = kind;
      c.root = kind == CollType::kSend ? to : from;
      c.flags = kNoPayload;
      c.ready_us = ready;
      post(ClientId(me + 1), c);
    }
  };
  auto replies = [&](int rank) {
    std::vector<CollectiveDone> done;
    for (const auto& f : out.take(ClientId(rank + 1))) {
      EXPECT_EQ(f.type, MsgType::kCollectiveDone) << error_text(f);
      done.push_back(decode_fields<CollectiveDone>(f.fields.data(), f.fields.size()));
    }
    return done;
  };
  // Each send alone first: within node n0 (0 -> 1, NVLink) and across the network (1 -> 2).
  post_p2p(0, 1, 1, 0);
  const double inside = replies(0).at(0).modeled_us;
  replies(1);
  post_p2p(1, 2, 1, 0);
  const double across = replies(1).at(0).modeled_us;
  replies(2);
  // Then a ring, each rank sending to the next and receiving from the previous, all ready at
  // 1000 us, as a grouped exchange posts them. No two sends share a link (the two that cross
  // nodes go opposite ways), so each starts at once and takes as long as it did alone.
  for (int r = 0; r < 4; ++r) post_p2p(r, (r + 1) % 4, 2, 1000);
  for (int r = 0; r < 4; ++r) {
    const auto done = replies(r);
    ASSERT_EQ(done.size(), 2u) << "rank " << r << ": its send and its receive";
    for (const auto& d : done) {
      EXPECT_DOUBLE_EQ(d.start_us, 1000) << "rank " << r;
      EXPECT_TRUE(std::abs(d.modeled_us - inside) < 0.01 * inside || std::abs(d.modeled_us - across) < 0.01 * across)
          << d.modeled_us << " is neither a send inside a node (" << inside << ") nor across (" << across << ")";
    }
  }
  // A collective after the exchange waits for all of it.
  auto after = allreduce_at(comm, 0, {0, 0, 0, 0});
  EXPECT_GT(after[0].start_us, 10);
}

TEST_F(JobTimelineTest, SlicesThatOverlapPartlyGoToAnotherLaneOfTheirTrack) {
  for (int r = 0; r < 4; ++r) connect(ClientId(r + 1), r);
  uint64_t comm = init_comm(4);
  // A ring whose ranks get there 10 us apart: rank 1 receives from rank 0 over NVLink from 10 us
  // and sends to rank 2 across the network from 20 us, on one stream, so the two overlap partly.
  for (int r = 0; r < 4; ++r)
    for (CollType kind : {CollType::kSend, CollType::kRecv}) {
      Collective c = allreduce(comm, r, 0, 1 << 20);
      c.coll = kind;
      c.root = kind == CollType::kSend ? (r + 1) % 4 : (r + 3) % 4;
      c.flags = kNoPayload;
      c.ready_us = 10.0 * r;
      c.track = 7;
      post(ClientId(r + 1), c);
    }
  const nlohmann::json events = job.trace()["traceEvents"];
  std::map<int, std::vector<std::pair<double, double>>> rank1;  // tid -> slices
  bool named = false;
  for (const auto& e : events) {
    if (e["ph"] == "M" && e["name"] == "thread_name" &&
        e["args"]["name"].get<std::string>().find("(overlapping 1)") != std::string::npos)
      named = true;
    if (e["ph"] == "X" && e["tid"].get<int>() / 1000 == 1)
      rank1[e["tid"]].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_EQ(rank1.size(), 2u) << "the Send moved to a second lane";
  EXPECT_TRUE(named);
  for (auto& [tid, slices] : rank1) EXPECT_EQ(slices.size(), 1u) << tid;
}

TEST_F(JobTimelineTest, SendsOfOneSizeGetARowPerPath) {
  for (int r = 0; r < 4; ++r) connect(ClientId(r + 1), r);
  uint64_t comm = init_comm(4);
  // 4 MiB from rank 0 to 1 (NVLink inside node n0) and from rank 1 to 2 (across the 400 Gbit/s network).
  for (auto [from, to] : {std::pair{0, 1}, std::pair{1, 2}}) {
    for (CollType kind : {CollType::kSend, CollType::kRecv}) {
      const int me = kind == CollType::kSend ? from : to;
      Collective c = allreduce(comm, me, 0, 1 << 20);
      c.coll = kind;
      c.root = kind == CollType::kSend ? to : from;
      c.flags = kNoPayload;
      post(ClientId(me + 1), c);
    }
  }
  const nlohmann::json operations = job.report()["operations"];
  std::map<std::string, double> algbw;
  for (const auto& op : operations)
    if (op["collective"] == "Send") algbw[op["path"].get<std::string>()] = op["algbw_gbs"].get<double>();
  ASSERT_EQ(algbw.size(), 2u) << operations.dump();
  EXPECT_LE(algbw["network"], 400 / 8.0) << "no row beats its link";
  EXPECT_GT(algbw["NVLink"], algbw["network"]);
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
  EXPECT_DOUBLE_EQ(steps["median_time_us"].get<double>(), 150) << "the first step holds the set-up, so it is left out";
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
  int link_counters = 0;
  for (const auto& e : events)
    if (e["ph"] == "C" && e["name"].get<std::string>().find(" tx busy %") != std::string::npos) ++link_counters;
  EXPECT_GT(link_counters, 0) << "the busiest links get counters of their own";
  for (int r = 0; r < 2; ++r) {
    const std::pair<int, std::string> compute{r, "comp"}, nccl{r, "comm"};
    ASSERT_TRUE(tid_of_kind.count(compute) && tid_of_kind.count(nccl)) << events.dump();
    EXPECT_NE(tid_of_kind[compute], tid_of_kind[nccl]) << "two streams, two tracks";
  }
}

TEST_F(JobTimelineTest, OperatorTotalsBecomeTheReportsTableOfOperators) {
  for (int r = 0; r < 2; ++r) connect(ClientId(r + 1), r);
  EXPECT_TRUE(job.report()["operators"].is_null()) << "no rank sent any";
  RankOperators first;
  first.rows = {{"aten::mm", 4, 4, 600, 60, 0, 600, 0, 0, FAKEGPU_OP_GEMM}};
  post(ClientId(2), first);
  // Later totals replace earlier ones; the rank sends them largest first.
  RankOperators later;
  later.rows = {{"aten::mm", 10, 10, 1500, 150, 100, 1400, 0, 0, FAKEGPU_OP_GEMM},
                {"aten::_scaled_dot_product_flash_attention", 2, 2, 300, 70, 0, 300, 0, 0, FAKEGPU_OP_ATTENTION},
                {"aten::add", 20, 20, 200, 160, 40, 0, 10, 150, FAKEGPU_OP_MEMORY, 120}};
  post(ClientId(2), later);
  EXPECT_TRUE(out.take(ClientId(2)).empty()) << "RankOperators has no reply";
  const nlohmann::json ops = job.report()["operators"];
  ASSERT_EQ(ops["ranks"].size(), 1u) << ops.dump();
  const nlohmann::json& rank = ops["ranks"][0];
  EXPECT_EQ(rank["global_rank"], 1);
  EXPECT_DOUBLE_EQ(rank["gpu_us"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(rank["host_us"].get<double>(), 380);
  EXPECT_DOUBLE_EQ(rank["gpu_us_by_category"]["matrix"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(rank["gpu_us_by_category"]["attention"].get<double>(), 300);
  EXPECT_DOUBLE_EQ(rank["gpu_us_by_category"]["memory"].get<double>(), 200);
  ASSERT_EQ(rank["rows"].size(), 3u);
  EXPECT_EQ(rank["rows"][0]["name"], "aten::mm");
  EXPECT_EQ(rank["rows"][0]["calls"], 10);
  EXPECT_DOUBLE_EQ(rank["rows"][0]["share"].get<double>(), 0.75);
  EXPECT_EQ(rank["rows"][0]["bound"], "compute");
  EXPECT_EQ(rank["rows"][1]["category"], "attention");
  EXPECT_EQ(rank["rows"][2]["bound"], "host") << "most of its time in calls whose launch outlasted their kernels";
  // Kernel times measured on a GPU (fgpu --kernel-times) priced part of aten::add.
  EXPECT_DOUBLE_EQ(rank["rows"][2]["measured_us"].get<double>(), 120);
  EXPECT_DOUBLE_EQ(rank["rows"][0]["measured_us"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(rank["measured_gpu_us"].get<double>(), 120);
}

}  // namespace
}  // namespace fakegpu::coord::testing
