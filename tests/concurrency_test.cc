// Copyright 2026 The kvstore Authors.
//
// Many client threads overwrite and read the same few keys through one
// KvClient (pipelined connections) against a real kvserver while its cleaner
// compacts. Every value names its key and carries its own checksum, so a
// reader can tell a torn value, another key's value, or a value that was
// never written. Prints the seed, the counts and the retries.

#include <atomic>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/kv_client.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

#define XXH_INLINE_ALL
#include "xxhash.h"

namespace kvstore {
namespace {

using ::kvstore::testing::Eventually;

// value = "<key>|<writer>|<seq>|<16 hex checksum>|<filler>"; the checksum
// covers everything else.
std::string MakeValue(const std::string& key, int writer, uint64_t seq, size_t len,
                      std::mt19937_64& rng) {
  std::string filler(len, '\0');
  for (auto& c : filler) c = static_cast<char>('a' + rng() % 26);
  std::string head = absl::StrCat(key, "|", writer, "|", seq, "|");
  uint64_t sum =
      XXH3_64bits_withSeed(filler.data(), filler.size(), XXH3_64bits(head.data(), head.size()));
  return absl::StrCat(head, absl::StrFormat("%016x", sum), "|", filler);
}

// "" if `value` is a well-formed value of `key`, else what is wrong.
std::string CheckValue(const std::string& key, const std::string& value) {
  std::vector<std::string> parts = absl::StrSplit(value, absl::MaxSplits('|', 4));
  if (parts.size() != 5) return "malformed";
  if (parts[0] != key) return absl::StrCat("value of key '", parts[0], "'");
  std::string head = absl::StrCat(parts[0], "|", parts[1], "|", parts[2], "|");
  uint64_t sum =
      XXH3_64bits_withSeed(parts[4].data(), parts[4].size(), XXH3_64bits(head.data(), head.size()));
  if (absl::StrFormat("%016x", sum) != parts[3]) return "checksum mismatch (torn)";
  return "";
}

TEST(Concurrency, OverwritersAndReadersNeverSeeTornOrForeignValues) {
  auto server = testing::KvServerProcess::Start(
      {"--pool_size=32M", "--segment_size=256K", "--grace_period=20ms", "--transport=tcp"});
  ASSERT_TRUE(server.ok()) << server.status();
  client::Options o;
  o.servers = {server->control_address()};
  o.connections_per_server = 2;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  client::KvClient* client = c->get();

  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  constexpr int kKeys = 8, kWriters = 6, kReaders = 6;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0}, reads{0}, not_found{0}, errors{0}, bad{0};
  std::string first_bad;
  std::mutex bad_mu;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(seed * 31 + w);
      for (uint64_t seq = 0; !stop; ++seq) {
        std::string key = absl::StrCat("hot", rng() % kKeys);
        absl::Status s = client->Put(key, MakeValue(key, w, seq, 1 + rng() % 20000, rng));
        if (s.ok())
          writes++;
        else
          errors++;
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(seed * 77 + r);
      while (!stop) {
        std::string key = absl::StrCat("hot", rng() % kKeys);
        auto v = client->Get(key);
        if (!v.ok()) {
          (v.status().code() == absl::StatusCode::kNotFound ? not_found : errors)++;
          continue;
        }
        reads++;
        std::string problem = CheckValue(key, *v);
        if (!problem.empty()) {
          bad++;
          std::lock_guard<std::mutex> l(bad_mu);
          if (first_bad.empty()) first_bad = absl::StrCat(key, ": ", problem);
        }
      }
    });
  }
  // Bounded by work, not time: 8,000 writes of 10 KB on average pass the
  // 32 MiB pool twice over, so segments are reclaimed and reused under the
  // readers' feet however slow the machine is.
  EXPECT_TRUE(Eventually([&] { return writes.load() >= 8000 && reads.load() >= 8000; }))
      << "writes " << writes.load() << ", reads " << reads.load() << ", errors " << errors.load();
  stop = true;
  for (auto& t : threads) t.join();
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  std::printf(
      "writes %lu, reads %lu, not-found %lu, errors %lu, bad %lu, client checksum retries %lu, "
      "server cleaner moves %lu, segments reclaimed %lu\n",
      writes.load(), reads.load(), not_found.load(), errors.load(), bad.load(),
      testing::SeriesValue(client->metrics(), "kvstore_client_checksum_retries_total"),
      stats->counters["kvstore_cleaner_moved_entries_total"],
      stats->counters["kvstore_pool_segments_reclaimed_total"]);
  EXPECT_EQ(bad.load(), 0u) << first_bad;
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GT(stats->counters["kvstore_pool_segments_reclaimed_total"], 0u);
}

}  // namespace
}  // namespace kvstore
