// Copyright 2026 The kvstore Authors.

#include "server/resp/client_commands.h"

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp.h"
#include "server/resp/client_registry.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

using resp::CommandIs;

ClientEntry* Self(const CommandContext& ctx) { return ctx.conn->client.get(); }

// The owner's change to a field other loops read (client_registry.h).
void Change(const CommandContext& ctx, absl::FunctionRef<void(ClientEntry&)> change) {
  ctx.conn->client.registry()->Update(Self(ctx), change);
}

absl::Time Now(const CommandContext& ctx) { return LoopTime(ctx.store->clock()); }

// The bytes of the request being run: the caller's argv-mem, as Redis
// counts it.
uint64_t ArgBytes(CommandArgs args) {
  uint64_t n = 0;
  for (absl::string_view a : args) n += a.size();
  return n;
}

// A peer-supplied word echoed in an error: bounded and printable.
std::string Printable(absl::string_view s) {
  std::string out(s.substr(0, 128));
  for (char& ch : out) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(ch))) ch = '?';
  }
  return out;
}

// "on" / "off" (any case) into *on; false for anything else.
bool OnOff(absl::string_view arg, bool* on) {
  *on = CommandIs(arg, "on");
  return *on || CommandIs(arg, "off");
}

// Redis's TYPE values: every kvstore connection is a normal client.
// Returns false (error queued) for an unknown one.
bool ParseType(const CommandContext& ctx, absl::string_view type, ClientFilter* f) {
  if (CommandIs(type, "normal")) return true;
  if (CommandIs(type, "master") || CommandIs(type, "replica") || CommandIs(type, "slave") ||
      CommandIs(type, "pubsub")) {
    f->nobody = true;
    return true;
  }
  ctx.conn->ReplyError(absl::StrCat("ERR Unknown client type '", Printable(type), "'"));
  return false;
}

void Id(const CommandContext& ctx, CommandArgs) {
  ctx.conn->ReplyInteger(static_cast<int64_t>(Self(ctx)->id));
}

void GetName(const CommandContext& ctx, CommandArgs) {
  if (Self(ctx)->name.empty()) return ctx.conn->ReplyNull();
  ctx.conn->ReplyBulk(Self(ctx)->name);
}

void SetName(const CommandContext& ctx, CommandArgs args) {
  if (!ValidClientAttribute(args[2])) return ctx.conn->ReplyError(kBadClientName);
  Change(ctx, [&](ClientEntry& e) { e.name = std::string(args[2]); });
  ctx.conn->ReplyOk();
}

// Figures published first, so the line is this moment's.
void Info(const CommandContext& ctx, CommandArgs args) {
  PublishStats(*ctx.conn, ArgBytes(args));
  ctx.conn->ReplyVerbatim(FormatClientLine(*Self(ctx), Now(ctx)));
}

// [TYPE t] [ID id ...]: ID takes every argument after it.
void List(const CommandContext& ctx, CommandArgs args) {
  ClientFilter filter;
  for (size_t i = 2; i < args.size();) {
    if (CommandIs(args[i], "TYPE") && i + 1 < args.size()) {
      if (!ParseType(ctx, args[i + 1], &filter)) return;
      i += 2;
    } else if (CommandIs(args[i], "ID") && i + 1 < args.size()) {
      for (++i; i < args.size(); ++i) {
        uint64_t id;
        if (!absl::SimpleAtoi(args[i], &id) || id == 0) {
          return ctx.conn->ReplyError("ERR Invalid client ID");
        }
        filter.ids.push_back(id);
      }
    } else {
      return ctx.conn->ReplyError("ERR syntax error");
    }
  }
  PublishStats(*ctx.conn, ArgBytes(args));
  std::string text;
  ctx.conn->client.registry()->List(filter, Now(ctx), &text);
  ctx.conn->ReplyVerbatim(text);
}

void SetInfo(const CommandContext& ctx, CommandArgs args) {
  const bool lib_name = CommandIs(args[2], "LIB-NAME");
  if (!lib_name && !CommandIs(args[2], "LIB-VER")) {
    return ctx.conn->ReplyError(absl::StrCat("ERR Unrecognized option '", Printable(args[2]), "'"));
  }
  if (!ValidClientAttribute(args[3])) {
    return ctx.conn->ReplyError(absl::StrCat(
        "ERR ", Printable(args[2]), " cannot contain spaces, newlines or special characters."));
  }
  Change(ctx, [&](ClientEntry& e) { (lib_name ? e.lib_name : e.lib_ver) = std::string(args[3]); });
  ctx.conn->ReplyOk();
}

// NO-EVICT and NO-TOUCH: nothing in kvstore evicts clients or keeps an
// LRU, so the setting is only recorded (and shown in the flags).
void NoEvict(const CommandContext& ctx, CommandArgs args) {
  bool on;
  if (!OnOff(args[2], &on)) return ctx.conn->ReplyError("ERR syntax error");
  Change(ctx, [on](ClientEntry& e) { e.no_evict = on; });
  ctx.conn->ReplyOk();
}

void NoTouch(const CommandContext& ctx, CommandArgs args) {
  bool on;
  if (!OnOff(args[2], &on)) return ctx.conn->ReplyError("ERR syntax error");
  Change(ctx, [on](ClientEntry& e) { e.no_touch = on; });
  ctx.conn->ReplyOk();
}

