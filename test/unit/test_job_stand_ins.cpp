// Representative runs (FAKEGPU_REPRESENTATIVE): one process, rank 0, and the coordinator standing
// in for the other ranks of the four-rank cluster, on their own communicators.
#include <set>

#include "env.h"
#include "job_fixture.h"

namespace fakegpu::coord::testing {
namespace {

// The variable is read as the Job is made: a base constructed before JobTest sets it.
struct RepresentativeEnv {
  RepresentativeEnv() { env::assign(env::kRepresentative, "0"); }
  ~RepresentativeEnv() { env::assign(env::kRepresentative, ""); }
};

class StandInTest : private RepresentativeEnv, public JobTest {
 protected:
  StandInTest() { connect(1, 0); }

  template <typename Msg>
  void post(const Msg& msg, const std::vector<uint8_t>& bulk = {}) {
    JobTest::post(1, msg, bulk);
  }

  // The process's init of a communicator of the named group; its id, or 0 after an error.
  uint64_t init(const std::string& comm_name, int nranks, int rank = 0) {
    CommKey key = {};
    key.bytes[0] = static_cast<uint8_t>(++keys);
    post(CommInit{key, nranks, rank, 0, comm_name});
    auto frames = out.take(1);
    EXPECT_EQ(frames.size(), 1u);
    if (frames.empty() || frames[0].type != MsgType::kCommInitDone) return 0;
    return decode_fields<CommInitDone>(frames[0].fields.data(), frames[0].fields.size()).comm_id;
  }

  // Collectives per communicator, by its global ranks.
  std::map<std::vector<int>, int> collectives() {
    std::map<std::vector<int>, int> by_ranks;
    const nlohmann::json report = job.report();
    for (const auto& c : report["communicators"])
      by_ranks[c["global_ranks"].get<std::vector<int>>()] = c["collectives"].get<int>();
    return by_ranks;
  }

};

TEST_F(StandInTest, OneProcessCompletesTheWorldsAllReduceWithItsStandInsData) {
  post(GroupRanks{"0", {}});  // the default group: the whole world
  const uint64_t world = init("default_pg:0", 4);
  ASSERT_NE(world, 0u);
  post(allreduce(world, 0, 1, 2), floats({1.5f, -2}));
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_EQ(frames[0].type, MsgType::kCollectiveDone);
  EXPECT_EQ(result_of(frames[0]), (std::vector<float>{6, -8})) << "four ranks, each with rank 0's data";
  EXPECT_TRUE(out.sent.empty()) << "nothing is sent to a stand-in";

  auto report = job.report();
  ASSERT_EQ(report["ranks"].size(), 4u);
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(report["ranks"][r]["global_rank"], r);
    EXPECT_EQ(report["ranks"][r]["stood_in_by"], 0);
    EXPECT_EQ(report["ranks"][r]["collectives"], 1);
  }
  EXPECT_FALSE(report["ranks"][0].contains("stood_in_by"));
  EXPECT_EQ(report["representative"]["processes"], nlohmann::json({0}));
  EXPECT_EQ(report["representative"]["stood_in"], nlohmann::json({1, 2, 3}));
}

TEST_F(StandInTest, TheGroupsOfAKindThatHoldNoProcessGoThroughItsOperationsToo) {
  // A (dp, tp) DeviceMesh of 2 x 2: its tp groups, then its dp groups, as every rank makes them.
  post(GroupRanks{"0", {}});
  post(GroupRanks{"1", {0, 1}});
  post(GroupRanks{"2", {2, 3}});
  post(GroupRanks{"3", {0, 2}});
  post(GroupRanks{"4", {1, 3}});
  const uint64_t tp = init("mesh_tp:1", 2), dp = init("mesh_dp:3", 2);
  ASSERT_NE(tp, 0u);
  ASSERT_NE(dp, 0u);
  auto modeled_only = [](Collective c) {  // a timing-only run's: no data travels
    c.flags |= kNoPayload;
    return c;
  };
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    post(modeled_only(allreduce(tp, 0, seq, 1 << 20)));
    EXPECT_EQ(out.take(1).at(0).type, MsgType::kCollectiveDone);
  }
  post(modeled_only(allreduce(dp, 0, 1, 256)));
  EXPECT_EQ(out.take(1).at(0).type, MsgType::kCollectiveDone);
  std::map<std::vector<int>, int> want = {{{0, 1}, 3}, {{2, 3}, 3}, {{0, 2}, 1}, {{1, 3}, 1}};
  EXPECT_EQ(collectives(), want);
  // The tp group across the other node's NVLink was modeled there: its links carried traffic.
  std::set<std::string> busy;
  const nlohmann::json report = job.report();
  for (const auto& link : report["links"])
    if (link["bytes"].get<double>() > 0) busy.insert(link["link"].get<std::string>());
  EXPECT_TRUE(busy.count("n0/gpu0 nvlink tx")) << report["links"].dump();
  EXPECT_TRUE(busy.count("n1/gpu0 nvlink tx")) << report["links"].dump();
}

