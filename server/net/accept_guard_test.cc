// Copyright 2026 The kvstore Authors.
//
// The guard against real sockets and a real gRPC server in this process:
// the cap on a guarded port, pass-through for other ports, and a gRPC
// listener that accepts again after running out of descriptors.

#include "server/net/accept_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/eventually.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"

namespace kvstore {
namespace server {
namespace net {
namespace {

using ::kvstore::testing::Eventually;

// Non-blocking, as gRPC's listeners are: an accept with nothing pending
// fails with EAGAIN instead of waiting.
int Listen(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(fd, 512), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

// Connects `fd` (a TCP socket) to `port` on loopback.
int ConnectSocket(int fd, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

int Connect(int port) {
  return ConnectSocket(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port);
}

TEST(AcceptGuardTest, IsTheProcessAccept4) { EXPECT_TRUE(AcceptGuard::Interposed()); }

TEST(AcceptGuardTest, CapsOpenConnectionsOnAGuardedPort) {
  int port = 0;
  const int listener = Listen(&port);
  AcceptGuard::Get().LimitPort(port, 2);
  std::vector<int> clients;
  for (int i = 0; i < 5; ++i) clients.push_back(Connect(port));
  std::vector<int> accepted;
  for (;;) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      EXPECT_EQ(errno, EAGAIN);
      break;
    }
    accepted.push_back(fd);
  }
  EXPECT_EQ(accepted.size(), 2u);
  GuardedPortStats s = AcceptGuard::Get().Stats(port);
  EXPECT_EQ(s.open, 2u);
  EXPECT_EQ(s.refused_at_cap, 3u);
  // Closing one makes room for the next.
  close(accepted.back());
  accepted.pop_back();
  clients.push_back(Connect(port));
  ASSERT_TRUE(Eventually([&] {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) accepted.push_back(fd);
    return fd >= 0;
  }));
  EXPECT_EQ(AcceptGuard::Get().Stats(port).open, 2u);
  AcceptGuard::Get().ForgetPort(port);
  // Unguarded: the C library's behaviour, no cap.
  for (int i = 0; i < 3; ++i) clients.push_back(Connect(port));
  int more = 0;
  ASSERT_TRUE(Eventually([&] {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      accepted.push_back(fd);
      ++more;
    }
    return more == 3;
  }));
  for (int fd : accepted) close(fd);
  for (int fd : clients) close(fd);
  close(listener);
}

// gRPC 1.51's listener stops for good after an EMFILE from accept4. Here the
// process runs out of descriptors while connections arrive at a gRPC port;
// once descriptors are back, a new channel must connect.
TEST(AcceptGuardTest, GrpcListenerAcceptsAgainAfterRunningOutOfDescriptors) {
  // A synchronous service (every method unimplemented), so that the
  // server's own threads poll the listener, as kvserver's do.
  kvstore::v1::KvControl::Service service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  AcceptGuard::Get().LimitPort(port, 1000);

  // The client sockets exist before the table fills: connecting them then
  // takes no descriptor here, while each connection the server accepts
  // needs one it cannot get. (Making them afterwards raced with the
  // server's accepts for the last free slots.)
  std::vector<int> clients;
  for (int i = 0; i < 10; ++i) clients.push_back(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Fill the table up to a low soft limit with our own descriptors, then
  // connect: the server side has no descriptor left for the connections.
  rlimit low = saved;
  low.rlim_cur = 200;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (;;) {
    int fd = dup(0);
    if (fd < 0) break;
    filler.push_back(fd);
  }
  // The server's accept of these connections finds the table full.
  for (int fd : clients) ConnectSocket(fd, port);
  // gRPC's poller meets EMFILE on these connections.
  ASSERT_TRUE(Eventually([&] { return AcceptGuard::Get().Stats(port).refused_no_fd > 0; }))
      << "the listener never ran out of descriptors: the test proves nothing";
  for (int fd : filler) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  for (int fd : clients) close(fd);

  EXPECT_TRUE(Eventually([&] {
    grpc::ChannelArguments args;
    args.SetInt("kvstore.test.unique",
                static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count()));
    auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                             grpc::InsecureChannelCredentials(), args);
    return channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(2));
  })) << "the gRPC listener no longer accepts";
  AcceptGuard::Get().ForgetPort(port);
  server->Shutdown();
}

}  // namespace
}  // namespace net
}  // namespace server
}  // namespace kvstore
