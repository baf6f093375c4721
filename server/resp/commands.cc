// Copyright 2026 The kvstore Authors.

#include "server/resp/commands.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp.h"
#include "server/resp/auth_commands.h"
#include "server/resp/client_commands.h"
#include "server/resp/cluster_commands.h"
#include "server/resp/cluster_routing.h"
#include "server/resp/config_command.h"
#include "server/resp/keyspace_commands.h"
#include "server/resp/string_commands.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

using resp::CommandIs;

// "ERR <msg>": the generic Redis error, i.e. an invalid request.
void ReplyInvalid(const CommandContext& ctx, absl::string_view msg) {
  ctx.conn->ReplyStatus(absl::InvalidArgumentError(msg));
}

// --- Data commands -----------------------------------------------------------

// GET key: the value (copied when small, else zero-copy), a null bulk if absent, or the store's
// error (kDataLoss for an entry failing its checksum, kUnavailable if the
// key kept changing under the reader).
void Get(const CommandContext& ctx, CommandArgs args) {
  if (absl::Status s = ctx.store->limits().CheckKey(args[1]); !s.ok()) {
    return ctx.conn->ReplyStatus(s);
  }
  if (!RouteKey(ctx.options->cluster, ctx.conn, args[1], /*write=*/false)) return;
  // The hottest path: one clock pair, and the counter + histogram adds.
  const absl::Time start = absl::Now();
  auto v = ctx.store->Get(args[1]);
  if (v.ok()) {
    ctx.conn->ReplyValue(std::move(*v));
  } else if (v.status().code() == absl::StatusCode::kNotFound) {
    ctx.conn->ReplyNull();
  } else {
    ctx.conn->ReplyStatus(v.status());
  }
  // Misses and errors count as GETs too.
  ctx.counters->get.Record(absl::Now() - start);
}

// DEL/UNLINK (`del`) or EXISTS: the number of keys deleted / present. Every
// key is checked before any is touched, so a bad key changes nothing. In
// cluster mode the keys must share a slot this node serves; a refusal of
// the write hook (the map changed meanwhile) ends a DEL with its error, as
// of unknown effect once an earlier key was deleted (AfterEarlierKeys).
void CountKeys(const CommandContext& ctx, CommandArgs args, bool del) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (absl::Status s = ctx.store->limits().CheckKey(args[i]); !s.ok()) {
      return ctx.conn->ReplyStatus(s);
    }
  }
  if (!RouteKeys(ctx.options->cluster, ctx.conn, args, 1, 1, /*write=*/del)) return;
  const absl::Time start = absl::Now();
  int64_t n = 0;
  absl::Status refused;
  for (size_t i = 1; i < args.size() && refused.ok(); ++i) {
    if (!del) {
      n += ctx.store->Exists(args[i]);
      continue;
    }
    const absl::Status s = ctx.store->Delete(args[i]);
    if (IsClusterRefusal(s)) refused = n > 0 ? AfterEarlierKeys(s) : s;
    n += s.ok();
  }
  if (refused.ok()) {
    ctx.conn->ReplyInteger(n);
  } else {
    ReplyStoreStatus(ctx.options->cluster, ctx.conn, refused);
  }
  if (del) {
    // Every key counts as a delete request; the command is timed once.
    ctx.counters->del.requests->Increment(args.size() - 1);
    ctx.counters->del.duration->Observe(absl::Now() - start);
  }
}

// UNLINK is DEL: deletion never blocks on freeing memory here anyway.
void Del(const CommandContext& ctx, CommandArgs args) { CountKeys(ctx, args, /*del=*/true); }

void Exists(const CommandContext& ctx, CommandArgs args) { CountKeys(ctx, args, /*del=*/false); }

