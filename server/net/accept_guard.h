// Copyright 2026 The kvstore Authors.
//
// AcceptGuard: a connection cap, and survival when descriptors run out, for
// a listener kvserver does not own: gRPC's control port.
//
// Why: gRPC 1.51's POSIX listener has no connection cap, and treats every
// accept4() failure other than EAGAIN and EINTR as fatal for its port: one
// EMFILE (the process out of descriptors, e.g. during a burst of idle
// connections to any port) and the port never accepts again, even after
// the descriptors are back. The library offers no hook in between, so this
// file defines accept4() itself: the executable's definition takes
// precedence over the C library's for every shared library, gRPC's
// included (the target exports the symbol; Interposed() checks that it
// worked). For a listening socket bound to a port given to LimitPort():
//
//  * at most `max_connections` connections accepted there are open at
//    once. Beyond that, pending connections are accepted and closed at
//    once (the client sees its connection close) and the call reports
//    EAGAIN, which makes gRPC wait for the next connection.
//  * Out of descriptors (EMFILE, ENFILE), a reserve descriptor is given up
//    to accept and close the pending connections, and the call reports
//    EAGAIN: the listener stays armed and serves again once descriptors
//    are back.
//  * Other transient errors (ENOBUFS, ENOMEM, ECONNABORTED, EPROTO, EPERM)
//    are reported as EAGAIN for the same reason.
//
// Every other accept4() in the process (the RESP loop's, which copes with
// these errors itself) reaches the C library unchanged, as do errors that
// mean the listener itself is gone (EBADF, EINVAL: gRPC's shutdown relies
// on them).
//
// Open connections are counted by (descriptor, socket inode): an entry
// whose descriptor was closed, or now names another file, is dropped when
// the count reaches the cap, so the guard needs no notice of closes.
//
// Thread safety: thread-safe; one process-wide instance (Get()).

#ifndef KVSTORE_SERVER_NET_ACCEPT_GUARD_H_
#define KVSTORE_SERVER_NET_ACCEPT_GUARD_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvstore {
namespace server {
namespace net {

struct GuardedPortStats {
  uint64_t open = 0;              // connections accepted there and still open
  uint64_t refused_at_cap = 0;    // accepted and closed at once: the cap was reached
  uint64_t refused_no_fd = 0;     // accepted and closed with the reserve descriptor
  uint64_t transient_errors = 0;  // accept4 errors reported as EAGAIN
};

class AcceptGuard {
 public:
  // The process's guard.
  static AcceptGuard& Get();

  // Whether the accept4() of shared libraries reaches this guard. False
  // means the executable did not export its accept4 (a link problem): the
  // caps are then not enforced, and kvserver says so at start.
  static bool Interposed();

  // From now on, listening sockets bound to `port` (any address) are
  // guarded with this cap (>= 1); calling again changes the cap. Opens the
  // reserve descriptor if it is not open yet. The listeners must be
  // non-blocking (gRPC's are): shedding accepts under the guard's lock.
  void LimitPort(int port, int max_connections);
  // Stops guarding `port` (its counters go).
  void ForgetPort(int port);
  // Zeros for a port that is not guarded.
  GuardedPortStats Stats(int port);

  // The interposed accept4(): see the file comment.
  int Accept4(int listen_fd, sockaddr* addr, socklen_t* addr_len, int flags);

 private:
  struct Conn {
    int fd;
    ino_t ino;
  };
  struct Port {
    int max_connections = 0;
    std::vector<Conn> open;
    GuardedPortStats stats;
  };

  AcceptGuard() = default;
  // Drops the entries whose descriptor no longer names the socket accepted.
  static void Prune(std::vector<Conn>* open);
  // Accepts and closes one pending connection with the reserve descriptor;
  // false when there was none to accept or no reserve.
  bool ShedWithReserve(int listen_fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogRateLimited(int port, int err) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  absl::flat_hash_map<int, Port> ports_ ABSL_GUARDED_BY(mu_);
  int reserve_fd_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time last_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t unlogged_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace net
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_NET_ACCEPT_GUARD_H_
