// A coordinator that serves job after job lets go of what no job needs: communicators whose
// ranks have all left, ranks long gone, failed rendezvous. The report still tells the story.
#include <gtest/gtest.h>

#include "job_fixture.h"

using namespace fakegpu;
using namespace fakegpu::coord;
using namespace fakegpu::coord::testing;

TEST_F(JobTest, ACommunicatorAllRanksLeftIsRetiredButReported) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  post(1, allreduce(comm, 0, 1, 1), floats({1}));
  post(2, allreduce(comm, 1, 1, 1), floats({2}));
  const auto before = job.report()["communicators"];
  post(1, CommDestroy{comm, 0});
  EXPECT_EQ(job.status(std::chrono::steady_clock::now())["communicators_not_waiting"], 1) << "rank 1 is still in it";
  job.on_disconnect(2);  // rank 1 leaves without destroying it: nobody is left
  EXPECT_EQ(job.status(std::chrono::steady_clock::now())["communicators_not_waiting"], 0);
  auto after = job.report()["communicators"];
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after, before) << "the retired communicator's entry is what it was";
  // It is gone for good: a late call on it is refused.
  post(1, allreduce(comm, 0, 2, 1), floats({1}));
  EXPECT_NE(error_text(out.take(1).back()).find("unknown communicator"), std::string::npos);
}

TEST_F(JobTest, OnlyTheNewestDepartedRanksAreKept) {
  const ClientId total = 256 + 10;
  for (ClientId c = 1; c <= total; ++c) {
    connect(c);
    job.on_disconnect(c);
  }
  auto report = job.report();
  EXPECT_EQ(report["ranks"].size(), 256u);
  EXPECT_EQ(report["ranks_not_listed"], 10);
  EXPECT_EQ(report["ranks"][0]["pid"], 1000 + 11) << "the oldest went first";
}

TEST_F(JobTest, ADepartedRankOfALiveCommunicatorIsKept) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  job.on_disconnect(1);  // rank 0 gone; rank 1 still holds the failed communicator
  for (ClientId c = 3; c <= 256 + 3; ++c) {
    connect(c);
    job.on_disconnect(c);
  }
  auto report = job.report();
  EXPECT_EQ(report["ranks"].size(), 256u + 1) << "256 departed ranks, rank 1 among them, and the live one";
  EXPECT_EQ(report["ranks_not_listed"], 2);
  bool rank0_listed = false;
  for (const auto& r : report["ranks"]) rank0_listed = rank0_listed || r["pid"] == 1001;
  EXPECT_TRUE(rank0_listed);
  post(2, allreduce(comm, 1, 1, 1), floats({1}));
  std::string why = error_text(out.take(2).at(0));
  EXPECT_NE(why.find("rank 0 of communicator"), std::string::npos) << why;
  EXPECT_NE(why.find("pid 1001 on host"), std::string::npos) << "still named: " << why;
}

TEST_F(JobTest, AFailedInitIsForgottenAfterTheTimeout) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  CommKey key = {};
  key.bytes[0] = 7;
  post(1, CommInit{key, 2, 0, 0, ""});
  post(2, CommInit{key, 3, 1, 1, ""});  // disagrees on the size: the init fails
  EXPECT_NE(error_text(out.take(1).at(0)).find("disagree"), std::string::npos);
  out.take(2);
  post(1, CommInit{key, 2, 0, 0, ""});
  EXPECT_NE(error_text(out.take(1).at(0)).find("disagree"), std::string::npos) << "a late rank hears the failure";
  job.check_timeouts(std::chrono::steady_clock::now() + job.rendezvous_timeout() + std::chrono::seconds(1));
  // Forgotten: the same id starts a new init.
  post(1, CommInit{key, 2, 0, 0, ""});
  post(2, CommInit{key, 2, 1, 1, ""});
  EXPECT_EQ(out.take(1).at(0).type, MsgType::kCommInitDone);
  EXPECT_EQ(out.take(2).at(0).type, MsgType::kCommInitDone);
}
