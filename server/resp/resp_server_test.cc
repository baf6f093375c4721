// Copyright 2026 The kvstore Authors.
//
// RespServer over real sockets on 127.0.0.1 with an ephemeral port. The
// store, and with it the loops' timeouts and space waits, runs on a fake
// clock: a timeout ends when a test advances it, and the loops look for
// expired connections every few milliseconds, so a test waits for the
// outcome with Eventually() rather than sleeping past a deadline.

#include "server/resp/resp_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/metrics/testing.h"
#include "common/protocol/layout.h"
#include "common/protocol/resp.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/fake_clock.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;
using ::kvstore::testing::Eventually;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class RespServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(RespServerOptions()); }
  void Start(RespServerOptions o, uint64_t index_bytes = 1 << 20, uint64_t pool_bytes = 64 << 20,
             absl::Duration grace = absl::Milliseconds(10)) {
    server_.reset();
    store_.reset();
    MemoryPoolOptions po;
    po.data_bytes = pool_bytes;
    po.index_bytes = index_bytes;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.grace_period = grace;
    so.limits.max_value_bytes = 8 << 20;
    so.clock = &clock_;
    // No cleaner thread: its passes (every 50 ms of real time) would move
    // entries, and change which segments come free when, at moments the
    // test does not choose. Allocation reclaims what is due by itself.
    so.cleaner_interval = absl::ZeroDuration();
    store_ = *KvStore::Create(pool_.get(), so);
    o.port = 0;
    o.timeout_check_interval = absl::Milliseconds(5);
    o.threads = 2;
    auto s = RespServer::Start(store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  // rcvbuf > 0: a fixed receive buffer, set before connecting so the window
  // is negotiated for it (a reader whose window stays small).
  int Connect(int rcvbuf = 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server_->port());
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    // Generous: a read returns as soon as its reply is there; this bounds
    // only how long a broken test hangs.
    timeval tv{60, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
  }
  static void Send(int fd, absl::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      data.remove_prefix(n);
    }
  }
  // Reads `n` complete replies (or until EOF).
  static std::vector<resp::Reply> Read(int fd, size_t n, bool* eof = nullptr) {
    std::vector<resp::Reply> out;
    std::string buf;
    char tmp[65536];
    while (out.size() < n) {
      auto r = resp::ParseReply(buf, resp::ReplyLimits());
      if (r.ok() && r->complete) {
        out.push_back(r->reply);
        buf.erase(0, r->consumed);
        continue;
      }
      ssize_t got = recv(fd, tmp, sizeof(tmp), 0);
      if (got <= 0) {
        if (eof) *eof = true;
        break;
      }
      buf.append(tmp, got);
    }
    return out;
  }
  static bool ClosedByPeer(int fd) {
    char c;
    return recv(fd, &c, 1, 0) == 0;
  }
  static std::string Cmd(std::vector<absl::string_view> args) {
    std::string out;
    resp::AppendCommand(&out, args);
    return out;
  }

  FakeClock clock_;  // outlives the store, which reads it
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<RespServer> server_;
};

TEST_F(RespServerTest, PipelinedCommands) {
  int fd = Connect();
  std::string batch;
  for (int i = 0; i < 100; ++i) {
    batch += Cmd({"SET", absl::StrCat("k", i), absl::StrCat("v", i)});
  }
  for (int i = 0; i < 100; ++i) batch += Cmd({"GET", absl::StrCat("k", i)});
  batch += Cmd({"DBSIZE"}) + Cmd({"EXISTS", "k1", "k2", "nope"}) + Cmd({"DEL", "k1", "nope"}) +
           Cmd({"GET", "k1"}) + Cmd({"PING"});
  Send(fd, batch);
  auto replies = Read(fd, 205);
  ASSERT_EQ(replies.size(), 205u);
  EXPECT_EQ(replies[0].str, "OK");
  EXPECT_EQ(replies[100].str, "v0");
  EXPECT_EQ(replies[199].str, "v99");
  EXPECT_EQ(replies[200].integer, 100);
  EXPECT_EQ(replies[201].integer, 2);
  EXPECT_EQ(replies[202].integer, 1);
  EXPECT_EQ(replies[203].type, resp::Reply::Type::kNull);
  EXPECT_EQ(replies[204].str, "PONG");
  close(fd);
}

