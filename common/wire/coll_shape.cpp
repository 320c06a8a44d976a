#include "coll_shape.h"

namespace fakegpu {

using wire::CollType;

bool coll_shape(CollType type, uint64_t count, int rank, int root, int nranks, CollShape* out) {
  const uint64_t n = static_cast<uint64_t>(nranks);
  if (n != 0 && count > UINT64_MAX / n) return false;
  const uint64_t all = count * n;
  const bool is_root = rank == root;
  switch (type) {
    case CollType::kAllReduce: *out = {count, count}; break;
    case CollType::kBroadcast: *out = {is_root ? count : 0, count}; break;
    case CollType::kReduce: *out = {count, is_root ? count : 0}; break;
    case CollType::kAllGather: *out = {count, all}; break;
    case CollType::kReduceScatter: *out = {all, count}; break;
    case CollType::kAlltoAll: *out = {all, all}; break;
    case CollType::kGather: *out = {count, is_root ? all : 0}; break;
    case CollType::kScatter: *out = {is_root ? all : 0, count}; break;
    case CollType::kSend: *out = {count, 0}; break;
    case CollType::kRecv: *out = {0, count}; break;
  }
  return true;
}

bool is_reduction(CollType type) {
  return type == CollType::kAllReduce || type == CollType::kReduce || type == CollType::kReduceScatter;
}

bool has_root(CollType type) {
  return type == CollType::kBroadcast || type == CollType::kReduce || type == CollType::kGather ||
         type == CollType::kScatter;
}

bool is_point_to_point(CollType type) { return type == CollType::kSend || type == CollType::kRecv; }

}  // namespace fakegpu
