// Peer exchange as the coordinator sees it: who gets a mailbox, and collectives whose ranks move
// the data themselves, which it matches, checks and models but does not answer unless it fails
// them.
#include <unistd.h>

#include "job_fixture.h"
#include "peer_exchange.h"

namespace fakegpu::coord::testing {
namespace {

class JobPeerExchangeTest : public JobTest {
 protected:
  // Clients 1..n, each on a control ring that offered (or not) to exchange with its peers.
  void connect_ranks(int n, int without_offer = -1) {
    for (int r = 0; r < n; ++r) {
      connect(ClientId(r + 1), r);
      job.on_control_ring(ClientId(r + 1), r != without_offer);
    }
  }

  // Inits a comm of clients 1..n; returns its id and each client's frames.
  uint64_t init(int n, std::vector<std::vector<OutFrame>>* frames) {
    CommKey key = {};
    key.bytes[0] = static_cast<uint8_t>(++keys);
    for (int r = 0; r < n; ++r) post(ClientId(r + 1), CommInit{key, n, r, r, ""});
    frames->clear();
    for (int r = 0; r < n; ++r) frames->push_back(out.take(ClientId(r + 1)));
    const OutFrame& last = frames->at(0).back();
    EXPECT_EQ(last.type, MsgType::kCommInitDone);
    return decode_fields<CommInitDone>(last.fields.data(), last.fields.size()).comm_id;
  }

  uint64_t init_with_mailbox(int n) {
    std::vector<std::vector<OutFrame>> frames;
    uint64_t comm = init(n, &frames);
    for (auto& f : frames) EXPECT_EQ(f.size(), 2u);
    return comm;
  }

  Collective exchanged(uint64_t comm, int rank, uint64_t seq, uint64_t count, double ready_us) {
    Collective c = allreduce(comm, rank, seq, count);
    c.flags = kPeerExchange;
    c.ready_us = ready_us;
    return c;
  }

  CollectiveDone done_of(const OutFrame& f) {
    EXPECT_EQ(f.type, MsgType::kCollectiveDone);
    return decode_fields<CollectiveDone>(f.fields.data(), f.fields.size());
  }