// A null for every key that is missing or invalid (as Redis: MGET never
// fails as a whole, except that a reply too large to queue is refused).
// Every value is pinned first and the reply sized: if it would take the
// connection's queued output past RespLimits::output_hard_limit, the pins
// are dropped and the MGET is refused naming the limit, instead of queueing
// (and pinning) gigabytes for one client.
void MGet(const CommandContext& ctx, CommandArgs args) {
  if (!RouteKeys(ctx.options->cluster, ctx.conn, args, 1, 1, /*write=*/false)) return;
  const absl::Time start = absl::Now();
  std::vector<absl::StatusOr<PinnedValue>> values;
  values.reserve(args.size() - 1);
  uint64_t reply_bytes = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    // An invalid key cannot exist, so it reads as a miss.
    values.push_back(ctx.store->limits().CheckKey(args[i]).ok()
                         ? ctx.store->Get(args[i])
                         : absl::StatusOr<PinnedValue>(absl::NotFoundError("")));
    if (values.back().ok()) reply_bytes += values.back()->value().size() + 16;
  }
  const uint64_t hard = ctx.options->limits.output_hard_limit;
  if (hard != 0 && ctx.conn->out_bytes + reply_bytes > hard) {
    ctx.counters->limit_output_hard->Increment();
    ReplyInvalid(
        ctx, absl::StrCat("MGET reply of ", reply_bytes, " bytes exceeds resp_output_hard_limit (",
                          hard, " bytes per connection); ask for fewer keys"));
  } else {
    ctx.conn->ReplyArrayHeader(values.size());
    for (auto& v : values) {
      if (v.ok()) {
        ctx.conn->ReplyValue(std::move(*v));
      } else {
        ctx.conn->ReplyNull();
      }
    }
  }
  // Every key is a get request (hit or miss, as GET counts both); the
  // command is timed once.
  ctx.counters->get.requests->Increment(args.size() - 1);
  ctx.counters->get.duration->Observe(absl::Now() - start);
}

// Checks every pair before writing any; a write error stops the batch (the
// pairs before it stay written, so a refusal met after them is answered as
// of unknown effect: AfterEarlierKeys).
void MSet(const CommandContext& ctx, CommandArgs args) {
  for (size_t i = 1; i < args.size(); i += 2) {
    absl::Status s = ctx.store->limits().CheckKey(args[i]);
    if (s.ok()) s = ctx.store->limits().CheckValueLength(args[i + 1].size());
    if (!s.ok()) return ctx.conn->ReplyStatus(s);
  }
  if (!RouteKeys(ctx.options->cluster, ctx.conn, args, 1, 2, /*write=*/true)) return;
  // Values are copied from the request buffer (MSET is not streamed; the
  // TCP client pipelines SETs instead for large batches).
  const absl::Time start = absl::Now();
  absl::Status s;
  for (size_t i = 1; i < args.size() && s.ok(); i += 2) {
    s = ctx.store->Put(ctx.writer, args[i], args[i + 1]);
    if (!s.ok() && i > 1) s = AfterEarlierKeys(s);
    ctx.counters->put.requests->Increment();
  }
  if (s.ok()) {
    ctx.conn->ReplyOk();
  } else {
    ReplyStoreStatus(ctx.options->cluster, ctx.conn, s);
  }
  // One observation per MSET, whether it finished or stopped at an error.
  ctx.counters->put.duration->Observe(absl::Now() - start);
}

// The number of live keys in the index (a relaxed count, like Redis's).
void DbSize(const CommandContext& ctx, CommandArgs) {
  ctx.conn->ReplyInteger(static_cast<int64_t>(ctx.store->size()));
}

