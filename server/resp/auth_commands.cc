// Copyright 2026 The kvstore Authors.

#include "server/resp/auth_commands.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "common/auth/credentials.h"
#include "common/protocol/resp.h"
#include "common/version.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

using resp::CommandIs;

constexpr absl::string_view kWrongPass =
    "WRONGPASS invalid username-password pair or user is disabled.";

// Whether the server has users at all (else every connection is an admin
// and AUTH answers as Redis without requirepass).
bool HasUsers(const CommandContext& ctx) { return ctx.ids != nullptr && !ctx.ids->open(); }

// Checks a (user, password) pair against the server's users and marks the
// connection with the user and its role; queues the error and returns false
// when it does not match (a wrong password and an unknown user alike).
bool TryAuth(const CommandContext& ctx, absl::string_view user, absl::string_view password) {
  std::optional<auth::Identity> who = ctx.ids->ByUser(user, password);
  if (who.has_value()) {
    ctx.conn->authenticated = true;
    ctx.conn->user = who->name;
    ctx.conn->role = who->role;
    return true;
  }
  ctx.counters->auth_failures->Increment();
  ctx.conn->ReplyError(kWrongPass);
  return false;
}

// The RESP2 HELLO map (7 field/value pairs); mode "cluster" in cluster
// mode, as Redis says it.
void ReplyHelloMap(Connection* c, bool cluster) {
  c->ReplyArrayHeader(14);
  c->ReplyBulk("server");
  c->ReplyBulk("kvstore");
  c->ReplyBulk("version");
  c->ReplyBulk(kVersion);
  c->ReplyBulk("proto");
  c->ReplyInteger(2);
  c->ReplyBulk("id");
  c->ReplyInteger(c->fd);
  c->ReplyBulk("mode");
  c->ReplyBulk(cluster ? "cluster" : "standalone");
  c->ReplyBulk("role");
  c->ReplyBulk("master");
  c->ReplyBulk("modules");
  c->ReplyArrayHeader(0);
}

}  // namespace

bool AllowedBeforeAuth(absl::string_view name) {
  return CommandIs(name, "AUTH") || CommandIs(name, "HELLO") || CommandIs(name, "QUIT");
}

// AUTH password | AUTH user password. Without a configured password Redis
// accepts "AUTH default <anything>" (the default user is nopass) and refuses
// the one-argument form with the text below; so do we.
void AuthCommand(const CommandContext& ctx, CommandArgs args) {
  Connection* c = ctx.conn;
  if (args.size() != 2 && args.size() != 3) {
    return c->ReplyError("ERR wrong number of arguments for 'auth' command");
  }
  if (!HasUsers(ctx)) {
    if (args.size() == 3 && args[1] == "default") return c->ReplyOk();
    if (args.size() == 3) return c->ReplyError(kWrongPass);
    return c->ReplyError(
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?");
  }
  const absl::string_view user = args.size() == 3 ? args[1] : "default";
  if (TryAuth(ctx, user, args.back())) c->ReplyOk();
}

// HELLO [protover [AUTH user pass] [SETNAME name]]. The protocol version is
// checked first, as Redis does, so HELLO 3 answers NOPROTO even before AUTH
// (clients take it as "stay on RESP2").
void HelloCommand(const CommandContext& ctx, CommandArgs args) {
  Connection* c = ctx.conn;
  if (args.size() >= 2) {
    int64_t ver = 0;
    if (!absl::SimpleAtoi(args[1], &ver)) {
      return c->ReplyError("ERR Protocol version is not an integer or out of range");
    }
    if (ver != 2) return c->ReplyError("NOPROTO unsupported protocol version");
  }
  bool auth_given = false;
  absl::string_view user, password;
  for (size_t i = 2; i < args.size(); ++i) {
    if (CommandIs(args[i], "AUTH") && i + 2 < args.size()) {
      auth_given = true;
      user = args[i + 1];
      password = args[i + 2];
      i += 2;
    } else if (CommandIs(args[i], "SETNAME") && i + 1 < args.size()) {
      ++i;  // accepted and ignored, as CLIENT SETNAME
    } else {
      return c->ReplyError("ERR Syntax error in HELLO option '" +
                           std::string(args[i].substr(0, 64)) + "'");
    }
  }
  if (auth_given) {
    if (!HasUsers(ctx)) {
      if (user != "default") return c->ReplyError(kWrongPass);
    } else if (!TryAuth(ctx, user, password)) {
      return;
    }
  }
  if (!c->authenticated) {
    ctx.counters->noauth->Increment();
    return c->ReplyError(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
        "select the RESP protocol version at the same time");
  }
  ReplyHelloMap(c, ctx.options->cluster != nullptr);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
