// Copyright 2026 The kvstore Authors.

#include "client/internal/cluster/cluster_router.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"

namespace kvstore {
namespace client {
namespace {

// One GetClusterMap call takes a millisecond; a node that does not answer
// within this is frozen or partitioned, and the next one is asked.
constexpr absl::Duration kMapCallTimeout = absl::Seconds(1);

std::string LinkKey(const v1::ClusterNode& node) {
  return absl::StrCat(node.node_id(), "#", node.incarnation());
}

}  // namespace

bool ReadsNeedSlowPath(const cluster::ClusterMapView& map, uint32_t slot) {
  const v1::Migration* m = map.ActiveMigrationForSlot(slot);
  return m != nullptr && m->state() == v1::MIGRATION_HANDOFF;
}

const v1::ClusterNode* AskedNode(const cluster::ClusterMapView& map, uint32_t slot,
                                 const std::string& node_id, const std::string& address) {
  if (!node_id.empty()) {
    if (const v1::ClusterNode* node = map.Node(node_id)) return node;
  }
  if (!address.empty()) {
    // The map has a handful of nodes; a scan is cheaper than an index.
    for (const v1::ClusterNode& node : map.proto().nodes()) {
      if (node.control_address() == address || node.resp_address() == address) return &node;
    }
  }
  const v1::Migration* m = slot < cluster::kSlotCount ? map.ActiveMigrationForSlot(slot) : nullptr;
  if (m == nullptr) return nullptr;
  const v1::Shard* target = map.ShardById(m->target_shard());
  return target == nullptr ? nullptr : map.Primary(*target);
}

ClusterRouter::ClusterRouter(LinkEnv env, control::ControlSecurity security,
                             std::vector<std::string> seeds)
    : env_(std::move(env)), security_(std::move(security)), seeds_(std::move(seeds)) {}

// Links first (an RDMA path calls its ControlClient while it shuts down),
// then the channels.
ClusterRouter::~ClusterRouter() {
  absl::MutexLock lock(&mu_);
  links_.clear();
}

absl::StatusOr<ClusterRouter::Endpoint*> ClusterRouter::GetEndpoint(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto it = endpoints_.find(address);
  if (it != endpoints_.end()) return it->second.get();
  // Dialling connects lazily: cheap enough to do under the lock.
  KV_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                      control::ControlClient::DialChannel(address, security_));
  auto ep = std::make_unique<Endpoint>();
  ep->channel = channel;
  ep->rpc = std::make_unique<ClusterRpc>(channel, security_.auth_token);
  Endpoint* out = ep.get();
  endpoints_.emplace(address, std::move(ep));
  return out;
}

absl::StatusOr<ClusterRpc*> ClusterRouter::Rpc(const std::string& address) {
  KV_ASSIGN_OR_RETURN(Endpoint * ep, GetEndpoint(address));
  return ep->rpc.get();
}

absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> ClusterRouter::Fetch(
    const std::string& address, absl::Time deadline) {
  KV_ASSIGN_OR_RETURN(ClusterRpc * rpc, Rpc(address));
  KV_ASSIGN_OR_RETURN(
      v1::GetClusterMapResponse resp,
      rpc->GetClusterMap(epoch(), std::min(deadline, absl::Now() + kMapCallTimeout)));
  absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> view =
      cluster::ClusterMapView::Build(std::move(*resp.mutable_map()));
  if (!view.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cluster map from ", address, " is invalid: ", view.status().message()));
  }
  return view;
}

absl::Status ClusterRouter::Bootstrap(absl::Time deadline, std::string* single_node_seed) {
  absl::Status last = absl::UnavailableError("no seed server");
  // Each call is capped at kMapCallTimeout, but the first call to a seed
  // also sets up its channel (TCP, HTTP/2, the token), which on a slow
  // machine (an emulated CPU: the Soft-RoCE VM) takes longer than the cap.
  // So seeds that timed out are asked again, round after round, while the
  // caller's deadline allows; a seed that refuses (kUnavailable) is not.
  do {
    for (const std::string& seed : seeds_) {
      absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> view = Fetch(seed, deadline);
      if (view.ok()) {
        Install(*std::move(view));
        return absl::OkStatus();
      }
      // A single-node server answers for itself: no other seed is asked.
      if (IsSingleNodeAnswer(view.status())) {
        *single_node_seed = seed;
        return view.status();
      }
      last = absl::Status(view.status().code(),
                          absl::StrCat("cluster map from ", seed, ": ", view.status().message()));
    }
  } while (absl::IsDeadlineExceeded(last) && absl::Now() < deadline);
  return last;
}

std::shared_ptr<const cluster::ClusterMapView> ClusterRouter::map() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

bool ClusterRouter::Install(std::shared_ptr<const cluster::ClusterMapView> map) {
  std::vector<std::shared_ptr<ServerLink>> keep;
  {
    absl::MutexLock lock(&mu_);
    if (map_ != nullptr && map->epoch() <= map_->epoch()) return false;
    map_ = map;
    epoch_.store(map->epoch(), std::memory_order_release);
    // Links of nodes (or incarnations) the new map no longer names go.
    std::map<std::string, std::shared_ptr<ServerLink>> next;
    for (const v1::ClusterNode& node : map->proto().nodes()) {
      auto it = links_.find(LinkKey(node));
      if (it != links_.end()) next.emplace(it->first, it->second);
    }
    links_.swap(next);
    for (const auto& [key, link] : links_) keep.push_back(link);
  }
  env_.metrics->map_epoch()->Set(static_cast<int64_t>(map->epoch()));
  // Outside mu_: SetMapEpoch takes each link's own lock.
  for (const auto& link : keep) link->SetMapEpoch(map->epoch());
  LOG(INFO) << "kvstore client: routing by cluster map epoch " << map->epoch();
  return true;
}

bool ClusterRouter::Refresh(uint64_t routed_epoch, const std::string& hint, absl::Time deadline,
                            const std::string& last) {
  absl::MutexLock refresh(&refresh_mu_);
  // Another thread refreshed while this one waited: route by its map.
  if (epoch() > routed_epoch) return true;
  env_.metrics->map_refreshes()->Increment();
  std::vector<std::string> sources;
  if (!hint.empty()) sources.push_back(hint);
  if (std::shared_ptr<const cluster::ClusterMapView> m = map(); m != nullptr) {
    for (const v1::ClusterNode& node : m->proto().nodes()) {
      sources.push_back(node.control_address());
    }
  }
  sources.insert(sources.end(), seeds_.begin(), seeds_.end());
  if (!last.empty()) {
    sources.erase(std::remove(sources.begin(), sources.end(), last), sources.end());
    sources.push_back(last);
  }
  std::vector<std::string> asked;
  for (const std::string& address : sources) {
    if (absl::Now() >= deadline) break;
    if (std::find(asked.begin(), asked.end(), address) != asked.end()) continue;
    asked.push_back(address);
    absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> view = Fetch(address, deadline);
    if (!view.ok()) {
      VLOG(1) << "kvstore client: no cluster map from " << address << ": " << view.status();
      continue;
    }
    // An older or equal map (a lagging node) is ignored; ask the next.
    if (Install(*std::move(view))) return true;
  }
  return epoch() > routed_epoch;
}

void ClusterRouter::RecoverForNextOperation(const absl::Status& status, uint64_t epoch,
                                            const v1::ClusterNode* node,
                                            const std::shared_ptr<ServerLink>& link) {
  if (!absl::IsDeadlineExceeded(status) && !absl::IsUnavailable(status)) return;
  if (link != nullptr) Drop(link);
  Refresh(epoch, "", absl::Now() + kMapCallTimeout, node != nullptr ? node->control_address() : "");
}

absl::StatusOr<std::shared_ptr<ServerLink>> ClusterRouter::Link(const v1::ClusterNode& node) {
  const std::string key = LinkKey(node);
  {
    absl::MutexLock lock(&mu_);
    auto it = links_.find(key);
    if (it != links_.end()) return it->second;
  }
  // Connected outside the lock (a handshake takes a round trip or more); two
  // threads racing here both connect and the second link is dropped.
  KV_ASSIGN_OR_RETURN(Endpoint * ep, GetEndpoint(node.control_address()));
  auto control = std::make_unique<control::ControlClient>(v1::KvControl::NewStub(ep->channel),
                                                          security_.auth_token);
  auto link = std::make_shared<ServerLink>(env_, node.control_address(), std::move(control));
  KV_RETURN_IF_ERROR(link->Init());
  absl::MutexLock lock(&mu_);
  // Under mu_, so that an Install() cannot slip in between and leave this
  // link on the older epoch.
  link->SetMapEpoch(map_->epoch());
  // The map may have moved on meanwhile; a link for a node it no longer
  // names is still returned (the caller's attempt then fails and refreshes)
  // but not kept.
  bool named = false;
  for (const v1::ClusterNode& n : map_->proto().nodes()) named |= LinkKey(n) == key;
  if (!named) return link;
  auto [it, inserted] = links_.emplace(key, link);
  return it->second;
}

void ClusterRouter::Drop(const std::shared_ptr<ServerLink>& link) {
  absl::MutexLock lock(&mu_);
  for (auto it = links_.begin(); it != links_.end(); ++it) {
    if (it->second == link) {
      links_.erase(it);
      return;
    }
  }
}

}  // namespace client
}  // namespace kvstore
