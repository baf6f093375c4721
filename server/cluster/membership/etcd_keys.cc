// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/etcd_keys.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace kvstore {
namespace server {
namespace etcd_keys {
namespace {

template <typename Message>
absl::StatusOr<Message> Decode(absl::string_view json, absl::string_view what) {
  Message m;
  google::protobuf::util::JsonParseOptions options;
  // A newer kvserver may add fields; an older one must still read the map.
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &m, options);
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat("etcd value is not a ", what, ": ", status.message().as_string()));
  }
  return m;
}

template <typename Message>
std::string Encode(const Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Serialising a message we built cannot fail.
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

}  // namespace

std::string Prefix(absl::string_view cluster) { return absl::StrCat("/kvstore/", cluster, "/"); }
std::string MembersPrefix(absl::string_view cluster) {
  return absl::StrCat(Prefix(cluster), "members/");
}
std::string MemberKey(absl::string_view cluster, absl::string_view node_id) {
  return absl::StrCat(MembersPrefix(cluster), node_id);
}
std::string ControllerKey(absl::string_view cluster) {
  return absl::StrCat(Prefix(cluster), "controller");
}
std::string MapKey(absl::string_view cluster) { return absl::StrCat(Prefix(cluster), "map"); }

std::string NodeIdOfMemberKey(absl::string_view cluster, absl::string_view key) {
  const std::string prefix = MembersPrefix(cluster);
  if (!absl::StartsWith(key, prefix)) return "";
  return std::string(key.substr(prefix.size()));
}

std::string EncodeMap(const v1::ClusterMap& map) { return Encode(map); }
absl::StatusOr<v1::ClusterMap> DecodeMap(absl::string_view json) {
  return Decode<v1::ClusterMap>(json, "ClusterMap");
}
std::string EncodeNode(const v1::ClusterNode& node) { return Encode(node); }
absl::StatusOr<v1::ClusterNode> DecodeNode(absl::string_view json) {
  return Decode<v1::ClusterNode>(json, "ClusterNode");
}

}  // namespace etcd_keys
}  // namespace server
}  // namespace kvstore
