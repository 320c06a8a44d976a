// The Server in this process, on a real unix socket (and tcp on loopback), talked to by a raw
// socket client: the greeting, frames it refuses, a rank that vanishes, and the token.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <thread>
#include <utility>

#include "job_fixture.h"
#include "server.h"

namespace fakegpu::coord::testing {
namespace {

namespace fs = std::filesystem;

// A client that speaks the wire protocol by hand over a blocking socket.
class RawClient {
 public:
  explicit RawClient(const Endpoint& endpoint) {
    if (endpoint.transport == Transport::kUnix) {
      fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, endpoint.address.c_str(), sizeof(addr.sun_path) - 1);
      connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    } else {
      TcpAddress tcp = parse_tcp_address(endpoint.address);
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(tcp.port);
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    }
    // A broken server fails the test instead of hanging it.
    timeval limit{30, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  void close() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }

  void send_bytes(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }

  template <typename Msg>
  void send(const Msg& msg, uint64_t request_id, const std::vector<uint8_t>& bulk = {}) {
    std::vector<uint8_t> fields = encode_fields(msg);
    std::vector<uint8_t> bytes(kHeaderBytes);
    encode_header({Msg::kType, request_id, static_cast<uint32_t>(fields.size()), fields.size() + bulk.size()},
                  bytes.data());
    bytes.insert(bytes.end(), fields.begin(), fields.end());
    bytes.insert(bytes.end(), bulk.begin(), bulk.end());
    send_bytes(bytes);
  }

  struct Frame {
    FrameHeader header;
    std::vector<uint8_t> body;
  };
  // The next frame, or nothing once the server has closed the connection.
  std::optional<Frame> receive() {
    uint8_t header[kHeaderBytes];
    if (!read_exactly(header, sizeof header)) return std::nullopt;
    Frame f{decode_header(header), {}};
    f.body.resize(f.header.body_bytes);
    if (!read_exactly(f.body.data(), f.body.size())) return std::nullopt;
    return f;
  }

  template <typename Msg>
  Msg receive_as() {
    std::optional<Frame> f = receive();
    if (!f) throw std::runtime_error("the server closed the connection");
    if (f->header.type == MsgType::kError && Msg::kType != MsgType::kError)
      throw std::runtime_error("error reply: " + decode_fields<ErrorReply>(f->body.data(), f->header.fields_bytes).message);
    if (f->header.type != Msg::kType) throw std::runtime_error(std::string("got ") + msg_type_name(f->header.type));
    return decode_fields<Msg>(f->body.data(), f->header.fields_bytes);
  }

  Welcome greet(const std::string& token = "") {
    Hello hello;
    hello.pid = 4242;
    hello.hostname = "test-host";
    hello.token = token;
    send(hello, 1);
    return receive_as<Welcome>();
  }

  // True once the server has closed the connection (frames before the end are skipped); false
  // when the receive timeout ran out first.
  bool closed_by_server() {
    while (receive()) {
    }
    return !timed_out_;
  }

