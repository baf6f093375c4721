// Copyright 2026 The kvstore Authors.
//
// The EtcdClient contract as test cases, run against every etcd a test
// target instantiates them with: the in-memory FakeEtcd
// (fake_etcd_client_test, hermetic) and a real etcd process
// (etcd_client_test, tagged external). Both targets run exactly these
// cases, so the fake cannot drift from what etcd does.
//
//   INSTANTIATE_TEST_SUITE_P(Fake, EtcdContractTest,
//                            ::testing::Values(EtcdContractParam{"Fake", MakeFakeEnv}),
//                            EtcdContractParamName);
//
// An EtcdContractEnv is one etcd and what a case may do to it: make
// clients, let time pass, compact, and the faults (a crash, a hang, a clean
// stop, a restart with the data kept). The cases link in with
// alwayslink = True.
//
// Thread safety: an env is driven from the test's thread; Collector's
// callback runs on watch threads.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_CONTRACT_CASES_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_CONTRACT_CASES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/etcd_client.h"

namespace kvstore {
namespace server {
namespace etcd {

// The client's default (EtcdOptions::rpc_timeout).
inline constexpr absl::Duration kContractRpcTimeout = absl::Seconds(2);

class EtcdContractEnv {
 public:
  virtual ~EtcdContractEnv() = default;
  // Brings the etcd up, empty. Called once, before anything else.
  virtual absl::Status Start() = 0;
  // A client of it with the given rpc_timeout (kContractRpcTimeout unless
  // a case needs a shorter one); null (after a test failure) when it
  // cannot connect.
  virtual std::unique_ptr<EtcdClient> NewClient(absl::Duration rpc_timeout) = 0;
  // What a client's errors name.
  virtual std::string endpoint() const = 0;
  // Lets `d` pass for leases (a real etcd: real time).
  virtual void PassTime(absl::Duration d) = 0;
  virtual absl::Status Compact(int64_t revision) = 0;
  // A crash; a clean stop; both until Restart() (same data, same address).
  virtual void Kill() = 0;
  virtual void Stop() = 0;
  virtual absl::Status Restart() = 0;
  // A hang: nothing answers until Resume().
  virtual void Pause() = 0;
  virtual void Resume() = 0;
};

struct EtcdContractParam {
  std::string name;
  std::function<std::unique_ptr<EtcdContractEnv>()> make;
};

std::string EtcdContractParamName(const ::testing::TestParamInfo<EtcdContractParam>& info);

class EtcdContractTest : public ::testing::TestWithParam<EtcdContractParam> {
 protected:
  void SetUp() override;

  std::unique_ptr<EtcdContractEnv> env_;
  std::unique_ptr<EtcdClient> client_;
};

// Collects what a Watch delivers. Waits are bounded generously (a loaded
// machine is slow, not wrong).
class Collector {
 public:
  std::function<void(absl::StatusOr<std::vector<WatchEvent>>)> Callback();
  // Waits until `n` events arrived; returns them all.
  std::vector<WatchEvent> WaitEvents(size_t n);
  // Waits until an error arrived; returns the errors.
  std::vector<absl::Status> WaitError();
  std::vector<WatchEvent> events();
  std::vector<absl::Status> errors();
  // Batches delivered so far (events and errors).
  int batches();

 private:
  absl::Mutex mu_;
  std::vector<WatchEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
  int batches_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace etcd
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_CONTRACT_CASES_H_
