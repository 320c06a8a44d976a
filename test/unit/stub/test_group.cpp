// The stub's groups (group.h): nesting, ncclGroupEnd without a start, sequence numbers, and
// what a group's calls send to the coordinator (a fake one on a Unix socket). No CUDA runtime
// is loaded here, so the calls run from the calling thread on host memory, as on the legacy
// stream.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "fake_coordinator.h"
#include "group.h"

namespace fakegpu::stub {
namespace {

using test::FakeCoordinator;
using test::Frame;

// Frames of one kind, in the order the coordinator got them.
std::vector<Frame> frames_of(FakeCoordinator& coordinator, wire::MsgType type) {
  std::vector<Frame> out;
  for (const Frame& f : coordinator.frames())
    if (f.header.type == type) out.push_back(f);
  return out;
}

// Answers every Collective with its own sequence number, and with the bytes it sent, reversed,
// as the received data.
void answer_collectives(const Frame& frame, FakeCoordinator::Connection& conn) {
  if (frame.header.type != wire::MsgType::kCollective) return;
  std::vector<uint8_t> back(frame.bulk.rbegin(), frame.bulk.rend());
  conn.reply(frame.header.request_id, wire::CollectiveDone{frame.decode<wire::Collective>().seq, 0, -1}, back.data(),
             back.size());
}

// A communicator whose init has finished, on the client's connection.
void join(ncclComm& comm, std::shared_ptr<Client> client, int rank, uint64_t id) {
  comm.client = std::move(client);
  comm.nranks = 2;
  comm.rank = rank;
  comm.id = id;
}

// A call as ncclAllReduce makes it (over int8 data, so bytes are elements), its number taken.
CollectiveCall all_reduce(ncclComm& comm, const std::vector<uint8_t>& send, std::vector<uint8_t>& recv) {
  CollectiveCall call;
  call.comm = &comm;
  call.desc.comm_id = comm.id;
  call.desc.rank = comm.rank;
  call.desc.coll = wire::CollType::kAllReduce;
  call.desc.dtype = ncclInt8;
  call.desc.count = send.size();
  call.sendbuff = send.data();
  call.recvbuff = recv.data();
  call.send_bytes = send.size();
  call.recv_bytes = recv.size();
  take_sequence_number(call);
  return call;
}

TEST(StubGroup, EndWithoutStartIsInvalidUsage) {
  ASSERT_FALSE(in_group());
  try {
    group_end();
    FAIL() << "ncclGroupEnd without ncclGroupStart succeeded";
  } catch (const NcclError& e) {
    EXPECT_EQ(e.code(), ncclInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("without a matching ncclGroupStart"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(in_group());
}

TEST(StubGroup, OnlyTheOutermostEndRunsTheCalls) {
  FakeCoordinator coordinator(answer_collectives);
  ncclComm comm;
  join(comm, Client::get(coordinator.endpoint()), 0, 11);
  const std::vector<uint8_t> send = {1, 2, 3};
  std::vector<uint8_t> recv(3);
  group_start();
  group_start();
  EXPECT_TRUE(in_group());
  submit_collective(all_reduce(comm, send, recv));
  EXPECT_EQ(group_end(), ncclSuccess);
  EXPECT_TRUE(in_group());
  EXPECT_TRUE(frames_of(coordinator, wire::MsgType::kCollective).empty()) << "an inner ncclGroupEnd ran the call";
  EXPECT_EQ(group_end(), ncclSuccess);
  EXPECT_FALSE(in_group());
  ASSERT_EQ(frames_of(coordinator, wire::MsgType::kCollective).size(), 1u);
  EXPECT_EQ(recv, (std::vector<uint8_t>{3, 2, 1}));  // the reply's data landed in recvbuff
}

// Two ranks of one communicator driven by one thread: nothing can finish before both are
// posted. The coordinator answers only once it holds both calls, so a stub that waited for the
// first before posting the second would never return.
TEST(StubGroup, AGroupPostsEveryCallBeforeWaitingForAny) {
  std::mutex mu;
  std::vector<Frame> held;
  FakeCoordinator coordinator([&](const Frame& frame, FakeCoordinator::Connection& conn) {
    if (frame.header.type != wire::MsgType::kCollective) return;
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(frame);
    if (held.size() < 2) return;
    for (const Frame& f : held) answer_collectives(f, conn);
  });
  auto client = Client::get(coordinator.endpoint());
  ncclComm rank0, rank1;
  join(rank0, client, 0, 21);
  join(rank1, client, 1, 21);
  const std::vector<uint8_t> send0 = {1, 2}, send1 = {3, 4, 5, 6};
  std::vector<uint8_t> recv0(2), recv1(4);
  group_start();
  submit_collective(all_reduce(rank0, send0, recv0));
  submit_collective(all_reduce(rank1, send1, recv1));
  ASSERT_EQ(group_end(), ncclSuccess);

  auto posted = frames_of(coordinator, wire::MsgType::kCollective);
  ASSERT_EQ(posted.size(), 2u);
  const std::vector<std::pair<int, std::vector<uint8_t>>> expected = {{0, send0}, {1, send1}};
  for (size_t i = 0; i < posted.size(); ++i) {
    auto desc = posted[i].decode<wire::Collective>();
    EXPECT_EQ(desc.comm_id, 21u);
    EXPECT_EQ(desc.rank, expected[i].first);
    EXPECT_EQ(desc.seq, 1u);  // each rank's first collective
    EXPECT_EQ(desc.coll, wire::CollType::kAllReduce);
    EXPECT_EQ(desc.count, expected[i].second.size());
    EXPECT_EQ(desc.ready_us, -1);  // no runtime here keeps a modeled clock
    EXPECT_EQ(posted[i].bulk, expected[i].second);  // host memory travels in the frame
  }
  EXPECT_EQ(recv0, (std::vector<uint8_t>{2, 1}));
  EXPECT_EQ(recv1, (std::vector<uint8_t>{6, 5, 4, 3}));
  EXPECT_EQ(rank0.next_seq, 2u);
  EXPECT_EQ(rank1.next_seq, 2u);
}

TEST(StubGroup, AFailedCallFailsItsCommunicatorAndKeepsItsNumber) {
  FakeCoordinator coordinator([](const Frame& frame, FakeCoordinator::Connection& conn) {
    if (frame.header.type == wire::MsgType::kCollective)
      conn.fail(frame.header.request_id, wire::Status::kInvalidArgument, "count differs from rank 1's");
  });
  ncclComm comm;
  join(comm, Client::get(coordinator.endpoint()), 0, 31);
  const std::vector<uint8_t> send = {1};
  std::vector<uint8_t> recv(1);
  try {
    submit_collective(all_reduce(comm, send, recv));
    FAIL() << "a call the coordinator refused succeeded";
  } catch (const NcclError& e) {
    EXPECT_EQ(e.code(), ncclInvalidArgument);
  }
  // The peers saw the call, so its number stays used; watchdogs read the error later.
  EXPECT_EQ(comm.next_seq, 2u);
  EXPECT_EQ(comm.async_error, ncclInvalidArgument);
  EXPECT_EQ(comm.async_message, "count differs from rank 1's");
}

TEST(StubGroup, SimulateEndPricesTheCallsWithoutRunningThem) {
  FakeCoordinator coordinator([](const Frame& frame, FakeCoordinator::Connection& conn) {
    if (frame.header.type == wire::MsgType::kSimulate)
      conn.reply(frame.header.request_id, wire::SimulateDone{42.0});
  });
  ncclComm comm;
  join(comm, Client::get(coordinator.endpoint()), 1, 41);
  const std::vector<uint8_t> send(64, 1);
  std::vector<uint8_t> recv(64);
  group_start();
  submit_collective(all_reduce(comm, send, recv));
  submit_collective(all_reduce(comm, send, recv));
  EXPECT_FLOAT_EQ(group_simulate_end(), 42.0f);
  EXPECT_FALSE(in_group());
  EXPECT_TRUE(frames_of(coordinator, wire::MsgType::kCollective).empty()) << "a simulated call ran";
  EXPECT_EQ(comm.next_seq, 1u) << "the simulated calls kept their sequence numbers";
  auto asked = frames_of(coordinator, wire::MsgType::kSimulate);
  ASSERT_EQ(asked.size(), 1u);
  auto sim = asked[0].decode<wire::Simulate>();
  ASSERT_EQ(sim.ops.size(), 2u);
  EXPECT_EQ(sim.ops[0].comm_id, 41u);
  EXPECT_EQ(sim.ops[0].rank, 1);
  EXPECT_EQ(sim.ops[0].bytes, 64u);
}

TEST(StubGroup, SequenceNumbersCountCollectivesAndEachPeerApart) {
  ncclComm comm;
  CollectiveCall coll, send, recv;
  coll.comm = send.comm = recv.comm = &comm;
  send.desc.coll = wire::CollType::kSend;
  send.desc.root = 3;
  recv.desc.coll = wire::CollType::kRecv;
  recv.desc.root = 3;
  take_sequence_number(coll);
  EXPECT_EQ(coll.desc.seq, 1u);
  take_sequence_number(coll);
  EXPECT_EQ(coll.desc.seq, 2u);
  take_sequence_number(send);
  take_sequence_number(recv);
  EXPECT_EQ(send.desc.seq, 1u);  // from 1 per peer, apart from the collectives
  EXPECT_EQ(recv.desc.seq, 1u);

  // The newest numbers go back, newest first, and are taken again.
  release_sequence_numbers({send, recv});
  take_sequence_number(send);
  EXPECT_EQ(send.desc.seq, 1u);
  release_sequence_number(coll);
  take_sequence_number(coll);
  EXPECT_EQ(coll.desc.seq, 2u);
  EXPECT_EQ(comm.async_error, ncclSuccess);
}

TEST(StubGroup, ANumberThatCannotGoBackFailsTheCommunicator) {
  ncclComm comm;
  CollectiveCall first, second;
  first.comm = second.comm = &comm;
  take_sequence_number(first);
  take_sequence_number(second);
  release_sequence_number(first);  // not the newest: the peers will wait for it forever
  EXPECT_EQ(comm.async_error, ncclInternalError);
  EXPECT_NE(comm.async_message.find("can no longer match its peers"), std::string::npos) << comm.async_message;
  EXPECT_EQ(comm.next_seq, 3u);
}

}  // namespace
}  // namespace fakegpu::stub
