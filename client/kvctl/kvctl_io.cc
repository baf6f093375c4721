// Copyright 2026 The kvstore Authors.
//
// Error reporting and raw I/O for kvctl. Values are arbitrary bytes (NULs
// included), so everything here works on descriptors and lengths, never on
// C strings or text-mode streams.

#include "client/kvctl/kvctl_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvstore {
namespace client {
namespace kvctl {

int UsageError(absl::string_view message) {
  absl::FPrintF(stderr, "kvctl: %s\nRun 'kvctl --help' for usage.\n", message);
  return kExitUsage;
}

int Report(const absl::Status& status, int exit_code) {
  // The canonical code name (e.g. UNAVAILABLE) comes first so that scripts
  // can match on it without parsing the message.
  absl::FPrintF(stderr, "kvctl: %s: %s\n", absl::StatusCodeToString(status.code()),
                status.message());
  return exit_code;
}

namespace {
// Atomic only so that a bench worker reporting late reads it safely; it is
// written once, before any command runs.
std::atomic<bool> token_sent{false};
}  // namespace

void SetTokenSent(bool sent) { token_sent = sent; }

// The common case: an error that is neither "not found" nor a usage error.
// Authentication failures are worded for the person at the terminal: still
// one line, with the fix at its end.
int Failure(const absl::Status& status) {
  if (absl::IsUnauthenticated(status)) {
    absl::FPrintF(stderr, "kvctl: UNAUTHENTICATED: %s (%s)\n", status.message(),
                  token_sent ? "the server refused the token: --token_file must hold the token "
                               "of the server's --auth_token_file, and a server without one "
                               "refuses any"
                             : "server requires a token: pass --token_file=PATH or set "
                               "KVSTORE_TOKEN_FILE");
    return kExitAuth;
  }
  if (absl::IsPermissionDenied(status)) {
    absl::FPrintF(stderr, "kvctl: PERMISSION_DENIED: %s\n", status.message());
    return kExitAuth;
  }
  return Report(status, kExitError);
}

absl::StatusOr<std::string> ReadAll(int fd, absl::string_view what, uint64_t max_bytes) {
  auto too_long = [&] {
    // Worded like the library's own limit error, naming the server's flag.
    return absl::InvalidArgumentError(absl::StrCat(
        what, " holds a value over the limit max_value_bytes=", max_bytes, " (stopped reading)"));
  };
  std::string data;
  // A regular file tells its size: refuse it unread when it is too long,
  // else reserve once instead of growing through a large value.
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    if (static_cast<uint64_t>(st.st_size) > max_bytes) return too_long();
    data.reserve(static_cast<size_t>(st.st_size));
  }
  // 0 from read() is end of file; EINTR only means "try again".
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      data.append(buf, static_cast<size_t>(n));
      // Checked as it arrives: a pipe of unknown (or endless) length must
      // not be read whole before the limit is noticed.
      if (data.size() > max_bytes) return too_long();
    } else if (n == 0) {
      return data;
    } else if (errno != EINTR) {
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", what));
    }
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) {
  // O_CLOEXEC so that the descriptor never leaks into a child process.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  absl::StatusOr<std::string> data = ReadAll(fd, path, max_bytes);
  close(fd);
  return data;
}

absl::Status WriteAll(int fd, absl::string_view data) {
  // write() may take less than asked (pipes, signals); loop until done.
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno != EINTR) {
      return absl::ErrnoToStatus(errno, "writing stdout");
    }
  }
  return absl::OkStatus();
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
