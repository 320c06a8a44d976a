// Who sends how much to whom, per channel and step, for each algorithm: the one description of
// an algorithm's traffic. The per-link plan (estimate.cpp) and `fgpu model --flows` both read it.
#include <algorithm>

#include "comm_model.h"

namespace fakegpu::planner {

using wire::CollType;

std::vector<Flow> CommModel::flow_plan(CollType coll, int algo, int root) const {
  const int n = nranks();
  std::vector<Flow> out;
  auto add = [&](int channel, int step, int steps, int src, int dst, double bytes) {
    if (src != dst && bytes > 0) out.push_back({channel, step, steps, src, dst, bytes});
  };
  if (algo == kRing || algo == kPat) {
    const int nc = static_cast<int>(rings_.size());
    for (int c = 0; c < nc; ++c) {
      const auto& ring = rings_[c];
      auto next = [&](int i) { return ring[(i + 1) % n]; };
      if (coll == CollType::kBroadcast || coll == CollType::kReduce) {
        // A chain: Broadcast flows away from the root, Reduce into it, one hop after another.
        int at = static_cast<int>(std::find(ring.begin(), ring.end(), root) - ring.begin());
        int first = coll == CollType::kBroadcast ? at : at + 1;
        for (int k = 0; k < n - 1; ++k) add(c, k, 1, ring[(first + k) % n], next((first + k) % n), 1.0 / nc);
      } else {
        // Every rank passes one chunk of the channel's share to the next at every step.
        int steps = coll == CollType::kAllReduce ? 2 * (n - 1) : n - 1;
        for (int i = 0; i < n; ++i) add(c, 0, steps, ring[i], next(i), 1.0 / (static_cast<double>(nc) * n));
      }
    }
  } else if (algo == kTree) {
    const int nc = static_cast<int>(trees_.size());
    for (int c = 0; c < nc; ++c) {
      const auto& tree = trees_[c];
      std::vector<int> depth(n, 0);
      int deepest = 0;
      for (int r = 0; r < n; ++r) {
        for (int up = tree[r].parent; up >= 0; up = tree[up].parent) ++depth[r];
        deepest = std::max(deepest, depth[r]);
      }
      // Reduce from the leaves up, then broadcast from the root down.
      for (int r = 0; r < n; ++r) {
        int parent = tree[r].parent;
        if (parent < 0) continue;
        add(c, deepest - depth[r], 1, r, parent, 1.0 / nc);
        add(c, deepest + depth[r] - 1, 1, parent, r, 1.0 / nc);
      }
    }
  } else if (algo == kNvls || algo == kNvlsTree) {
    // Inside a node the switch reduces (multimem loads) and multicasts (multimem stores): a
    // GPU sends every byte once for the reduction and its own share once for the multicast;
    // with SHARP across nodes each share goes through the network in between.
    const bool network = algo == kNvls && nnodes() > 1;
    const int multicast = network ? 4 : 2;
    for (auto& ranks : node_ranks_) {
      const double k = static_cast<double>(ranks.size());
      for (int r : ranks) {
        int c = static_cast<int>(std::find(ranks.begin(), ranks.end(), r) - ranks.begin());
        if (coll == CollType::kAllGather) {
          add(c, 0, 1, r, Flow::kSwitch, 1 / k), add(c, 1, 1, Flow::kSwitch, r, 1);
          continue;
        }
        add(c, 0, 1, r, Flow::kSwitch, 1), add(c, 1, 1, Flow::kSwitch, r, 1 / k);
        if (coll == CollType::kReduceScatter) continue;
        if (network) add(c, 2, 1, r, Flow::kNetwork, 1 / k), add(c, 3, 1, Flow::kNetwork, r, 1 / k);
        add(c, multicast, 1, r, Flow::kSwitch, 1 / k), add(c, multicast + 1, 1, Flow::kSwitch, r, 1);
      }
    }
    if (algo == kNvlsTree) {
      // Across nodes only the NVLS heads talk (NCCL's connectNvls): one GPU beside each NIC, as
      // many as the NVLS graph has channels. Head h carries its share of the buffer to head h
      // of the parent node and back, on both halves of the double binary tree.
      const int nheads = std::max(1, graphs_[kNvlsTree].channels);
      std::vector<std::vector<int>> heads(nnodes());
      for (int nd = 0; nd < nnodes(); ++nd) {
        heads[nd] = nic_heads(nd);
        if (heads[nd].empty()) heads[nd] = node_ranks_[nd];  // no NIC known: the node's GPUs in turn
      }
      for (int half = 0; half < 2; ++half) {
        // The first channel on this half (tree_half), or the last one when it has none.
        const size_t first = static_cast<size_t>(half) * std::max(1, graphs_[kRing].channels);
        const auto& tree = trees_[std::min(first, trees_.size() - 1)];
        for (int nd = 0; nd < nnodes(); ++nd) {
          // The node's parent in this half: where the rank that leaves the node points.
          int parent = -1;
          for (int r : node_ranks_[nd])
            if (tree[r].parent >= 0 && node_of_[tree[r].parent] != nd) parent = tree[r].parent;
          if (parent < 0) continue;
          const auto& mine = heads[nd];
          const auto& theirs = heads[node_of_[parent]];
          for (int h = 0; h < nheads; ++h) {
            int a = mine[h % mine.size()], b = theirs[h % theirs.size()];
            add(h, 2, 1, a, b, 0.5 / nheads), add(h, 3, 1, b, a, 0.5 / nheads);
          }
        }
      }
    }
  } else if (algo == kCollNetDirect || algo == kCollNetChain) {
    // Each NIC's head GPU owns an equal share of the buffer: the node reduces every share onto
    // its head (directly, or along a chain from the head), the head exchanges it with the
    // network's switches, and the result comes back the same way.
    for (int nd = 0; nd < nnodes(); ++nd) {
      const auto& ranks = node_ranks_[nd];
      const std::vector<int> heads = nic_heads(nd);
      const double share = 1.0 / heads.size();
      const int k = static_cast<int>(ranks.size());
      for (int h = 0; h < static_cast<int>(heads.size()); ++h) {
        const int head = heads[h];
        const int up_steps = algo == kCollNetDirect ? 1 : k - 1;
        add(h, up_steps, 1, head, Flow::kNetwork, share), add(h, up_steps + 1, 1, Flow::kNetwork, head, share);
        if (algo == kCollNetDirect) {
          for (int r : ranks) add(h, 0, 1, r, head, share), add(h, up_steps + 2, 1, head, r, share);
        } else {
          int at = static_cast<int>(std::find(ranks.begin(), ranks.end(), head) - ranks.begin());
          for (int i = 1; i < k; ++i) {
            int up = ranks[(at + i - 1) % k], down = ranks[(at + i) % k];
            add(h, k - 1 - i, 1, down, up, share), add(h, up_steps + 1 + i, 1, up, down, share);
          }
        }
      }
    }
  } else {  // point-to-point patterns, one step
    for (int r = 0; r < n; ++r) {
      switch (coll) {
        case CollType::kAlltoAll:
          for (int q = 0; q < n; ++q) add(0, 0, 1, r, q, 1.0 / n);
          break;
        case CollType::kGather:
          add(0, 0, 1, r, root, 1.0 / n);
          break;
        case CollType::kScatter:
          add(0, 0, 1, root, r, 1.0 / n);
          break;
        default:  // Send/Recv as nccl-tests runs it: every rank to the next
          add(0, 0, 1, r, (r + 1) % n, 1.0);
      }
    }
  }
  return out;
}

}  // namespace fakegpu::planner
