// Copyright 2026 The kvstore Authors.

#include "server/resp/keyspace_commands.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp.h"
#include "server/resp/cluster_routing.h"
#include "server/resp/command_args.h"
#include "server/resp/glob.h"
#include "server/routing/cluster_state.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

using resp::CommandIs;
using Action = KeyUpdate::Action;

void ReplyInvalid(const CommandContext& ctx, absl::string_view msg) {
  ctx.conn->ReplyStatus(absl::InvalidArgumentError(msg));
}

bool CheckKey(const CommandContext& ctx, absl::string_view key, bool write) {
  if (absl::Status s = ctx.store->limits().CheckKey(key); !s.ok()) {
    ctx.conn->ReplyStatus(s);
    return false;
  }
  return RouteKey(ctx.options->cluster, ctx.conn, key, write);
}

// EXPIRE's conditions. A key without an expiry counts as one infinitely
// far away (Redis: GT never applies to it, LT always does).
struct Conditions {
  bool nx = false, xx = false, gt = false, lt = false;
  bool Allow(uint64_t current, int64_t when) const {
    if (nx && current != 0) return false;
    if (xx && current == 0) return false;
    if (gt && (current == 0 || when <= static_cast<int64_t>(current))) return false;
    if (lt && current != 0 && when >= static_cast<int64_t>(current)) return false;
    return true;
  }
};

}  // namespace

// EXPIRE key seconds [NX|XX|GT|LT], PEXPIRE (ms), EXPIREAT (unix s),
// PEXPIREAT (unix ms): 1 when the expiry was set (or the key deleted for a
// time already past), 0 when the key is absent or a condition failed.
void ExpireCommand(const CommandContext& ctx, CommandArgs args) {
  const bool ms = CommandIs(args[0], "PEXPIRE") || CommandIs(args[0], "PEXPIREAT");
  const bool absolute = CommandIs(args[0], "EXPIREAT") || CommandIs(args[0], "PEXPIREAT");
  Conditions c;
  for (size_t i = 3; i < args.size(); ++i) {
    if (CommandIs(args[i], "NX")) {
      c.nx = true;
    } else if (CommandIs(args[i], "XX")) {
      c.xx = true;
    } else if (CommandIs(args[i], "GT")) {
      c.gt = true;
    } else if (CommandIs(args[i], "LT")) {
      c.lt = true;
    } else {
      return ReplyInvalid(ctx, absl::StrCat("Unsupported option ", args[i]));
    }
  }
  if (c.nx && (c.xx || c.gt || c.lt)) {
    return ReplyInvalid(ctx, "NX and XX, GT or LT options at the same time are not compatible");
  }
  if (c.gt && c.lt) {
    return ReplyInvalid(ctx, "GT and LT options at the same time are not compatible");
  }
  const int64_t now = ctx.store->NowMs();
  auto when = ExpiryFromArg(args[2], ms ? ExpiryUnit::kMilliseconds : ExpiryUnit::kSeconds,
                            absolute, now, /*positive=*/false, args[0]);
  if (!when.ok()) return ctx.conn->ReplyStatus(when.status());
  if (!CheckKey(ctx, args[1], /*write=*/true)) return;
  bool applied = false;
  const absl::Status s = ctx.store->Update(
      ctx.writer, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        if (!cur.exists || !c.Allow(cur.expires_at_ms, *when)) return KeyUpdate();
        applied = true;
        KeyUpdate u;
        if (*when <= now) {
          u.action = Action::kDelete;
          return u;
        }
        u.action = Action::kWrite;
        u.value = {cur.value};
        u.expires_at_ms = static_cast<uint64_t>(*when);
        return u;
      });
  if (!s.ok()) return ReplyStoreStatus(ctx.options->cluster, ctx.conn, s);
  ctx.conn->ReplyInteger(applied ? 1 : 0);
}

// TTL / PTTL: time left in seconds (rounded to nearest) or ms; EXPIRETIME /
// PEXPIRETIME: the unix time. -2 for an absent key, -1 for no expiry.
void TtlCommand(const CommandContext& ctx, CommandArgs args) {
  if (!CheckKey(ctx, args[1], /*write=*/false)) return;
  auto info = ctx.store->Stat(args[1]);
  if (absl::IsNotFound(info.status())) return ctx.conn->ReplyInteger(-2);
  if (!info.ok()) return ctx.conn->ReplyStatus(info.status());
  if (info->expires_at_ms == 0) return ctx.conn->ReplyInteger(-1);
  const int64_t at = static_cast<int64_t>(info->expires_at_ms);
  if (CommandIs(args[0], "EXPIRETIME")) return ctx.conn->ReplyInteger(at / 1000);
  if (CommandIs(args[0], "PEXPIRETIME")) return ctx.conn->ReplyInteger(at);
  const int64_t left = std::max<int64_t>(0, at - ctx.store->NowMs());
  ctx.conn->ReplyInteger(CommandIs(args[0], "PTTL") ? left : (left + 500) / 1000);
}

