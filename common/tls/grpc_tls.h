// Copyright 2026 The kvstore Authors.
//
// gRPC credentials that follow their PEM files: built on gRPC's
// FileWatcherCertificateProvider, which re-reads the key, certificate chain
// and CA every `refresh` and hands new connections the new material. Old
// connections keep the certificate they were made with until they close.
// This is how a kvserver takes a renewed certificate without a restart
// (docs/security.md): replace the files (key and chain together, e.g. by
// renaming a directory or writing the key first), and within `refresh`
// every new handshake uses them.
//
// The files are read once here as well, so a missing or unreadable file is
// an error at start-up (naming the flag and the path) rather than a
// handshake that fails later; after start-up a file that cannot be read
// keeps the last good material (gRPC logs the failure).
//
// Thread safety: free functions; the credentials are gRPC's (thread-safe).

#ifndef KVSTORE_COMMON_TLS_GRPC_TLS_H_
#define KVSTORE_COMMON_TLS_GRPC_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpc/grpc_security.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace kvstore {
namespace tls {

// PEM file paths, each named by the flag that set it (for errors).
struct PemFiles {
  std::string cert;  // certificate chain
  std::string key;   // its private key
  std::string ca;    // CA bundle that verifies the other side
  // Flag names for error messages ("tls_cert" ...).
  std::string cert_flag = "tls_cert";
  std::string key_flag = "tls_key";
  std::string ca_flag = "tls_ca";
};

// Reads a whole PEM file. kInvalidArgument naming `flag` and `path` when it
// is missing, unreadable, empty or holds no "-----BEGIN" block.
absl::StatusOr<std::string> ReadPemFile(const std::string& flag, const std::string& path);

// The server side, as gRPC core credentials (the caller owns them: hand
// them to auth::ControlPortCredentials or release them with
// grpc_server_credentials_release). REQUIRES files.cert and files.key. With
// files.ca, a client must present a certificate that CA signed (mutual
// TLS); without, none is asked for. Errors: ReadPemFile's.
absl::StatusOr<grpc_server_credentials*> ReloadingServerCredentials(const PemFiles& files,
                                                                    absl::Duration refresh);

// The client side: the server's chain must lead to files.ca (required) and
// carry the host name (or IP) dialled; with files.cert and files.key (both
// or neither) it presents them for mutual TLS. Errors: ReadPemFile's, and
// kInvalidArgument for a missing CA or half a key pair.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ReloadingChannelCredentials(
    const PemFiles& files, absl::Duration refresh);

}  // namespace tls
}  // namespace kvstore

#endif  // KVSTORE_COMMON_TLS_GRPC_TLS_H_
