// Copyright 2026 The kvstore Authors.
//
// WorkerPool: threads for work that may block (a replication round's slow
// end: dropping a backup through etcd, waiting out a former primary's
// lease), handed over by threads that must not block (a gRPC reaction, an
// event loop).
//
// Threads start on demand, when a job finds no idle worker, up to
// `max_threads`; beyond that jobs queue. Idle workers stay until the pool
// is destroyed. The destructor runs every job already submitted, then
// joins: a job holds work someone waits for (a client's answer).
//
// Thread safety: Submit() from any thread, never from a job of this pool
// after the destructor started. The destructor from a thread that is not
// one of the pool's.

#ifndef KVSTORE_COMMON_SYNC_WORKER_POOL_H_
#define KVSTORE_COMMON_SYNC_WORKER_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kvstore {

class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Submit(std::function<void()> job);

 private:
  void Work();

  const size_t max_threads_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvstore

#endif  // KVSTORE_COMMON_SYNC_WORKER_POOL_H_