// PERSIST key: 1 when an expiry was removed, 0 when absent or none.
void PersistCommand(const CommandContext& ctx, CommandArgs args) {
  if (!CheckKey(ctx, args[1], /*write=*/true)) return;
  bool applied = false;
  const absl::Status s = ctx.store->Update(
      ctx.writer, args[1], [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
        if (!cur.exists || cur.expires_at_ms == 0) return KeyUpdate();
        applied = true;
        KeyUpdate u;
        u.action = Action::kWrite;
        u.value = {cur.value};
        return u;
      });
  if (!s.ok()) return ReplyStoreStatus(ctx.options->cluster, ctx.conn, s);
  ctx.conn->ReplyInteger(applied ? 1 : 0);
}

// TYPE key: "string" (the only type) or "none".
void TypeCommand(const CommandContext& ctx, CommandArgs args) {
  if (!CheckKey(ctx, args[1], /*write=*/false)) return;
  ctx.conn->ReplySimple(ctx.store->Exists(args[1]) ? "string" : "none");
}

// TOUCH key [key ...]: how many exist. Each one that does counts as a read
// for eviction, as in Redis (even for a CLIENT NO-TOUCH client there).
void TouchCommand(const CommandContext& ctx, CommandArgs args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (absl::Status s = ctx.store->limits().CheckKey(args[i]); !s.ok()) {
      return ctx.conn->ReplyStatus(s);
    }
  }
  if (!RouteKeys(ctx.options->cluster, ctx.conn, args, 1, 1, /*write=*/false)) return;
  int64_t n = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    if (!ctx.store->Exists(args[i])) continue;
    ++n;
    if (std::optional<layout::Slot> slot = ctx.store->Locate(args[i])) {
      ctx.store->NoteRead(slot->offset);
    }
  }
  ctx.conn->ReplyInteger(n);
}

// RANDOMKEY: a key from a random place in the index (null when empty).
// Walks on from a random bucket, a bounded number of buckets per call
// step, until it finds a key that has not expired or has seen every bucket.
void RandomKeyCommand(const CommandContext& ctx, CommandArgs) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t buckets = ctx.store->index().geometry().bucket_count;
  uint64_t cursor = buckets == 0 ? 0 : rng() % buckets;
  uint64_t seen = 0;
  std::vector<std::string> keys;
  while (ctx.store->size() > 0 && seen < buckets) {
    keys.clear();
    constexpr uint64_t kStep = 1024;
    const uint64_t next = ctx.store->Scan(cursor, 16, "", &keys, kStep);
    seen += next == 0 ? buckets - cursor : next - cursor;
    // From a random one of the page's keys on, so that keys sharing a
    // bucket are picked alike.
    const size_t start = keys.empty() ? 0 : rng() % keys.size();
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string& k = keys[(start + i) % keys.size()];
      if (ctx.store->Exists(k)) return ctx.conn->ReplyBulk(k);
    }
    cursor = next;  // 0: wrapped to the start
  }
  ctx.conn->ReplyNull();
}

// KEYS pattern: every key that matches and has not expired.
void KeysCommand(const CommandContext& ctx, CommandArgs args) {
  const absl::string_view pattern = args[1];
  const std::string prefix = GlobLiteralPrefix(pattern);
  std::vector<std::string> keys, page;
  uint64_t bytes = 0, cursor = 0;
  const uint64_t hard = ctx.options->limits.output_hard_limit;
  do {
    page.clear();
    cursor = ctx.store->Scan(cursor, 1024, prefix, &page);
    for (std::string& k : page) {
      if (!GlobMatch(pattern, k) || !ctx.store->Exists(k)) continue;
      bytes += k.size() + 16;
      keys.push_back(std::move(k));
    }
    if (hard != 0 && ctx.conn->out_bytes + bytes > hard) {
      ctx.counters->limit_output_hard->Increment();
      return ReplyInvalid(ctx, absl::StrCat("KEYS reply exceeds resp_output_hard_limit (", hard,
                                            " bytes per connection); use SCAN"));
    }
  } while (cursor != 0);
  ctx.conn->ReplyArrayHeader(keys.size());
  for (const std::string& k : keys) ctx.conn->ReplyBulk(k);
}

// FLUSHALL / FLUSHDB [ASYNC|SYNC]: deletes every key this node may write.
// ASYNC is accepted and done as SYNC: a delete only unpublishes a slot (the
// memory returns through the cleaner either way), so there is no freeing
// work to push to the background.
void FlushCommand(const CommandContext& ctx, CommandArgs args) {
  if (args.size() > 2 ||
      (args.size() == 2 && !CommandIs(args[1], "ASYNC") && !CommandIs(args[1], "SYNC"))) {
    return ReplyInvalid(ctx, "syntax error");
  }
  std::vector<std::string> page;
  uint64_t cursor = 0;
  int64_t deleted = 0;
  do {
    page.clear();
    cursor = ctx.store->Scan(cursor, 1024, "", &page);
    for (const std::string& k : page) {
      // A key of a slot another node leads (a copy held as its backup) is
      // not this node's to flush: its primary replicates its own deletes.
      // Checked here, not left to the write hook's refusal, so that a node
      // between maps or without a replicator flushes no copy either.
      const ClusterState* cluster = ctx.options->cluster;
      if (cluster != nullptr && cluster->RouteKey(k).kind != Route::Kind::kServe) continue;
      deleted += ctx.store->Delete(k).ok();
    }
  } while (cursor != 0);
  ctx.counters->del.requests->Increment(deleted);
  ctx.conn->ReplyOk();
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
