// Copyright 2026 The kvstore Authors.
//
// NameThread: gives the calling thread a name that `top -H`, `ps -L`,
// /proc/<pid>/task/<tid>/comm and `perf report --sort comm` show. Without
// names every kvserver thread reads "kvserver", and a profile or a CPU
// breakdown cannot tell a RESP loop from the cleaner or a backup's
// replication reader (docs/performance.md measures them per thread).
//
// The kernel keeps 15 bytes of a name; a longer one is cut to its first 15.
// Names used in kvserver start with "kv-" (docs/operations.md lists them).
// Never fails in a way that matters: a name that cannot be set is ignored.
// Thread-safe (it names only the calling thread).

#ifndef KVSTORE_COMMON_SYNC_THREAD_NAME_H_
#define KVSTORE_COMMON_SYNC_THREAD_NAME_H_

#include <pthread.h>

#include <string>

#include "absl/strings/string_view.h"

namespace kvstore {

inline void NameThread(absl::string_view name) {
  // pthread_setname_np refuses (ERANGE) a name over 15 bytes: cut it here.
  const std::string cut(name.substr(0, 15));
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace kvstore

#endif  // KVSTORE_COMMON_SYNC_THREAD_NAME_H_
