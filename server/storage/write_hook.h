// Copyright 2026 The kvstore Authors.
//
// WriteHook: what KvStore consults on every client write before it makes
// the write visible. In cluster mode the hook is the replicator (server/
// cluster/replicator.h): it checks that this node is the primary of the
// key's slot and not fenced, has every in-sync backup install the write, and
// only then lets the store publish it, so that no reader ever sees a value
// a failover could lose. In single-node mode there is no hook.
//
// KvStore calls Write() from Commit() (RDMA commits, RESP SET), Put() (RESP
// MSET, gRPC Put) and Delete(), after the entry has been verified and
// before its slot word is stored; never for the cleaner's relocations or for
// a backup installing a replicated write (KvStore::InstallReplica).
//
// Thread safety: implementations are thread-safe; Write() runs on the
// calling transport's thread and may block for a replication round trip.
// StartWrite() never blocks; its callbacks run on the hook's threads.

#ifndef KVSTORE_SERVER_STORAGE_WRITE_HOOK_H_
#define KVSTORE_SERVER_STORAGE_WRITE_HOOK_H_

#include <functional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/protocol/layout.h"

namespace kvstore {
namespace server {

class WriteHook {
 public:
  virtual ~WriteHook() = default;

  // A write of `key`: `entry` is the whole verified entry (layout.h) for a
  // PUT, empty for a DELETE. The hook calls `publish` at most once (it
  // publishes locally and returns the store's status) and returns what the
  // write's caller should see. Returning an error without calling `publish`
  // leaves the store unchanged. Errors the transports pass on to clients
  // are typed refusals (common/cluster/refusal.h), each saying whether the
  // write certainly had no effect or its outcome is unknown: kMoved (not
  // this node's slot), kAsk (the slot was handed to another shard: ask its
  // target), kTryAgain (the slot's handoff is under way), kClusterDown (no
  // primary, or this node is fenced), kNotPublished (sent on, not
  // published here). Every transport writes them its own way.
  virtual absl::Status Write(absl::string_view key, absl::string_view entry,
                             absl::FunctionRef<absl::Status()> publish) = 0;

  // Write() without waiting: for a transport's event loop, so that a
  // replication round does not hold the thread (KvStore::StartCommit).
  // Returns false, having done nothing, when this write cannot go so now
  // (the hook's fast path does not cover it: a migration, a syncing
  // replica, a busy key stripe, ...); the caller then calls Write().
  // Otherwise `done` runs exactly once, with what Write() would have
  // returned, after `publish` ran (at most once) or not; both run on a
  // thread of the hook's (a replication stream's reply, or a worker of its
  // own for the slow cases), possibly before StartWrite() returns. `key`
  // and `entry` must stay valid until `done` runs. `key_hash` is the key's
  // index hash (KvIndex::Hash), for cache hints. Default: never.
  using Publish = std::function<absl::Status()>;
  using Done = std::function<void(absl::Status)>;
  virtual bool StartWrite(absl::string_view key, const layout::KeyHash& key_hash,
                          absl::string_view entry, Publish publish, Done done) {
    return false;
  }

  // Whether a client write of `key` would be served here now (this node
  // leads the key's slot): a hint, for work the store starts on its own
  // (deleting expired keys), so that a backup does not send writes it would
  // only see refused. Write() decides for real.
  virtual bool MayWrite(absl::string_view key) { return true; }

  // Whether a client write of `key` would now wait for other nodes (a
  // replication round, a migration's forward, a reconcile): a hint, for
  // transports that run such a write off their event loop (the RESP loop
  // parks it) and the others inline, where a hand-off would cost more than
  // the write. Write() decides for real.
  virtual bool WaitsForPeers(absl::string_view key) { return true; }
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_WRITE_HOOK_H_
