// Copyright 2026 The kvstore Authors.

#include "server/resp/config_command.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp.h"
#include "server/resp/glob.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

using resp::CommandIs;

// Every parameter CONFIG GET reports, with its current value.
std::vector<std::pair<std::string, std::string>> Parameters(const CommandContext& ctx) {
  return {
      {"maxmemory", absl::StrCat(ctx.store->max_memory())},
      {"maxmemory-policy", std::string(PolicyName(ctx.store->eviction_policy()))},
      // Redis's names for what kvstore does not have: no persistence, one
      // database.
      {"appendonly", "no"},
      {"save", ""},
      {"databases", "1"},
  };
}

void Get(const CommandContext& ctx, CommandArgs args) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : Parameters(ctx)) {
    for (size_t i = 2; i < args.size(); ++i) {
      // Parameter names are matched case-insensitively, as Redis does.
      if (GlobMatch(absl::AsciiStrToLower(args[i]), p.first)) {
        out.push_back(p);
        break;
      }
    }
  }
  ctx.conn->ReplyMapHeader(out.size());
  for (const auto& [name, value] : out) {
    ctx.conn->ReplyBulk(name);
    ctx.conn->ReplyBulk(value);
  }
}

void Set(const CommandContext& ctx, CommandArgs args) {
  if (args.size() < 4 || (args.size() - 2) % 2 != 0) {
    return ctx.conn->ReplyStatus(
        absl::InvalidArgumentError("wrong number of arguments for 'config|set' command"));
  }
  // Checked all first, then applied: a bad pair changes nothing.
  std::optional<uint64_t> max_memory;
  std::optional<EvictionPolicy> policy;
  for (size_t i = 2; i + 1 < args.size(); i += 2) {
    const absl::string_view name = args[i], value = args[i + 1];
    if (CommandIs(name, "maxmemory")) {
      auto v = ParseMaxMemory(value, ctx.store->pool_bytes());
      if (!v.ok()) {
        return ctx.conn->ReplyStatus(absl::InvalidArgumentError(
            absl::StrCat("CONFIG SET failed (possibly related to argument 'maxmemory') - ",
                         v.status().message())));
      }
      max_memory = *v;
    } else if (CommandIs(name, "maxmemory-policy")) {
      policy = ParsePolicy(value);
      if (!policy) {
        return ctx.conn->ReplyStatus(absl::InvalidArgumentError(
            "CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) "
            "must be one of the following: noeviction, allkeys-lru, allkeys-lfu, volatile-lru, "
            "volatile-lfu, volatile-ttl"));
      }
    } else {
      return ctx.conn->ReplyStatus(absl::InvalidArgumentError(absl::StrCat(
          "Unknown option or number of arguments for CONFIG SET - '", name.substr(0, 64), "'")));
    }
  }
  if (policy) ctx.store->SetEvictionPolicy(*policy);
  if (max_memory) ctx.store->SetMaxMemory(*max_memory);
  ctx.conn->ReplyOk();
}

}  // namespace

void ConfigCommand(const CommandContext& ctx, CommandArgs args) {
  const bool get = args.size() >= 2 && CommandIs(args[1], "GET");
  if (!get) {
    const std::string sub = args.size() >= 2 ? absl::AsciiStrToLower(args[1].substr(0, 32)) : "";
    if (!RequirePermission(ctx, auth::Permission::kAdmin, absl::StrCat("config|", sub))) return;
  }
  if (get && args.size() >= 3) return Get(ctx, args);
  if (args.size() >= 2 && CommandIs(args[1], "SET")) return Set(ctx, args);
  ctx.conn->ReplyStatus(absl::InvalidArgumentError("only CONFIG GET and CONFIG SET are supported"));
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
