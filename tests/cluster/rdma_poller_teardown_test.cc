// Copyright 2026 The kvstore Authors.
//
// A connection the RDMA poller tears down while its commits wait for a
// frozen backup must not stop the poller: the node's other RDMA work (here,
// another primary's replicated writes arriving on its RDMA link) goes on.
//
// Three kvservers on RDMA, R=2, a real etcd, membership and replication
// deadlines long enough that nothing fails over while the test runs. Node
// P leads a shard whose backup B is frozen (SIGSTOP); a raw client on P
// starts as many commits as it has credits (their rounds wait for B; one
// of them, a second write of a key, waits in the connection's worker lane)
// and then one more, a credit violation, so P's poller tears the connection
// down. Ending that connection's leases waits for those rounds. Meanwhile a
// write to a shard that P backs up (its primary Q sends it over its RDMA
// link to P) must be acknowledged: it was not while the poller itself ended
// the leases (it waited out the 60 s replication deadline).
//
// Needs an RDMA device and /usr/bin/etcd: run in the Soft-RoCE VM
// (tests/rxe).

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/cluster_map.h"
#include "common/protocol/commit_wire.h"
#include "common/protocol/layout.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/cluster/server_counters.h"
#include "tests/raw_rdma_client.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

std::string Entry(absl::string_view key, absl::string_view value) {
  std::string e(layout::EntryBytes(key.size(), value.size()), '\0');
  layout::EncodeEntry(e.data(), key, value, 1);
  return e;
}

uint64_t Counter(ClusterHarness& cluster, int index, const std::string& series) {
  return SumSeries(ServerCounters({cluster.node(index)->control_address()}), series);
}

// Progress on stderr, unbuffered: a test killed at its timeout still shows
// how far it got.
void Step(const std::string& what) { std::fprintf(stderr, "step: %s\n", what.c_str()); }

// Resumes a frozen node when the test leaves, however it leaves: the
// harness cannot stop a stopped process.
struct ResumeOnExit {
  ClusterHarness& cluster;
  int index = -1;
  ~ResumeOnExit() {
    if (index >= 0) cluster.ResumeNode(index);
  }
};

// Entries written into one lease of a raw client, one after the other.
class RawWriter {
 public:
  explicit RawWriter(RawRdmaClient* raw) : raw_(raw) {}
  absl::Status Start() {
    absl::StatusOr<v1::Lease> lease = raw_->Grant(1 << 20);
    if (!lease.ok()) return lease.status();
    lease_ = *lease;
    return absl::OkStatus();
  }
  // WRITEs the entry; the commit that would publish it, not sent.
  absl::StatusOr<wire::PutCommit> Stage(absl::string_view key, absl::string_view value,
                                        uint64_t request_id) {
    const std::string e = Entry(key, value);
    absl::Status w = raw_->Write(lease_.write_addr() + at_, lease_.write_rkey(), e);
    if (!w.ok()) return w;
    wire::PutCommit c;
    c.request_id = request_id;
    c.lease_id = lease_.lease_id();
    c.offset = lease_.arena_offset() + at_;
    c.size = e.size();
    at_ += e.size();
    return c;
  }
  // Stage() and commit, waiting (20 s at most) for the ack.
  absl::Status Put(absl::string_view key, absl::string_view value) {
    absl::StatusOr<wire::PutCommit> c = Stage(key, value, 0);
    if (!c.ok()) return c.status();
    return raw_->Commit(c->lease_id, c->offset, c->size);
  }

 private:
  RawRdmaClient* const raw_;
  v1::Lease lease_;
  uint64_t at_ = 0;
};

