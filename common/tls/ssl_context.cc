// Copyright 2026 The kvstore Authors.

#include "common/tls/ssl_context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace tls {
namespace {

void FreeCtx(SSL_CTX* ctx) { SSL_CTX_free(ctx); }

absl::Status Fail(const std::string& flag, const std::string& path, const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": ", path, ": ", what, " (", TakeSslErrors(), ")"));
}

// The settings both sides share: TLS 1.2 at least, writes that may be
// partial and retried from a moved buffer (the pump's buffers compact).
absl::StatusOr<SslCtxPtr> NewContext(const SSL_METHOD* method) {
  SSL_CTX* raw = SSL_CTX_new(method);
  if (raw == nullptr) return absl::InternalError(absl::StrCat("SSL_CTX_new: ", TakeSslErrors()));
  SslCtxPtr ctx(raw, FreeCtx);
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_mode(raw, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

absl::Status LoadKeyPair(SSL_CTX* ctx, const PemFiles& files) {
  KV_RETURN_IF_ERROR(ReadPemFile(files.cert_flag, files.cert).status());
  KV_RETURN_IF_ERROR(ReadPemFile(files.key_flag, files.key).status());
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1) {
    return Fail(files.cert_flag, files.cert, "not a certificate chain");
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return Fail(files.key_flag, files.key, "not a private key");
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return Fail(files.key_flag, files.key, "does not match the certificate");
  }
  return absl::OkStatus();
}

absl::Status LoadCa(SSL_CTX* ctx, const PemFiles& files) {
  KV_RETURN_IF_ERROR(ReadPemFile(files.ca_flag, files.ca).status());
  if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1) {
    return Fail(files.ca_flag, files.ca, "not a CA certificate bundle");
  }
  return absl::OkStatus();
}

}  // namespace

std::string TakeSslErrors() {
  std::string out;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

absl::StatusOr<SslCtxPtr> MakeServerContext(const PemFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", files.cert_flag, " and --", files.key_flag, " are both needed"));
  }
  KV_ASSIGN_OR_RETURN(SslCtxPtr ctx, NewContext(TLS_server_method()));
  KV_RETURN_IF_ERROR(LoadKeyPair(ctx.get(), files));
  if (!files.ca.empty()) {
    KV_RETURN_IF_ERROR(LoadCa(ctx.get(), files));
    // Mutual TLS: no certificate the CA signed, no connection.
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return ctx;
}

absl::StatusOr<SslCtxPtr> MakeClientContext(const PemFiles& files) {
  if (files.ca.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", files.ca_flag, " is needed to verify the server's certificate"));
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", files.cert_flag, " and --", files.key_flag, " go together"));
  }
  KV_ASSIGN_OR_RETURN(SslCtxPtr ctx, NewContext(TLS_client_method()));
  KV_RETURN_IF_ERROR(LoadCa(ctx.get(), files));
  if (!files.cert.empty()) KV_RETURN_IF_ERROR(LoadKeyPair(ctx.get(), files));
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  return ctx;
}

absl::Status ConfigureClient(SSL* ssl, const std::string& host) {
  in6_addr any;
  const bool ip =
      inet_pton(AF_INET, host.c_str(), &any) == 1 || inet_pton(AF_INET6, host.c_str(), &any) == 1;
  int ok;
  if (ip) {
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  } else {
    ok = SSL_set1_host(ssl, host.c_str()) == 1 && SSL_set_tlsext_host_name(ssl, host.c_str()) == 1;
  }
  if (ok != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS: cannot verify the server as '", host, "': ", TakeSslErrors()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ReloadingServerContext>> ReloadingServerContext::Create(
    const PemFiles& files) {
  std::unique_ptr<ReloadingServerContext> r(new ReloadingServerContext(files));
  absl::MutexLock lock(&r->mu_);
  KV_RETURN_IF_ERROR(r->LoadLocked());
  return r;
}

std::string ReloadingServerContext::Stamp() const {
  std::string out;
  for (const std::string* path : {&files_.cert, &files_.key, &files_.ca}) {
    struct stat st {};
    if (path->empty() || stat(path->c_str(), &st) != 0) {
      out += "-;";
      continue;
    }
    absl::StrAppend(&out, st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                    st.st_mtim.tv_nsec, ";");
  }
  return out;
}

absl::Status ReloadingServerContext::LoadLocked() {
  const std::string stamp = Stamp();
  absl::StatusOr<SslCtxPtr> ctx = MakeServerContext(files_);
  if (!ctx.ok()) {
    failed_stamp_ = stamp;
    if (current_ != nullptr) ++failed_reloads_;
    return ctx.status();
  }
  if (current_ != nullptr) ++reloads_;
  current_ = *std::move(ctx);
  stamp_ = stamp;
  failed_stamp_.clear();
  return absl::OkStatus();
}

SslCtxPtr ReloadingServerContext::Current() {
  absl::MutexLock lock(&mu_);
  const std::string stamp = Stamp();
  if (stamp != stamp_ && stamp != failed_stamp_) {
    absl::Status s = LoadLocked();
    if (s.ok()) {
      LOG(INFO) << "TLS: loaded the renewed certificate " << files_.cert;
    } else {
      LOG(WARNING) << "TLS: the changed certificate files do not load; keeping the previous ("
                   << s.message() << ")";
    }
  }
  return current_;
}

absl::Status ReloadingServerContext::Reload() {
  absl::MutexLock lock(&mu_);
  return LoadLocked();
}

uint64_t ReloadingServerContext::reloads() const {
  absl::MutexLock lock(&mu_);
  return reloads_;
}

uint64_t ReloadingServerContext::failed_reloads() const {
  absl::MutexLock lock(&mu_);
  return failed_reloads_;
}

}  // namespace tls
}  // namespace kvstore