TEST_F(StandInTest, ASendToAStandInIsMetByItsReceive) {
  post(GroupRanks{"0", {}});
  const uint64_t world = init("default_pg:0", 4);
  Collective send = allreduce(world, 0, 1, 64);
  send.coll = CollType::kSend;
  send.root = 3;
  post(send, floats(std::vector<float>(64, 1)));
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].type, MsgType::kCollectiveDone);
  EXPECT_EQ(job.report()["collectives"]["Send"]["calls"], 1);
}

TEST_F(StandInTest, AnAllToAllOfMessagesReachesEveryPairOfRanks) {
  post(GroupRanks{"0", {}});
  const uint64_t world = init("default_pg:0", 4);
  ASSERT_NE(world, 0u);
  // An all-to-all's counts as PyTorch posts them: to and from each rank in turn, itself included;
  // the process sends rank r the value 10 + r.
  std::map<uint64_t, int> receives;  // request id -> the rank it receives from
  for (int r = 0; r < 4; ++r) {
    Collective send = allreduce(world, 0, 1, 1);
    send.coll = CollType::kSend;
    send.root = r;
    send.flags |= kSendsAndReceives;
    post(send, floats({10.0f + r}));
    Collective recv = send;
    recv.coll = CollType::kRecv;
    receives[next_request] = r;
    post(recv);
  }
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 8u);
  for (const OutFrame& f : frames) {
    ASSERT_EQ(f.type, MsgType::kCollectiveDone) << error_text(f);
    auto it = receives.find(f.request_id);
    // A stood-in rank sends back what the process sent it: in an SPMD exchange the two are alike.
    if (it != receives.end()) {
      EXPECT_EQ(result_of(f), (std::vector<float>{10.0f + it->second})) << it->second;
    }
  }
  // The stood-in ranks' messages among themselves are posted too: 16 in all, 4 out of and 4 into
  // every rank, as when every rank runs.
  const nlohmann::json report = job.report();
  EXPECT_EQ(report["collectives"]["Send"]["calls"], 16);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(report["ranks"][r]["collectives"], 8) << r;
}

TEST_F(StandInTest, APairwiseExchangePairsTheStoodInRanksByXor) {
  post(GroupRanks{"0", {}});
  const uint64_t world = init("default_pg:0", 4);
  ASSERT_NE(world, 0u);
  // Recursive doubling's rounds: the process exchanges with rank 1, then with rank 2, each a
  // group of one Send and one Receive with that peer alone.
  for (int peer : {1, 2}) {
    Collective send = allreduce(world, 0, 1, 16);
    send.coll = CollType::kSend;
    send.root = peer;
    send.flags |= kSendsAndReceives | kPairExchange;
    post(send, floats(std::vector<float>(16, 1)));
    Collective recv = send;
    recv.coll = CollType::kRecv;
    post(recv);
    auto frames = out.take(1);
    ASSERT_EQ(frames.size(), 2u) << peer;
    for (const OutFrame& f : frames) EXPECT_EQ(f.type, MsgType::kCollectiveDone) << error_text(f);
  }
  // Rank j with rank j xor 1, then j xor 2: every rank sends and receives once a round, as when
  // every rank runs (a shift would have rank 1 send twice in the first round and rank 3 never).
  const nlohmann::json report = job.report();
  EXPECT_EQ(report["collectives"]["Send"]["calls"], 8);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(report["ranks"][r]["collectives"], 4) << r;
}

