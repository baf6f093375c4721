// Copyright 2026 The kvstore Authors.
//
// The peer socket's framing and its listener's handshake, on loopback.

#include "server/cluster/peer/peer_socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/metrics/registry.h"
#include "common/metrics/testing.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/peer/peer_listener.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::Eventually;

absl::Time Soon() { return absl::Now() + absl::Seconds(30); }

// A connected pair of non-blocking stream sockets.
struct Pair {
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0); }
  ~Pair() {
    close(fds[0]);
    close(fds[1]);
  }
  int fds[2];
};

v1::ReplicateRequest Write(uint64_t seq, size_t bytes) {
  v1::ReplicateRequest w;
  w.set_seq(seq);
  w.set_key(absl::StrCat("k", seq));
  w.set_entry(std::string(bytes, static_cast<char>('a' + seq % 26)));
  return w;
}

TEST(FrameReaderTest, FramesArriveWholeWhateverTheSendersPieces) {
  Pair p;
  std::string out;
  for (uint64_t i = 1; i <= 40; ++i) AppendFrame(Write(i, 1000 * i), &out);
  // Sent a few bytes at a time at first, then in large pieces: each frame
  // comes out whole and in order.
  FrameReader reader;
  size_t sent = 0;
  uint64_t next = 1;
  while (next <= 40) {
    if (sent < out.size()) {
      const size_t piece = sent < 100 ? 3 : 70000;
      ASSERT_TRUE(SendAll(p.fds[0], absl::string_view(out).substr(sent, piece), Soon()).ok());
      sent = std::min(out.size(), sent + piece);
    }
    for (;;) {
      auto frame = reader.Next();
      ASSERT_TRUE(frame.ok()) << frame.status();
      if (!frame->has_value()) break;
      v1::ReplicateRequest w;
      ASSERT_TRUE(w.ParseFromArray((*frame)->data(), static_cast<int>((*frame)->size())));
      EXPECT_EQ(w.seq(), next);
      EXPECT_EQ(w.entry().size(), 1000 * next);
      ++next;
    }
    if (next <= 40) {
      const ssize_t n = reader.Receive(p.fds[1]);
      ASSERT_TRUE(n > 0 || errno == EAGAIN) << n;
    }
  }
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(FrameReaderTest, AnOversizedLengthIsDataLoss) {
  Pair p;
  const char header[4] = {'\xff', '\xff', '\xff', '\x7f'};
  ASSERT_TRUE(SendAll(p.fds[0], absl::string_view(header, 4), Soon()).ok());
  FrameReader reader;
  v1::ReplicateRequest w;
  EXPECT_EQ(ReadFrame(p.fds[1], reader, &w, Soon()).code(), absl::StatusCode::kDataLoss);
}

TEST(FrameReaderTest, EofAndSilenceAreErrorsNotHangs) {
  Pair p;
  FrameReader reader;
  v1::ReplicateRequest w;
  EXPECT_EQ(ReadFrame(p.fds[1], reader, &w, absl::Now()).code(),
            absl::StatusCode::kDeadlineExceeded);
  shutdown(p.fds[0], SHUT_WR);
  EXPECT_EQ(ReadFrame(p.fds[1], reader, &w, Soon()).code(), absl::StatusCode::kUnavailable);
}

// A listener whose "echo" handler answers each ReplicateRequest with a
// ReplicateResponse naming its seq.
class PeerListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PeerListenerOptions o;
    o.secret = "s3cret";
    o.hello_timeout = absl::Seconds(30);
    absl::flat_hash_map<std::string, PeerListener::Handler> handlers;
    handlers["echo"] = [this](int fd, FrameReader& reader, const std::string& peer) {
      peer_ = peer;
      int on = 0;
      socklen_t len = sizeof(on);
      if (getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len) == 0) served_keepalive_ = on;
      v1::ReplicateRequest w;
      while (ReadFrame(fd, reader, &w, absl::InfiniteFuture()).ok()) {
        v1::ReplicateResponse r;
        r.set_applied_seq(w.seq());
        std::string out;
        AppendFrame(r, &out);
        if (!SendAll(fd, out, Soon()).ok()) break;
      }
      ended_ = true;
    };
    auto l = PeerListener::Start(o, &registry_, std::move(handlers));
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = *std::move(l);
  }

  // Connects and says hello; returns the socket and the welcome's status.
  std::pair<int, absl::Status> Hello(const std::string& secret, const std::string& purpose) {
    auto fd = ConnectTo(absl::StrCat("127.0.0.1:", listener_->port()), Soon());
    EXPECT_TRUE(fd.ok()) << fd.status();
    v1::PeerSocketHello hello;
    hello.set_secret(secret);
    hello.set_node_id("node-a");
    hello.set_purpose(purpose);
    std::string out;
    AppendFrame(hello, &out);
    EXPECT_TRUE(SendAll(*fd, out, Soon()).ok());
    v1::PeerSocketWelcome welcome;
    absl::Status s = ReadFrame(*fd, reader_, &welcome, Soon());
    if (s.ok()) s = StatusFromBytes(welcome.status());
    return {*fd, s};
  }

  void TearDown() override {
    // The handlers write the members below: their threads end first.
    if (listener_ != nullptr) listener_->Stop();
  }

  uint64_t Counter(const std::string& name) { return metrics::testing::Value(registry_, name); }

  metrics::Registry registry_;
  std::unique_ptr<PeerListener> listener_;
  FrameReader reader_;
  std::string peer_;
  std::atomic<bool> ended_{false};
  std::atomic<int> served_keepalive_{-1};  // SO_KEEPALIVE of the handler's socket
};

