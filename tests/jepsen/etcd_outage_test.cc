// Copyright 2026 The kvstore Authors.
//
// The scripted etcd outage (etcd_outage.h) as a test: every etcd member
// frozen for twice the member TTL, then every member killed and restarted,
// under load. Fails on a history violation, a kvserver that exited, or one
// that lost its memory. The workload seed comes from KV_FAULT_SEED or is
// random (printed); `--runs_per_test=20` runs 20 seeds. Skips where
// namespaces or nftables are unavailable (not root, a sandbox): tags
// "local".

#include "tests/jepsen/etcd_outage.h"

#include <cstdio>
#include <cstdlib>
#include <random>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace jepsen {
namespace {

EtcdOutageOptions Options(int replicas, EtcdRestartOrder order) {
  EtcdOutageOptions o;
  o.seed = std::random_device{}() | 1;
  if (const char* env = std::getenv("KV_FAULT_SEED"); env != nullptr) {
    EXPECT_TRUE(absl::SimpleAtoi(env, &o.seed)) << "KV_FAULT_SEED=" << env;
  }
  std::printf("workload seed %llu (KV_FAULT_SEED=%llu replays it)\n",
              static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.seed));
  o.bed.nodes = 4;
  o.bed.max_nodes = o.bed.nodes;
  o.bed.replicas = replicas;
  o.restart = order;
  o.workload.keys = 500;
  o.workload.register_clients = 3;
  o.workload.set_clients = 1;
  o.workload.multiput_clients = 1;
  return o;
}

void Expect(const absl::StatusOr<EtcdOutageResult>& r) {
  if (absl::IsFailedPrecondition(r.status())) GTEST_SKIP() << r.status();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->ok, 0u) << r->report;
  EXPECT_FALSE(r->violation) << r->report;
  EXPECT_FALSE(r->node_exited) << r->report;
  EXPECT_FALSE(r->node_emptied) << r->report;
  EXPECT_TRUE(r->recovered) << r->report;
  EXPECT_GE(r->writes.first_write_ms, 0) << "no write accepted after the outage\n" << r->report;
  EXPECT_EQ(r->writes.shards_without_write, 0) << r->report;
  // Reconcile and repair (docs/consistency.md §1.3): every in-sync replica
  // identical at quiescence, as in the bounded fault suite.
  EXPECT_FALSE(r->diverged) << r->report;
  EXPECT_FALSE(r->undecided) << r->report;
}

TEST(EtcdOutage, FreezeTwiceTheTtlThenRollingRestartR2) {
  Expect(RunEtcdOutage(Options(2, EtcdRestartOrder::kRolling)));
}

TEST(EtcdOutage, FreezeTwiceTheTtlThenRestartAllAtOnceR3) {
  Expect(RunEtcdOutage(Options(3, EtcdRestartOrder::kAllAtOnce)));
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