// A pipeline far larger than one 64 KiB read: the loop reads on while a
// read fills its room (four reads an event), values straddle the reads,
// and what is left is read on the next events; every reply, in order.
TEST_F(RespServerTest, APipelineOfManyReadsIsAnsweredInOrder) {
  int fd = Connect();
  std::string batch;
  const int kSets = 96;  // 96 x 4 KiB: six full reads
  for (int i = 0; i < kSets; ++i) {
    batch +=
        Cmd({"SET", absl::StrCat("big", i), std::string(4096, static_cast<char>('a' + i % 26))});
  }
  for (int i = 0; i < kSets; ++i) batch += Cmd({"GET", absl::StrCat("big", i)});
  batch += Cmd({"PING"});
  Send(fd, batch);
  auto replies = Read(fd, 2 * kSets + 1);
  ASSERT_EQ(replies.size(), static_cast<size_t>(2 * kSets + 1));
  for (int i = 0; i < kSets; ++i) EXPECT_EQ(replies[i].str, "OK") << i;
  for (int i = 0; i < kSets; ++i) {
    EXPECT_EQ(replies[kSets + i].str, std::string(4096, static_cast<char>('a' + i % 26))) << i;
  }
  EXPECT_EQ(replies[2 * kSets].str, "PONG");
  close(fd);
}

TEST_F(RespServerTest, LargeBinaryValueByteExact) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  std::string value(3 << 20, '\0');
  for (auto& ch : value) ch = static_cast<char>(rng());
  int fd = Connect();
  // Dribble the SET in small pieces so the value is received in many reads.
  std::string req = Cmd({"SET", "bin", value});
  for (size_t off = 0; off < req.size(); off += 100000) {
    Send(fd, absl::string_view(req).substr(off, 100000));
  }
  auto r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].str, "OK");
  Send(fd, Cmd({"MGET", "bin", "missing", "bin"}));
  r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].elements.size(), 3u);
  EXPECT_TRUE(r[0].elements[0].str == value);
  EXPECT_EQ(r[0].elements[1].type, resp::Reply::Type::kNull);
  EXPECT_TRUE(r[0].elements[2].str == value);
  close(fd);
}

// A value that arrives whole with its request is copied and checksummed in
// one pass (FillAndSealEntry); one that arrives in pieces is sealed when
// its CRLF comes. Alternated on one connection, every entry must carry the
// checksum of its own bytes: one-sided readers and backups check it.
TEST_F(RespServerTest, WholeAndSplitValuesAreAllSealed) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  auto random_value = [&](size_t n) {
    std::string v(n, '\0');
    for (char& ch : v) ch = static_cast<char>(rng());
    return v;
  };
  int fd = Connect();
  std::vector<std::pair<std::string, std::string>> sets;
  for (int i = 0; i < 8; ++i) {
    sets.emplace_back(absl::StrCat("whole", i), random_value(4096 + 100 * i));
    sets.emplace_back(absl::StrCat("split", i), random_value(300 + 1000 * i));
    const std::string whole =
        Cmd({"SET", sets[sets.size() - 2].first, sets[sets.size() - 2].second});
    const std::string split = Cmd({"SET", sets.back().first, sets.back().second});
    const size_t cut = split.size() / 2;
    // The whole SET and the split one's first half in one send, the rest
    // only after the whole one's reply: the split value cannot be whole.
    Send(fd, whole + split.substr(0, cut));
    auto r = Read(fd, 1);
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].str, "OK");
    Send(fd, split.substr(cut));
    r = Read(fd, 1);
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].str, "OK");
  }
  for (const auto& [key, value] : sets) {
    absl::StatusOr<std::string> entry = store_->CopyEntry(key);
    ASSERT_TRUE(entry.ok()) << key << ": " << entry.status();
    absl::StatusOr<layout::EntryView> view = layout::ParseEntry(*entry);
    ASSERT_TRUE(view.ok()) << key << ": " << view.status();
    EXPECT_EQ(view->key, key);
    EXPECT_TRUE(view->value == value) << key;
  }
  close(fd);
}