// SCAN cursor [MATCH prefix*] [COUNT n]; the arity check has made the
// options come in pairs.
void Scan(const CommandContext& ctx, CommandArgs args) {
  uint64_t cursor;
  if (!absl::SimpleAtoi(args[1], &cursor)) return ReplyInvalid(ctx, "invalid cursor");
  std::string prefix;
  uint64_t count = 10;
  for (size_t i = 2; i + 1 < args.size(); i += 2) {
    if (CommandIs(args[i], "MATCH")) {
      absl::string_view pattern = args[i + 1];
      // Only prefix patterns ("user:*", "*") are supported: the index is a
      // hash table, so anything else would be a full scan in disguise.
      if (pattern.empty() || pattern.back() != '*' ||
          pattern.substr(0, pattern.size() - 1).find_first_of("*?[\\") != absl::string_view::npos) {
        return ReplyInvalid(ctx, "only prefix MATCH patterns ending in '*' are supported");
      }
      prefix = std::string(pattern.substr(0, pattern.size() - 1));
    } else if (CommandIs(args[i], "COUNT")) {
      if (!absl::SimpleAtoi(args[i + 1], &count) || count == 0) {
        return ReplyInvalid(ctx, "value is not an integer or out of range");
      }
      // A hint, as in Redis; capped so one call cannot hold the loop long.
      count = std::min<uint64_t>(count, 10000);
    } else {
      return ReplyInvalid(ctx, "syntax error");
    }
  }
  std::vector<std::string> keys;
  // The bucket budget bounds the walk even when nothing matches: Redis
  // allows empty pages, and a non-zero cursor tells the client to go on.
  const uint64_t next =
      ctx.store->Scan(cursor, count, prefix, &keys, ctx.options->limits.scan_max_buckets);
  if (next != 0 && keys.size() < count) ctx.counters->limit_scan_buckets->Increment();
  // [next cursor as a bulk string, [keys...]], as Redis shapes it.
  ctx.conn->ReplyArrayHeader(2);
  ctx.conn->ReplyBulk(absl::StrCat(next));
  // An expired key not yet deleted is left out, as Redis's SCAN does.
  keys.erase(std::remove_if(keys.begin(), keys.end(),
                            [&](const std::string& k) { return !ctx.store->Exists(k); }),
             keys.end());
  ctx.conn->ReplyArrayHeader(keys.size());
  for (const auto& k : keys) ctx.conn->ReplyBulk(k);
}

// --- Connection and tool commands ------------------------------------------

// PING: +PONG; PING msg: msg as a bulk string (Redis's shapes).
void Ping(const CommandContext& ctx, CommandArgs args) {
  if (args.size() == 2) return ctx.conn->ReplyBulk(args[1]);
  ctx.conn->ReplySimple("PONG");
}

// ECHO msg: msg as a bulk string.
void Echo(const CommandContext& ctx, CommandArgs args) { ctx.conn->ReplyBulk(args[1]); }

// INFO [section]: the section is ignored. The server's text when it has one
// (kvserver's includes # Keyspace, from the same snapshot as its other
// numbers); otherwise just the Keyspace section redis-cli and monitoring
// tools look for.
// Every INFO ends with the "# Cluster" section Redis has, which cluster-
// aware tools read to tell cluster mode from single-node mode.
void Info(const CommandContext& ctx, CommandArgs) {
  std::string text = ctx.options->info ? ctx.options->info()
                                       : absl::StrCat("# Keyspace\r\ndb0:keys=", ctx.store->size(),
                                                      ",expires=0\r\n");
  absl::StrAppend(&text, "# Cluster\r\ncluster_enabled:", ctx.options->cluster != nullptr ? 1 : 0,
                  "\r\n");
  ctx.conn->ReplyBulk(text);
}

// One COMMAND entry in Redis 6's shape: name (lower case), arity (negative:
// at least that many), flags, first key, last key, key step, ACL categories.
void ReplyCommandInfo(const CommandContext& ctx, const CommandSpec& spec) {
  ctx.conn->ReplyArrayHeader(7);
  ctx.conn->ReplyBulk(absl::AsciiStrToLower(spec.name));
  ctx.conn->ReplyInteger(spec.max_args == spec.min_args ? static_cast<int64_t>(spec.min_args)
                                                        : -static_cast<int64_t>(spec.min_args));
  ctx.conn->ReplyArrayHeader(spec.flag.empty() ? 0 : 1);
  if (!spec.flag.empty()) ctx.conn->ReplySimple(spec.flag);
  ctx.conn->ReplyInteger(spec.first_key);
  ctx.conn->ReplyInteger(spec.last_key);
  ctx.conn->ReplyInteger(spec.key_step);
  ctx.conn->ReplyArrayHeader(0);
}

