// Drives the coordinator's Job directly, without sockets.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "job_fixture.h"

using namespace fakegpu;
using namespace fakegpu::coord;
using namespace fakegpu::wire;

using namespace fakegpu::coord::testing;

TEST_F(JobTest, RejectsAnotherProtocolVersion) {
  job.on_connect(1);
  Hello h;
  h.protocol_version = kProtocolVersion + 1;
  post(1, h);
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(error_text(frames[0]).find("protocol version mismatch"), std::string::npos);
  EXPECT_EQ(out.disconnected, std::vector<ClientId>{1});
}

TEST_F(JobTest, FirstFrameMustBeHello) {
  job.on_connect(1);
  post(1, CommDestroy{1, 0});
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(error_text(frames[0]).find("expected Hello"), std::string::npos);
  EXPECT_EQ(out.disconnected.size(), 1u);
}

TEST_F(JobTest, RejectsAChunkSizeBelowTheMinimum) {
  job.on_connect(1);
  Hello h;
  h.chunk_bytes = 100;
  post(1, h);
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(error_text(frames[0]).find("FAKEGPU_STAGING_CHUNK_BYTES of 100 is below the minimum"), std::string::npos);
  EXPECT_EQ(out.disconnected, std::vector<ClientId>{1});
}

// Data that came in PayloadChunk pieces arrives beside the fields; replies are marked with
// the chunk size each rank asked for, so the transport can split them.
TEST_F(JobTest, StreamedPayloadsAreUsedAndRepliesCarryTheChunkSize) {
  for (ClientId c = 1; c <= 2; ++c) {
    job.on_connect(c);
    Hello h;
    h.chunk_bytes = c == 1 ? 4096 : 0;
    post(c, h);
    out.take(c);
  }
  uint64_t comm = init_comm(2);
  for (ClientId c = 1; c <= 2; ++c) {
    auto fields = encode_fields(allreduce(comm, static_cast<int>(c) - 1, 1, 2));
    FrameHeader h{MsgType::kCollective, next_request++, static_cast<uint32_t>(fields.size()), fields.size()};
    auto data = floats({1.0f * c, 10.0f * c});
    job.on_frame(c, h, fields, -1, std::make_shared<std::vector<uint8_t>>(data));
  }
  for (ClientId c = 1; c <= 2; ++c) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_EQ(frames[0].type, MsgType::kCollectiveDone);
    EXPECT_EQ(frames[0].chunk_bytes, c == 1 ? 4096u : 0u);
    EXPECT_EQ(result_of(frames[0]), (std::vector<float>{3, 30}));
  }
}

TEST_F(JobTest, AllReduceSumsEveryRank) {
  for (ClientId c = 1; c <= 3; ++c) connect(c);
  uint64_t comm = init_comm(3);
  post(1, allreduce(comm, 0, 1, 3), floats({1, 2, 3}));
  post(2, allreduce(comm, 1, 1, 3), floats({10, 20, 30}));
  EXPECT_TRUE(out.sent.empty()) << "must wait for the last rank";
  post(3, allreduce(comm, 2, 1, 3), floats({100, 200, 300}));
  for (ClientId c = 1; c <= 3; ++c) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_EQ(frames[0].type, MsgType::kCollectiveDone);
    EXPECT_EQ(result_of(frames[0]), (std::vector<float>{111, 222, 333}));
  }
  EXPECT_EQ(job.completed_operations(), 1u);
  auto report = job.report();
  EXPECT_EQ(report["collectives"]["AllReduce"]["calls"], 1);
  EXPECT_EQ(report["collectives"]["AllReduce"]["bytes"], 12);
}

TEST_F(JobTest, AverageDividesByRankCount) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t comm = init_comm(2);
  post(1, allreduce(comm, 0, 1, 2, RedOp::kAvg), floats({1, 5}));
  post(2, allreduce(comm, 1, 1, 2, RedOp::kAvg), floats({3, 7}));
  EXPECT_EQ(result_of(out.take(1).at(0)), (std::vector<float>{2, 6}));
}

