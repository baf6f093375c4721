// Copyright 2026 The kvstore Authors.
//
// Torn-read stress over RDMA against a real kvserver with a small pool, small
// segments and a short grace period, so segments are reclaimed and reused
// while one-sided GETs are reading them.
//
// Writer threads (one KvClient, WRITE + commit PUTs under leases) overwrite a
// few hot keys with values of ~26 B (the header alone) .. 64 KiB; each value
// names its key, its writer and its sequence number and carries its own
// checksum:
//
//   "<key>|<writer>|<seq>|<16 hex xxh3>|<filler>"
//
// Reader threads (another KvClient) read the same keys one-sided: Get,
// zero-copy GetInto and batched MultiGet. Every value a reader sees must
//   * be well formed and pass its checksum (not torn),
//   * name the key that was read (not another key's entry),
//   * have been attempted already when it was read (seq <= the writer's
//     highest attempted seq at that moment), and
//   * at the end, be a Put that returned OK (possibly after the read: it was
//     in flight then) of exactly that key and length; never a failed Put,
//   * and per reader thread and key never go back to an older value of the
//     same writer (the index is updated in place, so reads are monotonic).
//
// Prints the seed (KV_STRESS_SEED reproduces the writers' choices), the
// counts, the client metrics and the server's reclamation counters. The run
// goes on past its time (up to 3x) until the server has reclaimed more
// segments than its pool holds, so freed segments were certainly reused while
// the readers were reading.
// KV_STRESS_SECONDS overrides the run time (default 6), KV_STRESS_POOL_MB the
// pool size (default 4: 16 segments).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

#define XXH_INLINE_ALL
#include "xxhash.h"