TEST_F(RespServerTest, OverLimitKeyAndValueNameTheLimit) {
  int fd = Connect();
  std::string big_key(2000, 'k');
  Send(fd, Cmd({"SET", big_key, "v"}) + Cmd({"GET", big_key}) + Cmd({"PING"}));
  auto r = Read(fd, 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_THAT(r[0].str, HasSubstr("max_key_bytes=1024"));
  EXPECT_THAT(r[1].str, HasSubstr("max_key_bytes=1024"));
  EXPECT_EQ(r[2].str, "PONG");  // same connection still works
  // A value over the limit: error naming it, then the connection closes.
  Send(fd, absl::StrCat("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$", (8 << 20) + 1, "\r\n"));
  r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_THAT(r[0].str, HasSubstr("max_value_bytes"));
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
}

TEST_F(RespServerTest, MalformedInputClosesOnlyThatConnection) {
  int good = Connect();
  Send(good, Cmd({"SET", "a", "1"}));
  ASSERT_EQ(Read(good, 1)[0].str, "OK");
  const std::string bad_inputs[] = {
      "*-10\r\n",
      "*3000000000\r\n",
      "*2\r\n$3\r\nGET\r\n$2000000000\r\n",
      "*1\r\n$abc\r\n",
      "POST / HTTP/1.1\r\nHost: localhost\r\n\r\n",
      std::string("\x16\x03\x01\x02\x00", 5),
  };
  for (const std::string& bad : bad_inputs) {
    int fd = Connect();
    Send(fd, bad);
    auto r = Read(fd, 1);
    ASSERT_EQ(r.size(), 1u) << bad;
    EXPECT_EQ(r[0].type, resp::Reply::Type::kError);
    EXPECT_THAT(r[0].str, StartsWith("ERR Protocol error"));
    EXPECT_TRUE(ClosedByPeer(fd)) << bad;
    close(fd);
  }
  Send(good, Cmd({"GET", "a"}));
  EXPECT_EQ(Read(good, 1)[0].str, "1");
  EXPECT_GE(Value(server_->registry(), "kvstore_resp_protocol_errors_total"), 6u);
  close(good);
}

TEST_F(RespServerTest, HalfSentRequestTimesOut) {
  RespServerOptions o;
  o.request_timeout = absl::Milliseconds(300);
  Start(o);
  int fd = Connect();
  Send(fd, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nonly part");
  // The clock moves on until the loop, having stamped the partial request,
  // finds it older than request_timeout.
  ASSERT_TRUE(Eventually([&] {
    clock_.Advance(absl::Milliseconds(50));
    return Value(server_->registry(), "kvstore_resp_timeouts_total") == 1;
  }));
  bool eof = false;
  auto r = Read(fd, 1, &eof);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_THAT(r[0].str, HasSubstr("timed out"));
  // The code word, not the text, is what the C++ client classifies by.
  EXPECT_EQ(resp::RespErrorToStatus(r[0].str).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(ClosedByPeer(fd));
  EXPECT_FALSE(store_->Exists("k"));
  EXPECT_EQ(Value(server_->registry(), "kvstore_resp_timeouts_total"), 1u);
  close(fd);
}

TEST_F(RespServerTest, IdleConnectionTimesOut) {
  RespServerOptions o;
  o.idle_timeout = absl::Milliseconds(300);
  Start(o);
  int fd = Connect();
  Send(fd, Cmd({"PING"}));
  EXPECT_EQ(Read(fd, 1)[0].str, "PONG");
  // The clock moves on until the loop finds the connection idle for longer
  // than idle_timeout (a step taken before the loop stamped the PING's
  // activity would not count: hence steps, not one jump).
  ASSERT_TRUE(Eventually([&] {
    clock_.Advance(absl::Milliseconds(50));
    return Value(server_->registry(), "kvstore_resp_connections") == 0;
  }));
  bool eof = false;
  Read(fd, 1, &eof);  // the closing notice, if any, then EOF
  EXPECT_TRUE(eof || ClosedByPeer(fd));
  close(fd);
}

TEST_F(RespServerTest, ScanPagesWithPrefixAndToolCommands) {
  int fd = Connect();
  std::string batch;
  for (int i = 0; i < 50; ++i) batch += Cmd({"SET", absl::StrCat(i % 2 ? "u:" : "x:", i), "v"});
  Send(fd, batch);
  ASSERT_EQ(Read(fd, 50).size(), 50u);
  std::set<std::string> keys;
  std::string cursor = "0";
  do {
    Send(fd, Cmd({"SCAN", cursor, "MATCH", "u:*", "COUNT", "7"}));
    auto r = Read(fd, 1);
    ASSERT_EQ(r[0].elements.size(), 2u);
    cursor = r[0].elements[0].str;
    for (auto& k : r[0].elements[1].elements) keys.insert(k.str);
  } while (cursor != "0");
  EXPECT_EQ(keys.size(), 25u);
  Send(fd, Cmd({"COMMAND", "DOCS"}) + Cmd({"HELLO", "2"}) + Cmd({"INFO"}) +
               Cmd({"CONFIG", "GET", "save"}) + Cmd({"NOSUCH"}) +
               Cmd({"SET", "k", "v", "EX", "1"}));
  auto r = Read(fd, 6);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0].type, resp::Reply::Type::kArray);
  EXPECT_EQ(r[1].elements[1].str, "kvstore");
  EXPECT_THAT(r[2].str, HasSubstr("db0:keys=50"));
  EXPECT_EQ(r[3].elements.size(), 2u);
  EXPECT_THAT(r[4].str, HasSubstr("unknown command 'NOSUCH'"));
  EXPECT_EQ(r[5].str, "OK");  // SET with options (string_commands.h)
  close(fd);
}

// Finding 14: a prefix matching nothing walked the whole index on the loop
// thread in one call. Now a call stops after scan_max_buckets (default
// 16384) with a cursor to go on from, and an empty page (Redis allows it).
TEST_F(RespServerTest, ScanStopsAfterItsBucketBudget) {
  Start(RespServerOptions(), /*index_bytes=*/8 << 20);  // 131072 buckets
  int fd = Connect();
  std::string batch;
  for (int i = 0; i < 100; ++i) batch += Cmd({"SET", absl::StrCat("x:", i), "v"});
  Send(fd, batch);
  ASSERT_EQ(Read(fd, 100).size(), 100u);
  Send(fd, Cmd({"SCAN", "0", "MATCH", "nomatch:*", "COUNT", "10"}));
  auto r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].elements.size(), 2u);
  EXPECT_EQ(r[0].elements[0].str, "16384");
  EXPECT_TRUE(r[0].elements[1].elements.empty());
  // Following the cursor still lists every key exactly once.
  std::set<std::string> keys;
  std::string cursor = "0";
  int calls = 0;
  do {
    Send(fd, Cmd({"SCAN", cursor, "MATCH", "x:*", "COUNT", "1000"}));
    r = Read(fd, 1);
    cursor = r[0].elements[0].str;
    for (auto& k : r[0].elements[1].elements) keys.insert(k.str);
    ++calls;
  } while (cursor != "0");
  EXPECT_EQ(keys.size(), 100u);
  EXPECT_EQ(calls, 131072 / 16384);
  close(fd);
}

