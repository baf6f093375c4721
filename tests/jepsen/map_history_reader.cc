// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/map_history_reader.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/cluster/membership/etcd_keys.h"

namespace kvstore {
namespace jepsen {
namespace {

// The key as of `revision` (0: now); nullopt when it did not exist then.
absl::StatusOr<std::optional<mvccpb::KeyValue>> GetAt(etcdserverpb::KV::Stub& kv,
                                                      const std::string& key, int64_t revision) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  req.set_revision(revision);
  etcdserverpb::RangeResponse resp;
  grpc::Status s = kv.Range(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  if (resp.kvs().empty()) return std::nullopt;
  return resp.kvs(0);
}

}  // namespace

absl::StatusOr<std::vector<MapRevision>> ReadMapHistory(const std::string& endpoints,
                                                        const std::string& cluster_name,
                                                        bool* truncated) {
  *truncated = false;
  const std::string key = server::etcd_keys::MapKey(cluster_name);
  absl::Status last = absl::UnavailableError("no etcd endpoint");
  for (absl::string_view ep : absl::StrSplit(endpoints, ',', absl::SkipEmpty())) {
    auto kv = etcdserverpb::KV::NewStub(
        grpc::CreateChannel(std::string(ep), grpc::InsecureChannelCredentials()));
    std::vector<MapRevision> out;
    int64_t at = 0;  // now, then each earlier version's revision
    absl::Status failed;
    while (true) {
      absl::StatusOr<std::optional<mvccpb::KeyValue>> got = GetAt(*kv, key, at);
      if (!got.ok()) {
        // etcd answers OUT_OF_RANGE for a revision below its compaction.
        if (absl::IsOutOfRange(got.status())) {
          *truncated = true;
        } else {
          failed = got.status();
        }
        break;
      }
      if (!got->has_value()) break;
      const mvccpb::KeyValue& v = **got;
      absl::StatusOr<v1::ClusterMap> map = server::etcd_keys::DecodeMap(v.value());
      if (!map.ok()) {
        return absl::DataLossError(
            absl::StrCat("map key at revision ", v.mod_revision(), ": ", map.status().message()));
      }
      out.push_back({v.mod_revision(), *std::move(map)});
      if (v.mod_revision() <= v.create_revision()) break;
      at = v.mod_revision() - 1;
    }
    if (!failed.ok() && out.empty()) {
      last = absl::Status(failed.code(), absl::StrCat(ep, ": ", failed.message()));
      continue;
    }
    if (!failed.ok()) {
      return absl::Status(failed.code(), absl::StrCat(ep, " failed after ", out.size(),
                                                      " versions: ", failed.message()));
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  return last;
}

}  // namespace jepsen
}  // namespace kvstore
