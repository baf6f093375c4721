// Copyright 2026 The kvstore Authors.
//
// `kvctl bench` glue: flags to BenchConfig, KvClient to BenchTarget, the
// engine's progress callback to a status line, SIGINT to the engine's
// cancel flag, and the result to stdout.

#include "client/kvctl/kvctl_bench_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "client/kvctl/bench_config.h"
#include "client/kvctl/bench_report.h"
#include "client/kvctl/bench_runner.h"
#include "client/kvctl/kv_client_bench_target.h"
#include "client/kvctl/kvctl_flags.h"
#include "client/kvctl/kvctl_io.h"

namespace kvstore {
namespace client {
namespace kvctl {
namespace {

// Set by SIGINT during bench. A lock-free atomic store is async-signal-safe.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnSigint(int /*signo*/) { g_interrupted.store(true, std::memory_order_relaxed); }

// Prints progress lines to stderr: rewritten in place with '\r' on a
// terminal, one per line otherwise. Not thread-safe; the engine calls its
// progress callback from one thread.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(STDERR_FILENO)) {}

  // Shows `progress`, replacing the previous line on a terminal.
  void Print(const BenchProgress& progress) {
    // The preload's last line stays visible when the timed phase begins.
    if (tty_ && open_line_ && progress.preloading != last_preloading_) std::fputc('\n', stderr);
    const std::string line = FormatProgressLine(progress);
    if (tty_) {
      absl::FPrintF(stderr, "\r%s\x1b[K", line);  // ESC[K clears the rest of the line
      open_line_ = true;
    } else {
      absl::FPrintF(stderr, "%s\n", line);
    }
    last_preloading_ = progress.preloading;
    std::fflush(stderr);
  }

  // Ends a line left open by Print().
  void Finish() {
    if (open_line_) std::fputc('\n', stderr);
    open_line_ = false;
  }

 private:
  const bool tty_;
  bool open_line_ = false;
  bool last_preloading_ = false;
};

// The bench flags as given, for MakeBenchConfig(). --duration and --ops
// also record whether they appeared: their defaults are valid values, so
// only the command line tells whether the user chose one.
BenchFlags BenchFlagsFromCommandLine(const Context& context) {
  BenchFlags flags;
  flags.keys = absl::GetFlag(FLAGS_keys);
  flags.value_size = absl::GetFlag(FLAGS_value_size);
  flags.get_ratio = absl::GetFlag(FLAGS_get_ratio);
  flags.concurrency = absl::GetFlag(FLAGS_concurrency);
  flags.duration = absl::GetFlag(FLAGS_duration);
  flags.duration_given = context.given.count("duration") > 0;
  flags.ops = absl::GetFlag(FLAGS_ops);
  flags.ops_given = context.given.count("ops") > 0;
  flags.preload = absl::GetFlag(FLAGS_preload);
  flags.seed = absl::GetFlag(FLAGS_seed);
  flags.zero_copy = absl::GetFlag(FLAGS_zero_copy);
  return flags;
}

// Says on stderr what is about to run, before the first progress line.
// stdout carries only the report, so that --json output stays parseable.
void PrintWorkload(const Context& context, const std::string& transport,
                   const BenchConfig& config) {
  absl::FPrintF(
      stderr,
      "bench: server %s, transport %s, seed %d, %d keys, %d-byte values, "
      "%g%% GET, %d threads, %s%s\n",
      context.options.servers[0], transport, config.seed, config.keys, config.value_size,
      config.get_ratio * 100, config.concurrency,
      config.ops > 0 ? absl::StrCat(config.ops, " ops") : absl::FormatDuration(config.duration),
      config.zero_copy ? ", zero-copy GETs" : "");
}

// Ctrl-C ends the run early; SA_RESETHAND makes a second one fatal, so a
// hung operation can still be escaped.
void CatchFirstSigint() {
  struct sigaction action = {};
  action.sa_handler = OnSigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
}

}  // namespace

int RunBenchCommand(const Context& context, const std::vector<std::string>& /*args*/) {
  // A drawn seed stays below 2^53 so that JSON readers which hold numbers
  // as doubles (jq, JavaScript) print it back exactly.
  absl::BitGen entropy;
  const uint64_t random_seed = absl::Uniform<uint64_t>(entropy, 1, uint64_t{1} << 53);
  absl::StatusOr<BenchConfig> config =
      MakeBenchConfig(BenchFlagsFromCommandLine(context), random_seed);
  if (!config.ok()) return UsageError(config.status().message());

  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  KvClientBenchTarget target(client->get(), config->zero_copy ? config->value_size : 0);
  const std::string transport = (*client)->transport_name();
  PrintWorkload(context, transport, *config);

  CatchFirstSigint();
  ProgressPrinter printer;
  absl::StatusOr<BenchResult> result = RunBench(
      *config, target, transport, [&](const BenchProgress& p) { printer.Print(p); },
      &g_interrupted);
  printer.Finish();
  // From here on Ctrl-C kills kvctl as usual.
  signal(SIGINT, SIG_DFL);
  if (!result.ok()) return Failure(result.status());

  // The report is printed even when operations failed: the figures are
  // still worth having, and the exit code says something went wrong.
  const std::string report =
      context.json ? BenchResultToJson(*result) + "\n" : FormatBenchReport(*result);
  const absl::Status status = WriteAll(STDOUT_FILENO, report);
  if (!status.ok()) return Failure(status);
  if (result->errors > 0) {
    return Failure(absl::Status(result->first_error.code(),
                                absl::StrCat(result->errors, " operations failed; the first: ",
                                             result->first_error.message())));
  }
  return kExitOk;
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
