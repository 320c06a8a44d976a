// The coordinator's diagnoses: mismatch classes, a rank that leaves, deadlocks, the live status,
// and who may talk to it at all (tokens, observers, strangers).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>

#include "job_fixture.h"

using namespace fakegpu;
using namespace fakegpu::coord;
using namespace fakegpu::coord::testing;

namespace {

class TokenJobTest : public JobTest {
 protected:
  TokenJobTest() : JobTest("s3cret") {}
  // Says Hello with the given token; returns the one frame the coordinator answered.
  OutFrame hello_with(ClientId c, const std::string& token) {
    job.on_connect(c);
    Hello h;
    h.token = token;
    post(c, h);
    auto frames = out.take(c);
    EXPECT_EQ(frames.size(), 1u);
    return frames.at(0);
  }
};

Collective with(Collective c, void (*change)(Collective&)) {
  change(c);
  return c;
}

}  // namespace

TEST_F(TokenJobTest, ClientsWithoutTheTokenAreRefused) {
  EXPECT_NE(error_text(hello_with(1, "")).find("requires a token"), std::string::npos);
  EXPECT_NE(error_text(hello_with(2, "s3creT")).find("does not match"), std::string::npos);
  EXPECT_NE(error_text(hello_with(3, "s3cret-")).find("does not match"), std::string::npos);
  EXPECT_EQ(out.disconnected, (std::vector<ClientId>{1, 2, 3}));
  EXPECT_EQ(hello_with(4, "s3cret").type, MsgType::kWelcome);
  EXPECT_TRUE(job.greeted(4));
  EXPECT_FALSE(job.greeted(1));
  // A refused client leaves no trace in the report.
  for (ClientId c = 1; c <= 3; ++c) job.on_disconnect(c);
  EXPECT_EQ(job.report()["ranks"].size(), 1u);
}

TEST_F(JobTest, AnObserverMayOnlyAskForTheStatus) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  post(1, allreduce(comm, 0, 1, 1), floats({1}));
  job.on_connect(9);
  Hello h;
  h.role = ClientRole::kObserver;
  post(9, h);
  ASSERT_EQ(out.take(9).at(0).type, MsgType::kWelcome);
  post(9, StatusQuery{});
  auto reply = out.take(9);
  ASSERT_EQ(reply.size(), 1u);
  ASSERT_EQ(reply[0].type, MsgType::kStatusReply);
  const Bulk& b = reply[0].bulk.at(0);
  auto status = nlohmann::json::parse(b.buffer->begin() + b.offset, b.buffer->begin() + b.offset + b.size);
  EXPECT_EQ(status["ranks_connected"], 2) << "the observer is not a rank";
  const auto& waiting = status["communicators"].at(0)["waiting"].at(0);
  EXPECT_EQ(waiting["arrived"], "0");
  EXPECT_EQ(waiting["missing"].at(0)["rank"], 1);
  EXPECT_NE(waiting["missing"].at(0)["doing"].get<std::string>().find("is idle: last posted ncclCommInitRank"), std::string::npos);
  EXPECT_NE(format_status(status).find("AllReduce(count=1, float32, sum): waiting"), std::string::npos);

  post(9, CommInit{});
  EXPECT_NE(error_text(out.take(9).at(0)).find("an observer may not send CommInit"), std::string::npos);
  EXPECT_EQ(out.disconnected, std::vector<ClientId>{9});
  job.on_disconnect(9);
  EXPECT_EQ(job.report()["ranks"].size(), 2u);
}

