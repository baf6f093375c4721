// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/resent_seqs.h"

#include <algorithm>

namespace kvstore {
namespace server {

absl::Status ResentSeqs::InstallFromRdma(uint32_t shard_id, absl::string_view key, uint64_t seq,
                                         absl::FunctionRef<absl::Status()> install, bool* dropped) {
  absl::MutexLock lock(&mu_);
  *dropped = false;
  if (!seqs_.empty()) {
    auto it = seqs_.find(std::make_pair(shard_id, std::string(key)));
    if (it != seqs_.end() && it->second >= seq) {
      *dropped = true;
      return absl::OkStatus();
    }
  }
  return install();
}

bool ResentSeqs::Superseded(uint32_t shard_id, absl::string_view key, uint64_t seq) const {
  absl::MutexLock lock(&mu_);
  if (seqs_.empty()) return false;
  auto it = seqs_.find(std::make_pair(shard_id, std::string(key)));
  return it != seqs_.end() && it->second >= seq;
}

absl::Status ResentSeqs::InstallResent(uint32_t shard_id, absl::string_view key, uint64_t seq,
                                       absl::FunctionRef<absl::Status()> install) {
  absl::MutexLock lock(&mu_);
  absl::Status s = install();
  if (s.ok()) {
    uint64_t& last = seqs_[std::make_pair(shard_id, std::string(key))];
    last = std::max(last, seq);
  }
  return s;
}

size_t ResentSeqs::size() const {
  absl::MutexLock lock(&mu_);
  return seqs_.size();
}

}  // namespace server
}  // namespace kvstore
