// Copyright 2026 The kvstore Authors.
//
// Where the cluster plane keeps its state in etcd (architecture §19.2) and
// how values are encoded there: JSON of the proto messages, so that
// `etcdctl get --prefix /kvstore/` is readable by an operator.
//
//   /kvstore/<cluster>/members/<node_id>   ClusterNode, under the node's lease
//   /kvstore/<cluster>/controller          node id, under the controller's lease
//   /kvstore/<cluster>/map                 ClusterMap
//
// Thread safety: pure functions.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_KEYS_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_KEYS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace server {
namespace etcd_keys {

std::string Prefix(absl::string_view cluster);
std::string MembersPrefix(absl::string_view cluster);
std::string MemberKey(absl::string_view cluster, absl::string_view node_id);
std::string ControllerKey(absl::string_view cluster);
std::string MapKey(absl::string_view cluster);
// The node id of a key under MembersPrefix (empty for another key).
std::string NodeIdOfMemberKey(absl::string_view cluster, absl::string_view key);

std::string EncodeMap(const v1::ClusterMap& map);
// kDataLoss naming the problem for a value that is not a ClusterMap.
absl::StatusOr<v1::ClusterMap> DecodeMap(absl::string_view json);
std::string EncodeNode(const v1::ClusterNode& node);
absl::StatusOr<v1::ClusterNode> DecodeNode(absl::string_view json);

}  // namespace etcd_keys
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_KEYS_H_