TEST(RdmaPollerTeardownTest, ADeadConnectionsRoundsDoNotStopThePoller) {
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  if (dev == nullptr || *dev == '\0') GTEST_SKIP() << "no KV_RDMA_DEVICE: run in tests/rxe";
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.Start().ok());
  ClusterOptions o;
  o.etcd_endpoint = etcd.endpoint();
  o.nodes = 3;
  o.replicas = 2;
  // Nothing may fail over or time out while B is frozen: the test's own
  // bounds (20 s for the write below) are well inside these.
  o.member_ttl = "90s";
  o.fence_margin = "2s";
  o.replication_timeout = "60s";
  o.extra_flags = {"--pool_size=64M", "--transport=rdma", absl::StrCat("--rdma_device=", dev),
                   "--grace_period=100ms"};
  auto started = ClusterHarness::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  ClusterHarness& cluster = **started;
  ASSERT_TRUE(cluster.WaitHealthy(absl::Seconds(120)).ok()) << cluster.Logs();
  Step("cluster healthy");

  // P (the first key's primary), its shard's backup B, and a key of a
  // shard P backs up, led by Q (neither P nor B). One map for every key.
  absl::StatusOr<v1::ClusterMap> map = cluster.GetMap();
  ASSERT_TRUE(map.ok()) << map.status();
  auto view = cluster::ClusterMapView::Build(*std::move(map));
  ASSERT_TRUE(view.ok()) << view.status();
  int p = -1, b = -1, q = -1;
  std::vector<std::string> keys_of_p;
  std::string key_of_q;
  for (int i = 0; i < 4000; ++i) {
    const std::string key = absl::StrCat("t:", i);
    const v1::Shard* shard = (*view)->ShardForKey(key);
    ASSERT_TRUE(shard != nullptr && shard->replicas_size() == 2);
    const int primary = cluster.IndexOf(shard->replicas(0));
    const int backup = cluster.IndexOf(shard->replicas(1));
    if (p < 0) {
      p = primary;
      b = backup;
    }
    if (primary == p) {
      keys_of_p.push_back(key);
    } else if (backup == p && primary != b && key_of_q.empty()) {
      q = primary;
      key_of_q = key;
    }
  }
  ASSERT_GE(q, 0) << "no shard backed up by n" << p + 1 << " and led by a third node";
  Step(absl::StrCat("P n", p + 1, ", its backup n", b + 1, ", Q n", q + 1));

  // Both links up first, each checked by its node's RDMA replication
  // count: Q's to P (its writes must reach P's poller), and P's to B (P's
  // rounds then wait for B's ack until their 60 s deadline, where a
  // stream to a frozen peer would break at its own frame deadline).
  auto to_q = RawRdmaClient::Connect(cluster.node(q)->control_address());
  ASSERT_TRUE(to_q.ok()) << to_q.status();
  auto to_p = RawRdmaClient::Connect(cluster.node(p)->control_address());
  ASSERT_TRUE(to_p.ok()) << to_p.status();
  RawWriter on_q(to_q->get()), on_p(to_p->get());
  ASSERT_TRUE(on_q.Start().ok() && on_p.Start().ok());
  for (auto [node, writer, key] : {std::tuple{q, &on_q, key_of_q}, {p, &on_p, keys_of_p.back()}}) {
    const absl::Time link_deadline = absl::Now() + absl::Seconds(120);
    while (Counter(cluster, node, "kvstore_replication_rdma_writes_total") == 0) {
      ASSERT_LT(absl::Now(), link_deadline) << "no RDMA replication from n" << node + 1 << "\n"
                                            << cluster.Logs();
      absl::Status w = writer->Put(key, "warm-up");
      ASSERT_TRUE(w.ok()) << w;
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  Step("Q replicates to P by RDMA, P to B");

  // On P, one commit more than the raw client's credits.
  const uint32_t credits = (*to_p)->commit_credits();
  ASSERT_GT(credits, 0u);
  ASSERT_GE(keys_of_p.size(), credits + 2);
  // The second commit writes the first one's key again: its key is busy
  // with the first's round, so P declines to start it on the poller and it
  // takes the connection's worker lane, and every commit after it follows.
  // The violation must be seen across both paths (it was not when only the
  // lane's waiting commits counted: a collision of two keys' lock stripes
  // did the same, in about 3 % of runs).
  std::vector<wire::PutCommit> commits;
  for (uint32_t i = 0; i <= credits; ++i) {
    absl::StatusOr<wire::PutCommit> c = on_p.Stage(keys_of_p[i == 1 ? 0 : i], "held", 1000 + i);
    ASSERT_TRUE(c.ok()) << c.status();
    commits.push_back(*c);
  }
  const uint64_t violations = Counter(cluster, p, "kvstore_rdma_credit_violations_total");
  const uint64_t released = Counter(cluster, p, "kvstore_leases_released_total");

  Step(absl::StrCat(credits, " credits; freezing B"));
  ResumeOnExit resume{cluster};
  cluster.PauseNode(b);
  resume.index = b;
  char msg[wire::kAckBytes];
  for (const wire::PutCommit& c : commits) {
    const size_t len = wire::EncodePutCommit(c, msg);
    ASSERT_TRUE((*to_p)->SendOnly(absl::string_view(msg, len)).ok());
  }
  const absl::Time torn_deadline = absl::Now() + absl::Seconds(60);
  while (Counter(cluster, p, "kvstore_rdma_credit_violations_total") == violations) {
    ASSERT_LT(absl::Now(), torn_deadline) << "the last commit was not a credit violation";
    absl::SleepFor(absl::Milliseconds(100));
  }

  Step("the connection is torn down; a write P backs up");
  // The connection is torn down and its rounds still wait for B: a write P
  // must install for Q is acknowledged all the same (RawRdmaClient waits
  // 20 s for an ack).
  const uint64_t rdma_writes = Counter(cluster, q, "kvstore_replication_rdma_writes_total");
  const absl::Time t0 = absl::Now();
  absl::Status after = on_q.Put(key_of_q, "while-torn-down");
  Step(absl::StrCat("Q's write: ", after.ToString(), " after ",
                    absl::FormatDuration(absl::Now() - t0)));
  EXPECT_TRUE(after.ok()) << after << " (P's poller waited for the dead connection's rounds)";
  EXPECT_GT(Counter(cluster, q, "kvstore_replication_rdma_writes_total"), rdma_writes)
      << "Q's write did not go over its RDMA link to P";

  Step("resuming B");
  resume.index = -1;
  cluster.ResumeNode(b);
  // Once B answers, the rounds end, and the reaper ends the dead
  // connection's lease.
  const absl::Time end_deadline = absl::Now() + absl::Seconds(120);
  while (Counter(cluster, p, "kvstore_leases_released_total") == released) {
    ASSERT_LT(absl::Now(), end_deadline) << "the dead connection's lease never ended";
    absl::SleepFor(absl::Milliseconds(200));
  }
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
