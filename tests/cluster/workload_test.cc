// Copyright 2026 The kvstore Authors.
//
// The whole pipeline of the cluster tests (Workload -> History ->
// HistoryChecker) against one real kvserver in single-node mode, where the
// truth is known: a clean run has zero violations, and kill -9 followed by
// a restart (a single node keeps nothing) must be reported as lost writes.

#include "tests/cluster/workload.h"

#include <cstdio>
#include <random>

#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"
#include "tests/cluster/history.h"
#include "tests/cluster/history_checker.h"
#include "tests/cluster/node_process.h"

namespace kvstore {
namespace testing {
namespace {

using ::kvstore::testing::Eventually;
class WorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    std::printf("seed %u\n", seed_);
    launch_.flags = {"--pool_size=16M", "--transport=tcp"};
    launch_.log_tag = "workload";
    auto n = NodeProcess::Start(launch_);
    ASSERT_TRUE(n.ok()) << n.status();
    node_ = std::move(*n);
  }

  WorkloadOptions Options() const {
    WorkloadOptions w;
    w.servers = {node_->control_address()};
    w.seed = seed_;
    w.keys = 8;
    return w;
  }

  uint32_t seed_ = 0;
  NodeLaunch launch_;
  std::unique_ptr<NodeProcess> node_;
};

TEST_F(WorkloadTest, CleanRunHasNoViolations) {
  History history;
  Workload load(Options(), &history);
  load.Start();
  // Runs until it has done some work, however slow the machine.
  EXPECT_TRUE(Eventually([&] { return history.size() >= 400; }));
  load.Stop();
  ASSERT_TRUE(load.FinalReads(absl::Seconds(10)).ok());
  CheckOptions check;
  check.require_final_reads = true;
  CheckResult r = CheckHistory(history.Snapshot(), check);
  EXPECT_TRUE(r.ok()) << r.Report();
  EXPECT_GT(r.acknowledged_writes, 100u) << r.Report();
  EXPECT_EQ(r.final_reads, 8u);
  std::printf("%s\n", r.Report(0).c_str());
}

TEST_F(WorkloadTest, RestartOfASingleNodeLosesAcknowledgedWrites) {
  History history;
  WorkloadOptions w = Options();
  w.delete_fraction = 0;  // every key ends with an acknowledged PUT
  Workload load(w, &history);
  load.Start();
  EXPECT_TRUE(Eventually([&] { return history.size() >= 300; }));
  load.Stop();
  node_->Kill();
  launch_.control_port = node_->control_port();
  launch_.resp_port = node_->resp_port();
  auto again = NodeProcess::Start(launch_);
  ASSERT_TRUE(again.ok()) << again.status();
  node_ = std::move(*again);
  ASSERT_TRUE(load.FinalReads(absl::Seconds(10)).ok());
  CheckResult r = CheckHistory(history.Snapshot());
  size_t lost = 0;
  for (const Violation& v : r.violations) lost += v.kind == ViolationKind::kLostWrite;
  EXPECT_EQ(lost, 8u) << r.Report();
  std::printf("%s\n", r.Report(1).c_str());
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
