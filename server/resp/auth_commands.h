// Copyright 2026 The kvstore Authors.
//
// Authentication on the RESP port, as Redis does it with ACL users
// (RespServerOptions::credentials, common/auth/credentials.h):
//   AUTH <password>             -> the user "default" (the data token), as
//                                  Redis's requirepass
//   AUTH <user> <password>      -> that user (redis-cli --user U --pass P):
//                                  "admin" (the admin token) or one of the
//                                  users file's; the peer secret is no user
//   HELLO [2|3 [AUTH <user> <password>] [SETNAME name]]
//                               -> the HELLO map, authenticated, and the
//                                  connection switched to RESP2 or RESP3
//                                  (Connection::protocol) and named
// The user's role then limits the commands (commands.h: -NOPERM).
//   HELLO 4 (any protover but 2 and 3)          -> -NOPROTO, whatever the state
//   HELLO x (not a number)      -> -ERR Protocol version is not an integer or
//                                  out of range
//   HELLO 3 SETNAME "a b"       -> -ERR Client names cannot contain spaces,
//                                  newlines or special characters.
// A failed HELLO changes nothing: neither protocol nor name.
// Before a successful AUTH only AUTH, HELLO and QUIT are served; anything
// else gets Redis's exact "-NOAUTH Authentication required." (and HELLO
// without AUTH gets Redis's NOAUTH hint to add AUTH). Errors, with Redis's
// texts so redis-cli and client libraries recognise them:
//   -WRONGPASS invalid username-password pair or user is disabled.
//   -ERR AUTH <password> called without any password configured for the
//    default user. Are you sure your configuration is correct?
// Wrong passwords are counted (kvstore_resp_auth_failures_total) and
// passwords are compared with auth::TokenEquals (constant time).
//
// Thread safety: as the command table (commands.h): on the loop's thread.

#ifndef KVSTORE_SERVER_RESP_AUTH_COMMANDS_H_
#define KVSTORE_SERVER_RESP_AUTH_COMMANDS_H_

#include "absl/strings/string_view.h"
#include "server/resp/commands.h"

namespace kvstore {
namespace server {
namespace resp_internal {

inline constexpr absl::string_view kNoAuthError = "NOAUTH Authentication required.";

// Whether command `name` (any case) may run on a connection that has not
// authenticated: AUTH, HELLO and QUIT, as in Redis.
bool AllowedBeforeAuth(absl::string_view name);

// The AUTH and HELLO rows of the command table.
void AuthCommand(const CommandContext& ctx, CommandArgs args);
void HelloCommand(const CommandContext& ctx, CommandArgs args);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_AUTH_COMMANDS_H_
