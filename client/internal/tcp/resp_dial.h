// Copyright 2026 The kvstore Authors.
//
// DialResp: one connected socket to a RESP port, authenticated when the
// client has a token. The first step of every TCP data connection (and of
// every reconnect), kept apart from the pipelining in tcp_data_path.cc.
//
// Why AUTH here, before the connection's reader thread starts: a server with
// a password answers every command but AUTH with -NOAUTH, so the token must
// be the first thing on the wire, and its reply must be consumed before any
// pipelined reply is matched to a waiter.
//
// Thread safety: free functions without shared state.

#ifndef KVSTORE_CLIENT_INTERNAL_TCP_RESP_DIAL_H_
#define KVSTORE_CLIENT_INTERNAL_TCP_RESP_DIAL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/tls/ssl_context.h"

namespace kvstore {
namespace client {

// TLS to a RESP port (DataEndpoints.resp_tls): the client context (CA and
// optional client certificate) and the name to verify.
struct RespTls {
  tls::SslCtxPtr context;
  std::string server_name;  // empty: the host of the address dialled
};

// A connected, blocking TCP socket to "host:port" (the caller owns and
// closes it), trying each address the name resolves to in turn; `timeout`
// bounds each attempt. When `auth_token` is not empty, `AUTH <token>` is
// sent first and its reply awaited, within `timeout` too.
// Errors: kUnavailable when the name does not resolve, no address connects,
// or the connection fails during AUTH; kUnauthenticated, with the server's
// error text (e.g. "WRONGPASS ..."), when the server answers AUTH with any
// error; kInternal for a reply to AUTH that is neither +OK nor an error;
// kDeadlineExceeded when no reply to AUTH came in time. With `readonly`,
// READONLY is sent next (cluster replica reads: a backup then serves reads
// of its shards); an error reply to it is only logged, a lost connection or
// no reply in time fails as for AUTH. On any error the socket is closed.
//
// With `tls` the connection is TLS: the server's certificate must verify
// against tls->context's CA and name tls->server_name (or, when that is
// empty, the host of `address`); the handshake is bounded by `timeout`, and a
// refused one is kUnavailable with OpenSSL's reason. The socket returned is
// then the plaintext end of a socketpair whose other end a thread of its own
// bridges to the TLS connection (common/tls/tls_pump.h), so callers read and
// write it as before; closing it ends that thread.
absl::StatusOr<int> DialResp(const std::string& address, absl::Duration timeout,
                             absl::string_view auth_token, bool readonly = false,
                             const RespTls* tls = nullptr);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_TCP_RESP_DIAL_H_
