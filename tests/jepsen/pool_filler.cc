// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/pool_filler.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "client/options.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/refusal.h"

namespace kvstore {
namespace jepsen {
namespace {

constexpr size_t kValueBytes = 512 * 1024;

bool Backs(const v1::Shard& shard, const std::string& node_id) {
  for (int i = 1; i < shard.replicas_size(); ++i) {
    if (shard.replicas(i) == node_id) return true;
  }
  return false;
}

}  // namespace

PoolFiller::PoolFiller(std::vector<std::string> seeds, const v1::ClusterMap& map,
                       std::string node_id, uint64_t max_bytes)
    : seeds_(std::move(seeds)) {
  auto view = cluster::ClusterMapView::Build(map);
  if (!view.ok()) return;
  const size_t want = max_bytes / kValueBytes + 1;
  for (int n = 0; keys_.size() < want && n < 1000000; ++n) {
    std::string key = absl::StrCat("fill-", n);
    const v1::Shard* shard = (*view)->ShardForKey(key);
    if (shard != nullptr && Backs(*shard, node_id)) keys_.push_back(std::move(key));
  }
}

PoolFiller::~PoolFiller() { Stop(); }

absl::Status PoolFiller::Start() {
  if (keys_.empty()) return absl::FailedPreconditionError("the node backs no shard with slots");
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void PoolFiller::Run() {
  client::Options o;
  o.servers = seeds_;
  o.transport = client::TransportMode::kTcp;
  o.op_timeout = absl::Seconds(5);
  auto kv = client::KvClient::Connect(o);
  if (!kv.ok()) {
    first_error_ = kv.status().ToString();
    return;
  }
  const std::string value(kValueBytes, 'f');
  for (const std::string& key : keys_) {
    if (stop_) break;
    ++attempted_;
    absl::Status s = (*kv)->Put(key, value);
    if (s.ok()) {
      ++written_;
    } else {
      if (first_error_.empty()) first_error_ = s.ToString();
      ++(cluster::CertainlyNoEffect(s) ? refused_ : unknown_);
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
}

void PoolFiller::Stop() {
  stop_ = true;
  if (!thread_.joinable()) return;
  thread_.join();
  client::Options o;
  o.servers = seeds_;
  o.transport = client::TransportMode::kTcp;
  o.op_timeout = absl::Seconds(2);
  auto kv = client::KvClient::Connect(o);
  if (!kv.ok()) return;
  const absl::Time until = absl::Now() + absl::Seconds(20);
  for (int i = 0; i < attempted_ && absl::Now() < until; ++i) (void)(*kv)->Delete(keys_[i]);
}

std::string PoolFiller::Summary() const {
  return absl::StrCat(written_.load(), " written (", written_.load() * kValueBytes / 1024,
                      " KiB), ", refused_.load(), " refused, ", unknown_.load(), " unknown",
                      first_error_.empty() ? "" : "; first error: ", first_error_);
}

}  // namespace jepsen
}  // namespace kvstore
