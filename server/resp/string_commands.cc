// Copyright 2026 The kvstore Authors.

#include "server/resp/string_commands.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp.h"
#include "server/resp/cluster_routing.h"
#include "server/resp/command_args.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

using resp::CommandIs;
using Action = KeyUpdate::Action;

void ReplyInvalid(const CommandContext& ctx, absl::string_view msg) {
  ctx.conn->ReplyStatus(absl::InvalidArgumentError(msg));
}

// Key and value limits, then routing as a write; false when a reply was
// queued.
bool CheckWrite(const CommandContext& ctx, absl::string_view key, uint64_t value_len = 0) {
  absl::Status s = ctx.store->limits().CheckKey(key);
  if (s.ok()) s = ctx.store->limits().CheckValueLength(value_len);
  if (!s.ok()) {
    ctx.conn->ReplyStatus(s);
    return false;
  }
  return RouteKey(ctx.options->cluster, ctx.conn, key, /*write=*/true);
}

// Runs `decide` on `key` through KvStore::Update, counts the write and
// queues the store's error if it fails. Returns whether it succeeded (the
// caller then queues the command's own reply).
bool RunUpdate(const CommandContext& ctx, absl::string_view key, UpdateFn decide) {
  const absl::Time start = absl::Now();
  const absl::Status s = ctx.store->Update(ctx.writer, key, decide);
  ctx.counters->put.requests->Increment();
  ctx.counters->put.duration->Observe(absl::Now() - start);
  if (!s.ok()) {
    ReplyStoreStatus(ctx.options->cluster, ctx.conn, s);
    return false;
  }
  return true;
}

KeyUpdate Write(absl::string_view value, uint64_t expires_at_ms) {
  KeyUpdate u;
  u.action = Action::kWrite;
  u.value = {value};
  u.expires_at_ms = expires_at_ms;
  return u;
}

KeyUpdate Delete() {
  KeyUpdate u;
  u.action = Action::kDelete;
  return u;
}

// A write with an expiry time that has already passed deletes the key
// instead (Redis: SET ... PXAT <past> leaves no key).
KeyUpdate WriteOrDelete(absl::string_view value, int64_t expires_at_ms, int64_t now_ms) {
  if (expires_at_ms != 0 && expires_at_ms <= now_ms) return Delete();
  return Write(value, static_cast<uint64_t>(expires_at_ms));
}

// The old value of GETSET/SET GET/GETDEL: copied, since the reply is queued
// after the update has released the entry.
void ReplyOld(const CommandContext& ctx, const std::optional<std::string>& old) {
  if (old) {
    ctx.conn->ReplyBulk(*old);
  } else {
    ctx.conn->ReplyNull();
  }
}

}  // namespace

// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT ts | PXAT ms | KEEPTTL].
void SetCommand(const CommandContext& ctx, CommandArgs args) {
  const int64_t now = ctx.store->NowMs();
  auto opts = ParseExpiryOptions(args.data() + 3, args.size() - 3, /*set=*/true, now, "set");
  if (!opts.ok()) return ctx.conn->ReplyStatus(opts.status());
  if (!CheckWrite(ctx, args[1], args[2].size())) return;
  bool written = false;
  std::optional<std::string> old;
  const bool ok =
      RunUpdate(ctx, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        if (opts->get && cur.exists) old.emplace(cur.value);
        if ((opts->nx && cur.exists) || (opts->xx && !cur.exists)) return KeyUpdate();
        written = true;
        const int64_t at = opts->keepttl ? static_cast<int64_t>(cur.expires_at_ms)
                                         : opts->expires_at_ms.value_or(0);
        return WriteOrDelete(args[2], at, now);
      });
  if (!ok) return;
  if (opts->get) return ReplyOld(ctx, old);
  if (written) return ctx.conn->ReplyOk();
  ctx.conn->ReplyNull();
}

// SETNX key value: 1 when it set the key, 0 when the key existed.
void SetNxCommand(const CommandContext& ctx, CommandArgs args) {
  if (!CheckWrite(ctx, args[1], args[2].size())) return;
  bool written = false;
  if (!RunUpdate(ctx, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        if (cur.exists) return KeyUpdate();
        written = true;
        return Write(args[2], 0);
      })) {
    return;
  }
  ctx.conn->ReplyInteger(written ? 1 : 0);
}

