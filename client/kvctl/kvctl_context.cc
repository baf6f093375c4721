// Copyright 2026 The kvstore Authors.
//
// Turning kvctl's global flags into client Options, and connecting. The
// checks here are the ones a typo can fail; everything else about the
// address and device is left to the client library, which knows better.

#include "client/kvctl/kvctl_context.h"

#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/kvctl/kvctl_flags.h"
#include "common/auth/token.h"

namespace kvstore {
namespace client {
namespace kvctl {

namespace {

// The security flags into `options`. The token file is read here so that a
// wrong path is a usage error naming it, before anything is dialled; the
// flag wins over the environment, and neither set means no token.
absl::Status SecurityFromFlags(Options* options) {
  std::string token_file = absl::GetFlag(FLAGS_token_file);
  std::string source = "--token_file";
  if (token_file.empty()) {
    const char* env = std::getenv("KVSTORE_TOKEN_FILE");
    if (env != nullptr) token_file = env;
    source = "KVSTORE_TOKEN_FILE";
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = auth::ReadTokenFile(token_file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", token.status().message()));
    }
    options->auth_token = *std::move(token);
  }
  options->tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  options->tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options->tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options->tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  // The library checks these too; checked here they are usage errors
  // worded with kvctl's flag names.
  if (options->tls_cert_file.empty() != options->tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (options->tls_ca_file.empty() &&
      (!options->tls_cert_file.empty() || !options->tls_server_name.empty())) {
    return absl::InvalidArgumentError(
        "--tls_cert, --tls_key and --tls_server_name need --tls_ca (the CA of the server's "
        "certificate)");
  }
  return absl::OkStatus();
}

}  // namespace

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
  context.options.rdma_location_cache_entries =
      static_cast<size_t>(absl::GetFlag(FLAGS_rdma_location_cache_entries));
  context.options.rdma_read_in_pieces = absl::GetFlag(FLAGS_rdma_read_in_pieces);
  // One --timeout bounds both connecting and each operation, so a user has
  // a single knob for "how long may this command hang".
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--timeout must be positive");
  }
  context.options.connect_timeout = timeout;
  context.options.op_timeout = timeout;
  if (absl::Status s = SecurityFromFlags(&context.options); !s.ok()) return s;
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
