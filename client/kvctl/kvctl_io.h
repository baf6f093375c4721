// Copyright 2026 The kvstore Authors.
//
// kvctl's exit codes, its two ways of reporting an error on stderr, and
// byte-exact reads and writes of whole files and standard streams.
//
// Thread safety: the functions are safe to call from any thread, but
// concurrent writes to the same descriptor may interleave.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_IO_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace client {
namespace kvctl {

// The documented exit codes (see `kvctl --help`).
inline constexpr int kExitOk = 0;        // success; get/exists: the key exists
inline constexpr int kExitNotFound = 1;  // the key does not exist (get, del, exists)
inline constexpr int kExitUsage = 2;     // usage error
inline constexpr int kExitError = 3;     // any other error
inline constexpr int kExitAuth = 4;      // the server refused our credentials

// Prints "kvctl: <message>" and a pointer to --help on stderr; returns
// kExitUsage.
int UsageError(absl::string_view message);

// Prints "kvctl: CODE: message" for `status` on stderr and returns
// `exit_code`.
int Report(const absl::Status& status, int exit_code);

// Report(status, kExitError), except for kUnauthenticated: then the line
// also says how to fix it (pass --token_file, or, when a token was sent, use
// the server's) and the result is kExitAuth, so that scripts can tell "not
// allowed" from "not reachable".
int Failure(const absl::Status& status);

// Tells Failure() whether kvctl sent a token, which decides its hint. Set
// once, after the flags are read; false until then.
void SetTokenSent(bool sent);

// Reads `fd` to end of file, retrying on EINTR. `what` names the source in
// the error ("reading <what>: ..."). Stops as soon as more than `max_bytes`
// have arrived (kInvalidArgument naming `what` and the limit), so an endless
// or huge input costs at most max_bytes + 64 KiB of memory. Does not close
// `fd`.
absl::StatusOr<std::string> ReadAll(int fd, absl::string_view what, uint64_t max_bytes);

// The whole contents of the file at `path`, in binary, refused without
// reading when it is larger than `max_bytes` (kInvalidArgument). An error
// names the path ("opening <path>" or "reading <path>").
absl::StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes);

// Writes all of `data` to `fd`, retrying on EINTR and short writes. The
// error says "writing stdout": kvctl only ever writes its results there.
absl::Status WriteAll(int fd, absl::string_view data);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_IO_H_
