// Copyright 2026 The kvstore Authors.
//
// The cache commands (expiry, string read-modify-writes, keyspace) through
// clients nobody here wrote: Debian's redis-cli and redis-py. The store
// runs on a fake clock, so every TTL is exact and a key expires exactly
// when the test moves time; the expiry cycle is run by the test.

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/metrics/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/resp/resp_server.h"
#include "server/resp/resp_test_util.h"
#include "server/storage/fake_clock.h"
#include "server/storage/kv_store.h"
#include "server/storage/memory_pool.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;

class CacheCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryPoolOptions po;
    po.data_bytes = 32 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.grace_period = absl::Milliseconds(10);
    so.clock = &clock_;
    so.cleaner_interval = absl::ZeroDuration();
    so.expiry_interval = absl::ZeroDuration();
    store_ = *KvStore::Create(pool_.get(), so);
    RespServerOptions o;
    o.port = 0;
    o.threads = 2;
    auto s = RespServer::Start(store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  // Runs `commands` (one per line) through redis-cli and returns its output
  // lines: redis-cli prints raw replies when its output is not a terminal
  // (nil as an empty line, errors as their text).
  std::vector<std::string> Cli(const std::vector<std::string>& commands) {
    const std::string out = resp_test::RedisCli({"-p", absl::StrCat(server_->port())},
                                                absl::StrJoin(commands, "\n") + "\n");
    std::vector<std::string> raw = absl::StrSplit(out, '\n');
    if (!raw.empty() && raw.back().empty()) raw.pop_back();
    // redis-cli follows an error's text with an empty line in raw mode.
    std::vector<std::string> lines;
    for (size_t i = 0; i < raw.size(); ++i) {
      lines.push_back(raw[i]);
      if (absl::StartsWith(raw[i], "ERR ") && i + 1 < raw.size() && raw[i + 1].empty()) ++i;
    }
    return lines;
  }
  std::string Cli1(const std::string& command) {
    auto lines = Cli({command});
    return absl::StrJoin(lines, "|");
  }

  FakeClock clock_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<RespServer> server_;
};

TEST_F(CacheCommandsTest, SetOptionsAsRedisAnswersThem) {
  EXPECT_THAT(Cli({"SET k v NX", "SET k w NX", "GET k", "SET k w XX", "GET k", "SET n v XX",
                   "EXISTS n", "SET k x GET", "SET fresh y GET", "SET k z NX GET", "GET k"}),
              ::testing::ElementsAre("OK", "", "v", "OK", "w", "", "0", "w", "", "x", "x"));
  // Conflicting or malformed options: syntax errors, nothing written.
  EXPECT_EQ(Cli1("SET k v NX XX"), "ERR syntax error");
  EXPECT_EQ(Cli1("SET k v EX 10 PX 100"), "ERR syntax error");
  EXPECT_EQ(Cli1("SET k v EX 10 KEEPTTL"), "ERR syntax error");
  EXPECT_EQ(Cli1("SET k v EX"), "ERR syntax error");
  EXPECT_EQ(Cli1("SET k v BOGUS"), "ERR syntax error");
  EXPECT_EQ(Cli1("GET k"), "x");
}

