// A CUDA graph as fakegpu records it: the work captured from a stream (and from streams that
// joined the capture through events), in capture order. Replaying runs the nodes in that order
// on the launch stream, which is a valid order for any dependencies the capture expressed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "streams.h"

namespace fakegpu::cuda {

struct GraphNode {
  std::function<void()> work;
  int64_t cost_ns = 0;
  WorkKind kind = kUntracked;
};

// A resource handed to graphs (cudaUserObjectCreate), such as the data of a captured host
// function: `destroy(ptr)` runs when the last reference goes, the program's or a graph's.
class UserObject {
 public:
  UserObject(void* ptr, void (*destroy)(void*)) : ptr_(ptr), destroy_(destroy) {}
  ~UserObject() { destroy_(ptr_); }
  UserObject(const UserObject&) = delete;
  UserObject& operator=(const UserObject&) = delete;

 private:
  void* const ptr_;
  void (*const destroy_)(void*);
};

// References to one user object: the object, kept alive while count > 0.
struct UserObjectRefs {
  std::shared_ptr<UserObject> object;
  unsigned count = 0;
};

struct Graph {
  std::vector<GraphNode> nodes;
  // The user objects the graph holds. An instance is a copy, so it holds them too: they live
  // until the graph and all its instances are destroyed (and their launches have run).
  std::map<UserObject*, UserObjectRefs> user_objects;
  bool invalidated = false;  // a capture that hit an unsupported call
  unsigned long long capture_id = 0;
};

}  // namespace fakegpu::cuda