namespace kvstore {
namespace {

using ::kvstore::testing::KvServerProcess;
using ::kvstore::testing::RequestsOn;
using ::kvstore::testing::SeriesValue;

// kvstore_client_<name>_total in a client's metrics() (0 when absent).
uint64_t ClientTotal(const std::map<std::string, uint64_t>& m, const std::string& name) {
  return SeriesValue(m, "kvstore_client_" + name + "_total");
}

constexpr int kKeys = 4;
constexpr int kWriters = 3;
constexpr int kSeedWriter = kWriters;  // the main thread's initial values
constexpr size_t kMaxValue = 64 * 1024;

std::string KeyName(int k) { return absl::StrCat("hot", k); }

std::string DeviceFlag() {
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  return absl::StrCat("--rdma_device=", dev ? dev : "");
}

int EnvInt(const char* name, int def) {
  const char* v = std::getenv(name);
  int out;
  return v != nullptr && absl::SimpleAtoi(v, &out) ? out : def;
}

std::string Head(int key, int writer, uint64_t seq) {
  return absl::StrCat(KeyName(key), "|", writer, "|", seq, "|");
}

uint64_t Sum(absl::string_view head, absl::string_view filler) {
  return XXH3_64bits_withSeed(filler.data(), filler.size(), XXH3_64bits(head.data(), head.size()));
}

// A value of `len` bytes in total (at least the header's length).
std::string MakeValue(int key, int writer, uint64_t seq, size_t len, std::mt19937_64& rng) {
  const std::string head = Head(key, writer, seq);
  const size_t fixed = head.size() + 16 + 1;
  std::string filler(len > fixed ? len - fixed : 0, '\0');
  for (size_t i = 0; i < filler.size(); i += 8) {
    uint64_t r = rng();
    for (size_t j = i; j < std::min(i + 8, filler.size()); ++j, r >>= 8) {
      filler[j] = static_cast<char>('a' + (r & 0xff) % 26);
    }
  }
  return absl::StrCat(head, absl::StrFormat("%016x", Sum(head, filler)), "|", filler);
}

// Lengths spread over tiny values, entries that fit the client's small
// scratch (4 KiB) and large ones up to 64 KiB.
size_t PickLength(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return 1 + rng() % 48;  // clamped up to the header length
    case 1:
      return 1 + rng() % 4000;
    case 2:
      return 4000 + rng() % 12000;
    default:
      return 1 + rng() % kMaxValue;
  }
}

struct Parsed {
  int writer = -1;
  uint64_t seq = 0;
};

// "" if `value` is a well-formed, intact value of key `key`; else the problem.
std::string CheckValue(int key, const std::string& value, Parsed* out) {
  std::vector<absl::string_view> parts = absl::StrSplit(value, absl::MaxSplits('|', 4));
  if (parts.size() != 5) return absl::StrCat("malformed (", value.size(), " bytes)");
  if (parts[0] != KeyName(key)) return absl::StrCat("value of key '", parts[0], "'");
  const std::string head = absl::StrCat(parts[0], "|", parts[1], "|", parts[2], "|");
  if (absl::StrFormat("%016x", Sum(head, parts[4])) != parts[3]) {
    return "checksum mismatch (torn)";
  }
  if (!absl::SimpleAtoi(parts[1], &out->writer) || out->writer < 0 || out->writer > kSeedWriter ||
      !absl::SimpleAtoi(parts[2], &out->seq)) {
    return "bad writer/seq";
  }
  return "";
}

// What a writer did: written only by its thread, read by others only after
// the threads have been joined -- except `attempted`.
struct WriterLog {
  enum State : uint8_t { kNone = 0, kOk = 1, kFailed = 2 };
  std::atomic<uint64_t> attempted{0};  // highest seq whose Put has been issued
  std::vector<uint8_t> state{0};       // by seq (seq 0 unused)
  std::vector<uint8_t> key{0};
  std::vector<uint32_t> length{0};
};

struct Seen {
  uint8_t key;
  uint8_t writer;
  uint8_t how;  // 0 Get, 1 GetInto, 2 MultiGet
  uint32_t length;
  uint64_t seq;
};

TEST(RdmaStress, OneSidedReadsNeverSeeTornForeignOrUncommittedValues) {
  const int seconds = EnvInt("KV_STRESS_SECONDS", 6);
  const uint32_t seed = static_cast<uint32_t>(EnvInt("KV_STRESS_SEED", 0)) != 0
                            ? static_cast<uint32_t>(EnvInt("KV_STRESS_SEED", 0))
                            : std::random_device{}();
  std::printf("seed %u (KV_STRESS_SEED), %d s (KV_STRESS_SECONDS)\n", seed, seconds);

  // 256 KiB segments, 256 KiB leases (one segment each, so drained lease
  // chunks can be freed or compacted), a pool small enough that the segment
  // allocator wraps around within the run.
  const std::string pool = absl::StrCat("--pool_size=", EnvInt("KV_STRESS_POOL_MB", 4), "M");
  auto server = KvServerProcess::Start(
      {pool, "--segment_size=256K", "--grace_period=40ms", "--transport=rdma", DeviceFlag()});
  ASSERT_TRUE(server.ok()) << server.status();
  client::Options o;
  o.servers = {server->control_address()};
  o.transport = client::TransportMode::kRdma;
  o.lease_bytes = 256 << 10;  // one segment: chunks turn over quickly
  auto wc = client::KvClient::Connect(o);
  ASSERT_TRUE(wc.ok()) << wc.status();
  auto rc = client::KvClient::Connect(o);
  ASSERT_TRUE(rc.ok()) << rc.status();
  client::KvClient* writer_client = wc->get();
  client::KvClient* reader_client = rc->get();
  ASSERT_EQ(writer_client->transport_name(), "rdma");
  ASSERT_EQ(reader_client->transport_name(), "rdma");

  std::vector<WriterLog> logs(kWriters + 1);
  {
    std::mt19937_64 rng(seed);
    WriterLog& l = logs[kSeedWriter];
    for (int k = 0; k < kKeys; ++k) {
      const uint64_t seq = k + 1;
      const std::string v = MakeValue(k, kSeedWriter, seq, 100, rng);
      l.attempted = seq;
      ASSERT_TRUE(writer_client->Put(KeyName(k), v).ok());
      l.state.push_back(WriterLog::kOk);
      l.key.push_back(k);
      l.length.push_back(v.size());
    }
  }

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> puts_ok{0}, puts_failed{0}, reads{0}, not_found{0}, read_errors{0}, bad{0},
      bytes_written{0};
  std::mutex mu;
  std::vector<std::string> problems;
  auto report = [&](std::string p) {
    bad++;
    std::lock_guard<std::mutex> lock(mu);
    if (problems.size() < 20) problems.push_back(std::move(p));
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(seed * 31 + w);
      WriterLog& l = logs[w];
      for (uint64_t seq = 1; !stop; ++seq) {
        const int k = static_cast<int>(rng() % kKeys);
        const std::string v = MakeValue(k, w, seq, PickLength(rng), rng);
        l.key.push_back(k);
        l.length.push_back(v.size());
        l.attempted.store(seq, std::memory_order_release);
        absl::Status s = writer_client->Put(KeyName(k), v);
        l.state.push_back(s.ok() ? WriterLog::kOk : WriterLog::kFailed);
        if (s.ok()) {
          puts_ok++;
          bytes_written += v.size();
        } else {
          puts_failed++;
          std::lock_guard<std::mutex> lock(mu);
          if (problems.size() < 20) problems.push_back(absl::StrCat("Put failed: ", s.ToString()));
        }
      }
    });
  }
  constexpr int kReaders = 4;  // 0, 1: Get; 2: GetInto; 3: MultiGet
  std::vector<std::vector<Seen>> seen(kReaders);
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(seed * 77 + r);
      std::vector<char> buf(kMaxValue + 4096);
      client::RegisteredBuffer reg;
      if (r == 2) {
        auto b = reader_client->Register(buf.data(), buf.size());
        if (!b.ok()) {
          report(absl::StrCat("Register: ", b.status().ToString()));
          return;
        }
        reg = *b;
      }
      std::vector<std::string> all;
      for (int k = 0; k < kKeys; ++k) all.push_back(KeyName(k));
      // Newest seq seen per (key, writer), for the monotonicity check.
      std::vector<std::vector<uint64_t>> newest(kKeys, std::vector<uint64_t>(kWriters + 1, 0));
      auto check = [&](int k, const std::string& v, uint8_t how) {
        reads++;
        Parsed p;
        std::string problem = CheckValue(k, v, &p);
        if (problem.empty() && p.seq > logs[p.writer].attempted.load(std::memory_order_acquire)) {
          problem = absl::StrCat("writer ", p.writer, " seq ", p.seq, " not yet attempted");
        }
        if (problem.empty() && p.seq < newest[k][p.writer]) {
          problem = absl::StrCat("went back from writer ", p.writer, " seq ", newest[k][p.writer],
                                 " to seq ", p.seq);
        }
        if (!problem.empty()) {
          report(absl::StrCat("reader ", r, " (how ", int{how}, ") ", KeyName(k), ": ", problem));
          return;
        }
        newest[k][p.writer] = p.seq;
        seen[r].push_back(Seen{static_cast<uint8_t>(k), static_cast<uint8_t>(p.writer), how,
                               static_cast<uint32_t>(v.size()), p.seq});
      };
      auto failed = [&](const absl::Status& s) {
        if (s.code() == absl::StatusCode::kNotFound) {
          not_found++;
          return;
        }
        read_errors++;
        std::lock_guard<std::mutex> lock(mu);
        if (problems.size() < 20) {
          problems.push_back(absl::StrCat("reader ", r, ": ", s.ToString()));
        }
      };
      while (!stop) {
        const int k = static_cast<int>(rng() % kKeys);
        if (r == 3) {
          auto many = reader_client->MultiGet(all);
          if (!many.ok()) {
            failed(many.status());
            continue;
          }
          for (int i = 0; i < kKeys; ++i) {
            if ((*many)[i].ok()) {
              check(i, *(*many)[i], 2);
            } else {
              failed((*many)[i].status());
            }
          }
        } else if (r == 2) {
          std::memset(buf.data(), '#', 64);
          auto n = reader_client->GetInto(all[k], reg, 0, kMaxValue);
          if (n.ok()) {
            check(k, std::string(buf.data(), *n), 1);
          } else {
            failed(n.status());
          }
        } else {
          auto v = reader_client->Get(all[k]);
          if (v.ok()) {
            check(k, *v, 0);
          } else {
            failed(v.status());
          }
        }
      }
    });
  }
  // Run for `seconds`, and on (up to 3x as long) until the allocator has
  // freed more segments than the pool has: then some were certainly reused.
  // Sample the free-segment count meanwhile.
  const absl::Time t0 = absl::Now();
  uint64_t min_free = UINT64_MAX, total = 0, reclaimed = 0;
  while (true) {
    absl::SleepFor(absl::Milliseconds(250));
    auto st = reader_client->Stats();
    if (st.ok()) {
      min_free = std::min(min_free, st->counters["kvstore_pool_segments_free"]);
      total = st->counters["kvstore_pool_segments"];
      reclaimed = st->counters["kvstore_pool_segments_reclaimed_total"];
    }
    const absl::Duration ran = absl::Now() - t0;
    if (ran >= absl::Seconds(seconds) && (reclaimed > total || ran >= absl::Seconds(3 * seconds))) {
      break;
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - t0);

  // Every value seen is a Put of that key and length that returned OK.
  uint64_t checked = 0, uncommitted = 0, failed_seen = 0, mismatched = 0;
  uint64_t by_how[3] = {0, 0, 0};
  for (int r = 0; r < kReaders; ++r) {
    for (const Seen& s : seen[r]) {
      checked++;
      by_how[s.how]++;
      const WriterLog& l = logs[s.writer];
      std::string problem;
      if (s.seq >= l.state.size() || l.state[s.seq] == WriterLog::kNone) {
        uncommitted++;
        problem = "never committed";
      } else if (l.state[s.seq] == WriterLog::kFailed) {
        failed_seen++;
        problem = "its Put failed";
      } else if (l.key[s.seq] != s.key || l.length[s.seq] != s.length) {
        mismatched++;
        problem =
            absl::StrCat("written as key ", int{l.key[s.seq]}, ", ", l.length[s.seq], " bytes");
      }
      if (!problem.empty()) {
        report(absl::StrCat("reader ", r, " saw ", KeyName(s.key), " writer ", int{s.writer},
                            " seq ", s.seq, " (", s.length, " bytes): ", problem));
      }
    }
  }

  // The final values: the last OK Put of their writer to that key.
  for (int k = 0; k < kKeys && puts_failed == 0; ++k) {
    auto v = reader_client->Get(KeyName(k));
    ASSERT_TRUE(v.ok()) << v.status();
    Parsed p;
    ASSERT_EQ(CheckValue(k, *v, &p), "");
    const WriterLog& l = logs[p.writer];
    ASSERT_LT(p.seq, l.state.size());
    EXPECT_EQ(l.state[p.seq], WriterLog::kOk);
    for (uint64_t later = p.seq + 1; later < l.state.size(); ++later) {
      EXPECT_FALSE(l.key[later] == k && l.state[later] == WriterLog::kOk)
          << KeyName(k) << " holds writer " << p.writer << " seq " << p.seq
          << " but that writer's later seq " << later << " was stored OK";
    }
  }

  auto stats = reader_client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto& sc = stats->counters;
  const std::map<std::string, uint64_t> w = writer_client->metrics();
  const std::map<std::string, uint64_t> rd = reader_client->metrics();
  std::printf(
      "run %.1f s: puts ok %lu failed %lu (%.1f MiB), reads %lu (Get %lu, GetInto %lu, MultiGet "
      "%lu), not-found %lu, read errors %lu, bad %lu\n",
      secs, puts_ok.load(), puts_failed.load(), bytes_written.load() / 1048576.0, reads.load(),
      by_how[0], by_how[1], by_how[2], not_found.load(), read_errors.load(), bad.load());
  std::printf(
      "readers' client: rdma requests %lu tcp requests %lu checksum_retries %lu span_retries %lu "
      "server_fallback_gets %lu reconnects %lu\n",
      RequestsOn(rd, "rdma"), RequestsOn(rd, "tcp"), ClientTotal(rd, "checksum_retries"),
      ClientTotal(rd, "span_retries"), ClientTotal(rd, "server_fallback_gets"),
      ClientTotal(rd, "reconnects"));
  std::printf(
      "writers' client: rdma requests %lu tcp requests %lu leases granted %lu renewed %lu "
      "released %lu aborts %lu reconnects %lu\n",
      RequestsOn(w, "rdma"), RequestsOn(w, "tcp"), ClientTotal(w, "leases_granted"),
      ClientTotal(w, "leases_renewed"), ClientTotal(w, "leases_released"),
      ClientTotal(w, "lease_aborts"), ClientTotal(w, "reconnects"));
  std::printf(
      "server: segments_total %lu segments_reclaimed %lu segments_free %lu cleaner_moved_entries "
      "%lu commits %lu rdma_commits %lu rpc_gets %lu leases_granted %lu pool_full_errors %lu\n",
      sc["kvstore_pool_segments"], sc["kvstore_pool_segments_reclaimed_total"],
      sc["kvstore_pool_segments_free"], sc["kvstore_cleaner_moved_entries_total"],
      sc["kvstore_commits_total"],
      sc[R"(kvstore_server_requests_total{op="put",transport="rdma"})"],
      sc[R"(kvstore_grpc_requests_total{method="Get"})"], sc["kvstore_leases_granted_total"],
      sc["kvstore_pool_full_errors_total"]);
  std::printf("segments reclaimed %lu times in a pool of %lu segments (fewest free %lu): %s\n",
              sc["kvstore_pool_segments_reclaimed_total"], sc["kvstore_pool_segments"], min_free,
              sc["kvstore_pool_segments_reclaimed_total"] > sc["kvstore_pool_segments"]
                  ? "some were reused"
                  : "reuse not proven");
  for (const auto& p : problems) std::printf("problem: %s\n", p.c_str());

  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(uncommitted, 0u);
  EXPECT_EQ(failed_seen, 0u);
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(puts_failed.load(), 0u);
  EXPECT_EQ(read_errors.load(), 0u);
  EXPECT_EQ(not_found.load(), 0u);  // every key existed before the readers started
  EXPECT_GT(puts_ok.load(), 100u);
  EXPECT_GT(reads.load(), 100u);
  EXPECT_EQ(checked, reads.load());
  for (int h = 0; h < 3; ++h) EXPECT_GT(by_how[h], 0u) << "read kind " << h;
  // The readers really read one-sided, and the writers really used RDMA.
  EXPECT_EQ(RequestsOn(rd, "tcp"), 0u);
  EXPECT_LT(ClientTotal(rd, "server_fallback_gets"), reads.load());
  EXPECT_GT(sc[R"(kvstore_server_requests_total{op="put",transport="rdma"})"], 100u);
  EXPECT_GT(ClientTotal(w, "leases_granted"), 1u);
  // Segments were reclaimed during the run (superseded entries and drained
  // lease chunks freed after the grace period).
  EXPECT_GT(sc["kvstore_pool_segments_reclaimed_total"], 0u);
  EXPECT_GT(sc["kvstore_pool_segments_reclaimed_total"], sc["kvstore_pool_segments"])
      << "no segment was certainly reused";
  if (HasFailure()) std::printf("server log:\n%s\n", server->Log().c_str());
}

}  // namespace
}  // namespace kvstore
