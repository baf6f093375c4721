// Copyright 2026 The kvstore Authors.
//
// The RESP command table: every command the data port answers, with the
// argument counts it accepts and the function that answers it. Dispatch
// looks a request's first argument up here; adding a command is adding a
// row (commands.cc). "SET key value" sent as a RESP array is streamed into
// pool memory by StreamedSet and never comes here; SET with options (and
// an inline SET) does (string_commands.h).
//
// Errors are Redis's own texts, which redis-cli and client libraries show:
//   NOPERM User <user> has no permissions to run the '<name>' command
//   ERR unknown command '<name>'            (name cut to 64 bytes, non-
//                                            printable bytes shown as '?')
//   ERR wrong number of arguments for '<name in lower case>' command
// Store errors are mapped by resp::StatusToRespError.
//
// Thread safety: the table is immutable; a handler runs on the calling
// thread and touches only what its CommandContext names: a loop's thread,
// or, for a write command parked off the loop (RespLoop::ParkCommand), a
// worker of the loop's CommitPool, with a stand-in connection of its own
// and the loop's shared writer for such commands.

#ifndef KVSTORE_SERVER_RESP_COMMANDS_H_
#define KVSTORE_SERVER_RESP_COMMANDS_H_

#include <cstddef>
#include <limits>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/auth/credentials.h"
#include "common/auth/principal.h"
#include "server/resp/connection.h"
#include "server/resp/resp_counters.h"
#include "server/resp/resp_options.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// What a handler may use; built by the loop for each request. Nothing is
// owned; everything outlives the call.
struct CommandContext {
  KvStore* store;
  // The loop's writer (MSET writes through it); for a parked command, the
  // loop's shared one (KvStore::NewSharedWriter).
  KvStore::Writer* writer;
  const RespServerOptions* options;
  Counters* counters;
  Connection* conn;  // the requesting connection; replies are queued on it
  // The server's users (AUTH); null: none, every connection an admin.
  const auth::Identities* ids = nullptr;
};

// args[0] is the command name as sent; args are views into the request
// buffer, valid only during the call.
using CommandArgs = absl::Span<const absl::string_view>;
using CommandHandler = void (*)(const CommandContext& ctx, CommandArgs args);

inline constexpr size_t kAnyArgs = std::numeric_limits<size_t>::max();

struct CommandSpec {
  absl::string_view name;  // upper case; requests match it case-insensitively
  // Accepted argument counts, the name included: min_args..max_args, where
  // the arguments after the first min_args come in groups of arg_group (2
  // for MSET's key/value pairs and SCAN's option/value pairs).
  size_t min_args;
  size_t max_args;
  size_t arg_group;
  CommandHandler handler;
  // What the connection's role must allow (common/auth/principal.h): kRead
  // for reads, kWrite for writes, kAdmin for the operator's commands,
  // kSession for connection housekeeping (PING, SELECT ...), kClusterMap
  // for CLUSTER. Refused with Redis's -NOPERM text otherwise.
  auth::Permission permission;
  // What COMMAND reports, so cluster-aware clients (which find a request's
  // keys from it) can route: the first and last key argument (last -1: the
  // last argument) and the step between keys; 0, 0, 0 for no keys.
  int first_key = 0;
  int last_key = 0;
  int key_step = 0;
  // COMMAND's flag: "write", "readonly" or "" (none).
  absl::string_view flag = "";
};

// True when the connection's role allows `permission`; otherwise replies
// -NOPERM naming `command` (lower case, as Redis), counts it and returns
// false.
bool RequirePermission(const CommandContext& ctx, auth::Permission permission,
                       absl::string_view command);

// The row for `name` (any case), or null for an unknown command.
const CommandSpec* FindCommand(absl::string_view name);

// Whether `argc` arguments (the name included) fit `spec`.
bool ArityOk(const CommandSpec& spec, size_t argc);

// Runs the command in `args` (non-empty, as the parser guarantees): looks
// args[0] up, checks its arity, calls its handler; or queues the unknown-
// command / wrong-arity error. Exactly one reply is queued on ctx.conn.
void DispatchCommand(const CommandContext& ctx, CommandArgs args);
// The same with args[0]'s row already looked up (`spec`: FindCommand(args[0]),
// null for an unknown command), for a caller that needed it first.
void DispatchCommand(const CommandContext& ctx, CommandArgs args, const CommandSpec* spec);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_COMMANDS_H_
