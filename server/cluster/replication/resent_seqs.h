// Copyright 2026 The kvstore Authors.
//
// ResentSeqs: a backup's guard against replica commits that a primary's
// RDMA -> gRPC fallback left behind (architecture §19.3.1).
//
// A primary whose RDMA link to this backup fails fast (a queue pair error,
// a lost session) sends the same seq again by the Replicate RPC, marked
// resent_after_rdma, and goes on with the key's next write once that is
// acknowledged. The replica commit of the failed link may still sit in
// this node's RDMA worker queue (or on the wire) and be processed after
// that next write: installed, it would put the older value back on an
// in-sync copy. The rule: each resent seq is recorded per shard and key,
// and a replica commit arriving by RDMA whose seq is not above the key's
// recorded seq is dropped (it is that very write, or an older one, both
// applied already), and so is a Replicate RPC (Superseded()). A primary
// marks its repair of a key whose write ended unknown the same way, so the
// write's own Replicate, held up on the wire by a cut and delivered when it
// healed, cannot undo the repair. Seqs of one key grow with real time (the primary takes
// them under the key's stripe lock and finishes each write's round before
// the next), so a newer commit is never dropped. The check and the install
// of an RDMA commit, and the install and the record of a resend, run under
// one lock, so a stale commit either lands before the resend (which then
// installs the same write again) or is dropped.
//
// Cost: one entry per key whose write met a failing link (those in flight
// at each link failure), kept while this node holds the shard (Retain).
//
// Thread safety: thread-safe. The lock is held across `install`, which
// must not call back into this object.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_RESENT_SEQS_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_RESENT_SEQS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace server {

class ResentSeqs {
 public:
  // A replica commit of `key` that arrived by RDMA: runs `install` and
  // returns its status, unless a resend of the key with a seq at least
  // `seq` was recorded; then returns OK without installing and sets
  // `*dropped`.
  absl::Status InstallFromRdma(uint32_t shard_id, absl::string_view key, uint64_t seq,
                               absl::FunctionRef<absl::Status()> install, bool* dropped);
  // Whether a resend of `key` with a seq at least `seq` was recorded: a
  // Replicate RPC of that seq arriving now was held up on the wire (a cut
  // that healed) and is older than what the key holds. Checked without
  // holding the lock across the install, so gRPC installs stay parallel;
  // a resend is sent only after the older delivery's deadline passed, so
  // the two do not race in practice.
  bool Superseded(uint32_t shard_id, absl::string_view key, uint64_t seq) const;
  // A Replicate RPC marked resent_after_rdma: runs `install`, and once it
  // succeeded records `seq` for the key (the highest recorded stays).
  absl::Status InstallResent(uint32_t shard_id, absl::string_view key, uint64_t seq,
                             absl::FunctionRef<absl::Status()> install);
  // Forgets every shard for which `keep(shard_id)` is false (this node no
  // longer holds it: a later role starts with a new shard epoch, which
  // every stale commit fails).
  template <typename Keep>
  void Retain(Keep keep) {
    absl::MutexLock lock(&mu_);
    absl::erase_if(seqs_, [&](const auto& kv) { return !keep(kv.first.first); });
  }
  // Recorded keys, for tests and metrics.
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::pair<uint32_t, std::string>, uint64_t> seqs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_RESENT_SEQS_H_
