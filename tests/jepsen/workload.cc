// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/workload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"

namespace kvstore {
namespace jepsen {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t Recorder::Invoke(Op op) {
  op.invoke_ns = NowNs();
  op.complete_ns = kNever;
  op.outcome = Outcome::kUnknown;
  absl::MutexLock lock(&mu_);
  op.id = ops_.size();
  ops_.push_back(std::move(op));
  return ops_.size() - 1;
}

void Recorder::Complete(size_t index, Outcome outcome, std::optional<std::string> read_value,
                        std::string error) {
  const int64_t now = NowNs();
  absl::MutexLock lock(&mu_);
  Op& op = ops_[index];
  op.outcome = outcome;
  op.complete_ns = outcome == Outcome::kUnknown ? kNever : now;
  if (op.kind == OpKind::kGet) op.value = std::move(read_value);
  op.error = std::move(error);
}

std::vector<Op> Recorder::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return ops_;
}

uint64_t Recorder::Count(Outcome outcome) const {
  absl::MutexLock lock(&mu_);
  return std::count_if(ops_.begin(), ops_.end(),
                       [&](const Op& op) { return op.outcome == outcome; });
}

Outcome OutcomeOf(OpKind kind, const absl::Status& status) {
  if (status.ok()) return Outcome::kOk;
  if (absl::IsNotFound(status) && kind != OpKind::kPut) return Outcome::kOk;
  if (absl::IsInvalidArgument(status) || cluster::CertainlyNoEffect(status)) return Outcome::kFail;
  return Outcome::kUnknown;
}

Workload::Workload(WorkloadOptions options, Recorder* recorder)
    : options_(std::move(options)), recorder_(recorder) {
  // Zipf(1.0) over the keys: P(rank r) proportional to 1/r.
  double sum = 0;
  zipf_cdf_.reserve(options_.keys);
  for (int r = 1; r <= options_.keys; ++r) {
    sum += 1.0 / r;
    zipf_cdf_.push_back(sum);
  }
  for (double& c : zipf_cdf_) c /= sum;
}

Workload::~Workload() { Stop(); }

std::string Workload::Key(int i) const { return absl::StrCat("r", i); }

int Workload::ZipfKey(std::mt19937_64& rng) const {
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  return static_cast<int>(std::lower_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u) -
                          zipf_cdf_.begin());
}

const ClientPath& Workload::PathOf(int client) const {
  static const ClientPath kResp;
  const std::vector<ClientPath>& paths = options_.register_paths;
  if (paths.empty() || client >= options_.register_clients) return kResp;
  return paths[client % paths.size()];
}

std::map<std::string, uint64_t> Workload::PathMetrics(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = path_metrics_.find(name);
  return it == path_metrics_.end() ? std::map<std::string, uint64_t>{} : it->second;
}

absl::StatusOr<std::unique_ptr<client::KvClient>> Workload::Connect(const ClientPath& path) const {
  client::Options o;
  o.servers = options_.seeds;
  o.transport = path.transport;
  o.rdma_device = path.rdma_device;
  o.rdma_location_cache_entries = path.location_cache_entries;
  o.connect_timeout = options_.op_timeout;
  o.op_timeout = options_.op_timeout;
  return client::KvClient::Connect(o);
}

void Workload::Start() {
  stop_ = false;
  int client = 0;
  const int kinds[] = {options_.register_clients, options_.set_clients, options_.multiput_clients};
  for (int kind = 0; kind < 3; ++kind) {
    for (int i = 0; i < kinds[kind]; ++i, ++client) {
      threads_.emplace_back([this, client, kind] { RunClient(client, kind); });
    }
  }
}

