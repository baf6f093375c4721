// Copyright 2026 The kvstore Authors.
//
// BatchScope: lets an event loop turn the sends that the requests it serves
// in one wake-up would each start into one send (group commit). The RESP
// loop opens a scope around serving the events of one epoll_wait (and one
// around each connection's read and parse, which nests); a replication
// stream that is idle when a SET inside it queues a write does not send
// the write at once but defers the start to the scope's end, so the writes
// of a whole pipeline, and of every connection served in that wake-up, go
// to each backup as one batch. Without it the first SET went alone, the
// rest waited for its answer, and a pipelining client got its replies in
// two writes (docs/performance.md §1.2).
//
// Contract:
// * Defer(start) returns false outside a scope: the caller starts now.
//   Inside one it keeps `start` and returns true; the outermost scope's end
//   runs every kept start, in the order deferred, on the same thread.
//   Scopes nest: inner ones run nothing.
// * A thread inside a scope must not block on what a deferred start would
//   send: before waiting, call RunDeferred() (ReplicationStream::Wait does).
// * While the outermost scope's end runs the starts, the thread is no
//   longer inside a scope: what they would defer runs at once.
// * Latency: a scope lasts one loop iteration (the RESP loop opens one
//   around serving the events one epoll_wait returned), so an idle request
//   (alone in its iteration) is not delayed; nothing waits on a timer.
//
// Thread safety: per thread (thread_local state); a deferred start runs
// on the thread that deferred it. Starts must not throw.

#ifndef KVSTORE_SERVER_NET_BATCH_SCOPE_H_
#define KVSTORE_SERVER_NET_BATCH_SCOPE_H_

#include <functional>
#include <utility>
#include <vector>

namespace kvstore {
namespace server {
namespace net {

class BatchScope {
 public:
  BatchScope() { ++State().depth; }
  ~BatchScope() {
    if (--State().depth == 0) RunDeferred();
  }
  BatchScope(const BatchScope&) = delete;
  BatchScope& operator=(const BatchScope&) = delete;

  // Whether the calling thread is inside a scope.
  static bool Active() { return State().depth > 0; }

  // See the file comment.
  static bool Defer(std::function<void()> start) {
    ThreadState& s = State();
    if (s.depth == 0) return false;
    s.pending.push_back(std::move(start));
    return true;
  }

  // Runs what the calling thread deferred so far, in order (inside a scope,
  // also what those starts defer in turn). Re-entrant: a start that waits
  // (and so runs this again) finds only what was deferred after it.
  static void RunDeferred() {
    ThreadState& s = State();
    while (!s.pending.empty()) {
      std::vector<std::function<void()>> run;
      run.swap(s.pending);
      for (std::function<void()>& start : run) start();
      run.clear();
      if (s.pending.empty()) s.pending.swap(run);  // keeps its room for the next scope
    }
  }

 private:
  struct ThreadState {
    int depth = 0;
    std::vector<std::function<void()>> pending;
  };
  static ThreadState& State() {
    static thread_local ThreadState state;
    return state;
  }
};

}  // namespace net
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_NET_BATCH_SCOPE_H_