// SETEX key seconds value / PSETEX key milliseconds value.
void SetExCommand(const CommandContext& ctx, CommandArgs args) {
  const bool ms = CommandIs(args[0], "PSETEX");
  auto at = ExpiryFromArg(args[2], ms ? ExpiryUnit::kMilliseconds : ExpiryUnit::kSeconds,
                          /*absolute=*/false, ctx.store->NowMs(), /*positive=*/true, args[0]);
  if (!at.ok()) return ctx.conn->ReplyStatus(at.status());
  if (!CheckWrite(ctx, args[1], args[3].size())) return;
  if (!RunUpdate(ctx, args[1], [&](const CurrentValue&) -> absl::StatusOr<KeyUpdate> {
        return Write(args[3], static_cast<uint64_t>(*at));
      })) {
    return;
  }
  ctx.conn->ReplyOk();
}

// GETSET key value: the old value (or null); the key loses its expiry.
void GetSetCommand(const CommandContext& ctx, CommandArgs args) {
  if (!CheckWrite(ctx, args[1], args[2].size())) return;
  std::optional<std::string> old;
  if (!RunUpdate(ctx, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        if (cur.exists) old.emplace(cur.value);
        return Write(args[2], 0);
      })) {
    return;
  }
  ReplyOld(ctx, old);
}

// GETDEL key: the value (or null), and the key is deleted.
void GetDelCommand(const CommandContext& ctx, CommandArgs args) {
  if (!CheckWrite(ctx, args[1])) return;
  std::optional<std::string> old;
  if (!RunUpdate(ctx, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        if (cur.exists) old.emplace(cur.value);
        return Delete();
      })) {
    return;
  }
  ReplyOld(ctx, old);
}

// GETEX key [EX s | PX ms | EXAT ts | PXAT ms | PERSIST]: the value, and
// its expiry changed as asked (no option: unchanged, nothing written).
void GetExCommand(const CommandContext& ctx, CommandArgs args) {
  const int64_t now = ctx.store->NowMs();
  auto opts = ParseExpiryOptions(args.data() + 2, args.size() - 2, /*set=*/false, now, "getex");
  if (!opts.ok()) return ctx.conn->ReplyStatus(opts.status());
  if (!CheckWrite(ctx, args[1])) return;
  std::optional<std::string> old;
  if (!RunUpdate(ctx, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        if (!cur.exists) return KeyUpdate();
        old.emplace(cur.value);
        if (opts->persist) {
          return cur.expires_at_ms == 0 ? KeyUpdate() : Write(cur.value, 0);
        }
        if (!opts->expires_at_ms) return KeyUpdate();
        return WriteOrDelete(cur.value, *opts->expires_at_ms, now);
      })) {
    return;
  }
  ReplyOld(ctx, old);
}

// APPEND key value: the new length; the key keeps its expiry.
void AppendCommand(const CommandContext& ctx, CommandArgs args) {
  if (!CheckWrite(ctx, args[1], args[2].size())) return;
  uint64_t length = 0;
  if (!RunUpdate(ctx, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        length = cur.value.size() + args[2].size();
        if (absl::Status s = ctx.store->limits().CheckValueLength(length); !s.ok()) return s;
        KeyUpdate u;
        u.action = Action::kWrite;
        u.value = {cur.value, args[2]};
        u.expires_at_ms = cur.expires_at_ms;
        return u;
      })) {
    return;
  }
  ctx.conn->ReplyInteger(static_cast<int64_t>(length));
}

// STRLEN key: the value's length, 0 when absent.
void StrLenCommand(const CommandContext& ctx, CommandArgs args) {
  if (absl::Status s = ctx.store->limits().CheckKey(args[1]); !s.ok()) {
    return ctx.conn->ReplyStatus(s);
  }
  if (!RouteKey(ctx.options->cluster, ctx.conn, args[1], /*write=*/false)) return;
  auto info = ctx.store->Stat(args[1]);
  if (info.ok()) return ctx.conn->ReplyInteger(static_cast<int64_t>(info->value_len));
  if (absl::IsNotFound(info.status())) return ctx.conn->ReplyInteger(0);
  ctx.conn->ReplyStatus(info.status());
}

