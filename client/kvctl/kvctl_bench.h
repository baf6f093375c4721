// Copyright 2026 The kvstore Authors.
//
// PreprocessArgs(), kvctl's small layer in front of absl::ParseCommandLine
// (hyphenated flag names, help detection).
//
// The bench engine that used to live here is now split by job; this header
// still includes it for kvctl_main.cc and the test:
//
//   latency_histogram.h  LatencyHistogram
//   bench_config.h       BenchConfig, BenchFlags, MakeBenchConfig()
//   bench_runner.h       BenchTarget, RunBench(), BenchResult
//   bench_report.h       FormatBenchReport(), BenchResultToJson()

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_H_

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/kvctl/bench_config.h"
#include "client/kvctl/bench_report.h"
#include "client/kvctl/bench_runner.h"
#include "client/kvctl/latency_histogram.h"

namespace kvstore {
namespace client {

// ---------------------------------------------------------------------------
// Command-line preprocessing (kvctl_main.cc)

// What PreprocessArgs needs to know about a flag name (underscore form).
enum class FlagKind {
  kUnknown,     // not a flag of this program
  kBool,        // takes no separate value: --json, --nojson, --json=false
  kTakesValue,  // --name=value or --name value
};

struct PreprocessedArgs {
  // argv with hyphenated flag names rewritten to the names absl knows:
  // "--value-size=1k" -> "--value_size=1k", "--no-preload" -> "--nopreload".
  // Everything else, including all arguments after "--", is copied as is.
  std::vector<std::string> argv;
  // The underscore names of the known flags that appear ("nopreload" is
  // recorded as "preload").
  std::set<std::string> given;
  // A help flag appeared: -h, --help, --helpfull, --helpshort (one or two
  // leading dashes).
  bool help = false;
};

// Prepares argv for absl::ParseCommandLine, which only knows underscore
// names. Follows absl's syntax: flags may appear anywhere before "--", start
// with one or two dashes, and a kTakesValue flag without "=" consumes the
// next argument. A lone "-" is positional. Unknown flags are left alone for
// absl to report.
PreprocessedArgs PreprocessArgs(const std::vector<std::string>& argv,
                                const std::function<FlagKind(absl::string_view)>& kind_of);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_H_
