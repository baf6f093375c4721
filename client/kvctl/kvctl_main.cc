// Copyright 2026 The kvstore Authors.
//
// kvctl: the kvstore command-line tool.
//
//   kvctl [flags] COMMAND [args]
//
// Commands: put, get, del, exists, scan, stat, bench, cluster. `kvctl --help` prints
// the full usage, including the exit codes:
//
//   0  success; get/exists: the key exists
//   1  the key does not exist (get, del, exists)
//   2  usage error
//   3  any other error, reported on stderr as "kvctl: CODE: message"
//   4  the server refused kvctl's credentials (UNAUTHENTICATED)
//
// Values and keys are bytes: put reads files and stdin in binary and get
// writes the value to stdout exactly, adding a newline only for a terminal.
//
// This file holds the command table and the dispatch: flag parsing
// (kvctl_args), help (kvctl_usage), the global flags (kvctl_context), then
// one handler (kvctl_commands, kvctl_bench_command).

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/kvctl/kvctl_args.h"
#include "client/kvctl/kvctl_bench_command.h"
#include "client/kvctl/kvctl_cluster_command.h"
#include "client/kvctl/kvctl_commands.h"
#include "client/kvctl/kvctl_context.h"
#include "client/kvctl/kvctl_flags.h"
#include "client/kvctl/kvctl_io.h"
#include "client/kvctl/kvctl_usage.h"
#include "glog/logging.h"