TEST_F(JobTest, MismatchFailsEveryRankAndNamesTheCalls) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t comm = init_comm(2);
  post(1, allreduce(comm, 0, 1, 4), floats({1, 2, 3, 4}));
  post(2, allreduce(comm, 1, 1, 3), floats({1, 2, 3}));
  for (ClientId c = 1; c <= 2; ++c) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    std::string e = error_text(frames[0]);
    EXPECT_NE(e.find("rank 0 called AllReduce(count=4"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1 called AllReduce(count=3"), std::string::npos) << e;
  }
}

TEST_F(JobTest, CommunicatorLargerThanTheClusterIsRejectedForEveryRank) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  CommKey key{};
  post(1, CommInit{key, 5, 0, 0, ""});
  post(2, CommInit{key, 5, 1, 0, ""});
  for (ClientId c = 1; c <= 2; ++c) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_NE(error_text(frames[0]).find("does not fit cluster 'test'"), std::string::npos);
  }
}

TEST_F(JobTest, RankOutsideTheClusterFailsTheWholeInit) {
  connect(1, /*env_rank=*/0);
  connect(2, /*env_rank=*/7);
  CommKey key{};
  post(1, CommInit{key, 2, 0, 0, ""});
  EXPECT_TRUE(out.sent.empty());
  post(2, CommInit{key, 2, 1, 0, ""});
  for (ClientId c = 1; c <= 2; ++c) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u) << c;
    EXPECT_NE(error_text(frames[0]).find("RANK=7"), std::string::npos);
  }
}

TEST_F(JobTest, DuplicateRankAtInitIsAnError) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  CommKey key{};
  post(1, CommInit{key, 2, 0, 0, ""});
  post(2, CommInit{key, 2, 0, 0, ""});
  EXPECT_NE(error_text(out.take(2).at(0)).find("claimed twice"), std::string::npos);
  EXPECT_NE(error_text(out.take(1).at(0)).find("claimed twice"), std::string::npos);
}

TEST_F(JobTest, SplitGroupsByColourAndOrdersByKey) {
  for (ClientId c = 1; c <= 4; ++c) connect(c);
  uint64_t world = init_comm(4);
  EXPECT_EQ(job.report()["ranks"][3]["global_rank"], 3) << "the world comm defines identities";
  // Colours: ranks 0,2 -> 0; rank 1 -> none; rank 3 -> 1. Keys reverse the order in colour 0.
  post(1, CommSplit{world, 0, 0, 0, 9});
  post(2, CommSplit{world, 1, 0, -1, 0});
  post(3, CommSplit{world, 2, 0, 0, 1});
  EXPECT_TRUE(out.sent.empty());
  post(4, CommSplit{world, 3, 0, 1, 0});
  auto reply = [&](ClientId c) {
    auto frames = out.take(c);
    EXPECT_EQ(frames.size(), 1u);
    return decode_fields<CommSplitDone>(frames[0].fields.data(), frames[0].fields.size());
  };
  auto r0 = reply(1), r1 = reply(2), r2 = reply(3), r3 = reply(4);
  EXPECT_EQ(r1.comm_id, 0u);
  EXPECT_EQ(r0.comm_id, r2.comm_id);
  EXPECT_NE(r0.comm_id, r3.comm_id);
  EXPECT_EQ(r0.nranks, 2);
  EXPECT_EQ(r0.rank, 1);  // key 9 sorts after key 1
  EXPECT_EQ(r2.rank, 0);
  EXPECT_EQ(r0.global_rank, 0);
  EXPECT_EQ(r3.nranks, 1);
  // The child works: an allreduce over its two members.
  post(3, allreduce(r2.comm_id, 0, 1, 1), floats({1}));
  post(1, allreduce(r0.comm_id, 1, 1, 1), floats({2}));
  EXPECT_EQ(result_of(out.take(1).at(0)), std::vector<float>{3});
}

TEST_F(JobTest, DisconnectFailsPendingOperationsOfPeers) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t comm = init_comm(2);
  post(1, allreduce(comm, 0, 1, 1), floats({1}));
  job.on_disconnect(2);
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(error_text(frames[0]).find("disconnected"), std::string::npos);
}