// Finding 16: connections were unbounded. At max_clients the next one is
// told so (Redis's text) and closed; a slot freed is usable again.
TEST_F(RespServerTest, MaxClientsRefusesTheNextConnection) {
  RespServerOptions o;
  o.limits.max_clients = 3;
  Start(o);
  int fds[3];
  for (int& fd : fds) {
    fd = Connect();
    Send(fd, Cmd({"PING"}));
    ASSERT_EQ(Read(fd, 1)[0].str, "PONG");
  }
  int extra = Connect();
  auto r = Read(extra, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].str, "ERR max number of clients reached");
  EXPECT_TRUE(ClosedByPeer(extra));
  close(extra);
  close(fds[0]);
  ASSERT_TRUE(
      Eventually([&] { return Value(server_->registry(), "kvstore_resp_connections") == 2; }));
  int again = Connect();
  Send(again, Cmd({"PING"}));
  EXPECT_EQ(Read(again, 1)[0].str, "PONG");
  EXPECT_EQ(
      Value(server_->registry(), R"(kvstore_resp_limit_rejections_total{limit="max_clients"})"),
      1u);
  close(again);
  close(fds[1]);
  close(fds[2]);
}

// Finding 6/16: a request whose declared size passes the query-buffer
// limit (here the default 8 MiB, below the old max_value_bytes + 1 MiB) is
// refused at its length line, naming the flag, instead of being buffered.
TEST_F(RespServerTest, QueryBufferLimitIsNamedAndCloses) {
  int fd = Connect();
  const size_t part = 4200 << 10;  // two of them pass 8 MiB
  Send(fd, absl::StrCat("*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$", part, "\r\n", std::string(part, 'a'),
                        "\r\n$1\r\nb\r\n$", part, "\r\n"));
  auto r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_THAT(r[0].str, HasSubstr("resp_max_query_buffer"));
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  EXPECT_EQ(Value(server_->registry(),
                  R"(kvstore_resp_limit_rejections_total{limit="max_query_buffer"})"),
            1u);
}

