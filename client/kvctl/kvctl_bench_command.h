// Copyright 2026 The kvstore Authors.
//
// The `kvctl bench` command: reads the bench flags, connects, runs the
// bench engine (bench_runner.h) with progress on stderr and Ctrl-C as a
// clean stop of the timed run, and prints the report (bench_report.h) on
// stdout.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_COMMAND_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_COMMAND_H_

#include <string>
#include <vector>

#include "client/kvctl/kvctl_context.h"

namespace kvstore {
namespace client {
namespace kvctl {

// A CommandFn (kvctl_context.h). Usage error for bad bench flags (see
// MakeBenchConfig()); kExitError when connecting fails, when the preload
// fails or is interrupted (no report then), when writing the report fails,
// and also when any timed operation failed (after the report is printed).
// Installs a SIGINT handler for the run and restores the default one
// afterwards. Call from main's thread only.
int RunBenchCommand(const Context& context, const std::vector<std::string>& args);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_COMMAND_H_
