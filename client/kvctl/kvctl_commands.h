// Copyright 2026 The kvstore Authors.
//
// The handlers of kvctl's key-value commands: put, get, del, exists, scan
// and stat (bench has its own, kvctl_bench_command.h). Each has the
// CommandFn signature: it gets the Context and its positional arguments
// (count already checked against the command table), connects, does its
// one job, reports any error on stderr and returns the exit code
// (kvctl_io.h). Each connects its own client and closes it on return.
//
// Thread safety: call from main's thread only; they read flags and write
// to stdout/stderr.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_COMMANDS_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_COMMANDS_H_

#include <string>
#include <vector>

#include "client/kvctl/kvctl_context.h"

namespace kvstore {
namespace client {
namespace kvctl {

// put KEY [VALUE]: stores VALUE, the file named by --file, or stdin (when
// VALUE is "-", or omitted and stdin is not a terminal). Usage error for
// both VALUE and --file, an empty --file, or no value source at all.
int RunPut(const Context& context, const std::vector<std::string>& args);

// get KEY: writes the value to stdout byte for byte, plus a newline when
// stdout is a terminal. kExitNotFound if the key does not exist.
int RunGet(const Context& context, const std::vector<std::string>& args);

// del KEY: deletes the key. kExitNotFound if it did not exist.
int RunDel(const Context& context, const std::vector<std::string>& args);

// exists KEY: prints "1" or "0"; exits kExitOk or kExitNotFound to match.
int RunExists(const Context& context, const std::vector<std::string>& args);
// ttl KEY: milliseconds left, -1 without an expiry, -2 (exit 1) when absent.
int RunTtl(const Context& context, const std::vector<std::string>& args);
// expire KEY DURATION: 1 when set, 0 (exit 1) when the key is absent.
int RunExpire(const Context& context, const std::vector<std::string>& args);
// persist KEY: 1 when an expiry was removed, 0 otherwise.
int RunPersist(const Context& context, const std::vector<std::string>& args);

// scan: prints every key starting with --prefix, one per line, paging
// --count keys at a time. Usage error for --count 0; an error if the
// server's cursor stops advancing.
int RunScan(const Context& context, const std::vector<std::string>& args);

// stat: prints the server's info and counters and this client's metrics
// (FormatStat(), text or --json).
int RunStat(const Context& context, const std::vector<std::string>& args);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_COMMANDS_H_
