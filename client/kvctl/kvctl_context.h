// Copyright 2026 The kvstore Authors.
//
// What every kvctl command gets (Context) and how it is described in the
// dispatch table (Command), plus the connection step all commands share.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_CONTEXT_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_CONTEXT_H_

#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/kv_client.h"
#include "client/options.h"

namespace kvstore {
namespace client {
namespace kvctl {

// What every command needs from the global flags. A plain value, built by
// ContextFromFlags() and then only read.
struct Context {
  Options options;
  bool json = false;
  // The flags that appeared on the command line (underscore names).
  std::set<std::string> given;
};

// The signature of a command: the context and the positional arguments
// after the command name (their count already checked against the table);
// returns the process exit code (kvctl_io.h), having reported any error.
using CommandFn = int (*)(const Context& context, const std::vector<std::string>& args);

// One row of kvctl's command table (kvctl_main.cc), also the source of the
// Commands section of --help.
struct Command {
  const char* name;
  const char* synopsis;
  const char* help;  // one paragraph; HelpText() wraps it
  size_t min_args;   // positional arguments after the command name
  size_t max_args;
  CommandFn run;
};

// Builds a Context from the global flags (--server, --transport, --timeout,
// --rdma-device, --json, and the security flags --token_file (else
// $KVSTORE_TOKEN_FILE), --tls_ca, --tls_cert, --tls_key, --tls_server_name),
// after absl::ParseCommandLine(). `given` is left empty. kInvalidArgument,
// with a message fit for UsageError(), for an empty --server, an unknown
// --transport, a non-positive --timeout, a token file that cannot be read or
// holds no valid token (naming the file), --tls_cert without --tls_key (or
// the reverse), or a client certificate or server name without --tls_ca.
// The PEM files themselves are read by the client library when connecting.
absl::StatusOr<Context> ContextFromFlags();

// KvClient::Connect(context.options). A failure keeps its code and gains
// the server address and transport mode in its message. The caller owns
// the client; KvClient is thread-safe.
absl::StatusOr<std::unique_ptr<KvClient>> ConnectClient(const Context& context);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_CONTEXT_H_