// INCR key, DECR key, INCRBY key n, DECRBY key n: the new value; an absent
// key counts as 0; the key keeps its expiry.
void IncrCommand(const CommandContext& ctx, CommandArgs args) {
  int64_t delta = CommandIs(args[0], "DECR") ? -1 : 1;
  const bool by = args.size() == 3;
  if (by && !ParseStrictInt64(args[2], &delta)) return ReplyInvalid(ctx, kNotInteger);
  if (CommandIs(args[0], "DECRBY")) {
    if (delta == std::numeric_limits<int64_t>::min()) {
      return ReplyInvalid(ctx, "decrement would overflow");
    }
    delta = -delta;
  }
  if (!CheckWrite(ctx, args[1])) return;
  int64_t result = 0;
  std::string text;
  if (!RunUpdate(ctx, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        int64_t n = 0;
        if (cur.exists && !ParseStrictInt64(cur.value, &n)) {
          return absl::InvalidArgumentError(kNotInteger);
        }
        if ((delta > 0 && n > std::numeric_limits<int64_t>::max() - delta) ||
            (delta < 0 && n < std::numeric_limits<int64_t>::min() - delta)) {
          return absl::InvalidArgumentError("increment or decrement would overflow");
        }
        result = n + delta;
        text = absl::StrCat(result);
        return Write(text, cur.expires_at_ms);
      })) {
    return;
  }
  ctx.conn->ReplyInteger(result);
}

// INCRBYFLOAT key increment: the new value as a bulk string, in long double
// precision and Redis's format; the key keeps its expiry.
void IncrByFloatCommand(const CommandContext& ctx, CommandArgs args) {
  long double incr;
  if (!ParseStrictLongDouble(args[2], &incr)) return ReplyInvalid(ctx, kNotFloat);
  if (!CheckWrite(ctx, args[1])) return;
  std::string text;
  if (!RunUpdate(ctx, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        long double v = 0;
        if (cur.exists && !ParseStrictLongDouble(cur.value, &v)) {
          return absl::InvalidArgumentError(kNotFloat);
        }
        v += incr;
        if (std::isnan(v) || std::isinf(v)) {
          return absl::InvalidArgumentError("increment would produce NaN or Infinity");
        }
        text = FormatLongDouble(v);
        return Write(text, cur.expires_at_ms);
      })) {
    return;
  }
  ctx.conn->ReplyBulk(text);
}

// MSETNX key value [key value ...]: 1 when every key was absent and all
// were set, 0 (nothing set) when any existed. All keys are locked at once.
void MSetNxCommand(const CommandContext& ctx, CommandArgs args) {
  std::vector<absl::string_view> keys;
  for (size_t i = 1; i < args.size(); i += 2) {
    absl::Status s = ctx.store->limits().CheckKey(args[i]);
    if (s.ok()) s = ctx.store->limits().CheckValueLength(args[i + 1].size());
    if (!s.ok()) return ctx.conn->ReplyStatus(s);
    keys.push_back(args[i]);
  }
  if (!RouteKeys(ctx.options->cluster, ctx.conn, args, 1, 2, /*write=*/true)) return;
  bool written = false;
  absl::Status s = ctx.store->UpdateKeys(
      ctx.writer, keys, [&](absl::Span<const CurrentValue> cur, std::vector<KeyUpdate>* out) {
        for (const CurrentValue& c : cur) {
          if (c.exists) return absl::OkStatus();
        }
        for (size_t i = 0; i < cur.size(); ++i) out->push_back(Write(args[2 + 2 * i], 0));
        written = true;
        return absl::OkStatus();
      });
  ctx.counters->put.requests->Increment(keys.size());
  if (!s.ok()) {
    // Keys before the failing one may be written (as MSET).
    return ReplyStoreStatus(ctx.options->cluster, ctx.conn, written ? AfterEarlierKeys(s) : s);
  }
  ctx.conn->ReplyInteger(written ? 1 : 0);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
