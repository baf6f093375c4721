// Copyright 2026 The kvstore Authors.
//
// The credential and permission check at the metadata stage of a gRPC
// call, before its request message is read.
//
// Why: a sync handler (and so Authenticator::Check in it) runs only once
// gRPC has received and parsed the whole request, which on the control port
// may be tens of MiB. Checked there alone, anyone who can reach the port
// makes the server read and buffer whole uploads before being refused.
// MetadataTokenCheck is an auth metadata processor: gRPC's server auth
// filter runs it on the call's initial metadata, and a refused call ends
// with UNAUTHENTICATED (no or an unknown credential) or PERMISSION_DENIED
// (a data client calling a peer or admin RPC) before the server asks the
// transport for the message, so no more of the body than one HTTP/2
// flow-control window ever leaves the client. The handlers keep their own
// check (defence in depth, and what a test calling a service directly goes
// through).
//
// An UNAUTHENTICATED refusal is sent `refusal_delay` late (DelayedAnswers):
// a stranger that starts its next upload as soon as one is refused would
// otherwise make thousands of calls a second, each costing the server a
// stream, a window of body and a refusal, and on a small machine that alone
// doubles authenticated clients' tail latency. With the delay a client gets
// at most (its concurrent calls) / (the delay) refusals a second. At most
// `max_delayed_refusals` wait at once (each holds a call and a window of
// body); beyond that, refusals go at once and are counted apart. Refusals
// of known principals (PERMISSION_DENIED) are not delayed: they come from
// holders of a credential.
//
// The processor runs through gRPC's core API (ControlPortCredentials), whose
// callback may be answered later from any thread; the C++ API's wrapper
// answers at once or blocks a thread per call.
//
// It decides by Authenticator::AdmitAuthorization, the services' own rule
// (the same secrets, roles and method table), so the two stages never
// disagree. Calls whose method path starts with one of `open_prefixes` pass
// without a credential (health checks: orchestrators probe with none).
//
// Errors: those of Authenticator::Admit, with its texts and counters; two
// counters of its own (kvstore_grpc_auth_failures_delayed_total,
// kvstore_grpc_auth_failures_undelayed_total).
//
// Ownership and threads: thread-safe. Shared by the credentials (gRPC's
// core keeps them while any connection made with them lives) and its
// owner, who calls StopDelaying() before the gRPC server shuts down (that
// shutdown waits for the calls held here) and keeps the object until the
// server is destroyed.

#ifndef KVSTORE_COMMON_AUTH_METADATA_TOKEN_CHECK_H_
#define KVSTORE_COMMON_AUTH_METADATA_TOKEN_CHECK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/auth/authenticator.h"
#include "common/auth/delayed_answers.h"
#include "common/metrics/registry.h"
#include "grpc/grpc_security.h"
#include "grpcpp/security/server_credentials.h"

namespace kvstore {
namespace auth {

class MetadataTokenCheck {
 public:
  struct Options {
    // Method path prefixes open without a credential.
    std::vector<std::string> open_prefixes;
    // How late an UNAUTHENTICATED refusal is sent; zero: at once.
    absl::Duration refusal_delay = absl::Milliseconds(250);
    // Refusals waiting at once, at most (>= 1).
    size_t max_delayed_refusals = 1024;
  };

  // `authenticator` must not be null; `registry` (not owned, outlives
  // this) gets the two counters above.
  MetadataTokenCheck(std::shared_ptr<const Authenticator> authenticator, Options options,
                     metrics::Registry* registry);
  ~MetadataTokenCheck();

  // The decision for one call: OK, or the refusal. `path` is the call's
  // ":path" ("/kvstore.v1.KvControl/Put"), `authorization` its
  // "authorization" metadata ("" when none).
  absl::Status Check(absl::string_view path, absl::string_view authorization) const;

  // gRPC's core processor entry: decides on `md` and answers `done`, at once
  // or (UNAUTHENTICATED) after the delay. Consumes no metadata.
  void Process(const grpc_metadata* md, size_t num_md, grpc_process_auth_metadata_done_cb done,
               void* user_data);

  // Sends every held-back refusal now, and later ones at once. Idempotent.
  void StopDelaying();

 private:
  const std::shared_ptr<const Authenticator> authenticator_;
  const Options options_;
  metrics::Counter* delayed_;
  metrics::Counter* undelayed_;
  DelayedAnswers answers_;
};

// The control port's credentials: `core` (owned; gRPC core server
// credentials, plaintext or TLS) with `check` (may be null: nothing to
// check) run on every call's metadata.
std::shared_ptr<grpc::ServerCredentials> ControlPortCredentials(
    grpc_server_credentials* core, std::shared_ptr<MetadataTokenCheck> check);

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_METADATA_TOKEN_CHECK_H_
