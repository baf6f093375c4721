// Copyright 2026 The kvstore Authors.
//
// FakeRespServer: a scriptable RESP2 server on 127.0.0.1 for client tests.
// It parses each complete request (SET's value included), records it, and
// answers with what the test's handler says: any reply bytes, nothing, or a
// hang-up. The default answer is +OK to every command.
//
//   FakeRespServer server;
//   server.On("GET", [](const FakeRespServer::Request&) {
//     return FakeRespServer::Reply::Bulk("v");
//   });
//   ... point the client at server.address() ...
//   EXPECT_EQ(server.received()[0].args[0], "SET");
//
// Handlers run on the connection's own thread (one per connection), with
// no lock of the server held; they may keep per-connection state keyed by
// Request::connection, and must be thread-safe if connections overlap.
// Test-only (testonly = True).

#ifndef KVSTORE_TESTS_TESTING_FAKE_RESP_SERVER_H_
#define KVSTORE_TESTS_TESTING_FAKE_RESP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace testing {

class FakeRespServer {
 public:
  // One complete request as received.
  struct Request {
    size_t connection = 0;          // 0-based, in the order accepted
    std::vector<std::string> args;  // the command and its arguments
  };
  // What the server does with a request.
  struct Reply {
    std::string bytes;     // sent as is (may be empty: no answer)
    bool hang_up = false;  // close the connection instead of answering

    static Reply Ok() { return Raw("+OK\r\n"); }
    static Reply Raw(std::string bytes) { return Reply{std::move(bytes), false}; }
    static Reply Error(const std::string& message) { return Raw("-" + message + "\r\n"); }
    static Reply Bulk(const std::string& value);
    static Reply Nothing() { return Reply{}; }
    static Reply HangUp() { return Reply{"", true}; }
  };
  using Handler = std::function<Reply(const Request&)>;

  // Listens on an ephemeral port of 127.0.0.1; a failure is a test failure.
  FakeRespServer();
  // Closes every connection and joins every thread.
  ~FakeRespServer();
  FakeRespServer(const FakeRespServer&) = delete;
  FakeRespServer& operator=(const FakeRespServer&) = delete;

  // The handler for `command` (case-insensitive), replacing any before.
  void On(const std::string& command, Handler handler);
  // The handler for commands that have none of their own (default: Ok()).
  void OnAnyOther(Handler handler);

  std::string address() const;  // "127.0.0.1:port"
  int port() const { return port_; }
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }
  // Every complete request so far, in the order they were parsed.
  std::vector<Request> received() const;
  // The first request of each connection, arguments joined by spaces
  // ("" for a connection that sent nothing yet).
  std::vector<std::string> first_commands() const;

  // Shuts down every connection accepted so far: each client sees its end
  // of the stream, as when a server restarts.
  void DropConnections();

 private:
  void AcceptLoop();
  void Serve(int fd, size_t connection);
  Handler HandlerFor(const std::string& command) const;

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Handler> handlers_ ABSL_GUARDED_BY(mu_);
  Handler any_other_ ABSL_GUARDED_BY(mu_);
  std::vector<Request> received_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> first_commands_ ABSL_GUARDED_BY(mu_);
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> connection_threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_TESTING_FAKE_RESP_SERVER_H_