namespace kvstore {
namespace client {
namespace kvctl {
namespace {

// The commands, in --help order. Argument counts are checked here, before
// a handler runs, so handlers may index their arguments freely.
constexpr Command kCommands[] = {
    {"put", "put KEY [VALUE] [--ttl D]",
     "Store a value under KEY. The value is VALUE, or the contents of --file PATH, or stdin "
     "when VALUE is \"-\" or omitted and stdin is not a terminal. Any bytes, NUL included. "
     "With --ttl (30s, 500ms, 2h) the key expires that long after the server stores it.",
     1, 2, RunPut},
    {"get", "get KEY",
     "Write the value of KEY to stdout byte for byte; a newline is added only when stdout is "
     "a terminal.",
     1, 1, RunGet},
    {"del", "del KEY", "Delete KEY.", 1, 1, RunDel},
    {"exists", "exists KEY", "Print 1 if KEY exists, 0 if not.", 1, 1, RunExists},
    {"ttl", "ttl KEY",
     "Print KEY's time to live in milliseconds; -1 when it has no expiry, -2 when it does not "
     "exist (exit 1).",
     1, 1, RunTtl},
    {"expire", "expire KEY DURATION",
     "Make KEY expire DURATION (30s, 500ms, 2h) from now, keeping its value. Print 1, or 0 "
     "when KEY does not exist (exit 1).",
     2, 2, RunExpire},
    {"persist", "persist KEY", "Remove KEY's expiry. Print 1 if it had one, 0 otherwise.", 1, 1,
     RunPersist},
    {"scan", "scan [--prefix P] [--count N]",
     "Print every key (starting with P), one per line, as raw bytes, paging through the "
     "listing N keys at a time until it is complete.",
     0, 0, RunScan},
    {"stat", "stat",
     "Print the server's info and counters, this client's metrics and the transport in use.", 0, 0,
     RunStat},
    {"bench", "bench",
     "Load generator: --concurrency threads sharing one client GET and PUT keys chosen "
     "uniformly from --keys keys, for --duration or --ops. Progress goes to stderr once per "
     "second, the report to stdout: ops/s, GET and PUT counts, p50/p99/p99.9 latency in "
     "microseconds, GB/s of values, misses, errors, transport and seed. Ctrl-C ends the timed "
     "run early and still reports; during the preload it stops bench with CANCELLED (exit 3).",
     0, 0, RunBenchCommand},
    {"cluster", "cluster SUBCOMMAND",
     "The cluster map as the server holds it: status (epoch, controller, shards with slot "
     "ranges, primary, backups, syncing nodes, up or DOWN), nodes (addresses, incarnation, "
     "roles), slots (ranges -> primary), failover --shard=N [--to=NODE] (manual failover "
     "through the controller; prints the new map), remove-node NODE (drain NODE before "
     "stopping it; prints the new map), add-node NODE (a new, empty shard led by NODE), or "
     "rebalance [--dry-run] [--wait] (queue slot migrations that even out the shards; "
     "--wait follows them), or accept-loss --shard=N --yes (a DOWN shard serves again, "
     "empty). Run 'kvctl cluster --help' for details. A "
     "server in single-node mode answers FAILED_PRECONDITION, one without the cluster service "
     "UNIMPLEMENTED (exit 3).",
     1, 2, RunCluster},
};

// The command named on the command line before absl parses it (for
// `kvctl cluster --help`): the first argument that is neither a flag nor a
// flag's separate value. Empty when there is none.
std::string CommandBeforeParsing(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") return i + 1 < argv.size() ? argv[i + 1] : "";
    if (a.size() < 2 || a[0] != '-') return a;
    const size_t dashes = a[1] == '-' ? 2 : 1;
    if (a.find('=') != std::string::npos) continue;
    if (KindOfFlag(a.substr(dashes)) == FlagKind::kTakesValue) ++i;  // its value
  }
  return "";
}

// The client library logs through glog; a command-line tool keeps quiet
// about anything below ERROR unless asked, and never writes log files.
void InitLogging(const char* argv0) {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = absl::GetFlag(FLAGS_verbose) ? google::GLOG_INFO : google::GLOG_ERROR;
  google::InitGoogleLogging(argv0);
}

// Parses the command line, picks the command, checks its arguments and
// flags, and runs it. Returns the exit code; exits the process itself only
// for a flag absl rejects (see ParseFlagsOrExit()).
int Main(int argc, char** argv) {
  // As in kvserver: Debian's Abseil keeps absl::Mutex's deadlock detection
  // on (no NDEBUG), a global lock graph updated on every lock of every GET
  // (the slot pool, the path lock). The TSan build checks lock order.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  PreprocessedArgs pre = PreprocessArgs(std::vector<std::string>(argv, argv + argc), &KindOfFlag);
  // Help wins over everything else on the line, including errors.
  if (pre.help) {
    const std::string text =
        CommandBeforeParsing(pre.argv) == "cluster" ? ClusterHelpText() : HelpText(kCommands);
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  // absl would act on these itself (print its version, or exit after
  // checking); kvctl offers neither.
  for (const char* unsupported : {"version", "only_check_args"}) {
    if (pre.given.count(unsupported) > 0) {
      return UsageError(absl::StrCat("--", unsupported, " is not supported"));
    }
  }
  const std::vector<std::string> positional = ParseFlagsOrExit(std::move(pre.argv));
  InitLogging(argv[0]);

  // positional[0] is the program name.
  if (positional.size() < 2) return UsageError("no command given");
  const std::string name = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  const Command* command = nullptr;
  for (const Command& c : kCommands) {
    if (name == c.name) command = &c;
  }
  if (command == nullptr) return UsageError(absl::StrCat("unknown command \"", name, "\""));
  if (args.size() < command->min_args || args.size() > command->max_args) {
    return UsageError(absl::StrCat("wrong number of arguments; usage: kvctl ", command->synopsis));
  }
  const absl::Status flags_apply = CheckFlagsApply(name, pre.given);
  if (!flags_apply.ok()) return UsageError(flags_apply.message());

  absl::StatusOr<Context> context = ContextFromFlags();
  if (!context.ok()) return UsageError(context.status().message());
  context->given = std::move(pre.given);
  SetTokenSent(!context->options.auth_token.empty());
  return command->run(*context, args);
}

}  // namespace
}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::client::kvctl::Main(argc, argv); }