TEST_F(JobTest, MismatchesAreClassedAsTheFlightRecorderDoes) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t comm = init_comm(2);
  struct Case {
    void (*change)(Collective&);
    const char* kind;
  } cases[] = {
      {[](Collective& c) { c.coll = CollType::kAllGather; }, "COLLECTIVE_TYPE_MISMATCH"},
      {[](Collective& c) { c.dtype = static_cast<uint8_t>(DataType::kInt32); }, "COLLECTIVE_DTYPE_MISMATCH"},
      {[](Collective& c) { c.count = 2; }, "SIZE_OR_SYNTAX_MISMATCH"},
      {[](Collective& c) { c.op = static_cast<uint8_t>(RedOp::kMax); }, "SIZE_OR_SYNTAX_MISMATCH"},
      {[](Collective& c) { c.flags = kNoPayload; }, "COLLECTIVE_STATE_MISMATCH"},
  };
  uint64_t seq = 0;
  for (const Case& k : cases) {
    ++seq;
    post(1, allreduce(comm, 0, seq, 1), floats({1}));
    Collective other = with(allreduce(comm, 1, seq, 1), k.change);
    // Every variant carries what its own call needs: 4-byte elements, none when payload-free.
    post(2, other, std::vector<uint8_t>((other.flags & kNoPayload) ? 0 : other.count * 4));
    for (ClientId c : {1, 2}) {
      std::string why = error_text(out.take(c).at(0));
      EXPECT_EQ(why.rfind(k.kind, 0), 0u) << why;
      EXPECT_NE(why.find("rank 0 called AllReduce(count=1, float32, sum)"), std::string::npos) << why;
    }
  }
  auto mismatches = job.report()["diagnoses"]["mismatches"];
  EXPECT_EQ(mismatches["SIZE_OR_SYNTAX_MISMATCH"], 2);
  EXPECT_EQ(mismatches["COLLECTIVE_TYPE_MISMATCH"], 1);
}

// Real NCCL hangs when a rank destroys a communicator its peers still use; here they hear of
// it at once, before and after the destroy.
TEST_F(JobTest, DestroyingACommunicatorPeersWaitOnIsAStateMismatch) {
  for (ClientId c = 1; c <= 3; ++c) connect(c);
  uint64_t comm = init_comm(3);
  post(1, allreduce(comm, 0, 1, 1), floats({1}));
  post(3, CommDestroy{comm, 2});
  EXPECT_EQ(out.take(3).at(0).type, MsgType::kAck);
  std::string why = error_text(out.take(1).at(0));
  EXPECT_EQ(why.rfind("COLLECTIVE_STATE_MISMATCH", 0), 0u) << why;
  EXPECT_NE(why.find("rank 2 (pid 1003 on host) destroyed the communicator"), std::string::npos) << why;
  post(2, allreduce(comm, 1, 2, 1), floats({1}));
  EXPECT_NE(error_text(out.take(2).at(0)).find("destroyed the communicator"), std::string::npos);
  EXPECT_EQ(job.report()["diagnoses"]["mismatches"]["COLLECTIVE_STATE_MISMATCH"], 2);
}

// Rank 0 joins an operation on communicator A while rank 1 joins one on B: each waits for the
// other, and neither will ever post again.
TEST_F(JobTest, CrossCommunicatorDeadlockIsNamedAndBroken) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t a = init_comm(2), b = init_comm(2);
  post(1, allreduce(a, 0, 1, 1), floats({1}));
  post(2, allreduce(b, 1, 1, 1), floats({1}));
  const auto now = std::chrono::steady_clock::now();
  job.check_timeouts(now);
  EXPECT_TRUE(out.sent.empty()) << "not while the ranks are still fresh";
  job.check_timeouts(now + std::chrono::seconds(6));
  for (ClientId c : {1, 2}) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    std::string why = error_text(frames[0]);
    EXPECT_EQ(why.rfind("cross-communicator deadlock: 2 ranks wait only for each other", 0), 0u) << why;
    EXPECT_NE(why.find(fmt::format("global rank 0 (pid 1001 on host) waits in AllReduce(count=1, float32, sum) #1 on "
                                   "communicator {} for rank 1", a)),
              std::string::npos)
        << why;
    EXPECT_NE(why.find(fmt::format("on communicator {} for rank 0", b)), std::string::npos) << why;
  }
  EXPECT_EQ(job.report()["diagnoses"]["deadlocks"].size(), 1u);
}