void Command(const CommandContext& ctx, CommandArgs args);  // defined after the table

// One keyspace: SELECT 0 is accepted so tools that always send it work.
void Select(const CommandContext& ctx, CommandArgs args) {
  if (args.size() == 2 && args[1] == "0") return ctx.conn->ReplyOk();
  ReplyInvalid(ctx, "only database 0 exists");
}

// Answers, then the loop closes the connection once the reply is flushed.
void Quit(const CommandContext& ctx, CommandArgs) {
  ctx.conn->ReplyOk();
  ctx.conn->close_after_flush = true;
  ctx.conn->reading = false;
}

// Searched in order, so GET, the hot command, is first; the rest follow the
// order of the if-chain this table replaced. A linear scan over ~20 short
// names compares fewer bytes than hashing an upper-cased copy of the name.
using P = auth::Permission;

constexpr CommandSpec kCommands[] = {
    // name      min  max       group  handler  permission  first/last key, step, flag
    {"GET", 2, 2, 1, Get, P::kRead, 1, 1, 1, "readonly"},
    {"SET", 3, kAnyArgs, 1, SetCommand, P::kWrite, 1, 1, 1, "write"},
    {"PING", 1, 2, 1, Ping, P::kSession},
    {"ECHO", 2, 2, 1, Echo, P::kSession},
    {"DEL", 2, kAnyArgs, 1, Del, P::kWrite, 1, -1, 1, "write"},
    {"UNLINK", 2, kAnyArgs, 1, Del, P::kWrite, 1, -1, 1, "write"},
    {"EXISTS", 2, kAnyArgs, 1, Exists, P::kRead, 1, -1, 1, "readonly"},
    {"MGET", 2, kAnyArgs, 1, MGet, P::kRead, 1, -1, 1, "readonly"},
    {"MSET", 3, kAnyArgs, 2, MSet, P::kWrite, 1, -1, 2, "write"},
    {"DBSIZE", 1, kAnyArgs, 1, DbSize, P::kRead, 0, 0, 0, "readonly"},
    {"SCAN", 2, kAnyArgs, 2, Scan, P::kRead, 0, 0, 0, "readonly"},
    {"INFO", 1, kAnyArgs, 1, Info, P::kRead},
    {"COMMAND", 1, kAnyArgs, 1, Command, P::kSession},
    {"HELLO", 1, kAnyArgs, 1, HelloCommand, P::kSession},
    {"CONFIG", 1, kAnyArgs, 1, ConfigCommand, P::kRead},
    {"AUTH", 2, 3, 1, AuthCommand, P::kSession},
    {"SELECT", 1, kAnyArgs, 1, Select, P::kSession},
    {"CLIENT", 2, kAnyArgs, 1, ClientCommand, P::kSession},
    {"QUIT", 1, kAnyArgs, 1, Quit, P::kSession},
    {"CLUSTER", 2, kAnyArgs, 1, ClusterCommand, P::kClusterMap},
    {"READONLY", 1, 1, 1, ReadOnlyCommand, P::kSession},
    {"READWRITE", 1, 1, 1, ReadWriteCommand, P::kSession},
    {"ASKING", 1, 1, 1, AskingCommand, P::kSession},
    {"WAIT", 3, 3, 1, WaitCommand, P::kSession},
    // Strings (string_commands.h).
    {"SETNX", 3, 3, 1, SetNxCommand, P::kWrite, 1, 1, 1, "write"},
    {"SETEX", 4, 4, 1, SetExCommand, P::kWrite, 1, 1, 1, "write"},
    {"PSETEX", 4, 4, 1, SetExCommand, P::kWrite, 1, 1, 1, "write"},
    {"GETSET", 3, 3, 1, GetSetCommand, P::kWrite, 1, 1, 1, "write"},
    {"GETDEL", 2, 2, 1, GetDelCommand, P::kWrite, 1, 1, 1, "write"},
    {"GETEX", 2, kAnyArgs, 1, GetExCommand, P::kWrite, 1, 1, 1, "write"},
    {"APPEND", 3, 3, 1, AppendCommand, P::kWrite, 1, 1, 1, "write"},
    {"STRLEN", 2, 2, 1, StrLenCommand, P::kRead, 1, 1, 1, "readonly"},
    {"INCR", 2, 2, 1, IncrCommand, P::kWrite, 1, 1, 1, "write"},
    {"DECR", 2, 2, 1, IncrCommand, P::kWrite, 1, 1, 1, "write"},
    {"INCRBY", 3, 3, 1, IncrCommand, P::kWrite, 1, 1, 1, "write"},
    {"DECRBY", 3, 3, 1, IncrCommand, P::kWrite, 1, 1, 1, "write"},
    {"INCRBYFLOAT", 3, 3, 1, IncrByFloatCommand, P::kWrite, 1, 1, 1, "write"},
    {"MSETNX", 3, kAnyArgs, 2, MSetNxCommand, P::kWrite, 1, -1, 2, "write"},
    // Keyspace (keyspace_commands.h).
    {"EXPIRE", 3, kAnyArgs, 1, ExpireCommand, P::kWrite, 1, 1, 1, "write"},
    {"PEXPIRE", 3, kAnyArgs, 1, ExpireCommand, P::kWrite, 1, 1, 1, "write"},
    {"EXPIREAT", 3, kAnyArgs, 1, ExpireCommand, P::kWrite, 1, 1, 1, "write"},
    {"PEXPIREAT", 3, kAnyArgs, 1, ExpireCommand, P::kWrite, 1, 1, 1, "write"},
    {"TTL", 2, 2, 1, TtlCommand, P::kRead, 1, 1, 1, "readonly"},
    {"PTTL", 2, 2, 1, TtlCommand, P::kRead, 1, 1, 1, "readonly"},
    {"EXPIRETIME", 2, 2, 1, TtlCommand, P::kRead, 1, 1, 1, "readonly"},
    {"PEXPIRETIME", 2, 2, 1, TtlCommand, P::kRead, 1, 1, 1, "readonly"},
    {"PERSIST", 2, 2, 1, PersistCommand, P::kWrite, 1, 1, 1, "write"},
    {"TYPE", 2, 2, 1, TypeCommand, P::kRead, 1, 1, 1, "readonly"},
    {"TOUCH", 2, kAnyArgs, 1, TouchCommand, P::kRead, 1, -1, 1, "readonly"},
    {"RANDOMKEY", 1, 1, 1, RandomKeyCommand, P::kRead, 0, 0, 0, "readonly"},
    {"KEYS", 2, 2, 1, KeysCommand, P::kRead, 0, 0, 0, "readonly"},
    {"FLUSHALL", 1, 2, 1, FlushCommand, P::kAdmin, 0, 0, 0, "write"},
    {"FLUSHDB", 1, 2, 1, FlushCommand, P::kAdmin, 0, 0, 0, "write"},
};

}  // namespace

