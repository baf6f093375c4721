// Copyright 2026 The kvstore Authors.
//
// BatchScope: lets an event loop turn the sends that the requests of one
// read would each start into one send. The RESP loop opens a scope around
// reading and parsing what a connection sent; a replication stream that is
// idle when a SET of that read queues a write on it does not send the write
// at once but defers the start to the scope's end, so the whole pipeline's
// writes go to each backup as one batch. Without it the first SET of a
// pipeline went alone, the rest waited for its answer, and the client got
// its replies in two writes (docs/performance.md §1.2).
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
// * Latency: a scope lasts one read and its parsing, so an idle request
//   (alone in its read) is not delayed; nothing waits on a timer.
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
  // also what those starts defer in turn).
  static void RunDeferred() {
    ThreadState& s = State();
    // By index: a start may defer more, which appends.
    for (size_t i = 0; i < s.pending.size(); ++i) {
      std::function<void()> start = std::move(s.pending[i]);
      start();
    }
    s.pending.clear();  // keeps its room for the next scope
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