// The filter form's pairs into *f and *skip_self; false (error queued)
// for a bad one.
bool ParseKillFilter(const CommandContext& ctx, CommandArgs args, ClientFilter* f,
                     bool* skip_self) {
  if ((args.size() - 2) % 2 != 0) {
    ctx.conn->ReplyError("ERR syntax error");
    return false;
  }
  for (size_t i = 2; i < args.size(); i += 2) {
    const absl::string_view opt = args[i], value = args[i + 1];
    if (CommandIs(opt, "ID")) {
      uint64_t id;
      if (!absl::SimpleAtoi(value, &id) || id == 0) {
        ctx.conn->ReplyError("ERR client-id should be greater than 0");
        return false;
      }
      f->ids = {id};
    } else if (CommandIs(opt, "ADDR")) {
      f->addr = std::string(value);
    } else if (CommandIs(opt, "LADDR")) {
      f->laddr = std::string(value);
    } else if (CommandIs(opt, "USER")) {
      f->user = std::string(value);
    } else if (CommandIs(opt, "TYPE")) {
      if (!ParseType(ctx, value, f)) return false;
    } else if (CommandIs(opt, "SKIPME") && (CommandIs(value, "yes") || CommandIs(value, "no"))) {
      *skip_self = CommandIs(value, "yes");
    } else {
      ctx.conn->ReplyError("ERR syntax error");
      return false;
    }
  }
  return true;
}

// KILL ip:port (Redis's old form: the caller is not spared, and the answer
// is +OK or an error) or KILL <filter> <value> ... (a count).
void Kill(const CommandContext& ctx, CommandArgs args) {
  const bool old_form = args.size() == 3;
  ClientFilter filter;
  bool skip_self = !old_form;
  if (old_form) {
    filter.addr = std::string(args[2]);
  } else if (!ParseKillFilter(ctx, args, &filter, &skip_self)) {
    return;
  }
  bool self_matched = false;
  const size_t killed =
      ctx.conn->client.registry()->Kill(filter, Self(ctx), skip_self, &self_matched);
  if (old_form && killed == 0) return ctx.conn->ReplyError("ERR No such client");
  if (old_form) {
    ctx.conn->ReplyOk();
  } else {
    ctx.conn->ReplyInteger(static_cast<int64_t>(killed));
  }
  if (self_matched) {
    // Like QUIT: the reply goes out, then the connection closes.
    ctx.conn->close_after_flush = true;
    ctx.conn->reading = false;
  }
}

constexpr absl::string_view kHelp[] = {
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of this connection (null when it has none).",
    "ID",
    "    Return the id of this connection.",
    "INFO",
    "    Return this connection's line of CLIENT LIST.",
    "KILL <ip:port>",
    "    Close the connection from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Close every connection matching all the options:",
    "    * ID <client-id>",
    "    * ADDR <ip:port>        (the client's address)",
    "    * LADDR <ip:port>       (the address it connected to)",
    "    * USER <username>",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "    * SKIPME (YES|NO)       (spare this connection; default yes)",
    "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <client-id> [...]]",
    "    Return one line per connection of the server.",
    "NO-EVICT (ON|OFF)",
    "    Accepted; kvstore never evicts clients.",
    "NO-TOUCH (ON|OFF)",
    "    Accepted; kvstore keeps no LRU to spare.",
    "SETINFO (LIB-NAME|LIB-VER) <value>",
    "    Record the client library's name or version (shown by LIST).",
    "SETNAME <name>",
    "    Name this connection (an empty name removes it).",
    "HELP",
    "    Print this help.",
};

void Help(const CommandContext& ctx, CommandArgs) {
  ctx.conn->ReplyArrayHeader(sizeof(kHelp) / sizeof(kHelp[0]));
  for (absl::string_view line : kHelp) ctx.conn->ReplySimple(line);
}

using P = auth::Permission;

// One row per subcommand. `name` is lower case and static (NoteSubcommand
// keeps the pointer); min/max count the whole request, CLIENT included,
// as Redis's arities do.
struct Subcommand {
  const char* name;
  size_t min_args;
  size_t max_args;
  P permission;
  CommandHandler run;
};

constexpr Subcommand kSubcommands[] = {
    {"id", 2, 2, P::kSession, Id},
    {"getname", 2, 2, P::kSession, GetName},
    {"setname", 3, 3, P::kSession, SetName},
    {"info", 2, 2, P::kSession, Info},
    {"setinfo", 4, 4, P::kSession, SetInfo},
    {"list", 2, kAnyArgs, P::kAdmin, List},
    {"kill", 3, kAnyArgs, P::kAdmin, Kill},
    {"no-evict", 3, 3, P::kAdmin, NoEvict},
    {"no-touch", 3, 3, P::kSession, NoTouch},
    {"help", 2, 2, P::kSession, Help},
};

}  // namespace

bool ValidClientAttribute(absl::string_view name) {
  for (char ch : name) {
    if (ch < '!' || ch > '~') return false;
  }
  return true;
}

// As Redis: the subcommand is looked up first, then its arity, then the
// caller's permission.
void ClientCommand(const CommandContext& ctx, CommandArgs args) {
  const Subcommand* sub = nullptr;
  for (const Subcommand& row : kSubcommands) {
    if (CommandIs(args[1], row.name)) sub = &row;
  }
  if (sub == nullptr) {
    return ctx.conn->ReplyError(
        absl::StrCat("ERR unknown subcommand '", Printable(args[1]), "'. Try CLIENT HELP."));
  }
  if (args.size() < sub->min_args || args.size() > sub->max_args) {
    return ctx.conn->ReplyError(
        absl::StrCat("ERR wrong number of arguments for 'client|", sub->name, "' command"));
  }
  if (!RequirePermission(ctx, sub->permission, absl::StrCat("client|", sub->name))) return;
  NoteSubcommand(*ctx.conn, sub->name);
  // Only a Connection built without a registry (a unit test's) has none.
  if (Self(ctx) == nullptr && sub->run != Help) {
    return ctx.conn->ReplyError("ERR this connection is not registered with the port");
  }
  sub->run(ctx, args);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