 private:
  bool read_exactly(uint8_t* dst, size_t size) {
    while (size > 0) {
      ssize_t n = ::recv(fd_, dst, size, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        timed_out_ = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        return false;
      }
      dst += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool timed_out_ = false;
};

// A server running its loop on a thread of its own, over a temporary directory.
class ServerTest : public ::testing::Test {
 protected:
  ServerTest() {
    std::string pattern = (fs::temp_directory_path() / "fakegpu-server-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
  }
  ~ServerTest() override {
    stop();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  Endpoint unix_endpoint() const { return {Transport::kUnix, (dir_ / "coordinator.sock").string()}; }

  void start(const Endpoint& endpoint, const std::string& token = "") {
    server_ = std::make_unique<Server>(io_, endpoint, four_rank_cluster(), "test.yaml", token);
    endpoint_ = {endpoint.transport, server_->bound_address()};
    loop_ = std::thread([this] { server_->run(); });
  }

  void stop() {
    if (!loop_.joinable()) return;
    asio::post(io_, [this] {
      server_->stop();
      io_.stop();
    });
    loop_.join();
    server_.reset();
  }

  // Runs f on the server's loop, where the Job lives, and returns its result.
  template <typename F>
  auto on_loop(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }

  fs::path dir_;
  asio::io_context io_;
  std::unique_ptr<Server> server_;
  Endpoint endpoint_;
  std::thread loop_;
};

TEST_F(ServerTest, HelloIsAnsweredWithWelcome) {
  start(unix_endpoint());
  EXPECT_EQ(endpoint_.address, unix_endpoint().address);
  RawClient client(endpoint_);
  ASSERT_TRUE(client.connected());
  Welcome welcome = client.greet();
  EXPECT_EQ(welcome.world_size, 4u);
  EXPECT_EQ(welcome.cluster_name, "test");
  EXPECT_NE(welcome.client_id, 0u);
  EXPECT_EQ(on_loop([this] { return server_->job().ranks_seen(); }), 1u);
}

TEST_F(ServerTest, SocketFileIsPrivateAndRemovedAtStop) {
  start(unix_endpoint());
  const fs::path socket = unix_endpoint().address;
  ASSERT_TRUE(fs::is_socket(socket));
  EXPECT_EQ(fs::status(socket).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  stop();
  EXPECT_FALSE(fs::exists(socket));
}

TEST_F(ServerTest, TcpOnLoopbackBindsAFreePort) {
  start({Transport::kTcp, "127.0.0.1:0"});
  EXPECT_EQ(endpoint_.address.rfind("127.0.0.1:", 0), 0u) << endpoint_.address;
  EXPECT_NE(parse_tcp_address(endpoint_.address).port, 0) << endpoint_.address;
  RawClient client(endpoint_);
  ASSERT_TRUE(client.connected());
  EXPECT_EQ(client.greet().world_size, 4u);
}

TEST_F(ServerTest, TcpBeyondLoopbackNeedsAToken) {
  try {
    Server server(io_, {Transport::kTcp, "0.0.0.0:0"}, four_rank_cluster(), "test.yaml", "");
    FAIL() << "listened on every interface without a token";
  } catch (const ServerError& e) {
    EXPECT_NE(std::string(e.what()).find("without a token"), std::string::npos) << e.what();
  }
}

TEST_F(ServerTest, RefusesToReplaceAFileThatIsNotASocket) {
  const Endpoint endpoint = unix_endpoint();
  { std::ofstream(endpoint.address) << "not a socket"; }
  try {
    Server server(io_, endpoint, four_rank_cluster(), "test.yaml", "");
    FAIL() << "replaced a regular file";
  } catch (const ServerError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a socket"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_regular_file(endpoint.address));
}

TEST_F(ServerTest, BadMagicDropsOnlyThatClient) {
  start(unix_endpoint());
  RawClient bad(endpoint_);
  bad.send_bytes(std::vector<uint8_t>(kHeaderBytes, 0x5a));
  EXPECT_TRUE(bad.closed_by_server());
  RawClient good(endpoint_);
  EXPECT_EQ(good.greet().world_size, 4u);
}

TEST_F(ServerTest, LargeFrameBeforeHelloIsRefused) {
  start(unix_endpoint());
  RawClient stranger(endpoint_);
  std::vector<uint8_t> header(kHeaderBytes);
  encode_header({MsgType::kHello, 1, 16, uint64_t{64} << 20}, header.data());  // claims 64 MiB
  stranger.send_bytes(header);
  EXPECT_FALSE(stranger.receive()) << "answered instead of dropped";
  EXPECT_TRUE(stranger.closed_by_server());
}

TEST_F(ServerTest, AFirstFrameOtherThanHelloIsAnErrorAndAClose) {
  start(unix_endpoint());
  RawClient client(endpoint_);
  client.send(CommInfo{}, 1);
  std::optional<RawClient::Frame> reply = client.receive();
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->header.type, MsgType::kError);
  EXPECT_NE(decode_fields<ErrorReply>(reply->body.data(), reply->header.fields_bytes).message.find("expected Hello"),
            std::string::npos);
  EXPECT_TRUE(client.closed_by_server());
}

TEST_F(ServerTest, ARankThatDisconnectsFailsItsPeersOperation) {
  start(unix_endpoint());
  RawClient a(endpoint_), b(endpoint_);
  a.greet();
  b.greet();
  CommKey key{};
  key.bytes[0] = 7;
  a.send(CommInit{key, 2, 0, 0, "pair"}, 2);
  b.send(CommInit{key, 2, 1, 1, "pair"}, 2);
  const uint64_t comm = a.receive_as<CommInitDone>().comm_id;
  EXPECT_EQ(b.receive_as<CommInitDone>().comm_id, comm);

  Collective allreduce;
  allreduce.comm_id = comm;
  allreduce.dtype = static_cast<uint8_t>(DataType::kFloat32);
  allreduce.count = 2;
  a.send(allreduce, 3, std::vector<uint8_t>(2 * sizeof(float)));
  b.close();  // without destroying the communicator
  ErrorReply error = a.receive_as<ErrorReply>();
  EXPECT_NE(error.message.find("rank 1 of communicator " + std::to_string(comm)), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("disconnected without destroying it"), std::string::npos) << error.message;
}

class ServerTokenTest : public ServerTest {
 protected:
  ServerTokenTest() { start(unix_endpoint(), "open-sesame"); }
};

TEST_F(ServerTokenTest, NoTokenIsRefused) {
  RawClient client(endpoint_);
  try {
    client.greet();
    FAIL() << "a client without the token was welcomed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("requires a token"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(client.closed_by_server());
}

TEST_F(ServerTokenTest, AWrongTokenIsRefusedAndTheRightOneWelcomed) {
  RawClient wrong(endpoint_);
  try {
    wrong.greet("open-barley");
    FAIL() << "a wrong token was welcomed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(wrong.closed_by_server());
  RawClient right(endpoint_);
  EXPECT_EQ(right.greet("open-sesame").world_size, 4u);
}

}  // namespace
}  // namespace fakegpu::coord::testing