TEST_F(JobTest, ImpersonatingAnotherRankIsRefused) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t comm = init_comm(2);
  post(2, allreduce(comm, 0, 1, 1), floats({1}));
  EXPECT_NE(error_text(out.take(2).at(0)).find("is not rank 0"), std::string::npos);
}

TEST_F(JobTest, PayloadSizeMustMatchTheCount) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t comm = init_comm(2);
  post(1, allreduce(comm, 0, 1, 4), floats({1, 2}));
  EXPECT_NE(error_text(out.take(1).at(0)).find("carries 8 bytes"), std::string::npos);
  EXPECT_EQ(out.disconnected, std::vector<ClientId>{1});
}

TEST_F(JobTest, RanksArrivingAfterAFailedInitGetTheSameError) {
  for (ClientId c = 1; c <= 3; ++c) connect(c);
  CommKey key{};
  post(1, CommInit{key, 3, 0, 0, ""});
  post(2, CommInit{key, 2, 1, 0, ""});  // disagrees on the size: the init fails for everyone
  post(3, CommInit{key, 3, 2, 0, ""});  // arrives after the failure
  for (ClientId c = 1; c <= 3; ++c) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u) << c;
    EXPECT_NE(error_text(frames[0]).find("disagree on the communicator size"), std::string::npos);
  }
}

TEST_F(JobTest, LeavingWithoutDestroyIsOnlyReportedWhenItCostAPeer) {
  for (ClientId c = 1; c <= 2; ++c) connect(c);
  uint64_t quiet = init_comm(2);
  uint64_t busy = init_comm(2);
  post(1, allreduce(busy, 0, 1, 1), floats({1}));
  job.on_disconnect(2);
  out.take(1);
  auto comms = job.report()["communicators"];
  for (const auto& c : comms) {
    if (c["id"] == quiet) {
      EXPECT_FALSE(c.contains("failure")) << c;
    } else if (c["id"] == busy) {
      EXPECT_TRUE(c.contains("failure")) << c;
    }
  }
}

TEST_F(JobTest, LateRankLearnsTheMismatchNotTheDisconnectThatFollowed) {
  for (ClientId c = 1; c <= 3; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(3);
  post(1, allreduce(comm, 0, 1, 2), floats({1, 2}));
  post(3, allreduce(comm, 2, 1, 1), floats({1}));  // mismatch: ranks 0 and 2 get the error
  out.take(1);
  out.take(3);
  job.on_disconnect(3);  // rank 2 gives up and exits
  post(2, allreduce(comm, 1, 1, 2), floats({1, 2}));
  auto frames = out.take(2);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(error_text(frames[0]).find("collective mismatch"), std::string::npos) << error_text(frames[0]);
  // The report names the root cause for the communicator, and the error once, with all three ranks.
  const nlohmann::json report = job.report();
  EXPECT_NE(report["communicators"][0]["failure"].get<std::string>().find("collective mismatch"), std::string::npos)
      << report["communicators"].dump();
  int listed = 0;
  for (const auto& e : report["errors"])
    if (e.get<std::string>().find("collective mismatch") != std::string::npos) {
      ++listed;
      EXPECT_NE(e.get<std::string>().find("(sent to ranks 0-2)"), std::string::npos) << e;
    }
  EXPECT_EQ(listed, 1) << report["errors"].dump();
}

TEST_F(JobTest, ShrinkWaitingForARankThatDiesFailsInsteadOfHanging) {
  for (ClientId c = 1; c <= 4; ++c) connect(c);
  uint64_t comm = init_comm(4);
  CommShrink shrink;
  shrink.parent_comm = comm;
  shrink.excluded = {3};
  shrink.rank = 0;
  post(1, shrink);
  shrink.rank = 1;
  post(2, shrink);
  EXPECT_TRUE(out.sent.empty());
  job.on_disconnect(4);  // the excluded rank leaving changes nothing
  EXPECT_TRUE(out.sent.empty());
  job.on_disconnect(3);  // rank 2, which the shrink waits for, is gone
  for (ClientId c = 1; c <= 2; ++c) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_NE(error_text(frames[0]).find("disconnected"), std::string::npos);
  }
}

