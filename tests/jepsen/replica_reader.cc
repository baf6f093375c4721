// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/replica_reader.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cluster/cluster_map.h"
#include "common/protocol/resp.h"

namespace kvstore {
namespace jepsen {
namespace {

absl::StatusOr<int> Dial(const std::string& address) {
  std::pair<std::string, std::string> hp = absl::StrSplit(address, absl::MaxSplits(':', 1));
  int port = 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (!absl::SimpleAtoi(hp.second, &port) ||
      inet_pton(AF_INET, hp.first.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  }
  a.sin_port = htons(port);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect ", address));
  }
  return fd;
}

// Sends READONLY and one GET per key on one connection; the values.
absl::StatusOr<ReplicaDump> DumpOne(const std::string& address,
                                    const std::vector<std::string>& keys) {
  absl::StatusOr<int> fd = Dial(address);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<int, void (*)(int*)> closer(&*fd, [](int* f) { close(*f); });
  std::string out;
  resp::AppendCommand(&out, {"READONLY"});
  for (const std::string& k : keys) resp::AppendCommand(&out, {"GET", k});
  for (size_t off = 0; off < out.size();) {
    const ssize_t n = send(*fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError(absl::StrCat(address, ": send failed"));
    off += static_cast<size_t>(n);
  }
  ReplicaDump dump;
  std::string in;
  char buf[65536];
  for (size_t i = 0; i <= keys.size();) {
    absl::StatusOr<resp::ParsedReply> r = resp::ParseReply(in, resp::ReplyLimits());
    if (!r.ok()) return r.status();
    if (!r->complete) {
      const ssize_t n = recv(*fd, buf, sizeof(buf), 0);
      if (n <= 0) return absl::UnavailableError(absl::StrCat(address, ": connection lost"));
      in.append(buf, static_cast<size_t>(n));
      continue;
    }
    in.erase(0, r->consumed);
    const resp::Reply& reply = r->reply;
    if (i > 0) {  // reply 0 answers READONLY
      const std::string& key = keys[i - 1];
      if (reply.type == resp::Reply::Type::kBulk) {
        dump[key] = reply.str;
      } else if (reply.type != resp::Reply::Type::kNull) {
        return absl::InternalError(absl::StrCat(address, " GET ", key, ": ", reply.str));
      }
    }
    ++i;
  }
  return dump;
}

}  // namespace

absl::StatusOr<std::vector<ShardDumps>> ReadReplicas(
    const v1::ClusterMap& map, const std::map<std::string, std::string>& resp_addresses,
    const std::vector<std::string>& keys) {
  absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> view =
      cluster::ClusterMapView::Build(map);
  if (!view.ok()) return view.status();
  std::map<uint32_t, std::vector<std::string>> by_shard;
  for (const std::string& k : keys) {
    const v1::Shard* s = (*view)->ShardForKey(k);
    if (s != nullptr) by_shard[s->shard_id()].push_back(k);
  }
  std::vector<ShardDumps> out;
  for (const v1::Shard& shard : map.shards()) {
    ShardDumps d;
    d.shard = absl::StrCat(shard.shard_id());
    for (const std::string& node : shard.replicas()) {
      auto it = resp_addresses.find(node);
      if (it == resp_addresses.end()) {
        return absl::UnavailableError(absl::StrCat(node, " has no RESP address (not running?)"));
      }
      absl::StatusOr<ReplicaDump> dump = DumpOne(it->second, by_shard[shard.shard_id()]);
      if (!dump.ok())
        return absl::Status(dump.status().code(),
                            absl::StrCat(node, ": ", dump.status().message()));
      d.replicas[node] = *std::move(dump);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace jepsen
}  // namespace kvstore
