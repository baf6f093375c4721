// Copyright 2026 The kvstore Authors.

#include "common/tls/grpc_tls.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpc/grpc_security.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace kvstore {
namespace tls {
namespace {

using grpc::experimental::FileWatcherCertificateProvider;

unsigned int RefreshSeconds(absl::Duration refresh) {
  // gRPC counts whole seconds and takes at least one.
  return static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(refresh)));
}

}  // namespace

absl::StatusOr<std::string> ReadPemFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  if (in) content << in.rdbuf();
  if (!in || content.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read PEM file ", path,
                                                   " (missing, unreadable or empty)"));
  }
  if (!absl::StrContains(content.str(), "-----BEGIN")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path, " holds no PEM block (-----BEGIN ...)"));
  }
  return content.str();
}

absl::StatusOr<grpc_server_credentials*> ReloadingServerCredentials(const PemFiles& files,
                                                                    absl::Duration refresh) {
  KV_RETURN_IF_ERROR(ReadPemFile(files.cert_flag, files.cert).status());
  KV_RETURN_IF_ERROR(ReadPemFile(files.key_flag, files.key).status());
  if (!files.ca.empty()) KV_RETURN_IF_ERROR(ReadPemFile(files.ca_flag, files.ca).status());
  // The core API, not grpc::experimental::TlsServerCredentials: the caller
  // attaches an auth metadata processor that may answer later
  // (auth::ControlPortCredentials). The options take their own reference
  // to the provider's core object, which outlives the C++ wrapper.
  FileWatcherCertificateProvider provider(files.key, files.cert, files.ca, RefreshSeconds(refresh));
  grpc_tls_credentials_options* options = grpc_tls_credentials_options_create();
  grpc_tls_credentials_options_set_certificate_provider(options, provider.c_provider());
  grpc_tls_credentials_options_watch_identity_key_cert_pairs(options);
  if (files.ca.empty()) {
    grpc_tls_credentials_options_set_cert_request_type(options,
                                                       GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    // A client without a certificate the CA signed never gets past the
    // handshake.
    grpc_tls_credentials_options_watch_root_certs(options);
    grpc_tls_credentials_options_set_cert_request_type(
        options, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  // Takes ownership of the options.
  return grpc_tls_server_credentials_create(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ReloadingChannelCredentials(
    const PemFiles& files, absl::Duration refresh) {
  if (files.ca.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", files.ca_flag, " is needed to verify the other side's certificate"));
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", files.cert_flag, " and --", files.key_flag, " go together"));
  }
  KV_RETURN_IF_ERROR(ReadPemFile(files.ca_flag, files.ca).status());
  if (!files.cert.empty()) {
    KV_RETURN_IF_ERROR(ReadPemFile(files.cert_flag, files.cert).status());
    KV_RETURN_IF_ERROR(ReadPemFile(files.key_flag, files.key).status());
  }
  auto provider = std::make_shared<FileWatcherCertificateProvider>(files.key, files.cert, files.ca,
                                                                   RefreshSeconds(refresh));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!files.cert.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  // The chain alone is not enough: the certificate must name the peer
  // dialled, or any certificate of the CA would pass for any node.
  options.set_certificate_verifier(
      std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace tls
}  // namespace kvstore
