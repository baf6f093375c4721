// Copyright 2026 The kvstore Authors.

#include "server/cluster/controller/departures.h"

#include <algorithm>
#include <utility>

#include "glog/logging.h"
#include "server/cluster/controller/controller_plan_util.h"

namespace kvstore {
namespace server {

Departures::Departures(absl::Duration ttl) : ttl_(ttl) {}

MemberSet Departures::Settle(const v1::ClusterMap& map, const MemberSet& members,
                             absl::Duration now) {
  MemberSet out = members;
  absl::MutexLock lock(&mu_);
  std::map<std::string, Seen> seen;
  for (const std::string& id : plan_util::NamedNodes(map)) {
    // Back from a lease lapse with its memory: PlanNext gives its roles to
    // the new incarnation; holding the old record here would hide it.
    if (IsAliveIn(map, members, id) || IsRejoin(map, members, id)) continue;
    const v1::ClusterNode* record = plan_util::RecordOf(map, id);
    if (record == nullptr) continue;
    auto it = seen_.find(id);
    Seen s{record->incarnation(), now};
    if (it != seen_.end() && it->second.incarnation == record->incarnation()) {
      s = it->second;
    } else {
      LOG(WARNING) << "controller: node " << id << " (incarnation " << record->incarnation()
                   << ") left: its member key is gone or another incarnation's; it counts as "
                      "dead in "
                   << absl::FormatDuration(ttl_) << ", once its own lease deadline has passed";
    }
    seen[id] = s;
    // Still within its possible lease: as alive as the map says.
    if (now < s.at + ttl_) out[id] = *record;
  }
  seen_ = std::move(seen);
  return out;
}

absl::Duration Departures::NextDue(absl::Duration now) const {
  absl::MutexLock lock(&mu_);
  absl::Duration due = absl::InfiniteDuration();
  for (const auto& [id, s] : seen_) {
    if (s.at + ttl_ > now) due = std::min(due, s.at + ttl_);
  }
  return due;
}

}  // namespace server
}  // namespace kvstore
