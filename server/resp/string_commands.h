// Copyright 2026 The kvstore Authors.
//
// The RESP string commands that read and write one value, beyond plain
// GET/SET/MSET (commands.cc): SET with its options, SETNX, SETEX, PSETEX,
// GETSET, GETDEL, GETEX, APPEND, STRLEN, INCR, DECR, INCRBY, DECRBY,
// INCRBYFLOAT and MSETNX, with Redis 7's replies and error texts.
//
// Each read-modify-write runs through KvStore::Update(), under the key's
// write lock, so it is atomic with respect to every other writer (RESP,
// gRPC, RDMA commits) and replicated like any write in cluster mode. An
// expired key is absent to all of them. A command that keeps the key's
// expiry (APPEND, INCR...) writes the new value with the old expiry time.
//
// Thread safety: handlers run on the calling thread, a loop's or a parking
// worker's (commands.h).

#ifndef KVSTORE_SERVER_RESP_STRING_COMMANDS_H_
#define KVSTORE_SERVER_RESP_STRING_COMMANDS_H_

#include "server/resp/commands.h"

namespace kvstore {
namespace server {
namespace resp_internal {

void SetCommand(const CommandContext& ctx, CommandArgs args);
void SetNxCommand(const CommandContext& ctx, CommandArgs args);
void SetExCommand(const CommandContext& ctx, CommandArgs args);   // SETEX and PSETEX
void GetSetCommand(const CommandContext& ctx, CommandArgs args);  // GETSET
void GetDelCommand(const CommandContext& ctx, CommandArgs args);
void GetExCommand(const CommandContext& ctx, CommandArgs args);
void AppendCommand(const CommandContext& ctx, CommandArgs args);
void StrLenCommand(const CommandContext& ctx, CommandArgs args);
void IncrCommand(const CommandContext& ctx, CommandArgs args);  // INCR DECR INCRBY DECRBY
void IncrByFloatCommand(const CommandContext& ctx, CommandArgs args);
void MSetNxCommand(const CommandContext& ctx, CommandArgs args);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_STRING_COMMANDS_H_