TEST_F(CacheCommandsTest, TtlEdgeCases) {
  EXPECT_THAT(Cli({"SET k v EX 10", "TTL k", "PTTL k", "TTL missing", "SET p v", "TTL p",
                   "PTTL missing", "PTTL p"}),
              ::testing::ElementsAre("OK", "10", "10000", "-2", "OK", "-1", "-2", "-1"));
  clock_.Advance(absl::Milliseconds(3400));
  EXPECT_THAT(Cli({"TTL k", "PTTL k"}), ::testing::ElementsAre("7", "6600"));  // 6.6 s rounds up
  // Zero, negative, non-integer and overflowing times.
  EXPECT_EQ(Cli1("SET k v EX 0"), "ERR invalid expire time in 'set' command");
  EXPECT_EQ(Cli1("SET k v PX -1"), "ERR invalid expire time in 'set' command");
  EXPECT_EQ(Cli1("SET k v EX 9223372036854775807"), "ERR invalid expire time in 'set' command");
  EXPECT_EQ(Cli1("SET k v EX ten"), "ERR value is not an integer or out of range");
  EXPECT_EQ(Cli1("SETEX k 0 v"), "ERR invalid expire time in 'setex' command");
  EXPECT_EQ(Cli1("EXPIRE k 9223372036854775807"), "ERR invalid expire time in 'expire' command");
  EXPECT_EQ(Cli1("EXPIRE k 99999999999999999999"), "ERR value is not an integer or out of range");
  EXPECT_EQ(Cli1("TTL k"), "7");  // untouched by the refused commands
  // A time at or before now deletes the key and answers 1.
  EXPECT_THAT(
      Cli({"SET d v", "EXPIRE d 0", "EXISTS d", "SET d v", "PEXPIRE d -100", "EXISTS d", "SET d v",
           "EXPIREAT d 1", "EXISTS d", "SET d v PXAT 1", "EXISTS d", "EXPIRE missing 10"}),
      ::testing::ElementsAre("OK", "1", "0", "OK", "1", "0", "OK", "1", "0", "OK", "0", "0"));
  // Absolute times, reported back exactly.
  const int64_t now_s = store_->NowMs() / 1000;
  EXPECT_THAT(Cli({absl::StrCat("SET a v EXAT ", now_s + 100), "EXPIRETIME a", "PEXPIRETIME p",
                   "EXPIRETIME missing"}),
              ::testing::ElementsAre("OK", absl::StrCat(now_s + 100), "-1", "-2"));
  // The key expires at its time exactly.
  clock_.Advance(absl::Milliseconds(6599));
  EXPECT_EQ(Cli1("GET k"), "v");
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_THAT(Cli({"GET k", "TTL k", "EXISTS k", "STRLEN k", "TYPE k"}),
              ::testing::ElementsAre("", "-2", "0", "0", "none"));
}

TEST_F(CacheCommandsTest, ExpireConditionsPersistKeepTtlAndGetEx) {
  EXPECT_THAT(
      Cli({"SET k v", "EXPIRE k 100 XX", "EXPIRE k 100 GT", "EXPIRE k 100 LT", "TTL k",
           "EXPIRE k 50 NX", "EXPIRE k 200 GT", "TTL k", "EXPIRE k 300 LT", "EXPIRE k 50 LT",
           "TTL k", "EXPIRE k 10 NX XX", "EXPIRE k 10 GT LT"}),
      ::testing::ElementsAre("OK", "0", "0", "1", "100", "0", "1", "200", "0", "1", "50",
                             "ERR NX and XX, GT or LT options at the same time are not compatible",
                             "ERR GT and LT options at the same time are not compatible"));
  EXPECT_THAT(Cli({"SET k w KEEPTTL", "TTL k", "SET k x", "TTL k", "PERSIST k", "EXPIRE k 5",
                   "PERSIST k", "TTL k", "PERSIST missing"}),
              ::testing::ElementsAre("OK", "50", "OK", "-1", "0", "1", "1", "-1", "0"));
  EXPECT_THAT(Cli({"GETEX k EX 30", "TTL k", "GETEX k PERSIST", "TTL k", "GETEX k PX 1500",
                   "PTTL k", "GETEX missing EX 5", "GETEX k EX 5 PERSIST", "GETEX k EX 0"}),
              ::testing::ElementsAre("x", "30", "x", "-1", "x", "1500", "", "ERR syntax error",
                                     "ERR invalid expire time in 'getex' command"));
}

