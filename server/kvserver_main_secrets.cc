// Copyright 2026 The kvstore Authors.

#include "server/kvserver_main_secrets.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/auth/credentials.h"
#include "common/auth/token.h"

// Defined here, listed by kvserver --help with the rest (the usage config
// shows the flags of files named kvserver_main*).
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding the data clients' token (user \"default\", read-write): the gRPC bearer "
          "token and the RESP password (AUTH token); it grants no peer or admin call; at least 16 "
          "characters, no whitespace");
ABSL_FLAG(std::string, admin_token_file, "",
          "file holding the admin token (user \"admin\"): needed for failover, add/remove-node, "
          "rebalance, accept-loss (kvctl --admin_token_file) and RESP admin commands (CONFIG "
          "SET...); also reads and writes keys");
ABSL_FLAG(std::string, cluster_secret_file, "",
          "file holding the cluster secret the kvservers of a cluster present to each other "
          "(replication, shard copies, migration, reconciliation); the same file on every node, "
          "never given to clients; required with --etcd");
ABSL_FLAG(std::string, users_file, "",
          "file of more users, one per line: NAME ROLE SECRET, ROLE read (GET/SCAN only), write "
          "or admin; '#' starts a comment. gRPC clients send SECRET as their token, RESP "
          "clients AUTH NAME SECRET (redis-cli --user NAME --pass SECRET)");
ABSL_FLAG(absl::Duration, auth_failure_delay, absl::Milliseconds(250),
          "how late the control port answers a call without a known credential "
          "(UNAUTHENTICATED): a client retrying in a loop then costs the server a few calls a "
          "second, not thousands; at most 1024 such refusals wait at once, later ones are sent "
          "at once; 0 sends every refusal at once; at most 10s");

namespace kvstore {
namespace server {

absl::Status SecretsFromFlags(KvServerOptions* o) {
  if (const std::string path = absl::GetFlag(FLAGS_auth_token_file); !path.empty()) {
    absl::StatusOr<std::string> token = auth::ReadTokenFile(path);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth_token_file: ", token.status().message()));
    }
    o->auth_token = std::move(*token);
  }
  struct SecretFlag {
    const char* name;
    std::string path;
    std::string* field;
  };
  for (const SecretFlag& f :
       {SecretFlag{"admin_token_file", absl::GetFlag(FLAGS_admin_token_file), &o->admin_token},
        SecretFlag{"cluster_secret_file", absl::GetFlag(FLAGS_cluster_secret_file),
                   &o->cluster_secret}}) {
    if (f.path.empty()) continue;
    absl::StatusOr<std::string> token = auth::ReadTokenFile(f.path);
    if (!token.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", f.name, ": ", token.status().message()));
    }
    *f.field = std::move(*token);
  }
  const absl::Duration delay = absl::GetFlag(FLAGS_auth_failure_delay);
  if (delay < absl::ZeroDuration() || delay > absl::Seconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth_failure_delay must be between 0 and 10s, not ", absl::FormatDuration(delay)));
  }
  o->auth_failure_delay = delay;
  if (const std::string path = absl::GetFlag(FLAGS_users_file); !path.empty()) {
    absl::StatusOr<std::vector<auth::User>> users = auth::ReadUsersFile(path);
    if (!users.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--users_file: ", users.status().message()));
    }
    o->users = std::move(*users);
  }
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
