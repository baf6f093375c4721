// Copyright 2026 The kvstore Authors.
//
// The replication links' series in the server's registry: what /metrics
// (FormatPrometheusText), Stats and INFO (FlattenSnapshot) show, per backup.

#include "server/cluster/replication/replica_link_metrics.h"

#include <string>

#include "common/metrics/exposition.h"
#include "common/metrics/registry.h"
#include "common/metrics/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace mt = metrics::testing;

TEST(ReplicaLinkMetrics, LinkCountersAppearPerPeerInTheServersSeries) {
  metrics::Registry registry;
  ReplicaLinkMetrics m(&registry);
  const initiator::PathCounters b = m.ForPeer("node-b");
  const initiator::PathCounters c = m.ForPeer("node-c");
  b.leases.granted->Increment(3);
  b.leases.renewed->Increment(2);
  b.leases.released->Increment(1);
  b.lease_aborts->Increment(4);
  c.lease_aborts->Increment();

  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_leases_granted_total{peer=\"node-b\"}"),
            3u);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_leases_renewed_total{peer=\"node-b\"}"),
            2u);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_leases_released_total{peer=\"node-b\"}"),
            1u);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_lease_aborts_total{peer=\"node-b\"}"),
            4u);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_lease_aborts_total{peer=\"node-c\"}"),
            1u);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_leases_granted_total{peer=\"node-c\"}"),
            0u);

  // The text /metrics serves.
  const std::string text = metrics::FormatPrometheusText(registry.TakeSnapshot());
  EXPECT_THAT(text, HasSubstr("# TYPE kvstore_replication_rdma_lease_aborts_total counter\n"));
  EXPECT_THAT(text, HasSubstr("kvstore_replication_rdma_lease_aborts_total{peer=\"node-b\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("kvstore_replication_rdma_lease_aborts_total{peer=\"node-c\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("kvstore_replication_rdma_leases_granted_total{peer=\"node-b\"} 3\n"));
}

TEST(ReplicaLinkMetrics, AReconnectedLinkCountsOnInTheSameSeries) {
  metrics::Registry registry;
  ReplicaLinkMetrics m(&registry);
  const initiator::PathCounters first = m.ForPeer("node-b");
  const initiator::PathCounters again = m.ForPeer("node-b");
  EXPECT_EQ(first.leases.granted, again.leases.granted);
  EXPECT_EQ(first.leases.renewed, again.leases.renewed);
  EXPECT_EQ(first.leases.released, again.leases.released);
  EXPECT_EQ(first.lease_aborts, again.lease_aborts);
  EXPECT_NE(first.lease_aborts, m.ForPeer("node-c").lease_aborts);
}

TEST(ReplicaLinkMetrics, AHostPortNodeIdKeepsFlatSeriesFreeOfColons) {
  metrics::Registry registry;
  ReplicaLinkMetrics m(&registry);
  m.ForPeer("10.0.0.7:7300").lease_aborts->Increment();
  EXPECT_EQ(ReplicaLinkMetrics::PeerLabel("10.0.0.7:7300"), "10.0.0.7_7300");
  EXPECT_EQ(ReplicaLinkMetrics::PeerLabel("n1"), "n1");
  EXPECT_EQ(
      mt::Value(registry, "kvstore_replication_rdma_lease_aborts_total{peer=\"10.0.0.7_7300\"}"),
      1u);
  // Each flat series is one "key:value" line of RESP INFO.
  for (const auto& [series, value] : metrics::FlattenSnapshot(registry.TakeSnapshot())) {
    EXPECT_THAT(series, Not(HasSubstr(":"))) << series;
  }
}

TEST(ReplicaLinkMetrics, AllLinkCountersKeepTheirNames) {
  metrics::Registry registry;
  ReplicaLinkMetrics m(&registry);
  m.writes()->Increment(5);
  m.connects()->Increment(2);
  m.connect_failures()->Increment();
  m.fallbacks()->Increment(3);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_writes_total"), 5u);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_connects_total"), 2u);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_connect_failures_total"), 1u);
  EXPECT_EQ(mt::Value(registry, "kvstore_replication_rdma_fallbacks_total"), 3u);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