TEST_F(CacheCommandsTest, StringReadModifyWrites) {
  EXPECT_THAT(
      Cli({"INCR n", "INCRBY n 10", "DECR n", "DECRBY n 5", "GET n", "SET s abc", "INCR s",
           "APPEND s def", "GET s", "STRLEN s", "APPEND new x", "STRLEN none", "SETNX s zzz",
           "SETNX t zzz", "GETSET t yyy", "GETSET u 1", "GETDEL t", "GETDEL t", "EXISTS t"}),
      ::testing::ElementsAre("1", "11", "10", "5", "5", "OK",
                             "ERR value is not an integer or out of range", "6", "abcdef", "6", "1",
                             "0", "0", "1", "zzz", "", "yyy", "", "0"));
  EXPECT_THAT(Cli({"SET big 9223372036854775806", "INCR big", "INCR big",
                   "DECRBY n "
                   "-9223372036854775808",
                   "INCRBY n 1.5", "SET lead 007", "INCR lead"}),
              ::testing::ElementsAre(
                  "OK", "9223372036854775807", "ERR increment or decrement would overflow",
                  "ERR decrement would overflow", "ERR value is not an integer or out of range",
                  "OK", "ERR value is not an integer or out of range"));
  EXPECT_THAT(Cli({"SET f 10.5", "INCRBYFLOAT f 0.1", "INCRBYFLOAT f -5", "INCRBYFLOAT g 3",
                   "INCRBYFLOAT f abc", "SET h 5.0e3", "INCRBYFLOAT h 2.0e2", "INCRBYFLOAT h inf"}),
              ::testing::ElementsAre("OK", "10.6", "5.6", "3", "ERR value is not a valid float",
                                     "OK", "5200", "ERR increment would produce NaN or Infinity"));
  // Increments keep the key's expiry; SETEX/PSETEX set one.
  EXPECT_THAT(Cli({"SETEX e 100 1", "INCR e", "TTL e", "PSETEX e2 2500 x", "PTTL e2", "APPEND e2 y",
                   "PTTL e2"}),
              ::testing::ElementsAre("OK", "2", "100", "OK", "2500", "2", "2500"));
  EXPECT_THAT(Cli({"MSETNX m1 a m2 b", "MSETNX m2 c m3 d", "EXISTS m3", "GET m2"}),
              ::testing::ElementsAre("1", "0", "0", "b"));
}

TEST_F(CacheCommandsTest, KeyspaceCommands) {
  EXPECT_THAT(Cli({"MSET user:1 a user:2 b other c", "TYPE user:1", "TYPE nope",
                   "TOUCH user:1 user:2 nope", "EXISTS user:1 user:1 nope", "DBSIZE"}),
              ::testing::ElementsAre("OK", "string", "none", "2", "2", "3"));
  std::vector<std::string> keys = Cli({"KEYS user:*"});
  EXPECT_THAT(keys, ::testing::UnorderedElementsAre("user:1", "user:2"));
  EXPECT_THAT(Cli({"KEYS user:[2-9]"}), ::testing::ElementsAre("user:2"));
  EXPECT_THAT(Cli({"KEYS *"}), ::testing::UnorderedElementsAre("user:1", "user:2", "other"));
  EXPECT_THAT(Cli1("RANDOMKEY"), ::testing::AnyOf("user:1", "user:2", "other"));
  // Expired keys are left out of KEYS, SCAN and RANDOMKEY before the
  // expiry cycle runs, and the cycle deletes them.
  EXPECT_EQ(Cli1("PEXPIRE other 10"), "1");
  clock_.Advance(absl::Milliseconds(10));
  EXPECT_THAT(Cli({"KEYS *"}), ::testing::UnorderedElementsAre("user:1", "user:2"));
  EXPECT_EQ(Cli1("DBSIZE"), "3");  // as Redis: DBSIZE counts keys not yet reclaimed
  EXPECT_EQ(store_->ExpireDue(), 1u);
  EXPECT_EQ(Cli1("DBSIZE"), "2");
  EXPECT_EQ(Value(store_->registry(), "kvstore_expired_keys_total"), 1);
  EXPECT_THAT(Cli({"FLUSHALL", "DBSIZE", "RANDOMKEY", "KEYS *", "SET a 1", "FLUSHDB ASYNC",
                   "DBSIZE", "FLUSHALL BOGUS"}),
              ::testing::ElementsAre("OK", "0", "", "", "OK", "OK", "0", "ERR syntax error"));
}

