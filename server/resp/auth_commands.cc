// Copyright 2026 The kvstore Authors.

#include "server/resp/auth_commands.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "common/auth/credentials.h"
#include "common/protocol/resp.h"
#include "common/version.h"
#include "server/resp/client_commands.h"

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
    // CLIENT LIST shows the user, from other loops too.
    if (ClientEntry* e = ctx.conn->client.get()) {
      ctx.conn->client.registry()->Update(e, [&](ClientEntry& entry) { entry.user = who->name; });
    }
    return true;
  }
  ctx.counters->auth_failures->Increment();
  ctx.conn->ReplyError(kWrongPass);
  return false;
}

// HELLO's map of 7 pairs: a map in RESP3, the flat array of 14 in RESP2
// (ReplyMapHeader), in the protocol HELLO has just chosen; mode "cluster"
// in cluster mode, as Redis says it. The id is CLIENT ID's (the descriptor
// for a connection built without a registry).
void ReplyHelloMap(Connection* c, bool cluster) {
  c->ReplyMapHeader(7);
  c->ReplyBulk("server");
  c->ReplyBulk("kvstore");
  c->ReplyBulk("version");
  c->ReplyBulk(kVersion);
  c->ReplyBulk("proto");
  c->ReplyInteger(c->protocol);
  c->ReplyBulk("id");
  c->ReplyInteger(c->client.get() != nullptr ? static_cast<int64_t>(c->client.get()->id) : c->fd);
  c->ReplyBulk("mode");
  c->ReplyBulk(cluster ? "cluster" : "standalone");
  c->ReplyBulk("role");
  c->ReplyBulk("master");
  c->ReplyBulk("modules");
  c->ReplyArrayHeader(0);
}

// What HELLO changes once it has succeeded: the protocol (0: unchanged)
// and the name (set_name: SETNAME was given), also in the registry entry
// other loops read.
void ApplyHello(Connection* c, int64_t protocol, bool set_name, absl::string_view name) {
  if (protocol != 0) c->protocol = static_cast<int>(protocol);
  ClientEntry* e = c->client.get();
  if (e == nullptr) return;
  c->client.registry()->Update(e, [&](ClientEntry& entry) {
    entry.protocol = c->protocol;
    if (set_name) entry.name = std::string(name);
  });
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
// checked first, as Redis does, so an unsupported one answers NOPROTO even
// before AUTH; then the options (a bad SETNAME name is refused before any
// password is looked at), then the password. Only when all passed does the
// connection switch protocol and take the name.
void HelloCommand(const CommandContext& ctx, CommandArgs args) {
  Connection* c = ctx.conn;
  int64_t ver = 0;  // 0: no protover, keep the connection's
  if (args.size() >= 2) {
    if (!absl::SimpleAtoi(args[1], &ver)) {
      return c->ReplyError("ERR Protocol version is not an integer or out of range");
    }
    if (ver != 2 && ver != 3) return c->ReplyError("NOPROTO unsupported protocol version");
  }
  bool auth_given = false, set_name = false;
  absl::string_view user, password, name;
  for (size_t i = 2; i < args.size(); ++i) {
    if (CommandIs(args[i], "AUTH") && i + 2 < args.size()) {
      auth_given = true;
      user = args[i + 1];
      password = args[i + 2];
      i += 2;
    } else if (CommandIs(args[i], "SETNAME") && i + 1 < args.size()) {
      if (!ValidClientAttribute(args[i + 1])) return c->ReplyError(kBadClientName);
      set_name = true;
      name = args[++i];
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
  ApplyHello(c, ver, set_name, name);
  ReplyHelloMap(c, ctx.options->cluster != nullptr);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