TEST_F(JobTest, ShrinkKeepsParentOrderAndWorksOnAFailedParent) {
  for (ClientId c = 1; c <= 4; ++c) connect(c);
  uint64_t comm = init_comm(4);
  job.on_disconnect(2);  // rank 1 dies: the parent fails
  CommShrink shrink;
  shrink.parent_comm = comm;
  shrink.excluded = {1};
  for (int r : {3, 0, 2}) {
    shrink.rank = r;
    post(ClientId(r + 1), shrink);
  }
  std::vector<int> new_ranks;
  uint64_t child = 0;
  for (int r : {0, 2, 3}) {
    auto frames = out.take(ClientId(r + 1));
    ASSERT_EQ(frames.size(), 1u);
    auto done = decode_fields<CommSplitDone>(frames[0].fields.data(), frames[0].fields.size());
    EXPECT_EQ(done.nranks, 3);
    new_ranks.push_back(done.rank);
    child = done.comm_id;
  }
  EXPECT_EQ(new_ranks, (std::vector<int>{0, 1, 2}));
  post(1, allreduce(child, 0, 1, 1), floats({1}));
  post(3, allreduce(child, 1, 1, 1), floats({2}));
  post(4, allreduce(child, 2, 1, 1), floats({4}));
  EXPECT_EQ(result_of(out.take(4).at(0)), std::vector<float>{7});
}

// A rank that arrives last waits for nobody; the early ones wait for it: stragglers show.
TEST_F(JobTest, WaitTimeShowsTheStraggler) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  post(1, allreduce(comm, 0, 1, 2), floats({1, 2}));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  post(2, allreduce(comm, 1, 1, 2), floats({3, 4}));
  auto ranks = job.report()["ranks"];
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_GE(ranks[0]["wait_us"].get<double>(), 20000.0) << ranks.dump();
  EXPECT_LT(ranks[1]["wait_us"].get<double>(), ranks[0]["wait_us"].get<double>()) << ranks.dump();
}

