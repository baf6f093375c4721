// Copyright 2026 The kvstore Authors.
//
// History JSONL: one operation (history.h) per line, a JSON object.
//
//   {"id":12,"client":3,"op":"PUT","key":"k1","value":"c3-17",
//    "invoke_ns":1000200000,"complete_ns":1000900000,"outcome":"ok"}
//
// Fields: id (number), client (number), op ("PUT" | "GET" | "DELETE"), key,
// value (string or null: a PUT's value, an ok GET's value, null = absent),
// invoke_ns, complete_ns (null while pending or when the outcome is
// unknown), outcome ("ok" | "fail" | "unknown"); optional: batch (a
// MultiPut's id), workload ("set" for the write-once set), final (true for
// a read after the load stopped), path (the read path), error (text).
//
// The reader also takes what tests/cluster's History::DumpJsonLines writes
// (deploy/compose/chaos.sh's history-*.jsonl): times as invoke_us /
// complete_us, outcome "failed" (= fail) and "pending" (= unknown).
// Unknown fields are ignored; a line missing "op", "key" or "outcome", or
// with a value of the wrong type, is an error naming the line. Empty lines
// are skipped. An absent id becomes the line's index.
//
// Thread safety: pure functions.

#ifndef KVSTORE_TESTS_JEPSEN_HISTORY_IO_H_
#define KVSTORE_TESTS_JEPSEN_HISTORY_IO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {

// One line; `line_no` (0-based) is the default id and names errors.
absl::StatusOr<Op> ParseOpLine(absl::string_view line, size_t line_no);
// The line for `op` (no newline), in the format above.
std::string FormatOpLine(const Op& op);

// Every operation of the text / file, as written (not Normalize'd).
absl::StatusOr<std::vector<Op>> ParseHistory(absl::string_view text);
absl::StatusOr<std::vector<Op>> ReadHistoryFile(const std::string& path);
absl::Status WriteHistoryFile(const std::string& path, const std::vector<Op>& ops);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_HISTORY_IO_H_
