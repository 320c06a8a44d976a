// Prices a group's calls on the coordinator's model without running them (ncclGroupSimulateEnd).
#include "simulate.h"

#include <algorithm>
#include <map>

namespace fakegpu::stub {

double simulate(const std::vector<CollectiveCall>& calls) {
  // The coordinator prices the calls on each communicator's modeled channels; a
  // non-blocking communicator still initialising has none yet and adds nothing.
  std::map<Client*, wire::Simulate> per_client;
  for (const CollectiveCall& c : calls) {
    if (c.comm->id == 0) continue;
    wire::Simulate& sim = per_client[c.comm->client.get()];
    sim.ops.push_back({c.comm->id, c.comm->rank, c.desc.coll, c.desc.root, std::max(c.send_bytes, c.recv_bytes)});
  }
  double modeled_us = 0;
  for (auto& [client, sim] : per_client)
    modeled_us = std::max(modeled_us, client->submit(sim)->reply<wire::SimulateDone>().time_us);
  return modeled_us;
}

}  // namespace fakegpu::stub
