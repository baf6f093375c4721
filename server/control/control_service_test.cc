// Copyright 2026 The kvstore Authors.
//
// Drives KvControlServiceImpl through a real gRPC server on 127.0.0.1:0 and
// a real channel.

#include "server/control/control_service.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "common/grpc_status.h"
#include "common/metrics/testing.h"
#include "common/protocol/layout.h"
#include "common/protocol/limits.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"
#include "server/storage/eviction.h"

namespace kvstore {
namespace server {
namespace {

namespace pb = ::kvstore::v1;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kEpoch = 42;
constexpr uint64_t kSegment = 1 << 20;
constexpr uint64_t kIndexBytes = 1 << 20;
constexpr uint64_t kMaxValueBytes = 100000;

class ControlServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryPoolOptions po;
    po.data_bytes = 16 * kSegment;
    po.index_bytes = kIndexBytes;
    auto pool = MemoryPool::Create(po);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(*pool);
    KvStoreOptions so;
    so.segment_bytes = kSegment;
    so.grace_period = absl::Milliseconds(100);
    so.cleaner_interval = absl::ZeroDuration();
    so.index_seed = 7;
    so.registry = &registry_;
    so.limits.max_value_bytes = kMaxValueBytes;  // gRPC's 4 MB message cap is not under test
    auto store = KvStore::Create(pool_.get(), so);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    LeaseOptions lo;
    lo.expire_interval = absl::ZeroDuration();
    lo.registry = &registry_;
    leases_ = std::make_unique<LeaseTable>(store_.get(), lo);

    ControlServiceDeps deps;
    deps.store = store_.get();
    deps.leases = leases_.get();
    deps.pool = pool_.get();
    deps.epoch = kEpoch;
    deps.resp_address = "127.0.0.1:6390";
    deps.info = {{"build", "test"}};
    deps.registry = &registry_;
    deps.cluster = cluster_;
    deps.credentials.data_token = auth_token_;
    // Another component's series (the RESP server's, in kvserver) reaches
    // Stats through the shared registry.
    registry_.AddGauge("kvstore_resp_connections", "RESP connections open.")->Set(3);
    service_ = std::make_unique<KvControlServiceImpl>(std::move(deps));

    // As the server wiring does, before building the server.
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    stub_ = pb::KvControl::NewStub(channel_);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    server_.reset();
    service_.reset();
    leases_.reset();
    store_.reset();
    pool_.reset();
  }

  static grpc::Status Put(pb::KvControl::Stub& stub, const std::string& key,
                          const std::string& value) {
    grpc::ClientContext ctx;
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    pb::PutResponse resp;
    return stub.Put(&ctx, req, &resp);
  }
  grpc::Status Put(const std::string& key, const std::string& value) {
    return Put(*stub_, key, value);
  }

  grpc::Status Get(const std::string& key, std::string* value) {
    grpc::ClientContext ctx;
    pb::GetRequest req;
    req.set_key(key);
    pb::GetResponse resp;
    grpc::Status s = stub_->Get(&ctx, req, &resp);
    *value = resp.value();
    return s;
  }

  grpc::Status Delete(const std::string& key) {
    grpc::ClientContext ctx;
    pb::DeleteRequest req;
    req.set_key(key);
    pb::DeleteResponse resp;
    return stub_->Delete(&ctx, req, &resp);
  }

