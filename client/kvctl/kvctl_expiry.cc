// Copyright 2026 The kvstore Authors.
//
// kvctl's expiry commands: ttl, expire and persist (put --ttl is in
// kvctl_commands.cc). Each prints one integer, as redis-cli does, so a
// script can read it; absent keys also exit 1.

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "client/kvctl/kvctl_commands.h"
#include "client/kvctl/kvctl_io.h"

namespace kvstore {
namespace client {
namespace kvctl {

namespace {

int PrintInt(int64_t n, int exit_code) {
  const absl::Status status = WriteAll(STDOUT_FILENO, absl::StrCat(n, "\n"));
  if (!status.ok()) return Failure(status);
  return exit_code;
}

}  // namespace

int RunTtl(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<absl::Duration> ttl = (*client)->Ttl(args[0]);
  if (absl::IsNotFound(ttl.status())) return PrintInt(-2, kExitNotFound);
  if (!ttl.ok()) return Failure(ttl.status());
  return PrintInt(*ttl == absl::InfiniteDuration() ? -1 : absl::ToInt64Milliseconds(*ttl), kExitOk);
}

int RunExpire(const Context& context, const std::vector<std::string>& args) {
  absl::Duration ttl;
  if (!absl::ParseDuration(args[1], &ttl) || ttl <= absl::ZeroDuration() ||
      ttl == absl::InfiniteDuration()) {
    return UsageError(absl::StrCat("expire: '", args[1],
                                   "' is not a positive duration (e.g. 30s, 500ms, 2h); "
                                   "use persist to remove an expiry"));
  }
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<bool> applied = (*client)->Expire(args[0], ttl);
  if (!applied.ok()) return Failure(applied.status());
  return PrintInt(*applied ? 1 : 0, *applied ? kExitOk : kExitNotFound);
}

int RunPersist(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<bool> applied = (*client)->Persist(args[0]);
  if (!applied.ok()) return Failure(applied.status());
  return PrintInt(*applied ? 1 : 0, kExitOk);
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