TEST_F(PeerListenerTest, AdmittedConnectionReachesItsHandler) {
  auto [fd, s] = Hello("s3cret", "echo");
  ASSERT_TRUE(s.ok()) << s;
  std::string out;
  for (uint64_t i = 1; i <= 3; ++i) AppendFrame(Write(i, 5000), &out);
  ASSERT_TRUE(SendAll(fd, out, Soon()).ok());
  for (uint64_t i = 1; i <= 3; ++i) {
    v1::ReplicateResponse r;
    ASSERT_TRUE(ReadFrame(fd, reader_, &r, Soon()).ok());
    EXPECT_EQ(r.applied_seq(), i);
  }
  EXPECT_EQ(peer_, "node-a");
  EXPECT_EQ(Counter("kvstore_peer_socket_accepted_total"), 1u);
  // Stop() ends the handler's read, and the connection with it.
  listener_->Stop();
  EXPECT_TRUE(ended_);
  close(fd);
}

TEST_F(PeerListenerTest, WrongSecretAndUnknownPurposeAreRefusedWithTheReason) {
  auto [fd1, wrong] = Hello("guess", "echo");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated) << wrong;
  auto [fd2, unknown] = Hello("s3cret", "shell");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument) << unknown;
  // Both are closed by the listener after the refusal.
  v1::ReplicateResponse r;
  EXPECT_EQ(ReadFrame(fd1, reader_, &r, Soon()).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Eventually([&] { return Counter("kvstore_peer_socket_refused_total") == 2u; }));
  EXPECT_EQ(Counter("kvstore_peer_socket_accepted_total"), 0u);
  close(fd1);
  close(fd2);
}

TEST_F(PeerListenerTest, BothEndsProbeForAPeerThatWentSilent) {
  // A backup's reader blocks in recv() while its primary is idle: without
  // keepalive, a primary lost behind a partition would hold it for good.
  auto [fd, s] = Hello("s3cret", "echo");
  ASSERT_TRUE(s.ok()) << s;
  int on = 0;
  socklen_t len = sizeof(on);
  ASSERT_EQ(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len), 0);
  EXPECT_EQ(on, 1);
  unsigned int user_timeout = 0;
  len = sizeof(user_timeout);
  ASSERT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, &len), 0);
  EXPECT_GT(user_timeout, 0u);
  // And the listener's end: the handler's socket.
  EXPECT_TRUE(Eventually([&] { return served_keepalive_ == 1; }));
  close(fd);
}

TEST_F(PeerListenerTest, ConnectToANonListeningPortFailsClearly) {
  const int port = listener_->port();
  listener_.reset();
  auto fd = ConnectTo(absl::StrCat("127.0.0.1:", port), Soon());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(fd.status().message()), ::testing::HasSubstr("cannot connect"));
  EXPECT_EQ(ConnectTo("no-port", Soon()).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
