// Copyright 2026 The kvstore Authors.
//
// The bridge between a TLS connection and a plaintext socket: how the RESP
// port serves TLS without touching its event loops (the loop gets the
// plaintext end of a socketpair and cannot tell it from a TCP client), and
// how the client's pipelined TCP data path talks to it (its sender and
// reader threads keep using one plain socket; OpenSSL forbids reading and
// writing one SSL from two threads at once).
//
// One thread per connection runs Handshake() and then Pump(). The pump
// makes progress in both directions whatever either side does (non-blocking
// sockets, 64 KiB buffered each way): a peer that does not read while the
// other keeps writing stalls only its own direction, never a deadlock.
//
// Thread safety: every function works on the one connection its caller
// owns; no shared state.

#ifndef KVSTORE_COMMON_TLS_TLS_PUMP_H_
#define KVSTORE_COMMON_TLS_TLS_PUMP_H_

#include <openssl/ssl.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kvstore {
namespace tls {

// Runs the TLS handshake of `ssl` (set up for a server or a client, on the
// non-blocking socket `fd`) until done or `deadline`. kUnavailable with
// OpenSSL's reason (a certificate that does not verify, a peer that is not
// speaking TLS, EOF) or kDeadlineExceeded.
absl::Status Handshake(SSL* ssl, int fd, absl::Time deadline);

// Copies bytes both ways between `ssl` (on the non-blocking socket `tls_fd`)
// and the non-blocking socket `plain_fd` until either side closes or fails;
// what one side sent before it closed is delivered to the other first.
// Returns OK after an orderly close, else the reason. Closes neither
// descriptor (and frees nothing); the caller does.
absl::Status Pump(SSL* ssl, int tls_fd, int plain_fd);

// Sets O_NONBLOCK on `fd`.
void SetNonBlocking(int fd);

}  // namespace tls
}  // namespace kvstore

#endif  // KVSTORE_COMMON_TLS_TLS_PUMP_H_
