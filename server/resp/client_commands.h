// Copyright 2026 The kvstore Authors.
//
// CLIENT, the connection commands client libraries send on connect
// (redis-py, go-redis, lettuce, jedis: SETNAME, SETINFO; redis-cli: none),
// and the operator's view of every connection of the port (LIST, KILL).
// Answers and errors are Redis 7's; the subcommands:
//   CLIENT ID                      :<id>, unique on the port, increasing
//   CLIENT SETNAME name            +OK; an empty name clears it;
//                                  -ERR Client names cannot contain spaces,
//                                  newlines or special characters.
//   CLIENT GETNAME                 the name, or null when none
//   CLIENT INFO                    this connection's line (client_registry.h
//                                  FormatClientLine): a bulk string in RESP2,
//                                  a verbatim string in RESP3
//   CLIENT LIST [TYPE t] [ID id..] every connection of the port, one line
//                                  each; TYPE normal lists all, master,
//                                  replica, slave and pubsub none;
//                                  -ERR Unknown client type '<t>',
//                                  -ERR Invalid client ID          (admin)
//   CLIENT SETINFO LIB-NAME|LIB-VER value
//                                  +OK; -ERR Unrecognized option '<attr>',
//                                  -ERR <attr> cannot contain spaces,
//                                  newlines or special characters.
//   CLIENT NO-EVICT on|off         +OK (kvstore evicts no clients; shown as
//                                  flag e)                          (admin)
//   CLIENT NO-TOUCH on|off         +OK (no LRU to spare; flag T)
//   CLIENT KILL ip:port            +OK, or -ERR No such client      (admin)
//   CLIENT KILL <filter> <value> ...
//                                  :<connections closed>; filters ID, ADDR,
//                                  LADDR, USER, TYPE, SKIPME (yes: the
//                                  caller is spared, the default);
//                                  -ERR client-id should be greater than 0,
//                                  -ERR syntax error                (admin)
//   CLIENT HELP                    the lines of help, as simple strings
//   anything else                  -ERR unknown subcommand '<x>'. Try CLIENT HELP.
// A subcommand with the wrong number of arguments gets
// "-ERR wrong number of arguments for 'client|<sub>' command", and one the
// user's role does not allow "-NOPERM ... 'client|<sub>' command": LIST,
// KILL and NO-EVICT need the admin permission (as Redis's @admin).
// A killed connection on another loop is closed by its own loop, woken at
// once (client_registry.h); the caller itself, when it matches with SKIPME
// no (or in the old ip:port form), is closed after its reply.
//
// Thread safety: as the command table (commands.h): on the loop's thread;
// the registry does its own locking.

#ifndef KVSTORE_SERVER_RESP_CLIENT_COMMANDS_H_
#define KVSTORE_SERVER_RESP_CLIENT_COMMANDS_H_

#include "absl/strings/string_view.h"
#include "server/resp/commands.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// Redis's refusal of a client name (CLIENT SETNAME, HELLO SETNAME).
inline constexpr absl::string_view kBadClientName =
    "ERR Client names cannot contain spaces, newlines or special characters.";

// Whether `name` may be a client name (or a SETINFO value): printable
// ASCII without spaces, so a CLIENT LIST line still splits on spaces.
bool ValidClientAttribute(absl::string_view name);

// The CLIENT row of the command table.
void ClientCommand(const CommandContext& ctx, CommandArgs args);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_CLIENT_COMMANDS_H_