namespace {

// COMMAND (every entry), COMMAND COUNT and COMMAND INFO name...: cluster
// clients (redis-py's RedisCluster) find a request's keys from them.
// COMMAND DOCS, which redis-cli asks for to drive its hints, and anything
// else get an empty array: valid, and it keeps redis-cli working.
void Command(const CommandContext& ctx, CommandArgs args) {
  if (args.size() == 1) {
    ctx.conn->ReplyArrayHeader(sizeof(kCommands) / sizeof(kCommands[0]));
    for (const CommandSpec& spec : kCommands) ReplyCommandInfo(ctx, spec);
    return;
  }
  if (CommandIs(args[1], "COUNT")) {
    return ctx.conn->ReplyInteger(sizeof(kCommands) / sizeof(kCommands[0]));
  }
  if (CommandIs(args[1], "INFO")) {
    ctx.conn->ReplyArrayHeader(args.size() - 2);
    for (size_t i = 2; i < args.size(); ++i) {
      const CommandSpec* spec = FindCommand(args[i]);
      if (spec == nullptr) {
        ctx.conn->ReplyNull();
      } else {
        ReplyCommandInfo(ctx, *spec);
      }
    }
    return;
  }
  ctx.conn->ReplyArrayHeader(0);
}

}  // namespace