TEST_F(StandInTest, APairwiseExchangeWhosePartnersLeaveTheCommunicatorIsRefused) {
  post(GroupRanks{"0", {}});
  post(GroupRanks{"1", {0, 1, 2}});
  const uint64_t three = init("group:1", 3);
  ASSERT_NE(three, 0u);
  Collective send = allreduce(three, 0, 1, 16);
  send.coll = CollType::kSend;
  send.root = 2;
  send.flags |= kSendsAndReceives | kPairExchange;
  post(send, floats(std::vector<float>(16, 1)));
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].type, MsgType::kError);
  const std::string text = error_text(frames[0]);
  EXPECT_NE(text.find("pairwise exchange"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1's partner, 3, is beyond the communicator's 3 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("run every rank"), std::string::npos) << text;
}

TEST_F(StandInTest, ABroadcastFromAStandInSendsZeros) {
  post(GroupRanks{"0", {}});
  const uint64_t world = init("default_pg:0", 4);
  Collective bcast = allreduce(world, 0, 1, 4);
  bcast.coll = CollType::kBroadcast;
  bcast.root = 2;  // stood in: the process only receives, so it sends no data
  post(bcast);
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_EQ(frames[0].type, MsgType::kCollectiveDone) << error_text(frames[0]);
  EXPECT_EQ(result_of(frames[0]), (std::vector<float>{0, 0, 0, 0}));
}

TEST_F(StandInTest, ATwoRankCommunicatorOfAGroupIsThePairTheProcessNamed) {
  post(GroupRanks{"0", {}});
  // PyTorch's communicator for messages between two ranks, named as their group.
  EXPECT_EQ(init("default_pg:0", 2), 0u);
  std::string errors = job.report()["errors"].dump();
  EXPECT_NE(errors.find("as PyTorch makes for a send or recv between two ranks when init_process_group has no "
                        "device_id"), std::string::npos) << errors;
  post(GroupRanks{"0/pair:0:3", {0, 3}});  // what the hook names before the first message
  const uint64_t pair = init("default_pg:0", 2);
  ASSERT_NE(pair, 0u);
  EXPECT_EQ(collectives().count({0, 3}), 1u);
}

TEST_F(StandInTest, ACommunicatorOfNoKnownGroupIsRefused) {
  EXPECT_EQ(init("mystery:9", 4), 0u);
  const std::string report = job.report()["errors"].dump();
  EXPECT_NE(report.find("no process group of that name was made"), std::string::npos) << report;
}

TEST_F(StandInTest, ASplitMakesTheGroupItsProcessNamedAndMirrorsTheOthersOfItsKind) {
  post(GroupRanks{"0", {}});
  const uint64_t world = init("default_pg:0", 4);
  ASSERT_NE(world, 0u);
  // split_group over a 2 x 2 mesh's dp dimension: every group of it named, then the process's own.
  post(GroupRanks{"a", {0, 2}});
  post(GroupRanks{"b", {1, 3}});
  post(GroupRanks{"a", {0, 2}});
  post(CommSplit{world, 0, 0, 11, 0});
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_EQ(frames[0].type, MsgType::kCommSplitDone) << error_text(frames[0]);
  const auto done = decode_fields<CommSplitDone>(frames[0].fields.data(), frames[0].fields.size());
  EXPECT_EQ(done.nranks, 2);
  EXPECT_EQ(done.rank, 0);
  EXPECT_EQ(done.global_rank, 0);
  Collective c = allreduce(done.comm_id, 0, 1, 256);
  c.flags |= kNoPayload;
  post(c);
  EXPECT_EQ(out.take(1).at(0).type, MsgType::kCollectiveDone);
  std::map<std::vector<int>, int> want = {{{0, 1, 2, 3}, 0}, {{0, 2}, 1}, {{1, 3}, 1}};
  EXPECT_EQ(collectives(), want);
  const nlohmann::json report = job.report();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(report["ranks"][r]["comm_inits"], 1) << "a split is no init";
}

