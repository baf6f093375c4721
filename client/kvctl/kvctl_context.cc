// Copyright 2026 The kvstore Authors.
//
// Turning kvctl's global flags into client Options, and connecting. The
// checks here are the ones a typo can fail; everything else about the
// address and device is left to the client library, which knows better.

#include "client/kvctl/kvctl_context.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/kvctl/kvctl_flags.h"

namespace kvstore {
namespace client {
namespace kvctl {

absl::StatusOr<Context> ContextFromFlags() {
  Context context;
  context.json = absl::GetFlag(FLAGS_json);
  // kvctl talks to one server; the library's list holds just that one.
  const std::string server = absl::GetFlag(FLAGS_server);
  if (server.empty()) return absl::InvalidArgumentError("--server must not be empty");
  if (absl::Status s = ValidateServerAddress(server); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--server: ", s.message()));
  }
  context.options.servers = {server};
  absl::StatusOr<TransportMode> mode = ParseTransportMode(absl::GetFlag(FLAGS_transport));
  if (!mode.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--transport: ", mode.status().message()));
  }
  context.options.transport = *mode;
  context.options.rdma_device = absl::GetFlag(FLAGS_rdma_device);
  // One --timeout bounds both connecting and each operation, so a user has
  // a single knob for "how long may this command hang".
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--timeout must be positive");
  }
  context.options.connect_timeout = timeout;
  context.options.op_timeout = timeout;
  return context;
}

absl::StatusOr<std::unique_ptr<KvClient>> ConnectClient(const Context& context) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = KvClient::Connect(context.options);
  if (!client.ok()) {
    // Say where and how kvctl tried to connect, so that a wrong --server or
    // --transport is easy to spot.
    return absl::Status(client.status().code(),
                        absl::StrCat("connecting to ", context.options.servers[0], " (",
                                     TransportModeName(context.options.transport),
                                     "): ", client.status().message()));
  }
  return client;
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
