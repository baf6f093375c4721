// Copyright 2026 The kvstore Authors.
//
// kvctl's key-value commands. Arguments are checked before connecting, so
// that a usage error costs no round trip and never depends on whether the
// server is up. Keys and values are bytes throughout: nothing here assumes
// text, NUL-free data or a trailing newline.

#include "client/kvctl/kvctl_commands.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "client/kvctl/kvctl_flags.h"
#include "client/kvctl/kvctl_format.h"
#include "client/kvctl/kvctl_io.h"

namespace kvstore {
namespace client {
namespace kvctl {

int RunPut(const Context& context, const std::vector<std::string>& args) {
  const std::string file = absl::GetFlag(FLAGS_file);
  const bool has_value_arg = args.size() == 2;
  // "Given" rather than "non-empty": `--file=` is a mistake worth naming,
  // not a request to read stdin.
  const bool from_file = context.given.count("file") > 0;
  if (from_file && file.empty()) return UsageError("put: --file needs a path");
  if (from_file && has_value_arg) return UsageError("put: give either VALUE or --file, not both");
  const bool from_stdin = !from_file && (!has_value_arg || args[1] == "-");
  // "-" always means stdin; an omitted VALUE only when stdin is not a
  // terminal, so that a forgotten argument does not wait for typing.
  if (from_stdin && !has_value_arg && isatty(STDIN_FILENO)) {
    return UsageError("put: no value: give VALUE, --file PATH, or pipe it to stdin");
  }

  // Connect before reading a file or stdin: the handshake tells the value
  // limit, so a too-long input is refused after limit + 64 KiB at most
  // rather than read whole (a 2 GiB pipe used to cost 2 GiB of memory).
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  const uint64_t limit = (*client)->max_value_bytes();
  std::string value;
  if (from_file || from_stdin) {
    absl::StatusOr<std::string> data =
        from_file ? ReadFile(file, limit) : ReadAll(STDIN_FILENO, "stdin", limit);
    if (!data.ok()) return Failure(data.status());
    value = *std::move(data);
  } else {
    value = args[1];
  }
  const absl::Duration ttl = absl::GetFlag(FLAGS_ttl);
  if (ttl < absl::ZeroDuration()) return UsageError("put: --ttl must not be negative");
  const absl::Status status = ttl > absl::ZeroDuration()
                                  ? (*client)->PutWithTtl(args[0], value, ttl)
                                  : (*client)->Put(args[0], value);
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

int RunGet(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<std::string> value = (*client)->Get(args[0]);
  // A missing key is an answer, not a failure: it gets its own exit code.
  if (absl::IsNotFound(value.status())) return Report(value.status(), kExitNotFound);
  if (!value.ok()) return Failure(value.status());
  // The newline is only for a person at a terminal; a pipe gets the exact
  // bytes, so `kvctl get k > file` round-trips with `kvctl put k --file`.
  absl::Status status = WriteAll(STDOUT_FILENO, *value);
  if (status.ok() && isatty(STDOUT_FILENO)) status = WriteAll(STDOUT_FILENO, "\n");
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

int RunDel(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  const absl::Status status = (*client)->Delete(args[0]);
  // As for get: deleting a missing key is reported, and exits 1.
  if (absl::IsNotFound(status)) return Report(status, kExitNotFound);
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

int RunExists(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<bool> exists = (*client)->Exists(args[0]);
  if (!exists.ok()) return Failure(exists.status());
  // Both the output and the exit code carry the answer: one for people and
  // `$(...)`, the other for `if kvctl exists ...`.
  const absl::Status status = WriteAll(STDOUT_FILENO, *exists ? "1\n" : "0\n");
  if (!status.ok()) return Failure(status);
  return *exists ? kExitOk : kExitNotFound;
}

int RunScan(const Context& context, const std::vector<std::string>& /*args*/) {
  const uint32_t count = absl::GetFlag(FLAGS_count);
  if (count == 0) return UsageError("--count must be positive");
  const std::string prefix = absl::GetFlag(FLAGS_prefix);
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());

  // Cursor 0 starts the listing, and the server returns 0 when it is done.
  uint64_t cursor = 0;
  do {
    absl::StatusOr<ScanPage> page = (*client)->Scan(cursor, count, prefix);
    if (!page.ok()) return Failure(page.status());
    // A server that hands back the cursor it was given, with nothing on the
    // page, would keep us here forever.
    if (page->keys.empty() && page->cursor != 0 && page->cursor == cursor) {
      return Failure(absl::InternalError(
          absl::StrCat("scan made no progress: the server returned cursor ", cursor, " again")));
    }
    // stdio buffering is fine here (many small writes); errors are caught
    // once, at the flush below.
    for (const std::string& key : page->keys) {
      std::fwrite(key.data(), 1, key.size(), stdout);
      std::fputc('\n', stdout);
    }
    cursor = page->cursor;
  } while (cursor != 0);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return Failure(absl::ErrnoToStatus(errno, "writing stdout"));
  }
  return kExitOk;
}

int RunStat(const Context& context, const std::vector<std::string>& /*args*/) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<ServerStats> stats = (*client)->Stats();
  if (!stats.ok()) return Failure(stats.status());
  // One snapshot of each side; the client's is taken after the server's.
  const std::string out =
      FormatStat((*client)->transport_name(), *stats, (*client)->metrics(), context.json);
  const absl::Status status = WriteAll(STDOUT_FILENO, out);
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
