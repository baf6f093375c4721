// Copyright 2026 The kvstore Authors.

#include "tests/cluster/workload.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace kvstore {
namespace testing {

Outcome OutcomeOf(OpType type, const absl::Status& status) {
  if (status.ok()) return Outcome::kOk;
  if (type != OpType::kPut && absl::IsNotFound(status)) return Outcome::kOk;
  if (absl::IsInvalidArgument(status)) return Outcome::kFailed;
  return Outcome::kUnknown;
}

Workload::Workload(WorkloadOptions options, History* history)
    : options_(std::move(options)), history_(history) {
  for (int i = 0; i < options_.keys; ++i) keys_.push_back(Key(i));
}

Workload::~Workload() { Stop(); }

std::string Workload::Key(int i) const { return absl::StrCat(options_.key_prefix, i); }

client::Options Workload::ClientOptions() const {
  client::Options o;
  o.servers = options_.servers;
  o.transport = options_.transport;
  o.op_timeout = options_.op_timeout;
  o.connect_timeout = options_.connect_timeout;
  o.connections_per_server = 1;
  o.auth_token = options_.auth_token;
  o.tls_ca_file = options_.tls_ca_file;
  o.tls_cert_file = options_.tls_cert_file;
  o.tls_key_file = options_.tls_key_file;
  return o;
}

std::string Workload::last_connect_error() const {
  absl::MutexLock lock(&mu_);
  return last_connect_error_;
}

void Workload::Start() {
  stop_ = false;
  for (int c = options_.first_client_id; c < options_.first_client_id + options_.clients; ++c) {
    threads_.emplace_back([this, c] { RunClient(c); });
  }
}

void Workload::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void Workload::RunClient(int client) {
  std::mt19937_64 rng(options_.seed * 1000003ull + client);
  uint64_t seq = 0;
  std::unique_ptr<client::KvClient> kv;
  while (!stop_) {
    if (kv == nullptr) {
      auto c = client::KvClient::Connect(ClientOptions());
      if (!c.ok()) {
        connect_failures_++;
        {
          absl::MutexLock lock(&mu_);
          last_connect_error_ = c.status().ToString();
        }
        absl::SleepFor(absl::Milliseconds(50));
        continue;
      }
      kv = std::move(*c);
    }
    RunOne(client, *kv, &seq, rng());
    if (options_.think_time > absl::ZeroDuration()) absl::SleepFor(options_.think_time);
  }
  if (kv != nullptr) {
    const std::map<std::string, uint64_t> m = kv->metrics();
    absl::MutexLock lock(&mu_);
    for (const auto& [series, value] : m) metrics_[series] += value;
  }
}

std::map<std::string, uint64_t> Workload::ClientMetrics() const {
  absl::MutexLock lock(&mu_);
  return metrics_;
}

void Workload::RunOne(int client, client::KvClient& kv, uint64_t* seq, uint64_t rnd) {
  const std::string& key = keys_[rnd % keys_.size()];
  const double pick = static_cast<double>((rnd >> 20) % 1000000) / 1e6;
  ops_++;
  if (pick < options_.put_fraction) {
    std::string value = absl::StrCat("c", client, "-", (*seq)++, "-");
    if (value.size() < options_.value_bytes) value.resize(options_.value_bytes, 'x');
    const size_t id = history_->Invoke(client, OpType::kPut, key, value);
    const absl::Status s = kv.Put(key, value);
    history_->Complete(id, OutcomeOf(OpType::kPut, s), std::nullopt, s);
    if (s.ok()) acked_writes_++;
  } else if (pick < options_.put_fraction + options_.delete_fraction) {
    const size_t id = history_->Invoke(client, OpType::kDelete, key);
    const absl::Status s = kv.Delete(key);
    history_->Complete(id, OutcomeOf(OpType::kDelete, s), std::nullopt, s);
    if (s.ok() || absl::IsNotFound(s)) acked_writes_++;
  } else {
    const size_t id = history_->Invoke(client, OpType::kGet, key);
    absl::StatusOr<std::string> v = kv.Get(key);
    if (v.ok()) {
      history_->Complete(id, Outcome::kOk, *std::move(v));
    } else {
      history_->Complete(id, OutcomeOf(OpType::kGet, v.status()), std::nullopt, v.status());
    }
  }
}

absl::Status Workload::FinalReads(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const int client = options_.first_client_id + options_.clients;  // an id of its own
  std::vector<std::string> left = keys_;
  std::unique_ptr<client::KvClient> kv;
  while (!left.empty() && absl::Now() < deadline) {
    if (kv == nullptr) {
      auto c = client::KvClient::Connect(ClientOptions());
      if (!c.ok()) {
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      kv = std::move(*c);
    }
    std::vector<std::string> again;
    for (const std::string& key : left) {
      const size_t id = history_->Invoke(client, OpType::kGet, key, std::nullopt, true);
      absl::StatusOr<std::string> v = kv->Get(key);
      if (v.ok()) {
        history_->Complete(id, Outcome::kOk, *std::move(v));
      } else if (absl::IsNotFound(v.status())) {
        history_->Complete(id, Outcome::kOk, std::nullopt);
      } else {
        history_->Complete(id, Outcome::kUnknown, std::nullopt, v.status());
        again.push_back(key);
      }
    }
    if (!again.empty()) {
      kv.reset();  // a fresh client fetches a fresh map
      absl::SleepFor(absl::Milliseconds(100));
    }
    left = std::move(again);
  }
  if (!left.empty()) {
    return absl::DeadlineExceededError(
        absl::StrCat("final reads failed for ", absl::StrJoin(left, ",")));
  }
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace kvstore
