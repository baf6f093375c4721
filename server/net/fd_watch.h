// Copyright 2026 The kvstore Authors.
//
// FdWatch and FdWatcher: how one layer lends its descriptor to another
// layer's event loop. The RESP server's loops implement FdWatcher
// (resp_server.h); the replication stream on the peer socket lends its
// socket to them (socket_replication_stream.h), so that the backups'
// replies are read by a loop that is awake anyway under load instead of
// waking a thread of the stream's own for every batch (each wake-up costs
// two context switches, the largest single cost of a replicated write on
// these hosts: docs/performance.md §1.2).
//
// FdWatcherSlot: a watcher that can be unset, for a user that outlives the
// loops (the replicator outlives the RESP server): once Set(nullptr) has
// returned, no Watch() reaches the old watcher.
//
// Thread safety: FdWatcher::Watch and FdWatcherSlot are thread-safe; an
// FdWatch's callbacks run on the loop's thread (see each).

#ifndef KVSTORE_SERVER_NET_FD_WATCH_H_
#define KVSTORE_SERVER_NET_FD_WATCH_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace server {
namespace net {

// A descriptor lent to a loop. The watch keeps fd() open for as long as
// the loop holds it (until OnReadable() returns false or OnUnwatched()):
// the loop keys it by number, so a descriptor closed and reused meanwhile
// would be mistaken for another.
class FdWatch {
 public:
  virtual ~FdWatch() = default;
  virtual int fd() const = 0;
  // On the loop's thread, whenever fd() is readable, hung up or in error
  // (level-triggered: until it reads what is there). Must not block.
  // Returns false to end the watch: the loop drops it and calls nothing
  // of it again.
  virtual bool OnReadable() = 0;
  // The loop will not call OnReadable() again although it did not return
  // false: the loop stopped, or could not add fd(). On the loop's thread or
  // the one destroying the loop; at most once, and never after
  // OnReadable() returned false.
  virtual void OnUnwatched() {}
};

class FdWatcher {
 public:
  virtual ~FdWatcher() = default;
  // Hands `watch` to a loop (within one loop iteration). Any thread.
  // Returns false when nothing will watch it (the watcher is stopped);
  // then no callback of `watch` is ever called.
  virtual bool Watch(std::shared_ptr<FdWatch> watch) = 0;
};

// Marks the calling thread, for its scope, as an event loop that watches
// descriptors. An owner whose watch such a loop runs must not block that
// thread waiting for what only the watch would read: a loop that waits
// (a synchronous write on a RESP loop) reads for itself instead
// (SocketReplicationStream::AwaitTicket).
class WatchingThreadScope {
 public:
  WatchingThreadScope() { Flag() = true; }
  ~WatchingThreadScope() { Flag() = false; }
  WatchingThreadScope(const WatchingThreadScope&) = delete;
  WatchingThreadScope& operator=(const WatchingThreadScope&) = delete;
  // Whether the calling thread is inside such a scope.
  static bool Active() { return Flag(); }

 private:
  static bool& Flag() {
    static thread_local bool watching = false;
    return watching;
  }
};

class FdWatcherSlot final : public FdWatcher {
 public:
  // `target` (may be null: Watch() returns false) is not owned; it must
  // stay valid until Set() replaced it.
  void Set(FdWatcher* target) {
    absl::MutexLock lock(&mu_);
    target_ = target;
  }
  bool Watch(std::shared_ptr<FdWatch> watch) override {
    absl::MutexLock lock(&mu_);
    return target_ != nullptr && target_->Watch(std::move(watch));
  }

 private:
  absl::Mutex mu_;
  FdWatcher* target_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace net
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_NET_FD_WATCH_H_
