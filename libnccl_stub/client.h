// The rank's persistent connection to the coordinator. Any thread may submit requests; one
// receiver thread reads replies and hands each to the request that is waiting for it, writing
// bulk data straight into the destination buffer the request named.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "endpoint.h"
#include "errors.h"
#include "wire.h"

namespace fakegpu::stub {

class Request {
 public:
  void wait();
  bool ready() const;
  // Decodes the reply as Msg; throws NcclError carrying the coordinator's error instead.
  template <typename Msg>
  Msg reply() {
    wait();
    check();
    if (reply_type_ != Msg::kType)
      throw NcclError(ncclInternalError, std::string("coordinator answered ") + wire::msg_type_name(reply_type_) +
                                             ", expected " + wire::msg_type_name(Msg::kType));
    return wire::decode_fields<Msg>(fields_.data(), fields_.size());
  }

 private:
  friend class Client;
  void check() const;
  void finish(ncclResult_t status, std::string error);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  ncclResult_t status_ = ncclSuccess;
  std::string error_;
  wire::MsgType reply_type_{};
  std::vector<uint8_t> fields_;
  void* bulk_dst_ = nullptr;
  size_t bulk_capacity_ = 0;
};

class Client {
 public:
  // The process's connection to the coordinator at this endpoint, made (with the handshake)
  // on first use. Throws NcclError when the coordinator cannot be reached or refuses us.
  static std::shared_ptr<Client> get(const Endpoint& endpoint);

  // Sends msg with optional bulk data. reply_dst receives the reply's bulk data, which must
  // not exceed reply_capacity bytes.
  template <typename Msg>
  std::shared_ptr<Request> submit(const Msg& msg, const void* bulk = nullptr, size_t bulk_bytes = 0,
                                  void* reply_dst = nullptr, size_t reply_capacity = 0) {
    return submit_raw(Msg::kType, wire::encode_fields(msg), bulk, bulk_bytes, reply_dst, reply_capacity);
  }

  const wire::Welcome& welcome() const { return welcome_; }
  const Endpoint& endpoint() const { return endpoint_; }

 private:
  explicit Client(Endpoint endpoint);
  void connect_with_retry();
  void handshake();
  std::shared_ptr<Request> submit_raw(wire::MsgType type, std::vector<uint8_t> fields, const void* bulk,
                                      size_t bulk_bytes, void* reply_dst, size_t reply_capacity);
  void receive_loop();
  void read_exact(void* dst, size_t n);
  void fail_all(const std::string& why);

  Endpoint endpoint_;
  int fd_ = -1;
  wire::Welcome welcome_;
  std::mutex send_mu_;  // one frame on the wire at a time
  std::mutex mu_;       // guards the fields below
  std::map<uint64_t, std::shared_ptr<Request>> pending_;
  uint64_t next_request_ = 1;
  std::string broken_;  // why the connection is gone, once it is
};

}  // namespace fakegpu::stub
