// Copyright 2026 The kvstore Authors.
//
// SlowReadPath against an in-test KvControl server (a real gRPC server and
// ControlClient) answering Get as a migration's source does: reads go to
// the server's Get and keep its ASK / TRYAGAIN answers per key; writes go
// to the wrapped path untouched.

#include "client/internal/cluster/slow_read_path.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/internal/cluster/cluster_errors.h"
#include "common/cluster/refusal.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"

namespace kvstore {
namespace client {
namespace {

// "asked" -> a kAsk refusal, "busy" -> kTryAgain, "here" -> a value, anything else
// NOT_FOUND; counts the calls.
class SourceControl final : public v1::KvControl::Service {
 public:
  grpc::Status Get(grpc::ServerContext*, const v1::GetRequest* req,
                   v1::GetResponse* resp) override {
    ++gets;
    if (req->key() == "asked") {
      return ToGrpcStatus(cluster::ToStatus(cluster::Refusal::Ask(42, "c", "127.0.0.1:7003")));
    }
    if (req->key() == "busy") {
      return ToGrpcStatus(
          cluster::ToStatus(cluster::Refusal::TryAgain(42, "is being handed to another shard")));
    }
    if (req->key() == "here") {
      resp->set_value("v");
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "key not found");
  }
  std::atomic<int> gets{0};
};

// The wrapped path: counts what reaches it; reads must not.
class RecordingPath final : public DataPath {
 public:
  absl::StatusOr<std::string> Get(absl::string_view, absl::Time) override {
    ++reads;
    return std::string("one-sided");
  }
  absl::Status Put(absl::string_view, absl::string_view, absl::Time) override {
    ++writes;
    return absl::OkStatus();
  }
  absl::Status Delete(absl::string_view, absl::Time) override {
    ++writes;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> Exists(absl::string_view, absl::Time) override {
    ++reads;
    return true;
  }
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time) override {
    ++reads;
    return std::vector<absl::StatusOr<std::string>>(keys.size(), std::string("one-sided"));
  }
  absl::StatusOr<std::vector<absl::Status>> MultiPut(
      absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time) override {
    ++writes;
    return std::vector<absl::Status>(pairs.size());
  }
  absl::string_view name() const override { return "rdma"; }
  int reads = 0;
  int writes = 0;
};

TEST(SlowReadPathTest, ReadsGoToTheServerWritesToThePath) {
  SourceControl service;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto control = control::ControlClient::Dial(absl::StrCat("127.0.0.1:", port));
  ASSERT_TRUE(control.ok()) << control.status();
  RecordingPath inner;
  SlowReadPath path(control->get(), &inner);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);

  EXPECT_EQ(*path.Get("here", deadline), "v");
  const absl::Status ask = path.Get("asked", deadline).status();
  EXPECT_EQ(Classify(ask), Verdict::kAsk) << ask;
  ASSERT_TRUE(ParseAsk(ask).has_value());
  EXPECT_EQ(ParseAsk(ask)->address, "127.0.0.1:7003");
  EXPECT_EQ(Classify(path.Get("busy", deadline).status()), Verdict::kTryAgain);
  EXPECT_TRUE(*path.Exists("here", deadline));
  EXPECT_FALSE(*path.Exists("nothing", deadline));
  EXPECT_EQ(Classify(path.Exists("asked", deadline).status()), Verdict::kAsk);
  auto many = path.MultiGet({"here", "asked", "nothing"}, deadline);
  ASSERT_TRUE(many.ok());
  ASSERT_EQ(many->size(), 3u);
  EXPECT_EQ(*(*many)[0], "v");
  EXPECT_EQ(Classify((*many)[1].status()), Verdict::kAsk);
  EXPECT_TRUE(absl::IsNotFound((*many)[2].status()));
  EXPECT_EQ(inner.reads, 0);
  EXPECT_EQ(service.gets.load(), 9);

  EXPECT_TRUE(path.Put("k", "v", deadline).ok());
  EXPECT_TRUE(path.Delete("k", deadline).ok());
  EXPECT_TRUE(path.MultiPut({{"k", "v"}}, deadline).ok());
  EXPECT_EQ(inner.writes, 3);
  EXPECT_EQ(path.name(), "rdma");
  server->Shutdown();
}

}  // namespace
}  // namespace client
}  // namespace kvstore