bool RequirePermission(const CommandContext& ctx, auth::Permission permission,
                       absl::string_view command) {
  if (auth::Allows(ctx.conn->role, permission)) return true;
  ctx.counters->noperm->Increment();
  ctx.conn->ReplyError(absl::StrCat("NOPERM User ", ctx.conn->user,
                                    " has no permissions to run the '", command, "' command"));
  return false;
}

// Case-insensitive, as Redis: "get", "GET" and "Get" are the same command.
const CommandSpec* FindCommand(absl::string_view name) {
  if (name.empty()) return nullptr;
  // Length and first letter (ASCII-folded) first: the full comparison runs
  // for a handful of table entries, not for every name of the same length.
  const char first = absl::ascii_tolower(static_cast<unsigned char>(name[0]));
  for (const CommandSpec& spec : kCommands) {
    if (spec.name.size() != name.size() ||
        absl::ascii_tolower(static_cast<unsigned char>(spec.name[0])) != first) {
      continue;
    }
    if (CommandIs(name, spec.name)) return &spec;
  }
  return nullptr;
}

// Unsigned arithmetic is safe: argc >= min_args is checked first.
bool ArityOk(const CommandSpec& spec, size_t argc) {
  return argc >= spec.min_args && argc <= spec.max_args &&
         (argc - spec.min_args) % spec.arg_group == 0;
}

// Lookup, then arity, then the handler: an unknown command is reported as
// unknown whatever its arguments, as Redis does.
void DispatchCommand(const CommandContext& ctx, CommandArgs args) {
  DispatchCommand(ctx, args, FindCommand(args[0]));
}

void DispatchCommand(const CommandContext& ctx, CommandArgs args, const CommandSpec* spec) {
  const absl::string_view cmd = args[0];
  // Before AUTH nothing but AUTH/HELLO/QUIT is looked at, not even whether
  // the command exists: an unauthenticated client learns nothing.
  if (!ctx.conn->authenticated && !AllowedBeforeAuth(cmd)) {
    ctx.counters->noauth->Increment();
    return ctx.conn->ReplyError(kNoAuthError);
  }
  if (spec == nullptr) {
    // The name is echoed back, so bound it and keep it printable.
    std::string name(cmd.substr(0, 64));
    for (char& ch : name) {
      if (!absl::ascii_isprint(static_cast<unsigned char>(ch))) ch = '?';
    }
    return ReplyInvalid(ctx, absl::StrCat("unknown command '", name, "'"));
  }
  if (!ArityOk(*spec, args.size())) {
    return ReplyInvalid(ctx, absl::StrCat("wrong number of arguments for '",
                                          absl::AsciiStrToLower(cmd), "' command"));
  }
  // The lowercase name is only built for a refusal, not for every command.
  if (!auth::Allows(ctx.conn->role, spec->permission)) {
    RequirePermission(ctx, spec->permission, absl::AsciiStrToLower(spec->name));
    return;
  }
  spec->handler(ctx, args);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