TEST_F(StandInTest, ARankInNoPartOfASplitIsAnsweredAtOnce) {
  post(GroupRanks{"0", {}});
  const uint64_t world = init("default_pg:0", 4);
  post(CommSplit{world, 0, 0, -1, 0});  // NCCL_SPLIT_NOCOLOR
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_EQ(frames[0].type, MsgType::kCommSplitDone);
  EXPECT_EQ(decode_fields<CommSplitDone>(frames[0].fields.data(), frames[0].fields.size()).comm_id, 0u);
}

TEST_F(StandInTest, ASplitForNoNamedGroupOfItsRankIsRefusedWithAMessage) {
  post(GroupRanks{"0", {}});
  const uint64_t world = init("default_pg:0", 4);
  post(GroupRanks{"b", {1, 3}});  // not rank 0's
  post(CommSplit{world, 0, 0, 3, 0});
  auto frames = out.take(1);
  ASSERT_EQ(frames.size(), 1u);
  const std::string text = error_text(frames[0]);
  EXPECT_NE(text.find("the split is for no process group the program named (the last, 'b', holds ranks 1, 3)"),
            std::string::npos) << text;
}

// Processes for ranks 0 and 2.
struct TwoProcessesEnv {
  TwoProcessesEnv() { env::assign(env::kRepresentative, "0,2"); }
  ~TwoProcessesEnv() { env::assign(env::kRepresentative, ""); }
};

class TwoProcessesTest : private TwoProcessesEnv, public JobTest {
 protected:
  TwoProcessesTest() {
    connect(1, 0);
    connect(2, 2);
  }
};

TEST_F(TwoProcessesTest, AGroupWhoseFirstRankRunsNoProcessIsRefusedNamingTheProcessesToRun) {
  post(1, GroupRanks{"0", {}});
  post(2, GroupRanks{"0", {}});
  post(1, GroupRanks{"g", {1, 2}});
  post(2, GroupRanks{"g", {1, 2}});
  CommKey key = {};
  key.bytes[0] = 9;
  post(2, CommInit{key, 2, 1, 0, "pg:g"});
  auto frames = out.take(2);
  ASSERT_EQ(frames.size(), 1u);
  const std::string text = error_text(frames[0]);
  EXPECT_NE(text.find("process group 'g' (ranks 1-2) holds rank 2, which runs as a process, but its first rank, 1, "
                      "runs none; a group that holds a process needs its first rank to run as one too: run it with "
                      "FAKEGPU_REPRESENTATIVE=0,1,2"),
            std::string::npos) << text;
}

TEST(RankList, ReadsRanksAndRangesAndRefusesTheRest) {
  EXPECT_EQ(parse_rank_list("0,8", 16), (std::vector<int>{0, 8}));
  EXPECT_EQ(parse_rank_list("4-6,0", 16), (std::vector<int>{0, 4, 5, 6}));
  EXPECT_THROW(parse_rank_list("1,2", 16), std::runtime_error);   // rank 0 always runs
  EXPECT_THROW(parse_rank_list("0,16", 16), std::runtime_error);  // beyond the world
  EXPECT_THROW(parse_rank_list("0,x", 16), std::runtime_error);
  EXPECT_THROW(parse_rank_list("0,3-1", 16), std::runtime_error);
}

}  // namespace
}  // namespace fakegpu::coord::testing