void Workload::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void Workload::RunClient(int client, int kind) {
  std::mt19937_64 rng(options_.seed * 1000003ull + client);
  const ClientPath& path = PathOf(client);
  uint64_t n = 0;
  std::unique_ptr<client::KvClient> kv;
  while (!stop_) {
    if (kv == nullptr) {
      auto c = Connect(path);
      if (!c.ok()) {
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      kv = *std::move(c);
    }
    if (kind == 0) RegisterStep(client, *kv, &n, rng);
    if (kind == 1) SetStep(client, *kv, &n, rng);
    if (kind == 2) MultiPutStep(client, *kv, &n, rng);
    absl::SleepFor(options_.think_time);
  }
  if (kv == nullptr) return;
  const std::map<std::string, uint64_t> m = kv->metrics();
  absl::MutexLock lock(&mu_);
  std::map<std::string, uint64_t>& sum = path_metrics_[path.name];
  for (const auto& [series, value] : m) sum[series] += value;
}

Outcome Workload::Get(int client, client::KvClient& kv, const std::string& key,
                      const char* workload, bool final_read, const std::string& path) {
  Op op;
  op.client = client;
  op.kind = OpKind::kGet;
  op.key = key;
  op.workload = workload;
  op.final_read = final_read;
  op.path = path;
  const size_t id = recorder_->Invoke(std::move(op));
  absl::StatusOr<std::string> v = kv.Get(key);
  if (v.ok()) {
    recorder_->Complete(id, Outcome::kOk, *std::move(v), "");
  } else if (absl::IsNotFound(v.status())) {
    recorder_->Complete(id, Outcome::kOk, std::nullopt, "");
  } else {
    recorder_->Complete(id, Outcome::kUnknown, std::nullopt, v.status().ToString());
    return Outcome::kUnknown;
  }
  return Outcome::kOk;
}

void Workload::RegisterStep(int client, client::KvClient& kv, uint64_t* n, std::mt19937_64& rng) {
  const std::string key = Key(ZipfKey(rng));
  const double pick = std::uniform_real_distribution<double>(0, 1)(rng);
  if (pick >= options_.write_fraction) {
    Get(client, kv, key, "", false, PathOf(client).name);
    return;
  }
  Op op;
  op.client = client;
  op.key = key;
  absl::Status s;
  if (pick < options_.delete_fraction) {
    op.kind = OpKind::kDelete;
    const size_t id = recorder_->Invoke(std::move(op));
    s = kv.Delete(key);
    recorder_->Complete(id, OutcomeOf(OpKind::kDelete, s), std::nullopt, s.ToString());
  } else {
    op.kind = OpKind::kPut;
    op.value = absl::StrCat("c", client, "-", (*n)++);
    const std::string value = *op.value;
    const size_t id = recorder_->Invoke(std::move(op));
    s = kv.Put(key, value);
    recorder_->Complete(id, OutcomeOf(OpKind::kPut, s), std::nullopt, s.ToString());
  }
}

void Workload::SetStep(int client, client::KvClient& kv, uint64_t* n, std::mt19937_64& rng) {
  std::string sample;
  {
    absl::MutexLock lock(&mu_);
    if (!set_keys_.empty() && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      sample = set_keys_[std::uniform_int_distribution<size_t>(0, set_keys_.size() - 1)(rng)];
    }
  }
  if (!sample.empty()) {
    Get(client, kv, sample, "set", false, "resp");
    return;
  }
  Op op;
  op.client = client;
  op.kind = OpKind::kPut;
  op.workload = "set";
  op.key = absl::StrCat("s-", client, "-", (*n)++);
  op.value = op.key;
  const std::string key = op.key;
  {
    absl::MutexLock lock(&mu_);
    set_keys_.push_back(key);
  }
  const size_t id = recorder_->Invoke(std::move(op));
  const absl::Status s = kv.Put(key, key);
  recorder_->Complete(id, OutcomeOf(OpKind::kPut, s), std::nullopt, s.ToString());
}

void Workload::MultiPutStep(int client, client::KvClient& kv, uint64_t* n, std::mt19937_64& rng) {
  const int pairs = std::uniform_int_distribution<int>(2, 8)(rng);
  std::vector<std::pair<std::string, std::string>> batch;
  std::vector<size_t> ids;
  const std::string batch_id = absl::StrCat("b", client, "-", *n);
  for (int i = 0; i < pairs; ++i) {
    std::string key = Key(ZipfKey(rng));
    if (std::any_of(batch.begin(), batch.end(), [&](const auto& p) { return p.first == key; })) {
      continue;  // one write per key per batch: the checker judges pairs alone
    }
    Op op;
    op.client = client;
    op.kind = OpKind::kPut;
    op.key = key;
    op.value = absl::StrCat("c", client, "-", (*n)++);
    op.batch = batch_id;
    batch.emplace_back(key, *op.value);
    ids.push_back(recorder_->Invoke(std::move(op)));
  }
  const absl::Status s = kv.MultiPut(batch);
  // The batch answers with one status: a failure says nothing certain about
  // any one pair (some may be stored), so every pair is unknown then.
  const Outcome out = s.ok() ? Outcome::kOk : Outcome::kUnknown;
  for (size_t id : ids) recorder_->Complete(id, out, std::nullopt, s.ToString());
}

absl::Status Workload::FinalReads(absl::Duration timeout) {
  std::vector<std::string> left;
  for (int i = 0; i < options_.keys; ++i) left.push_back(Key(i));
  {
    absl::MutexLock lock(&mu_);
    left.insert(left.end(), set_keys_.begin(), set_keys_.end());
  }
  const int client = options_.register_clients + options_.set_clients + options_.multiput_clients;
  const absl::Time deadline = absl::Now() + timeout;
  std::unique_ptr<client::KvClient> kv;
  while (!left.empty() && absl::Now() < deadline) {
    if (kv == nullptr) {
      auto c = Connect(ClientPath{});
      if (!c.ok()) {
        absl::SleepFor(absl::Milliseconds(200));
        continue;
      }
      kv = *std::move(c);
    }
    std::vector<std::string> again;
    for (const std::string& key : left) {
      // Checked per key: with a shard DOWN every read of its keys fails
      // only after the client's attempts, and a pass over thousands of them
      // would outlast any timeout.
      if (absl::Now() >= deadline ||
          Get(client, *kv, key, key[0] == 's' ? "set" : "", true, "resp") != Outcome::kOk) {
        again.push_back(key);
      }
    }
    if (!again.empty()) kv.reset();  // a fresh client fetches a fresh map
    left = std::move(again);
  }
  if (!left.empty()) {
    return absl::DeadlineExceededError(absl::StrCat(left.size(), " keys were never read"));
  }
  return absl::OkStatus();
}

}  // namespace jepsen
}  // namespace kvstore
