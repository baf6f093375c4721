// Copyright 2026 The kvstore Authors.
//
// OpenSSL contexts for TLS on a raw socket (the RESP port and its client;
// gRPC brings its own TLS, see grpc_tls.h).
//
//   * MakeServerContext / MakeClientContext: an SSL_CTX from PEM files, TLS
//     1.2 or newer, peers verified against the CA.
//   * ReloadingServerContext: the server context for new connections,
//     made again when a file changed (checked at each Current(), by
//     modification time, size and inode: a renamed-in file counts) or when
//     Reload() is called (SIGHUP). A new file set that does not load (a key
//     that does not match its certificate, half-written files) keeps the
//     old context and is reported (logged, counted in failed_reloads()).
//     Connections keep the context they were accepted with.
//   * ConfigureClient: the name the server's certificate must carry (a
//     host name, or an IP address matched against IP SANs) and SNI.
//
// Errors: kInvalidArgument naming the flag and the path for a file that
// cannot be read or parsed, a key that does not match its certificate, or
// half a key pair.
//
// Thread safety: ReloadingServerContext is thread-safe; an SSL_CTX is
// shared by any number of connections (OpenSSL's own rule).

#ifndef KVSTORE_COMMON_TLS_SSL_CONTEXT_H_
#define KVSTORE_COMMON_TLS_SSL_CONTEXT_H_

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/tls/grpc_tls.h"

namespace kvstore {
namespace tls {

using SslCtxPtr = std::shared_ptr<SSL_CTX>;

// Server: files.cert and files.key required; with files.ca a client must
// present a certificate that CA signed (mutual TLS).
absl::StatusOr<SslCtxPtr> MakeServerContext(const PemFiles& files);
// Client: files.ca required (the server's chain must lead to it); with
// files.cert and files.key, presented as the client certificate.
absl::StatusOr<SslCtxPtr> MakeClientContext(const PemFiles& files);

// Sets on a client `ssl` the name the server certificate must carry: an IP
// literal is matched against IP SANs, anything else against DNS names (and
// sent as SNI). kInvalidArgument when OpenSSL refuses the name.
absl::Status ConfigureClient(SSL* ssl, const std::string& host);

// OpenSSL's queued errors as one line (and the queue cleared); "" if none.
std::string TakeSslErrors();

class ReloadingServerContext {
 public:
  // Loads the files once; MakeServerContext's errors.
  static absl::StatusOr<std::unique_ptr<ReloadingServerContext>> Create(const PemFiles& files);

  // The context for a new connection: made again first when a file changed
  // since the last load.
  SslCtxPtr Current();
  // Loads the files now whatever their times say. On error the old context
  // stays and the error is returned.
  absl::Status Reload();

  uint64_t reloads() const;
  uint64_t failed_reloads() const;

 private:
  explicit ReloadingServerContext(PemFiles files) : files_(std::move(files)) {}
  // modification time, size and inode of every file, as one string.
  std::string Stamp() const;
  absl::Status LoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PemFiles files_;
  mutable absl::Mutex mu_;
  SslCtxPtr current_ ABSL_GUARDED_BY(mu_);
  std::string stamp_ ABSL_GUARDED_BY(mu_);
  // A stamp whose load failed: not tried again until the files change.
  std::string failed_stamp_ ABSL_GUARDED_BY(mu_);
  uint64_t reloads_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_reloads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tls
}  // namespace kvstore

#endif  // KVSTORE_COMMON_TLS_SSL_CONTEXT_H_
