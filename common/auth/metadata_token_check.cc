// Copyright 2026 The kvstore Authors.

#include "common/auth/metadata_token_check.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "grpc/grpc.h"
#include "grpc/slice.h"

namespace kvstore {
namespace auth {

namespace {

absl::string_view View(const grpc_slice& s) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(s)),
                           GRPC_SLICE_LENGTH(s));
}

// Core server credentials with the check attached. The core credentials
// own a reference to the check (released by their destroy callback): they
// outlive this object inside the server that bound a port with them.
class CheckedCredentials final : public grpc::ServerCredentials {
 public:
  CheckedCredentials(grpc_server_credentials* core, std::shared_ptr<MetadataTokenCheck> check)
      : creds_(core) {
    CHECK(creds_ != nullptr);
    if (check == nullptr) return;
    grpc_auth_metadata_processor p;
    p.process = [](void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                   size_t num_md, grpc_process_auth_metadata_done_cb cb, void* user_data) {
      (*static_cast<std::shared_ptr<MetadataTokenCheck>*>(state))
          ->Process(md, num_md, cb, user_data);
    };
    p.destroy = [](void* state) {
      delete static_cast<std::shared_ptr<MetadataTokenCheck>*>(state);
    };
    p.state = new std::shared_ptr<MetadataTokenCheck>(std::move(check));
    grpc_server_credentials_set_auth_metadata_processor(creds_, p);
  }
  ~CheckedCredentials() override { grpc_server_credentials_release(creds_); }

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    LOG(FATAL) << "the control port's credentials take a MetadataTokenCheck only";
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  grpc_server_credentials* const creds_;
};

}  // namespace

MetadataTokenCheck::MetadataTokenCheck(std::shared_ptr<const Authenticator> authenticator,
                                       Options options, metrics::Registry* registry)
    : authenticator_(std::move(authenticator)),
      options_(std::move(options)),
      answers_(options_.max_delayed_refusals) {
  CHECK(authenticator_ != nullptr);
  CHECK(registry != nullptr);
  delayed_ = registry->AddCounter(
      "kvstore_grpc_auth_failures_delayed_total",
      "gRPC calls without a known credential whose refusal was sent --auth_failure_delay late.");
  undelayed_ = registry->AddCounter(
      "kvstore_grpc_auth_failures_undelayed_total",
      "gRPC calls without a known credential refused at once: the most refusals that may wait "
      "were already waiting, or the server was stopping.");
}

MetadataTokenCheck::~MetadataTokenCheck() { StopDelaying(); }

absl::Status MetadataTokenCheck::Check(absl::string_view path,
                                       absl::string_view authorization) const {
  for (const std::string& prefix : options_.open_prefixes) {
    if (absl::StartsWith(path, prefix)) return absl::OkStatus();
  }
  absl::ConsumePrefix(&path, "/");
  return authenticator_->AdmitAuthorization(authorization, path).status();
}

void MetadataTokenCheck::Process(const grpc_metadata* md, size_t num_md,
                                 grpc_process_auth_metadata_done_cb done, void* user_data) {
  absl::string_view path, authorization;
  bool seen_authorization = false;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = View(md[i].key);
    if (key == ":path") {
      path = View(md[i].value);
    } else if (key == "authorization" && !seen_authorization) {
      // Only the first value of a repeated key counts, as in Authenticator.
      authorization = View(md[i].value);
      seen_authorization = true;
    }
  }
  const absl::Status status = Check(path, authorization);
  auto answer = [done, user_data, code = static_cast<grpc_status_code>(status.code()),
                 message = std::string(status.message())] {
    done(user_data, nullptr, 0, nullptr, 0, code,
         code == GRPC_STATUS_OK ? nullptr : message.c_str());
  };
  if (absl::IsUnauthenticated(status) && options_.refusal_delay > absl::ZeroDuration()) {
    if (answers_.RunLater(options_.refusal_delay, answer)) {
      delayed_->Increment();
      return;
    }
    undelayed_->Increment();
  }
  answer();
}

void MetadataTokenCheck::StopDelaying() { answers_.Stop(); }

std::shared_ptr<grpc::ServerCredentials> ControlPortCredentials(
    grpc_server_credentials* core, std::shared_ptr<MetadataTokenCheck> check) {
  return std::make_shared<CheckedCredentials>(core, std::move(check));
}

}  // namespace auth
}  // namespace kvstore
