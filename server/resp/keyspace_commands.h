// Copyright 2026 The kvstore Authors.
//
// The RESP keyspace commands: expiry (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT
// with NX/XX/GT/LT; TTL, PTTL, EXPIRETIME, PEXPIRETIME; PERSIST), TYPE,
// TOUCH, RANDOMKEY, KEYS, FLUSHALL and FLUSHDB, with Redis 7's replies.
//
// An expiry change rewrites the entry with the same value and the new
// time, through KvStore::Update() (atomic, replicated). An expiry time at
// or before now deletes the key, as Redis does.
//
// KEYS walks the whole index on the loop's thread (as it does in Redis:
// slow on a large store, for debugging; SCAN is the way to iterate), and
// is refused when its reply would pass the connection's output hard limit.
// FLUSHALL/FLUSHDB delete key by key through the store, so in cluster mode
// they delete (and replicate the delete of) the keys this node leads and
// leave the rest, as each Redis Cluster primary flushes only its own.
//
// Thread safety: handlers run on the calling thread, a loop's or a parking
// worker's (commands.h).

#ifndef KVSTORE_SERVER_RESP_KEYSPACE_COMMANDS_H_
#define KVSTORE_SERVER_RESP_KEYSPACE_COMMANDS_H_

#include "server/resp/commands.h"

namespace kvstore {
namespace server {
namespace resp_internal {

void ExpireCommand(const CommandContext& ctx, CommandArgs args);  // [P]EXPIRE[AT]
void TtlCommand(const CommandContext& ctx, CommandArgs args);     // [P]TTL, [P]EXPIRETIME
void PersistCommand(const CommandContext& ctx, CommandArgs args);
void TypeCommand(const CommandContext& ctx, CommandArgs args);
void TouchCommand(const CommandContext& ctx, CommandArgs args);
void RandomKeyCommand(const CommandContext& ctx, CommandArgs args);
void KeysCommand(const CommandContext& ctx, CommandArgs args);
void FlushCommand(const CommandContext& ctx, CommandArgs args);  // FLUSHALL, FLUSHDB

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_KEYSPACE_COMMANDS_H_