// Findings 4 and 13: SET headers alone reserve nothing (the entry is
// reserved with the first value byte), and reserved bytes of unfinished
// SETs are capped by a budget shared by all loops; over it a SET gets -OOM
// naming the limit while ordinary SETs keep working.
TEST_F(RespServerTest, InflightSetBudgetAndLazyReservation) {
  RespServerOptions o;
  o.limits.max_inflight_set_bytes = 10 << 20;
  Start(o);
  const uint64_t free_before = Value(store_->registry(), "kvstore_pool_segments_free");
  const std::string header = absl::StrCat("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$", 6 << 20, "\r\n");
  int idle[3];
  for (int& fd : idle) {
    fd = Connect();
    // In one send, so the loop reads the header with the PING: once the
    // PONG is back, the header has been parsed.
    Send(fd, Cmd({"PING"}) + header);
    ASSERT_EQ(Read(fd, 1)[0].str, "PONG");
  }
  // No header reserved anything.
  EXPECT_EQ(Value(store_->registry(), "kvstore_pool_segments_free"), free_before);
  // Now each sends one value byte: the first reserves 6 MiB, the others
  // would pass 10 MiB and are refused (and their values skipped).
  Send(idle[0], "x");
  ASSERT_TRUE(Eventually(
      [&] { return Value(store_->registry(), "kvstore_pool_segments_free") < free_before; }));
  for (int i = 1; i < 3; ++i) {
    Send(idle[i], "x");
    auto r = Read(idle[i], 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_THAT(r[0].str, ::testing::StartsWith("OOM"));
    EXPECT_THAT(r[0].str, HasSubstr("resp_max_inflight_set_bytes"));
  }
  int good = Connect();
  Send(good, Cmd({"SET", "small", std::string(100000, 'v')}) + Cmd({"GET", "small"}));
  auto r = Read(good, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].str, "OK");
  EXPECT_EQ(r[1].str.size(), 100000u);
  // The refused connections stay usable once their value is skipped.
  Send(idle[1], std::string((6 << 20) - 1, 'y') + "\r\n" + Cmd({"PING"}));
  EXPECT_EQ(Read(idle[1], 1)[0].str, "PONG");
  EXPECT_EQ(Value(server_->registry(),
                  R"(kvstore_resp_limit_rejections_total{limit="max_inflight_set_bytes"})"),
            2u);
  for (int fd : idle) close(fd);
  close(good);
}

