// Copyright 2026 The kvstore Authors.
//
// kvserver's credential flags (--auth_token_file, --admin_token_file,
// --cluster_secret_file, --users_file) and their reading: each names a file,
// and the secret is read from it at start, never kept in a flag, so it
// shows in neither --help, ps nor a flag dump (docs/security.md §2). Also
// --auth_failure_delay, how late a call without a known credential is
// refused.
//
// Thread safety: call once, from main, after absl::ParseCommandLine.

#ifndef KVSTORE_SERVER_KVSERVER_MAIN_SECRETS_H_
#define KVSTORE_SERVER_KVSERVER_MAIN_SECRETS_H_

#include "absl/status/status.h"
#include "server/kv_server.h"

namespace kvstore {
namespace server {

// Fills o->auth_token, admin_token, cluster_secret and users from the
// files the flags name (an empty flag leaves its field as it is), and
// o->auth_failure_delay. Errors: kInvalidArgument naming the flag and the
// file's problem (unreadable, a malformed token or users line) or a delay
// outside 0 to 10s.
absl::Status SecretsFromFlags(KvServerOptions* o);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_KVSERVER_MAIN_SECRETS_H_