// A rank that waits while its peer is merely idle (computing) is not deadlocked, however long.
TEST_F(JobTest, WaitingForAnIdleRankIsNoDeadlock) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t a = init_comm(2), b = init_comm(2);
  post(1, allreduce(a, 0, 1, 1), floats({1}));
  post(2, allreduce(a, 1, 1, 1), floats({1}));
  out.take(1), out.take(2);
  post(1, allreduce(b, 0, 1, 1), floats({1}));
  job.check_timeouts(std::chrono::steady_clock::now() + std::chrono::seconds(60));
  EXPECT_TRUE(out.sent.empty());
  EXPECT_TRUE(job.report()["diagnoses"]["deadlocks"].empty());
}

// Two ranks that each send to the other before receiving, outside a group.
TEST_F(JobTest, SendSendCycleIsADeadlock) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t comm = init_comm(2);
  for (int r = 0; r < 2; ++r) {
    Collective send = allreduce(comm, r, 1, 1);
    send.coll = CollType::kSend;
    send.root = 1 - r;
    post(ClientId(r + 1), send, floats({1}));
  }
  job.check_timeouts(std::chrono::steady_clock::now() + std::chrono::seconds(6));
  for (ClientId c : {1, 2}) {
    std::string why = error_text(out.take(c).at(0));
    EXPECT_EQ(why.rfind("deadlock: 2 ranks", 0), 0u) << why;
    EXPECT_NE(why.find("waits in Send(count=1, float32"), std::string::npos) << why;
  }
}

// Two jobs share one coordinator. A rank of the second knows only its own unique id: with it
// it neither joins the first job's communicator nor reaches it by number.
TEST_F(JobTest, AnotherJobCannotJoinOrReadACommunicator) {
  for (ClientId c = 1; c <= 3; ++c) connect(c);
  uint64_t comm = init_comm(2);  // the first job: clients 1 and 2
  CommKey other = {};
  other.bytes[0] = 0xee;
  post(3, CommInit{other, 2, 1, 0, ""});
  EXPECT_TRUE(out.take(3).empty()) << "a different key starts a different communicator, still waiting";
  post(3, allreduce(comm, 1, 1, 1), floats({1}));
  EXPECT_NE(error_text(out.take(3).at(0)).find("is not rank 1 of communicator"), std::string::npos);
  post(3, CommInfo{comm, 0, kInfoLines});
  EXPECT_NE(error_text(out.take(3).at(0)).find("is not rank 0 of communicator"), std::string::npos);
  post(3, CommSplit{comm, 0, 0, 0, 0});
  EXPECT_NE(error_text(out.take(3).at(0)).find("is not rank 0 of communicator"), std::string::npos);
  post(3, CommDestroy{comm, 1});
  EXPECT_NE(error_text(out.take(3).at(0)).find("is not rank 1 of communicator"), std::string::npos);
  // The first job is untouched.
  post(1, allreduce(comm, 0, 1, 1), floats({2}));
  post(2, allreduce(comm, 1, 1, 1), floats({3}));
  EXPECT_EQ(result_of(out.take(1).at(0)), std::vector<float>{5});
}

// One process owning two ranks (one thread each) may have posted for one and not yet for the
// other: that is no deadlock, however long the other thread computes.
TEST_F(JobTest, AProcessWaitingForItsOwnOtherRankIsNoDeadlock) {
  connect(1);
  CommKey key = {};
  key.bytes[0] = 0x42;
  post(1, CommInit{key, 2, 0, 0, ""});
  post(1, CommInit{key, 2, 1, 1, ""});
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 2u);
  auto done = decode_fields<CommInitDone>(frames[0].fields.data(), frames[0].fields.size());
  post(1, allreduce(done.comm_id, 0, 1, 1), floats({1}));
  job.check_timeouts(std::chrono::steady_clock::now() + std::chrono::seconds(60));
  EXPECT_TRUE(out.sent.empty());
}