// Finding 6: MGET pinned and queued every value at once. Past the hard
// output limit it is refused, naming the limit, and pins nothing.
// Overwrites of large values fill a small pool with segments still in their
// grace period. The SETs are held back until space comes due, not refused,
// and meanwhile the loop goes on serving its other connections. On the fake
// clock no space comes due until the test advances it, so "the PING is
// answered while the SETs wait" is a fact, not a race.
TEST_F(RespServerTest, SetsWaitForSegmentsLeavingTheirGracePeriod) {
  const absl::Duration grace = absl::Milliseconds(300);
  RespServerOptions o;
  o.threads = 1;  // both connections on the one loop
  Start(o, 1 << 20, /*pool_bytes=*/4 << 20, grace);
  const int writer = Connect();
  const int other = Connect();
  // One 700 KiB value per 1 MiB segment: each overwrite retires a segment.
  // Each value its own letter, so the last one read back says that the
  // held SETs kept their key while they waited.
  constexpr int kSets = 9;
  std::string batch;
  for (int i = 0; i < kSets; ++i) batch += Cmd({"SET", "hot", std::string(700 << 10, 'a' + i)});
  const absl::Duration start = clock_.Steady();
  std::atomic<int> replies{0}, ok{0};
  std::thread sender([&] { Send(writer, batch); });
  // Counts replies as they arrive (one recv may carry several).
  std::thread reader([&] {
    std::string buf;
    char tmp[4096];
    while (replies.load() < kSets) {
      auto r = resp::ParseReply(buf, resp::ReplyLimits());
      if (r.ok() && r->complete) {
        if (r->reply.str == "OK") ++ok;
        ++replies;
        buf.erase(0, r->consumed);
        continue;
      }
      ssize_t got = recv(writer, tmp, sizeof(tmp), 0);
      if (got <= 0) return;
      buf.append(tmp, got);
    }
  });
  ASSERT_TRUE(Eventually(
      [&] { return Value(server_->registry(), "kvstore_resp_sets_held_back_total") > 0; }));
  // While SETs wait, the loop answers the other connection.
  Send(other, Cmd({"PING"}));
  auto pong = Read(other, 1);
  ASSERT_EQ(pong.size(), 1u);
  EXPECT_EQ(pong[0].str, "PONG");
  EXPECT_LT(replies.load(), kSets);
  // Time passes a grace period at a time; each step lets at least one held
  // SET through (the one after it retires a segment due a grace later).
  while (replies.load() < kSets) {
    const int before = replies.load();
    clock_.Advance(grace);
    ASSERT_TRUE(Eventually([&] { return replies.load() > before; }))
        << replies.load() << " of " << kSets << " replies";
  }
  sender.join();
  reader.join();
  EXPECT_EQ(ok.load(), kSets);
  // The pool holds three such segments: nine SETs must have waited.
  EXPECT_GE(clock_.Steady() - start, grace);
  Send(writer, Cmd({"GET", "hot"}));
  auto last = Read(writer, 1);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].str, std::string(700 << 10, 'a' + kSets - 1));
  close(writer);
  close(other);
}

