// Copyright 2026 The kvstore Authors.
//
// check_history: the Jepsen-style checks of tests/jepsen over recorded
// histories (history_io.h's JSON lines; tests/cluster's chaos histories
// too) and, optionally, replica dumps.
//
//   check_history [--set_prefix=P] [--require_final_reads]
//                 [--max_steps=N] [--max_reported=N] [--replicas=FILE]
//                 HISTORY.jsonl...
//
// Each history is checked on its own (their clocks need not agree): op
// counts, per-key linearizability of the register keys, the write-once
// set's keys (ops marked "set", or keys starting with --set_prefix), and
// with --require_final_reads a final read of every acknowledged key. Each
// violation is printed with the ops that show it.
//
// Exit status: 0 every check passed; 1 a violation; 2 bad usage or an
// unreadable file; 3 no violation, but a key's search ran out of budget
// (no verdict for it).

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tests/jepsen/convergence.h"
#include "tests/jepsen/history_check.h"
#include "tests/jepsen/history_io.h"
#include "tests/jepsen/replica_dumps_io.h"

ABSL_FLAG(std::string, set_prefix, "", "keys starting with this are write-once set elements");
ABSL_FLAG(bool, require_final_reads, false,
          "a key with an acknowledged write and no final read is a violation");
ABSL_FLAG(uint64_t, max_steps, 20'000'000, "search steps per key before it is called unknown");
ABSL_FLAG(uint64_t, max_reported, 10, "violations printed per check");
ABSL_FLAG(std::string, replicas, "", "replica dumps (JSON lines) to check for convergence");

namespace kvstore {
namespace jepsen {
namespace {

int Run(const std::vector<std::string>& files) {
  HistoryCheckOptions options;
  options.set_prefix = absl::GetFlag(FLAGS_set_prefix);
  options.require_final_reads = absl::GetFlag(FLAGS_require_final_reads);
  options.linearizability.budget.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.max_reported = absl::GetFlag(FLAGS_max_reported);
  bool violation = false, undecided = false;
  for (const std::string& file : files) {
    absl::StatusOr<std::vector<Op>> ops = ReadHistoryFile(file);
    if (!ops.ok()) {
      std::fprintf(stderr, "check_history: %s\n", std::string(ops.status().message()).c_str());
      return 2;
    }
    const HistoryCheckResult r = CheckHistory(*ops, options);
    std::printf("== %s\n%s", file.c_str(), r.text.c_str());
    violation |= r.violation;
    undecided |= r.undecided;
  }
  const std::string replicas = absl::GetFlag(FLAGS_replicas);
  if (!replicas.empty()) {
    absl::StatusOr<std::vector<ShardDumps>> dumps = ReadReplicaDumpsFile(replicas);
    if (!dumps.ok()) {
      std::fprintf(stderr, "check_history: %s\n", std::string(dumps.status().message()).c_str());
      return 2;
    }
    std::printf(
        "== %s\n%s", replicas.c_str(),
        ConvergenceText(CheckConvergence(*dumps), options.max_reported, &violation).c_str());
  }
  const char* verdict = violation ? "FAIL" : (undecided ? "UNDECIDED" : "PASS");
  std::printf("check_history: %s\n", verdict);
  return violation ? 1 : (undecided ? 3 : 0);
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "check_history [flags] HISTORY.jsonl...: per-key linearizability, the write-once set, "
      "replica convergence (tests/jepsen/README.md)");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> files(args.begin() + 1, args.end());
  if (files.empty() && absl::GetFlag(FLAGS_replicas).empty()) {
    std::fprintf(stderr, "check_history: give at least one history file (see --help)\n");
    return 2;
  }
  return kvstore::jepsen::Run(files);
}
