// The bookkeeping inits, splits and shrinks share, and the registry of communicators.
#include <gtest/gtest.h>

#include "comm_registry.h"
#include "rendezvous.h"

using namespace fakegpu::coord;

namespace {

Rendezvous::Arrival arrival(ClientId client, uint64_t request_id) {
  return {client, request_id, Rendezvous::Clock::now()};
}

}  // namespace

TEST(Rendezvous, CompletesWhenEveryExpectedRankHasArrived) {
  Rendezvous r;
  EXPECT_FALSE(r.sized());
  r.expect(3);
  EXPECT_TRUE(r.sized());
  EXPECT_FALSE(r.waiting()) << "nobody has come yet";
  EXPECT_FALSE(r.arrive(2, arrival(12, 1)));
  EXPECT_TRUE(r.waiting());
  EXPECT_FALSE(r.arrive(0, arrival(10, 1)));
  EXPECT_EQ(r.arrived_ranks(), (std::vector<int>{0, 2}));
  EXPECT_EQ(r.missing_ranks(), (std::vector<int>{1}));
  EXPECT_TRUE(r.arrive(1, arrival(11, 7)));
  EXPECT_TRUE(r.missing_ranks().empty());
  EXPECT_EQ(r.arrival(1).client, 11u);
  EXPECT_EQ(r.arrival(1).request_id, 7u);
}

TEST(Rendezvous, ExcludedRanksAreNeitherAwaitedNorMissing) {
  Rendezvous r;
  r.expect(4, {1, 3});
  EXPECT_TRUE(r.is_excluded(3));
  EXPECT_FALSE(r.is_excluded(2));
  EXPECT_FALSE(r.arrive(0, arrival(1, 1)));
  EXPECT_EQ(r.missing_ranks(), (std::vector<int>{2}));
  EXPECT_TRUE(r.arrive(2, arrival(3, 1)));
}

TEST(Rendezvous, TheFirstArrivalDatesIt) {
  Rendezvous r;
  r.expect(2);
  const auto early = Rendezvous::Clock::now();
  r.arrive(1, {5, 1, early});
  r.arrive(0, {6, 1, early + std::chrono::seconds(3)});
  EXPECT_EQ(r.first_at(), early);
}

TEST(Rendezvous, AFailedOneKeepsItsArrivals) {
  Rendezvous r;
  r.expect(2);
  r.arrive(0, arrival(4, 9));
  r.fail("rank 1 is gone");
  EXPECT_TRUE(r.failed());
  EXPECT_FALSE(r.waiting());
  EXPECT_EQ(r.failure(), "rank 1 is gone");
  // A rank arriving late is told the failure, not taken for a repeat: the arrivals stay.
  EXPECT_TRUE(r.has_arrived(0));
  EXPECT_TRUE(r.any_arrival([](const Rendezvous::Arrival& a) { return a.client == 4; }));
  EXPECT_FALSE(r.any_arrival([](const Rendezvous::Arrival& a) { return a.client == 5; }));
}

TEST(Rendezvous, SplitsSortBeforeShrinksAndLabelTheirCall) {
  EXPECT_LT((RegroupKey{Regroup::kSplit, 9, 9}), (RegroupKey{Regroup::kShrink, 1, 0}));
  EXPECT_LT((RegroupKey{Regroup::kSplit, 1, 2}), (RegroupKey{Regroup::kSplit, 1, 3}));
  EXPECT_STREQ(regroup_call(Regroup::kSplit), "ncclCommSplit");
  EXPECT_STREQ(regroup_call(Regroup::kShrink), "ncclCommShrink");
}

TEST(CommRegistry, HandsOutIdsAndFindsMembers) {
  CommRegistry comms(8);
  Comm& a = comms.create();
  a.members = {{/*client=*/1}, {/*client=*/2}};
  Comm& b = comms.create();
  b.members = {{/*client=*/2}};
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(b.id, 2u);
  EXPECT_EQ(comms.find(2), &b);
  EXPECT_EQ(comms.find(3), nullptr);
  EXPECT_EQ(comms.comms_of(2), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(comms.has_member(1));
  EXPECT_FALSE(comms.has_member(3));
}

TEST(CommRegistry, RetiredEntriesAreKeptUpToTheBound) {
  CommRegistry comms(2);
  for (int i = 0; i < 3; ++i) {
    Comm& c = comms.create();
    c.members = {{/*client=*/7}};
    comms.retire(c.id, {{"id", c.id}});
  }
  EXPECT_EQ(comms.find(1), nullptr);
  EXPECT_FALSE(comms.has_member(7));
  ASSERT_EQ(comms.retired().size(), 2u);
  EXPECT_EQ(comms.retired().front()["id"], 2) << "the newest entries stay";
  EXPECT_EQ(comms.not_listed(), 1u);
  EXPECT_EQ(comms.create().id, 4u) << "ids are never reused";
}