  pb::ScanResponse Scan(uint64_t cursor, uint32_t count, const std::string& prefix) {
    grpc::ClientContext ctx;
    pb::ScanRequest req;
    req.set_cursor(cursor);
    req.set_count(count);
    req.set_prefix(prefix);
    pb::ScanResponse resp;
    grpc::Status s = stub_->Scan(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  pb::StatsResponse Stats() {
    grpc::ClientContext ctx;
    pb::StatsResponse resp;
    grpc::Status s = stub_->Stats(&ctx, pb::StatsRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  // Set by fixtures deriving from this one before SetUp().
  const ClusterState* cluster_ = nullptr;
  std::string auth_token_;
  // Declared first: everything below registers into it.
  metrics::Registry registry_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<LeaseTable> leases_;
  std::unique_ptr<KvControlServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::KvControl::Stub> stub_;
};

TEST_F(ControlServiceTest, HandshakeDescribesTheServer) {
  grpc::ClientContext ctx;
  pb::HandshakeRequest req;
  req.set_client_name("control_service_test");
  pb::HandshakeResponse resp;
  grpc::Status s = stub_->Handshake(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.epoch(), kEpoch);
  EXPECT_EQ(resp.server_version(), "kvstore 0.1.0");

  EXPECT_EQ(resp.limits().max_key_bytes(), kDefaultMaxKeyBytes);
  EXPECT_EQ(resp.limits().max_value_bytes(), kMaxValueBytes);
  EXPECT_EQ(resp.limits().max_batch_keys(), 4096u);
  EXPECT_EQ(resp.limits().max_lease_bytes(), (64ull << 20) + 4096);
  EXPECT_EQ(resp.limits().lease_ttl_ms(), 10000u);
  EXPECT_EQ(resp.limits().max_read_span_ms(), 50u);  // half the 100 ms grace period

  EXPECT_EQ(resp.index().bucket_count(), kIndexBytes / layout::kBucketBytes);
  EXPECT_EQ(resp.index().seed(), 7u);
  EXPECT_EQ(resp.index().layout_version(), layout::kLayoutVersion);
  EXPECT_EQ(resp.index().bucket_bytes(), layout::kBucketBytes);
  EXPECT_EQ(resp.index().slots_per_bucket(), layout::kSlotsPerBucket);

  // No RDMA device in this test: nothing is registered, so no regions.
  EXPECT_THAT(resp.regions(), IsEmpty());
  EXPECT_EQ(resp.endpoints().resp_address(), "127.0.0.1:6390");
  EXPECT_EQ(resp.endpoints().rdma_device(), "");
  EXPECT_EQ(resp.data_arena_bytes(), 16 * kSegment);
}

TEST_F(ControlServiceTest, PutGetDeleteRoundTripIsBinarySafe) {
  const std::string key = std::string("\0\xff", 2) + "bin" + std::string(1, '\0') + "key";
  const std::string value = std::string("va") + '\0' + "lu" + '\0' + "e\xff";
  ASSERT_EQ(key.size(), 9u);
  ASSERT_EQ(value.size(), 8u);
  grpc::Status s = Put(key, value);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string got;
  s = Get(key, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(got, value);
  // A key that differs only after the NUL is another key.
  EXPECT_EQ(Get(key.substr(0, 5), &got).error_code(), grpc::StatusCode::NOT_FOUND);

  // Overwrite, then an empty value.
  ASSERT_TRUE(Put(key, "second").ok());
  ASSERT_TRUE(Get(key, &got).ok());
  EXPECT_EQ(got, "second");
  ASSERT_TRUE(Put(key, "").ok());
  ASSERT_TRUE(Get(key, &got).ok());
  EXPECT_EQ(got, "");

  ASSERT_TRUE(Delete(key).ok());
  EXPECT_EQ(Get(key, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Delete(key).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ControlServiceTest, LimitsAreEnforcedAndNamed) {
  const std::string long_key(kDefaultMaxKeyBytes + 1, 'k');
  std::string got;
  for (grpc::Status s : {Put(long_key, "v"), Get(long_key, &got), Delete(long_key)}) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("max_key_bytes=1024"));
  }
  grpc::Status s = Put("k", std::string(kMaxValueBytes + 1, 'v'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("max_value_bytes=", kMaxValueBytes)));
  EXPECT_EQ(Put("", "v").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Put("k", std::string(kMaxValueBytes, 'v')).ok());
  EXPECT_EQ(store_->size(), 1u);
}

TEST_F(ControlServiceTest, ScanPagesThroughAPrefix) {
  std::set<std::string> expected;
  for (int i = 0; i < 60; ++i) {
    const std::string key = absl::StrFormat("scan/%02d", i);
    ASSERT_TRUE(Put(key, "v").ok());
    expected.insert(key);
  }
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Put(absl::StrCat("other/", i), "v").ok());

  std::multiset<std::string> seen;
  uint64_t cursor = 0;
  int pages = 0;
  do {
    pb::ScanResponse page = Scan(cursor, 7, "scan/");
    // Whole buckets are listed, so a page may exceed the count by a bucket.
    EXPECT_LE(page.keys_size(), 7 + static_cast<int>(layout::kSlotsPerBucket));
    for (const std::string& key : page.keys()) seen.insert(key);
    cursor = page.cursor();
    ASSERT_LT(++pages, 10000);
  } while (cursor != 0);
  EXPECT_GE(pages, 60 / (7 + static_cast<int>(layout::kSlotsPerBucket)));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), expected);
  EXPECT_EQ(seen.size(), expected.size());  // each key exactly once
}

TEST_F(ControlServiceTest, ScanCountDefaultsAndIsCapped) {
  auto writer = store_->NewWriter();
  for (int i = 0; i < 1200; ++i) {
    ASSERT_TRUE(store_->Put(writer.get(), absl::StrCat("key", i), "v").ok());
  }
  const int slack = static_cast<int>(layout::kSlotsPerBucket);
  pb::ScanResponse page = Scan(0, 0, "");
  EXPECT_GE(page.keys_size(), 100);
  EXPECT_LE(page.keys_size(), 100 + slack);
  EXPECT_NE(page.cursor(), 0u);
  page = Scan(0, 5000, "");
  EXPECT_GE(page.keys_size(), 1000);
  EXPECT_LE(page.keys_size(), 1000 + slack);
  EXPECT_NE(page.cursor(), 0u);
  // A cursor past the end ends the listing.
  page = Scan(~uint64_t{0}, 10, "");
  EXPECT_EQ(page.keys_size(), 0);
  EXPECT_EQ(page.cursor(), 0u);
}

// One-sided GETs reach the eviction policy only through ReportReads: keys
// reported there, in either encoding, outlive a flood of keys never read.
// A server that ignored a field would evict the hot keys reported in it.
TEST_F(ControlServiceTest, ReportedReadsInEitherEncodingKeepKeysFromEviction) {
  store_->SetEvictionPolicy(EvictionPolicy::kAllKeysLru);
  const std::string value(1000, 'v');
  // Every key goes straight to the store through one writer, so the hot
  // keys' segment is sealed and may be evicted like any other (a gRPC Put's
  // writer would keep it open, and safe, for the whole test).
  std::unique_ptr<KvStore::Writer> writer = store_->NewWriter();
  std::vector<std::string> hot;
  for (int i = 0; i < 100; ++i) {
    hot.push_back(absl::StrCat("hot", i));
    ASSERT_TRUE(store_->Put(writer.get(), hot.back(), value).ok());
  }
  // The cold keys: 2.5 times the 16 MiB pool.
  for (int i = 0; i < 40000; ++i) {
    absl::Status put = store_->Put(writer.get(), absl::StrCat("cold", i), value, absl::Seconds(30));
    ASSERT_TRUE(put.ok()) << put << " at " << i;
    if (i % 500 != 0) continue;
    pb::ReportReadsRequest req;
    for (size_t k = 0; k < hot.size(); ++k) {
      std::optional<layout::Slot> slot = store_->Locate(hot[k]);
      ASSERT_TRUE(slot.has_value()) << hot[k] << " at " << i;
      if (k % 2 == 0) {
        req.add_fixed_offsets(slot->offset);
      } else {
        req.add_offsets(slot->offset);
      }
    }
    grpc::ClientContext ctx;
    pb::ReportReadsResponse resp;
    grpc::Status s = stub_->ReportReads(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_GT(metrics::testing::Value(registry_, "kvstore_evicted_keys_total"), 20000);
  std::string got;
  for (const auto& k : hot) EXPECT_TRUE(Get(k, &got).ok()) << k;
  writer.reset();
}

TEST_F(ControlServiceTest, ReportReadsCountsBothFieldsAgainstItsLimit) {
  pb::ReportReadsRequest req;
  for (int i = 0; i < kMaxReportedReads; ++i) req.add_fixed_offsets(uint64_t{1} << 62);
  {
    grpc::ClientContext ctx;
    pb::ReportReadsResponse resp;
    grpc::Status s = stub_->ReportReads(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();  // made-up offsets are ignored
  }
  req.add_offsets(0);
  grpc::ClientContext ctx;
  pb::ReportReadsResponse resp;
  grpc::Status s = stub_->ReportReads(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("4097 offsets; at most 4096"));
}

TEST_F(ControlServiceTest, StatsCountersMove) {
  pb::StatsResponse before = Stats();
  EXPECT_EQ(before.info().at("server_version"), "kvstore 0.1.0");
  EXPECT_EQ(before.info().at("epoch"), "42");
  EXPECT_EQ(before.info().at("build"), "test");
  const auto& c0 = before.counters();
  for (const char* name :
       {"kvstore_pool_bytes", "kvstore_pool_live_bytes", "kvstore_keys", "kvstore_index_slots",
        "kvstore_pool_segments", "kvstore_pool_segments_free",
        "kvstore_pool_segments_awaiting_grace", "kvstore_commits_total", "kvstore_deletes_total",
        "kvstore_leases_granted_total", "kvstore_leases_active", "kvstore_lease_commits_total",
        "kvstore_lease_aborted_commits_total", "kvstore_grpc_requests_total{method=\"Put\"}",
        "kvstore_resp_connections"}) {
    EXPECT_EQ(c0.count(name), 1u) << name;
  }
  EXPECT_EQ(c0.at("kvstore_pool_bytes"), 16 * kSegment);
  EXPECT_EQ(c0.at("kvstore_index_slots"),
            kIndexBytes / layout::kBucketBytes * layout::kSlotsPerBucket);
  EXPECT_EQ(c0.at("kvstore_resp_connections"), 3u);
  EXPECT_EQ(c0.at("kvstore_keys"), 0u);

  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(Put("b", "2").ok());
  ASSERT_TRUE(Delete("a").ok());
  pb::StatsResponse after = Stats();
  const auto& c1 = after.counters();
  EXPECT_EQ(c1.at("kvstore_keys"), 1u);
  EXPECT_EQ(c1.at("kvstore_commits_total"), c0.at("kvstore_commits_total") + 2);
  EXPECT_EQ(c1.at("kvstore_deletes_total"), c0.at("kvstore_deletes_total") + 1);
  EXPECT_EQ(c1.at("kvstore_grpc_requests_total{method=\"Put\"}"),
            c0.at("kvstore_grpc_requests_total{method=\"Put\"}") + 2);
  EXPECT_EQ(c1.at("kvstore_grpc_requests_total{method=\"Delete\"}"),
            c0.at("kvstore_grpc_requests_total{method=\"Delete\"}") + 1);
  EXPECT_EQ(c1.at(R"(kvstore_server_requests_total{op="put",transport="grpc"})"), 2u);
  EXPECT_EQ(c1.at(R"(kvstore_server_request_duration_seconds_count{op="put",transport="grpc"})"),
            2u);
  EXPECT_GT(c1.at("kvstore_pool_live_bytes"), 0u);
  EXPECT_LT(c1.at("kvstore_pool_segments_free"),
            c0.at("kvstore_pool_segments_free"));  // the put writer holds one
}

// Lease RPCs without RDMA: the epoch is checked first, then the session,
// and a lease always needs a queue pair (the RDMA lease path itself is
// covered by tests/rdma_*_test.cc; the session rules by
// control_security_test.cc).
TEST_F(ControlServiceTest, LeaseRpcsCheckEpochThenSessionThenConnection) {
  uint64_t session = 0;
  {
    grpc::ClientContext ctx;
    pb::HandshakeResponse resp;
    ASSERT_TRUE(stub_->Handshake(&ctx, pb::HandshakeRequest(), &resp).ok());
    session = resp.session_id();
  }
  ASSERT_NE(session, 0u);
  // Every lease RPC names the epoch; an old one means "handshake again".
  const std::string stale = "stale server epoch: client epoch 41, server epoch 42: handshake again";
  {
    grpc::ClientContext ctx;
    pb::GrantLeaseRequest req;
    req.set_epoch(kEpoch - 1);
    req.set_bytes(4096);
    req.set_session_id(session);
    pb::GrantLeaseResponse resp;
    grpc::Status s = stub_->GrantLease(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(), stale);
    EXPECT_TRUE(cluster::IsRefusal(FromGrpcStatus(s), cluster::RefusalKind::kStaleServerEpoch));
  }
  {
    grpc::ClientContext ctx;
    pb::RenewLeaseRequest req;
    req.set_epoch(kEpoch - 1);
    req.set_lease_id(1);
    req.set_session_id(session);
    pb::RenewLeaseResponse resp;
    grpc::Status s = stub_->RenewLease(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(), stale);
  }
  {
    grpc::ClientContext ctx;
    pb::ReleaseLeaseRequest req;
    req.set_epoch(kEpoch - 1);
    req.set_lease_id(1);
    req.set_session_id(session);
    pb::ReleaseLeaseResponse resp;
    grpc::Status s = stub_->ReleaseLease(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(), stale);
  }
  // Right epoch, no session: handshake first.
  {
    grpc::ClientContext ctx;
    pb::GrantLeaseRequest req;
    req.set_epoch(kEpoch);
    req.set_bytes(4096);
    pb::GrantLeaseResponse resp;
    grpc::Status s = stub_->GrantLease(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(s.error_message(), HasSubstr("no live session 0"));
    // Typed, so the client knows to handshake again without reading words.
    EXPECT_TRUE(cluster::IsRefusal(FromGrpcStatus(s), cluster::RefusalKind::kSessionLost));
  }
  // A session but no queue pair: no lease (finding 3: a keyless lease was
  // renewable by anyone, for ever).
  {
    grpc::ClientContext ctx;
    pb::GrantLeaseRequest req;
    req.set_epoch(kEpoch);
    req.set_bytes(4096);
    req.set_session_id(session);
    pb::GrantLeaseResponse resp;
    grpc::Status s = stub_->GrantLease(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(s.error_message(), HasSubstr("ConnectQp first"));
  }
  pb::StatsResponse stats = Stats();
  EXPECT_EQ(stats.counters().at("kvstore_leases_granted_total"), 0u);
  EXPECT_EQ(stats.counters().at("kvstore_grpc_stale_epoch_errors_total"), 3u);
  EXPECT_EQ(stats.counters().at(R"(kvstore_grpc_session_refusals_total{reason="no_session"})"), 1u);
  EXPECT_EQ(stats.counters().at(R"(kvstore_grpc_session_refusals_total{reason="no_connection"})"),
            1u);
}

// grpc.health.v1.Health/Check over a generic stub: Debian ships no generated
// health stubs, so the request and reply are hand-encoded protobuf.
std::string HealthCheck(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                        grpc::Status* status) {
  // HealthCheckRequest { string service = 1; }
  std::string request = "\x0a";
  request.push_back(static_cast<char>(service.size()));
  request += service;
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  absl::Notification done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request_buffer,
                 &response_buffer, [&](grpc::Status s) {
                   *status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  std::vector<grpc::Slice> slices;
  std::string response;
  if (status->ok() && response_buffer.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      response.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return response;
}

TEST_F(ControlServiceTest, DefaultHealthServiceIsRegistered) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  ASSERT_NE(health, nullptr);
  const std::string name = pb::KvControl::service_full_name();
  EXPECT_EQ(name, "kvstore.v1.KvControl");
  health->SetServingStatus(name, true);
  grpc::Status s;
  // HealthCheckResponse { ServingStatus status = 1; } SERVING = 1.
  EXPECT_EQ(HealthCheck(channel_, name, &s), std::string("\x08\x01", 2));
  EXPECT_TRUE(s.ok()) << s.error_message();
  health->SetServingStatus(name, false);  // NOT_SERVING = 2
  EXPECT_EQ(HealthCheck(channel_, name, &s), std::string("\x08\x02", 2));
  HealthCheck(channel_, "no.such.Service", &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

// Cluster mode: the slow path routes keys as the RESP port does, naming the
// primary's control address. Shard 0 is this node's (node-a), shard 1
// node-b's with node-a its backup, shard 2 has no replica left.
class ControlServiceClusterTest : public ControlServiceTest {
 protected:
  void SetUp() override {
    cluster_ = &state_;
    ControlServiceTest::SetUp();
    v1::ClusterMap map;
    map.set_epoch(3);
    const std::vector<v1::SlotRange> ranges = cluster::EvenSlotRanges(3);
    for (const char* id : {"node-a", "node-b"}) {
      v1::ClusterNode* node = map.add_nodes();
      node->set_node_id(id);
      node->set_control_address(absl::StrCat(id, ".example:7000"));
      node->set_resp_address(absl::StrCat(id, ".example:6380"));
    }
    for (int i = 0; i < 3; ++i) {
      v1::Shard* shard = map.add_shards();
      shard->set_shard_id(i);
      *shard->add_slots() = ranges[i];
      if (i == 0) shard->add_replicas("node-a");
      if (i == 1) {
        shard->add_replicas("node-b");
        shard->add_replicas("node-a");
      }
    }
    auto view = cluster::ClusterMapView::Build(map);
    ASSERT_TRUE(view.ok()) << view.status();
    map_ = *view;
  }
  // A key of shard `shard` of the map above.
  std::string KeyOf(int shard) const {
    const std::vector<v1::SlotRange> ranges = cluster::EvenSlotRanges(3);
    for (int i = 0;; ++i) {
      std::string key = absl::StrCat("k", i);
      const uint32_t slot = cluster::KeySlot(key);
      if (slot >= ranges[shard].start() && slot <= ranges[shard].end()) return key;
    }
  }

  ClusterState state_{"node-a"};
  std::shared_ptr<const cluster::ClusterMapView> map_;
};

TEST_F(ControlServiceClusterTest, RoutesGetPutDelete) {
  const std::string mine = KeyOf(0), theirs = KeyOf(1), down = KeyOf(2);
  std::string value;
  // No map yet: nothing is served.
  grpc::Status s = Put(mine, "v");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), ::testing::StartsWith("CLUSTERDOWN"));
  ASSERT_TRUE(state_.Update(map_));

  ASSERT_TRUE(Put(mine, "v").ok());
  ASSERT_TRUE(Get(mine, &value).ok());
  EXPECT_EQ(value, "v");
  const std::string moved =
      absl::StrCat("MOVED ", cluster::KeySlot(theirs), " node-b.example:7000");
  for (grpc::Status st : {Put(theirs, "v"), Get(theirs, &value), Delete(theirs)}) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(st.error_message(), moved);
    // The refusal itself, in the status details: node, control address, no effect.
    EXPECT_EQ(cluster::FromStatus(FromGrpcStatus(st)),
              cluster::Refusal::Moved(cluster::KeySlot(theirs), "node-b", "node-b.example:7000"));
  }
  EXPECT_FALSE(store_->Exists(theirs));
  for (grpc::Status st : {Put(down, "v"), Get(down, &value), Delete(down)}) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(st.error_message(), ::testing::StartsWith("CLUSTERDOWN"));
  }
  // Fenced: this node's own keys are refused too.
  state_.set_fenced(true);
  EXPECT_EQ(Get(mine, &value).error_code(), grpc::StatusCode::UNAVAILABLE);
  state_.set_fenced(false);
  EXPECT_TRUE(Delete(mine).ok());
  // Scan stays local (it lists this node's keys, whoever leads them).
  EXPECT_TRUE(Scan(0, 10, "").keys().empty());
}

class ControlServiceClusterAuthTest : public ControlServiceClusterTest {
 protected:
  void SetUp() override {
    auth_token_ = "0123456789abcdef0123456789abcdef";
    ControlServiceClusterTest::SetUp();
  }
};

// The token is checked before routing: without it nothing learns where a key lives.
TEST_F(ControlServiceClusterAuthTest, TokenCheckedBeforeRouting) {
  ASSERT_TRUE(state_.Update(map_));
  std::string value;
  for (grpc::Status st : {Put(KeyOf(1), "v"), Get(KeyOf(1), &value), Delete(KeyOf(1))}) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  }
}

}  // namespace
}  // namespace server
}  // namespace kvstore