TEST_F(JobTest, SimulatePricesWithoutRunning) {
  for (ClientId c = 1; c <= 4; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(4);
  auto simulate = [&](std::vector<SimOp> ops) {
    post(1, Simulate{std::move(ops)});
    auto frames = out.take(1);
    EXPECT_EQ(frames.size(), 1u);
    return frames.at(0);
  };
  auto one = simulate({{comm, 0, CollType::kAllReduce, -1, 1 << 20}});
  ASSERT_EQ(one.type, MsgType::kSimulateDone);
  double t1 = decode_fields<SimulateDone>(one.fields.data(), one.fields.size()).time_us;
  EXPECT_GT(t1, 0);
  auto two = simulate({{comm, 0, CollType::kAllReduce, -1, 1 << 20}, {comm, 0, CollType::kAllReduce, -1, 1 << 20}});
  EXPECT_DOUBLE_EQ(decode_fields<SimulateDone>(two.fields.data(), two.fields.size()).time_us, 2 * t1);
  // Sends of one group run side by side: the longest (to the other node) counts once.
  auto time_of = [](const OutFrame& f) { return decode_fields<SimulateDone>(f.fields.data(), f.fields.size()).time_us; };
  double both = time_of(simulate({{comm, 0, CollType::kSend, 1, 1 << 20}, {comm, 0, CollType::kSend, 2, 1 << 20}}));
  double near = time_of(simulate({{comm, 0, CollType::kSend, 1, 1 << 20}}));
  double far = time_of(simulate({{comm, 0, CollType::kSend, 2, 1 << 20}}));
  EXPECT_LT(near, far);
  EXPECT_DOUBLE_EQ(both, far);
  EXPECT_NE(error_text(simulate({{comm, 0, CollType::kSend, 9, 64}})).find("peer 9"), std::string::npos);
  EXPECT_NE(error_text(simulate({{comm, 3, CollType::kAllReduce, -1, 64}})).find("rank 3"), std::string::npos)
      << "client 1 is rank 0, not rank 3";
  EXPECT_EQ(job.completed_operations(), 0u) << "nothing ran";
}

TEST_F(JobTest, CommInfoDescribesTheChannels) {
  for (ClientId c = 1; c <= 4; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(4);
  post(2, CommInfo{comm, 1, kInfoLines | kGraphXml | kTopologyXml});
  auto frames = out.take(2);
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_EQ(frames[0].type, MsgType::kCommInfoReply);
  auto info = decode_fields<CommInfoReply>(frames[0].fields.data(), frames[0].fields.size());
  EXPECT_EQ(info.nnodes, 2);
  EXPECT_EQ(info.local_ranks, 2);
  EXPECT_EQ(info.local_rank, 1);
  bool ring = false, trees = false;
  for (const auto& l : info.lines) {
    ring |= l.text.rfind("Ring 00 : 0 -> 1 -> 2", 0) == 0 && l.subsys == kSubsysGraph;
    trees |= l.text.rfind("Trees [0] ", 0) == 0;
    EXPECT_NE(l.text.rfind("Channel ", 0), 0u) << "only rank 0 dumps the rings";
  }
  EXPECT_TRUE(ring && trees);
  EXPECT_NE(info.graph_xml.find("<graphs version=\"1\">"), std::string::npos);
  EXPECT_NE(info.topology_xml.find("<system"), std::string::npos);
}

// A rank that never posts: after the rendezvous timeout the waiting ranks get an error naming
// the missing rank and where it was last seen; a late arrival learns the same.
TEST_F(JobTest, RendezvousTimeoutListsTheWaitingRanksAsRanges) {
  for (ClientId c = 1; c <= 4; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(4);
  for (int r : {0, 1, 3}) post(ClientId(r + 1), allreduce(comm, r, 0, 1), floats({1}));
  job.check_timeouts(std::chrono::steady_clock::now() + job.rendezvous_timeout() + std::chrono::seconds(1));
  std::string why = error_text(out.take(1).at(0));
  EXPECT_NE(why.find("ranks 0-1, 3 waited"), std::string::npos) << why;
}

TEST_F(JobTest, RendezvousTimeoutNamesTheMissingRank) {
  for (ClientId c = 1; c <= 3; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(3);
  for (ClientId c = 1; c <= 3; ++c) post(c, allreduce(comm, static_cast<int>(c) - 1, 1, 1), floats({1}));
  out.take(1), out.take(2), out.take(3);
  post(1, allreduce(comm, 0, 2, 1), floats({1}));
  post(2, allreduce(comm, 1, 2, 1), floats({1}));
  const auto now = std::chrono::steady_clock::now();
  job.check_timeouts(now);
  EXPECT_TRUE(out.take(1).empty()) << "not before the timeout";
  job.check_timeouts(now + job.rendezvous_timeout() + std::chrono::seconds(1));
  for (ClientId c : {1, 2}) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    std::string why = error_text(frames[0]);
    EXPECT_NE(why.find("rendezvous timeout"), std::string::npos) << why;
    EXPECT_NE(why.find("ranks 0-1 waited"), std::string::npos) << why;
    EXPECT_NE(why.find("rank 2 (global rank 2"), std::string::npos) << why;
    EXPECT_NE(why.find("last posted AllReduce #1 on communicator"), std::string::npos) << why;
  }
  post(3, allreduce(comm, 2, 2, 1), floats({1}));
  EXPECT_NE(error_text(out.take(3).at(0)).find("rendezvous timeout"), std::string::npos);
  auto ranks = job.report()["ranks"];
  EXPECT_EQ(ranks[0]["timeouts"], 1);
  EXPECT_EQ(ranks[2]["timeouts"], 0);
}

TEST_F(JobTest, RendezvousTimeoutForAnUnmatchedSend) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  Collective send = allreduce(comm, 0, 1, 1);
  send.coll = CollType::kSend;
  send.root = 1;
  post(1, send, floats({1}));
  job.check_timeouts(std::chrono::steady_clock::now() + job.rendezvous_timeout() + std::chrono::seconds(1));
  std::string why = error_text(out.take(1).at(0));
  EXPECT_NE(why.find("waited for the Recv matching its Send"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 1 (global rank 1"), std::string::npos) << why;
  EXPECT_NE(why.find("is idle: last posted ncclCommInitRank"), std::string::npos) << why;
}
