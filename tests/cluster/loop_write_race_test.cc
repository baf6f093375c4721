// Copyright 2026 The kvstore Authors.
//
// A write command (DEL, INCR, SET with options) takes the key's locks.
// When a replicated SET of the same key, parked from another connection of
// the same RESP loop, holds them, its round ends only when that loop reads
// the backup's reply. Found 2026-12-04 by loop_write_race.py: the loop ran
// the DEL itself and slept on the lock until --replication_timeout broke
// the stream, the backup counted as failed, and the shard refused writes
// (or dropped a healthy backup). The loop then learnt to read its lent
// replies while it waits (RespLoop::ServeFor); now such a write is parked
// on a worker (RespLoop::ParkCommand) and the loop does not wait at all.
// The script also checks that the writes did meet on the lock.

#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

TEST(LoopWriteRaceTest, ALoopsOwnWriteDoesNotWaitOnAParkedSetOfTheSameKey) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.Start().ok());
  ClusterOptions o;
  o.etcd_endpoint = etcd.endpoint();
  o.nodes = 2;
  o.replicas = 2;
  o.extra_flags.push_back("--resp_threads=1");  // both connections on one loop
  auto c = ClusterHarness::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ClusterHarness& cluster = **c;
  ASSERT_TRUE(cluster.WaitHealthy(absl::Seconds(30)).ok()) << cluster.Logs();
  ProcessResult py = RunProcess({"/usr/bin/python3", BinaryPath("tests/cluster/loop_write_race.py"),
                                 absl::StrCat(cluster.node(0)->resp_port()),
                                 absl::StrCat(cluster.node(1)->resp_port()), "10"},
                                "", 120);
  std::cout << py.out;
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err << "\n" << cluster.Logs();
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