// Ranks 0-2 wait in the world's init for rank 3, which never connected (it died first): the
// status shows the init, and the rendezvous timeout fails it naming rank 3.
TEST_F(JobTest, AnInitMissingARankTimesOutNamingIt) {
  for (ClientId c = 1; c <= 3; ++c) connect(c, static_cast<int>(c) - 1);
  CommKey key = {};
  key.bytes[0] = 42;
  for (int r = 0; r < 3; ++r) post(ClientId(r + 1), CommInit{key, 4, r, r, "world"});
  const auto now = std::chrono::steady_clock::now();
  auto status = job.status(now);
  ASSERT_EQ(status["rendezvous"].size(), 1u) << status.dump();
  EXPECT_EQ(status["rendezvous"][0]["arrived"], "0-2");
  EXPECT_EQ(status["rendezvous"][0]["missing"][0]["doing"], "has not connected to the coordinator");
  EXPECT_EQ(status["ranks_never_connected"], std::vector<int>{3});
  const std::string text = format_status(status);
  EXPECT_NE(text.find("ncclCommInitRank of 'world', a 4-rank communicator: waiting"), std::string::npos) << text;
  EXPECT_NE(text.find("waits in ncclCommInitRank of 'world', a 4-rank communicator for rank 3"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("no operation is waiting"), std::string::npos) << text;

  job.check_timeouts(now + job.rendezvous_timeout() / 2);
  EXPECT_TRUE(out.sent.empty()) << "not before the timeout";
  job.check_timeouts(now + job.rendezvous_timeout() + std::chrono::seconds(1));
  for (ClientId c = 1; c <= 3; ++c) {
    std::string why = error_text(out.take(c).at(0));
    EXPECT_EQ(why.rfind("rendezvous timeout after 600 s in ncclCommInitRank of 'world', a 4-rank communicator: "
                        "ranks 0-2 waited for the others; rank 3 has not connected to the coordinator", 0), 0u)
        << why;
  }
  // Rank 3 arriving late is told the same; the report counts one timeout and says where each rank was.
  connect(4, 3);
  post(4, CommInit{key, 4, 3, 3, "world"});
  EXPECT_NE(error_text(out.take(4).at(0)).find("rendezvous timeout"), std::string::npos);
  auto report = job.report();
  EXPECT_EQ(report["diagnoses"]["timeouts"], 1);
  EXPECT_EQ(report["ranks"][0]["last_operation"], "ncclCommInitRank");
}

// Rank 0 splits the world while rank 1 calls AllReduce on it: each waits for the other. A rank
// in a split is not idle, so this is a deadlock, found and broken like any other.
TEST_F(JobTest, ASplitAgainstACollectiveIsADeadlock) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  post(1, CommSplit{comm, 0, 0, 0, 0});
  post(2, allreduce(comm, 1, 1, 1), floats({1}));
  const auto now = std::chrono::steady_clock::now();
  const std::string text = format_status(job.status(now));
  EXPECT_NE(text.find(fmt::format("ncclCommSplit #0 of communicator {}: waiting", comm)), std::string::npos) << text;
  job.check_timeouts(now + std::chrono::seconds(6));
  for (ClientId c : {1, 2}) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    std::string why = error_text(frames[0]);
    EXPECT_EQ(why.rfind("deadlock: 2 ranks wait only for each other", 0), 0u) << why;
    EXPECT_NE(why.find(fmt::format("global rank 0 (pid 1001 on host) waits in ncclCommSplit #0 of communicator {} "
                                   "for rank 1", comm)),
              std::string::npos)
        << why;
  }
  EXPECT_EQ(job.report()["diagnoses"]["deadlocks"].size(), 1u);
}

// A split whose ranks do not all come times out naming the missing one and where it is.
TEST_F(JobTest, ASplitMissingARankTimesOut) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  post(2, allreduce(comm, 1, 1, 1), floats({1}));
  post(1, allreduce(comm, 0, 1, 1), floats({1}));
  out.take(1), out.take(2);
  post(1, CommSplit{comm, 0, 0, 0, 0});
  job.check_timeouts(std::chrono::steady_clock::now() + job.rendezvous_timeout() + std::chrono::seconds(1));
  std::string why = error_text(out.take(1).at(0));
  EXPECT_EQ(why.rfind(fmt::format("rendezvous timeout after 600 s in ncclCommSplit #0 of communicator {}: rank 0 "
                                  "waited for the others; rank 1 (global rank 1",
                                  comm),
                      0),
            0u)
      << why;
  EXPECT_NE(why.find("is idle: last posted AllReduce #1"), std::string::npos) << why;
}
