// Copyright 2026 The kvstore Authors.
//
// CONFIG GET and CONFIG SET on the RESP port: the cache settings that Redis
// lets an operator change at run time (maxmemory, maxmemory-policy), and
// the read-only answers stock tools ask for at start-up (redis-benchmark
// reads save and appendonly). CONFIG GET is a read; every other CONFIG
// subcommand needs the admin role, as in Redis's ACL categories.
//
//   CONFIG GET pattern [pattern ...]  name/value pairs of every parameter
//                                     matching a glob (a map in RESP3);
//                                     an unknown name matches nothing
//   CONFIG SET name value [name value ...]
//                                     all or nothing: every pair is checked
//                                     before any is applied
//   CONFIG RESETSTAT, REWRITE         -ERR ... not supported
//
// Changes are per node and not persisted: --maxmemory/--maxmemory_policy
// set them at start.
//
// Thread safety: runs on the calling loop's thread; the store's setters
// are thread-safe.

#ifndef KVSTORE_SERVER_RESP_CONFIG_COMMAND_H_
#define KVSTORE_SERVER_RESP_CONFIG_COMMAND_H_

#include "server/resp/commands.h"

namespace kvstore {
namespace server {
namespace resp_internal {

void ConfigCommand(const CommandContext& ctx, CommandArgs args);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_CONFIG_COMMAND_H_
