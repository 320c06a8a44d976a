// The rank's side of peer exchange (common/wire/peer_exchange.h): which collectives its ranks run
// among themselves, running one through the communicator's mailbox, and what that needs from
// the coordinator's replies (the communicator's clock, the uncontended time of each
// latency-bound shape). A collective qualifies when its communicator has a mailbox, it is an
// AllReduce, Broadcast or AllGather of at most PeerExchange::kSlotBytes per rank, and an
// earlier reply priced its shape as latency-bound. Every member decides alike, from the same
// replies.
#pragma once

#include <cstdint>

#include "batch.h"
#include "group.h"
#include "wire.h"

namespace fakegpu::stub {

// Whether this process offers to exchange with its peers: FAKEGPU_PEER_EXCHANGE is on, its
// buffers are host memory and data moves (no staging, FAKEGPU_PAYLOAD=full).
bool peer_exchange_offered();

// Takes the mailbox the coordinator gave the communicator, once it is complete.
void adopt_peer_mailbox(ncclComm* comm);
// Records what a coordinator's reply to one of the comm's calls tells about its clock and sizes.
void learn_from_reply(ncclComm* comm, const wire::Collective& call, const wire::CollectiveDone& done);

// Posts the call through the mailbox when it qualifies (see above), noting it in *posted; false
// when it does not, and nothing was done.
bool post_exchanged(const CollectiveCall& call, double ready_us, uint64_t track, PostedBatch* posted);
// Whether finish_exchanged would not wait.
bool exchanged_ready(const PostedBatch& posted);
// Waits for the exchange, writes the result to the call's receive buffer and returns when the
// collective ends on the modeled clock. Throws the coordinator's error when it failed the call.
double finish_exchanged(const CollectiveCall& call, PostedBatch& posted);

}  // namespace fakegpu::stub