  uint64_t exchanged_ops() { return job.report()["data_plane"]["peer_exchange_ops"].get<uint64_t>(); }
};

TEST_F(JobPeerExchangeTest, EveryMemberGetsTheMailboxAheadOfItsInitReply) {
  connect_ranks(4);
  std::vector<std::vector<OutFrame>> frames;
  const uint64_t comm = init(4, &frames);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    ASSERT_EQ(frames[r].size(), 2u);
    const OutFrame& offer = frames[r][0];
    ASSERT_EQ(offer.type, MsgType::kPeerMailbox);
    auto msg = decode_fields<PeerMailbox>(offer.fields.data(), offer.fields.size());
    EXPECT_EQ(msg.comm_id, comm);
    EXPECT_EQ(msg.nranks, 4);
    ASSERT_TRUE(offer.descriptor);
    // What the rank maps is a mailbox for 4 ranks of the announced size.
    EXPECT_NO_THROW(PeerExchange::map(dup(offer.descriptor->fd), msg.nranks, msg.bytes));
    EXPECT_EQ(frames[r][1].type, MsgType::kCommInitDone);
  }
  EXPECT_EQ(job.report()["data_plane"]["peer_mailboxes"], 1);
}

TEST_F(JobPeerExchangeTest, OneMemberWithoutTheOfferMeansNoMailbox) {
  connect_ranks(4, /*without_offer=*/2);
  std::vector<std::vector<OutFrame>> frames;
  init(4, &frames);
  for (auto& f : frames) EXPECT_EQ(f.size(), 1u) << "only CommInitDone";
  EXPECT_EQ(job.report()["data_plane"]["peer_mailboxes"], 0);
}

TEST_F(JobPeerExchangeTest, AnExchangedCollectiveIsCountedAndNotAnswered) {
  connect_ranks(4);
  const uint64_t comm = init_with_mailbox(4);
  for (int r = 0; r < 4; ++r) post(ClientId(r + 1), exchanged(comm, r, 1, 2, 0));
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(out.take(ClientId(r + 1)).empty()) << "rank " << r;
  EXPECT_EQ(exchanged_ops(), 1u);
  EXPECT_EQ(job.report()["data_plane"]["peer_exchange_bytes"], 8);
  EXPECT_EQ(job.completed_operations(), 1u);
}

TEST_F(JobPeerExchangeTest, AMismatchIsStillDiagnosedAndAnswered) {
  connect_ranks(4);
  const uint64_t comm = init_with_mailbox(4);
  for (int r = 0; r < 4; ++r) post(ClientId(r + 1), exchanged(comm, r, 1, r == 3 ? 4 : 2, 0));
  for (int r = 0; r < 4; ++r) {
    auto frames = out.take(ClientId(r + 1));
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_NE(error_text(frames[0]).find("SIZE_OR_SYNTAX_MISMATCH"), std::string::npos);
  }
  EXPECT_EQ(exchanged_ops(), 0u);
}

TEST_F(JobPeerExchangeTest, RanksThatDisagreeOnExchangingAreAStateMismatch) {
  connect_ranks(4);
  const uint64_t comm = init_with_mailbox(4);
  for (int r = 0; r < 4; ++r) {
    Collective c = r == 0 ? exchanged(comm, r, 1, 2, 0) : allreduce(comm, r, 1, 2);
    if (r) c.flags = kNoPayload;
    post(ClientId(r + 1), c);
  }
  for (int r = 0; r < 4; ++r) {
    auto frames = out.take(ClientId(r + 1));
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_NE(error_text(frames[0]).find("COLLECTIVE_STATE_MISMATCH"), std::string::npos);
  }
}

TEST_F(JobPeerExchangeTest, ExchangingWithoutAMailboxIsRefused) {
  for (int r = 0; r < 4; ++r) connect(ClientId(r + 1), r);  // no control rings
  const uint64_t comm = init_comm(4);
  post(ClientId(1), exchanged(comm, 0, 1, 2, 0));
  auto frames = out.take(ClientId(1));
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(error_text(frames[0]).find("does not have"), std::string::npos) << error_text(frames[0]);
}

// The time the ranks compute for an exchanged collective (the latest of their streams' times
// and the comm's clock, plus the uncontended time an earlier reply gave) is the coordinator's:
// the next collective starts exactly where it ends.
TEST_F(JobPeerExchangeTest, TheModeledTimeIsTheOneTheRanksCompute) {
  connect_ranks(4);
  const uint64_t comm = init_with_mailbox(4);
  auto answered = [&](uint64_t seq, double ready_us) {
    for (int r = 0; r < 4; ++r) {
      Collective c = allreduce(comm, r, seq, 2);
      c.flags = kNoPayload;
      c.ready_us = ready_us;
      post(ClientId(r + 1), c);
    }
    std::vector<CollectiveDone> done;
    for (int r = 0; r < 4; ++r) done.push_back(done_of(out.take(ClientId(r + 1)).at(0)));
    return done;
  };
  const auto first = answered(1, 5);
  ASSERT_TRUE(first[0].latency_bound) << "8 bytes on 4 GPUs";
  EXPECT_EQ(first[0].start_us, 5);
  EXPECT_EQ(first[0].modeled_us, first[0].uncontended_us);
  const double clock = first[0].start_us + first[0].modeled_us;

  // Streams that reached it before the comm's clock: it starts at the clock.
  for (int r = 0; r < 4; ++r) post(ClientId(r + 1), exchanged(comm, r, 2, 2, 1 + r));
  const double exchanged_end = clock + first[0].uncontended_us;  // what each rank computes
  const auto third = answered(3, 0);
  EXPECT_EQ(third[0].start_us, exchanged_end);
  EXPECT_EQ(exchanged_ops(), 1u);
}

}  // namespace
}  // namespace fakegpu::coord::testing
