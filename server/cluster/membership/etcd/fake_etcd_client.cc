// Copyright 2026 The kvstore Authors.
//
// FakeEtcd's clients: thin EtcdClients that name themselves to the shared
// FakeEtcdStore (fake_etcd_store.h), where the behaviour lives.

#include "server/cluster/membership/etcd/fake_etcd_client.h"

#include <utility>

#include "server/cluster/membership/etcd/fake_etcd_store.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace {

using internal::EventsCallback;
using internal::FakeEtcdStore;
using internal::FakeWatchStream;

// Keeps the store alive for as long as the watch runs (it may outlive its
// client and the FakeEtcd).
class FakeWatch final : public WatchHandle {
 public:
  FakeWatch(std::shared_ptr<FakeEtcdStore> store, std::unique_ptr<FakeWatchStream> stream)
      : store_(std::move(store)), stream_(std::move(stream)) {}
  ~FakeWatch() override {
    // No event is queued once the store has let go; then the stream stops.
    store_->RemoveWatch(stream_.get());
    stream_.reset();
  }
  void RequestProgress() override { store_->RequestProgress(stream_.get()); }

 private:
  const std::shared_ptr<FakeEtcdStore> store_;
  std::unique_ptr<FakeWatchStream> stream_;
};

class FakeEtcdClient final : public EtcdClient {
 public:
  FakeEtcdClient(std::shared_ptr<FakeEtcdStore> store, std::string name)
      : store_(std::move(store)), name_(std::move(name)) {}

  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override {
    return store_->GrantLease(name_, ttl);
  }
  absl::Status RevokeLease(int64_t lease) override { return store_->RevokeLease(name_, lease); }
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease) override {
    return store_->KeepAliveOnce(name_, lease);
  }
  absl::StatusOr<std::optional<KeyValue>> Get(absl::string_view key) override {
    return store_->Get(name_, key);
  }
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(absl::string_view prefix,
                                                  int64_t* revision) override {
    return store_->GetPrefix(name_, prefix, revision);
  }
  absl::StatusOr<int64_t> Put(absl::string_view key, absl::string_view value,
                              int64_t lease) override {
    return store_->Put(name_, key, value, lease);
  }
  absl::StatusOr<int64_t> Delete(absl::string_view key) override {
    return store_->Delete(name_, key);
  }
  absl::StatusOr<TxnResult> Txn(const std::vector<Compare>& compares,
                                const std::vector<TxnOp>& success,
                                const std::vector<TxnOp>& failure) override {
    return store_->Txn(name_, compares, success, failure);
  }
  absl::StatusOr<std::unique_ptr<WatchHandle>> Watch(absl::string_view prefix,
                                                     int64_t start_revision,
                                                     EventsCallback on_events) override {
    auto stream =
        std::make_unique<FakeWatchStream>(name_, std::string(prefix), std::move(on_events));
    absl::Status s = store_->AddWatch(stream.get(), start_revision);
    if (!s.ok()) return s;  // the stream's thread stops with it, never having called back
    return std::unique_ptr<WatchHandle>(new FakeWatch(store_, std::move(stream)));
  }
  uint64_t endpoint_changes() const override { return store_->endpoint_changes(name_); }

 private:
  const std::shared_ptr<FakeEtcdStore> store_;
  const std::string name_;
};

}  // namespace

FakeEtcd::FakeEtcd(FakeEtcdOptions options)
    : store_(std::make_shared<FakeEtcdStore>(std::move(options.endpoint), options.clock,
                                             options.min_lease_ttl)) {}

FakeEtcd::~FakeEtcd() = default;

std::unique_ptr<EtcdClient> FakeEtcd::NewClient(absl::string_view name) {
  return std::make_unique<FakeEtcdClient>(store_, std::string(name));
}

void FakeEtcd::SetReachable(bool reachable) { store_->SetReachable(reachable); }

void FakeEtcd::SetClientReachable(absl::string_view name, bool reachable) {
  store_->SetClientReachable(std::string(name), reachable);
}

void FakeEtcd::RenewAllLeases() { store_->RenewAllLeases(); }

void FakeEtcd::StallWatches(absl::string_view name) { store_->StallWatches(std::string(name)); }

void FakeEtcd::ChangeEndpoint(absl::string_view name) { store_->ChangeEndpoint(std::string(name)); }

absl::Status FakeEtcd::ExpireLease(int64_t lease) { return store_->ExpireLease(lease); }

int FakeEtcd::ExpireDueLeases() { return store_->ExpireDueLeases(); }

absl::Status FakeEtcd::Compact(int64_t revision) { return store_->Compact(revision); }

int64_t FakeEtcd::revision() const { return store_->revision(); }

int FakeEtcd::watch_count() const { return store_->watch_count(); }

const std::string& FakeEtcd::endpoint() const { return store_->endpoint(); }

}  // namespace etcd
}  // namespace server
}  // namespace kvstore