TEST_F(CacheCommandsTest, ConfigGetAndSetTheCacheSettings) {
  EXPECT_THAT(Cli({"CONFIG GET maxmemory*"}),
              ::testing::ElementsAre("maxmemory", "0", "maxmemory-policy", "noeviction"));
  EXPECT_THAT(Cli({"CONFIG SET maxmemory 16mb maxmemory-policy allkeys-lru", "CONFIG GET maxmemory",
                   "CONFIG GET MAXMEMORY-POLICY", "CONFIG SET maxmemory 50%",
                   "CONFIG GET maxmemory", "CONFIG GET nothing-like-this"}),
              ::testing::ElementsAre("OK", "maxmemory", "16777216", "maxmemory-policy",
                                     "allkeys-lru", "OK", "maxmemory", "16777216",
                                     ""));  // an empty array: nothing matched
  EXPECT_EQ(store_->eviction_policy(), EvictionPolicy::kAllKeysLru);
  // All or nothing: a bad pair leaves the good one unapplied.
  EXPECT_THAT(Cli1("CONFIG SET maxmemory-policy allkeys-lfu maxmemory lots"),
              ::testing::HasSubstr("CONFIG SET failed (possibly related to argument 'maxmemory')"));
  EXPECT_EQ(store_->eviction_policy(), EvictionPolicy::kAllKeysLru);
  EXPECT_THAT(Cli1("CONFIG SET maxmemory-policy allkeys-random"),
              ::testing::HasSubstr("argument(s) must be one of the following"));
  EXPECT_EQ(Cli1("CONFIG SET bogus 1"),
            "ERR Unknown option or number of arguments for CONFIG SET - 'bogus'");
}

// Under an evicting policy at 2x the limit, no SET is refused and memory in
// use stays at the limit. The store has no cleaner thread here: the writers
// evict for themselves when they pass the limit, as Redis does before a
// command.
TEST_F(CacheCommandsTest, NoSetIsRefusedUnderAnEvictingPolicy) {
  ASSERT_EQ(Cli1("CONFIG SET maxmemory 8mb maxmemory-policy allkeys-lru"), "OK");
  const std::string value(4000, 'x');
  std::vector<std::string> sets;
  for (int i = 0; i < 4000; ++i) sets.push_back(absl::StrCat("SET key", i, " ", value));
  // 16 MB of SETs into an 8 MB limit, 500 per redis-cli run.
  for (size_t start = 0; start < sets.size(); start += 500) {
    std::vector<std::string> batch(sets.begin() + start,
                                   sets.begin() + std::min(sets.size(), start + 500));
    for (const std::string& line : Cli(batch)) ASSERT_EQ(line, "OK");
    clock_.Advance(absl::Milliseconds(20));  // emptied segments leave their grace period
  }
  EXPECT_GT(Value(store_->registry(), "kvstore_evicted_keys_total"), 1000);
  // Emptied segments come back once their grace period has passed (the
  // cleaner frees them; here the test runs its pass).
  clock_.Advance(absl::Milliseconds(20));
  store_->RunCleanerOnce();
  EXPECT_LE(store_->UsedBytes(), 8u << 20);
}

