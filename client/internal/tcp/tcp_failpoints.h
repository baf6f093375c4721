// Copyright 2026 The kvstore Authors.
//
// Test-only failpoints of TcpDataPath. They exist only in the testonly
// library //client/internal/tcp:tcp_data_path_failpoints, built with
// KV_TCP_FAILPOINTS; the library every binary links has none, and its send
// path pays nothing for them.
//
// Each setter installs a hook (an empty std::function removes it) that runs
// on whichever thread reaches the point. Thread-safe; a hook must not call a
// setter.

#ifndef KVSTORE_CLIENT_INTERNAL_TCP_TCP_FAILPOINTS_H_
#define KVSTORE_CLIENT_INTERNAL_TCP_TCP_FAILPOINTS_H_

#include <functional>

namespace kvstore {
namespace client {
namespace tcp_failpoints {

// Runs in a request's sender after it found its connection up and before it
// queues the request's reply waiter (send lock held).
void SetBeforeQueueForTest(std::function<void()> f);

// Runs in a connection's reader thread after it failed and answered every
// queued waiter with the failure, just before the thread ends.
void SetAfterDrainForTest(std::function<void()> f);

}  // namespace tcp_failpoints
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_TCP_TCP_FAILPOINTS_H_
