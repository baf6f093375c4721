// Copyright 2026 The kvstore Authors.

#include "common/auth/metadata_token_check.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "grpc/grpc.h"
#include "grpc/grpc_security.h"
#include "grpc/slice.h"

namespace kvstore {
namespace auth {

namespace {

absl::string_view View(grpc::string_ref s) { return absl::string_view(s.data(), s.size()); }

absl::string_view View(const grpc_slice& s) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(s)),
                           GRPC_SLICE_LENGTH(s));
}

// Plaintext credentials that run a processor: the core library's insecure
// credentials with the processor attached (the C++ insecure credentials
// refuse one). The core credentials own the processor: they outlive this
// object inside the server that bound a port with them.
class InsecureCredentialsWithCheck final : public grpc::ServerCredentials {
 public:
  explicit InsecureCredentialsWithCheck(std::shared_ptr<grpc::AuthMetadataProcessor> processor)
      : creds_(grpc_insecure_server_credentials_create()) {
    SetAuthMetadataProcessor(std::move(processor));
  }
  ~InsecureCredentialsWithCheck() override { grpc_server_credentials_release(creds_); }

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) override {
    grpc_auth_metadata_processor p;
    p.process = &Process;
    p.destroy = [](void* state) {
      delete static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
    };
    p.state = new std::shared_ptr<grpc::AuthMetadataProcessor>(processor);
    grpc_server_credentials_set_auth_metadata_processor(creds_, p);
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  // The core's callback, adapted to grpc::AuthMetadataProcessor (only
  // non-blocking processors: it runs on gRPC's thread).
  static void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                      size_t num_md, grpc_process_auth_metadata_done_cb cb, void* user_data) {
    auto& processor = *static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
    grpc::AuthMetadataProcessor::InputMetadata input;
    for (size_t i = 0; i < num_md; ++i) {
      const absl::string_view key = View(md[i].key);
      const absl::string_view value = View(md[i].value);
      input.emplace(grpc::string_ref(key.data(), key.size()),
                    grpc::string_ref(value.data(), value.size()));
    }
    grpc::AuthMetadataProcessor::OutputMetadata consumed;
    grpc::AuthMetadataProcessor::OutputMetadata response;
    grpc::Status status = processor->Process(input, nullptr, &consumed, &response);
    // MetadataTokenCheck consumes and answers nothing.
    DCHECK(consumed.empty() && response.empty());
    cb(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(status.error_code()),
       status.ok() ? nullptr : status.error_message().c_str());
  }

  grpc_server_credentials* const creds_;
};

}  // namespace

MetadataTokenCheck::MetadataTokenCheck(std::shared_ptr<const Authenticator> authenticator,
                                       std::vector<std::string> open_prefixes)
    : authenticator_(std::move(authenticator)), open_prefixes_(std::move(open_prefixes)) {
  CHECK(authenticator_ != nullptr);
}

grpc::Status MetadataTokenCheck::Process(const InputMetadata& auth_metadata,
                                         grpc::AuthContext* /*context*/,
                                         OutputMetadata* /*consumed_auth_metadata*/,
                                         OutputMetadata* /*response_metadata*/) {
  absl::string_view method;
  auto path = auth_metadata.find(":path");
  if (path != auth_metadata.end()) {
    method = View(path->second);
    for (const std::string& prefix : open_prefixes_) {
      if (absl::StartsWith(method, prefix)) return grpc::Status::OK;
    }
  }
  absl::ConsumePrefix(&method, "/");
  absl::string_view given;
  // Only the first value of a repeated key is looked at, as in Authenticator.
  auto it = auth_metadata.find("authorization");
  if (it != auth_metadata.end()) given = View(it->second);
  absl::StatusOr<Identity> who = authenticator_->AdmitAuthorization(given, method);
  if (who.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(who.status().code()),
                      std::string(who.status().message()));
}

std::shared_ptr<grpc::ServerCredentials> ControlPortCredentials(
    const std::optional<grpc::SslServerCredentialsOptions>& ssl,
    std::shared_ptr<MetadataTokenCheck> check) {
  if (ssl.has_value()) {
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::SslServerCredentials(*ssl);
    if (check != nullptr) creds->SetAuthMetadataProcessor(std::move(check));
    return creds;
  }
  if (check == nullptr) return grpc::InsecureServerCredentials();
  return std::make_shared<InsecureCredentialsWithCheck>(std::move(check));
}

}  // namespace auth
}  // namespace kvstore