// TOUCH counts as a read for eviction, as in Redis: keys touched between
// batches of one-time writes survive a limit that evicts three times their
// number, where keys written once and never read or touched do not.
TEST_F(CacheCommandsTest, TouchedKeysSurviveEvictionAsReadOnesDo) {
  ASSERT_EQ(Cli1("CONFIG SET maxmemory 8mb maxmemory-policy allkeys-lru"), "OK");
  const std::string value(4000, 'x');
  std::vector<std::string> hot, untouched;
  std::string touch = "TOUCH";
  for (int i = 0; i < 100; ++i) {
    hot.push_back(absl::StrCat("SET hot", i, " ", value));
    untouched.push_back(absl::StrCat("SET untouched", i, " ", value));
    absl::StrAppend(&touch, " hot", i);
  }
  for (const std::string& line : Cli(hot)) ASSERT_EQ(line, "OK");
  for (const std::string& line : Cli(untouched)) ASSERT_EQ(line, "OK");
  // 24 MB of one-time keys into the 8 MB limit, the hot keys touched
  // before every 2 MB of them.
  for (int start = 0; start < 6000; start += 500) {
    ASSERT_EQ(Cli1(touch), "100");
    std::vector<std::string> batch;
    for (int i = start; i < start + 500; ++i)
      batch.push_back(absl::StrCat("SET cold", i, " ", value));
    for (const std::string& line : Cli(batch)) ASSERT_EQ(line, "OK");
    clock_.Advance(absl::Milliseconds(20));  // emptied segments leave their grace period
  }
  std::string exists_hot = "EXISTS", exists_untouched = "EXISTS";
  for (int i = 0; i < 100; ++i) {
    absl::StrAppend(&exists_hot, " hot", i);
    absl::StrAppend(&exists_untouched, " untouched", i);
  }
  EXPECT_EQ(Cli1(exists_hot), "100");
  EXPECT_EQ(Cli1(exists_untouched), "0");
}

// redis-py (Debian's python3-redis), as an application would use it.
TEST_F(CacheCommandsTest, RedisPyUsesTheCacheCommands) {
  const std::string script = absl::StrCat(::testing::TempDir(), "/cache_client.py");
  std::ofstream(script) << R"PY(
import sys, redis
r = redis.Redis(port=int(sys.argv[1]), decode_responses=True)
assert r.flushall()
assert r.set("k", "v", ex=100)
assert r.ttl("k") == 100
assert r.set("k", "w", nx=True) is None
assert r.set("k", "w", xx=True, keepttl=True)
assert r.ttl("k") == 100
assert r.getex("k", px=5000) == "w" and r.pttl("k") == 5000
assert r.persist("k") and r.ttl("k") == -1
assert r.expire("k", 60, nx=True) and not r.expire("k", 10, gt=True)
assert r.incr("n") == 1 and r.incrby("n", 41) == 42 and r.decr("n") == 41
assert abs(r.incrbyfloat("f", 2.5) - 2.5) < 1e-9
assert r.append("s", "ab") == 2 and r.append("s", "cd") == 4 and r.strlen("s") == 4
assert r.setnx("s", "x") is False
assert r.getset("s", "new") == "abcd" and r.getdel("s") == "new" and r.get("s") is None
assert r.msetnx({"m1": "1", "m2": "2"}) and not r.msetnx({"m2": "x", "m3": "y"})
assert r.type("m1") == "string" and r.type("none") == "none"
assert r.touch("m1", "m2", "none") == 2
assert sorted(r.keys("m*")) == ["m1", "m2"]
assert r.randomkey() is not None
assert r.setex("e", 30, "v") and r.ttl("e") == 30
assert r.psetex("e", 1500, "v") and r.pttl("e") == 1500
try:
    r.set("k", "v", ex=0)
    raise SystemExit("SET EX 0 was accepted")
except redis.ResponseError as e:
    assert "invalid expire time" in str(e), e
assert r.flushdb()
assert r.dbsize() == 0
print("ok")
)PY";
  const std::string cmd =
      absl::StrCat("timeout 60 /usr/bin/python3 '", script, "' ", server_->port(), " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

}  // namespace
}  // namespace server
}  // namespace kvstore