TEST_F(RespServerTest, MgetOverTheOutputLimitIsRefused) {
  RespServerOptions o;
  o.limits.output_hard_limit = 4 << 20;
  Start(o);
  int fd = Connect();
  Send(fd, Cmd({"SET", "big", std::string(1 << 20, 'b')}));
  ASSERT_EQ(Read(fd, 1)[0].str, "OK");
  Send(fd, Cmd({"MGET", "big", "big", "big"}));
  EXPECT_EQ(Read(fd, 1)[0].elements.size(), 3u);
  Send(fd, Cmd({"MGET", "big", "big", "big", "big", "big"}) + Cmd({"PING"}));
  auto r = Read(fd, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(r[0].str, HasSubstr("resp_output_hard_limit"));
  EXPECT_EQ(r[1].str, "PONG");
  close(fd);
}

// Finding 12: a reader that takes its replies too slowly kept pool entries
// pinned for as long as it trickled. Past max_pin_time a small value is
// copied out (the pin dropped, the reply intact) and a large one closes the
// connection.
TEST_F(RespServerTest, SlowReaderLosesItsPins) {
  RespServerOptions o;
  o.limits.max_pin_time = absl::Milliseconds(500);
  o.limits.pin_copy_bytes = 6 << 20;
  // Far beyond what the polls below advance the clock by in their bound, so
  // the only limit this test can hit is max_pin_time.
  o.request_timeout = absl::Hours(24);
  Start(o);
  int fd = Connect(/*rcvbuf=*/64 << 10);
  const std::string value(5 << 20, 'p');
  Send(fd, Cmd({"SET", "p", value}));
  ASSERT_EQ(Read(fd, 1)[0].str, "OK");
  Send(fd, Cmd({"GET", "p"}));
  // Not reading: the value stays queued (pinned) until a check after
  // max_pin_time copies it. The check first notes the pin, then judges it.
  ASSERT_TRUE(Eventually([&] {
    clock_.Advance(absl::Milliseconds(100));
    return Value(server_->registry(), "kvstore_resp_pinned_replies_copied_total") == 1;
  }));
  auto r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].str == value);
  close(fd);
  // Over pin_copy_bytes: the connection is closed instead.
  o.limits.pin_copy_bytes = 1 << 20;
  Start(o);
  fd = Connect(/*rcvbuf=*/64 << 10);
  Send(fd, Cmd({"SET", "p", value}));
  ASSERT_EQ(Read(fd, 1)[0].str, "OK");
  Send(fd, Cmd({"GET", "p"}));
  ASSERT_TRUE(Eventually([&] {
    clock_.Advance(absl::Milliseconds(100));
    return Value(server_->registry(),
                 R"(kvstore_resp_limit_rejections_total{limit="max_pin_time"})") == 1;
  }));
  bool eof = false;
  r = Read(fd, 1, &eof);
  EXPECT_TRUE(eof);
  close(fd);
}

// Finding 12: a client whose queued replies stay over the soft limit for
// output_soft_seconds, or go over the hard limit, is disconnected (pins
// kept out of the way: max_pin_time is long here).
TEST_F(RespServerTest, OutputLimitsDisconnectNonReaders) {
  RespServerOptions o;
  o.limits.max_pin_time = absl::Hours(24);
  o.request_timeout = absl::Hours(24);
  o.limits.output_soft_limit = 1 << 20;
  o.limits.output_soft_seconds = absl::Seconds(1);
  Start(o);
  // Well over what the socket buffers absorb (tcp_wmem's 4 MiB maximum on
  // the server side plus the client's 64 KiB), so most of it stays queued.
  const std::string value(7 << 20, 'o');
  int fd = Connect(/*rcvbuf=*/64 << 10);
  Send(fd, Cmd({"SET", "o", value}));
  ASSERT_EQ(Read(fd, 1)[0].str, "OK");
  Send(fd, Cmd({"GET", "o"}));
  // Over the soft limit from the first check on; disconnected once that
  // has lasted output_soft_seconds of the fake clock.
  ASSERT_TRUE(Eventually([&] {
    clock_.Advance(absl::Milliseconds(100));
    return Value(server_->registry(),
                 R"(kvstore_resp_limit_rejections_total{limit="output_soft_limit"})") == 1;
  }));
  close(fd);
  o.limits.output_soft_limit = 0;
  // Below what stays queued once the socket buffers are full.
  o.limits.output_hard_limit = 512 << 10;
  Start(o);
  fd = Connect(/*rcvbuf=*/64 << 10);
  Send(fd, Cmd({"SET", "o", value}));
  ASSERT_EQ(Read(fd, 1)[0].str, "OK");
  Send(fd, Cmd({"GET", "o"}));
  ASSERT_TRUE(Eventually([&] {
    return Value(server_->registry(),
                 R"(kvstore_resp_limit_rejections_total{limit="output_hard_limit"})") == 1;
  }));
  bool eof = false;
  auto r = Read(fd, 1, &eof);
  EXPECT_TRUE(eof);
  close(fd);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
