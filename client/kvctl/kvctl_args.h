// Copyright 2026 The kvstore Authors.
//
// kvctl's layer in front of absl::ParseCommandLine: hyphenated flag names
// (--value-size), --no-name for booleans, help detection, and exit code 2
// (not absl's 1) for a bad flag.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_ARGS_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_ARGS_H_

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace client {

// What PreprocessArgs needs to know about a flag name (underscore form).
enum class FlagKind {
  kUnknown,     // not a flag of this program
  kBool,        // takes no separate value: --json, --nojson, --json=false
  kTakesValue,  // --name=value or --name value
};

// The output of PreprocessArgs(); a plain value.
struct PreprocessedArgs {
  // argv with hyphenated flag names rewritten to the names absl knows:
  // "--value-size=1k" -> "--value_size=1k", "--no-preload" -> "--nopreload".
  // Everything else, including all arguments after "--", is copied as is.
  std::vector<std::string> argv;
  // The underscore names of the known flags that appear ("nopreload" is
  // recorded as "preload").
  std::set<std::string> given;
  // A help flag appeared before any "--": -h, --help, --helpfull,
  // --helpshort, --helppackage, --helpon or --helpmatch (one or two leading
  // dashes, with or without a value).
  bool help = false;
};

// Prepares argv for absl::ParseCommandLine, which only knows underscore
// names. Follows absl's syntax: flags may appear anywhere before "--", start
// with one or two dashes, and a kTakesValue flag without "=" consumes the
// next argument. A lone "-" is positional. Unknown flags are left alone for
// absl to report. Never fails; `kind_of` is called only during the call.
PreprocessedArgs PreprocessArgs(const std::vector<std::string>& argv,
                                const std::function<FlagKind(absl::string_view)>& kind_of);

namespace kvctl {

// The FlagKind of `name` among the flags linked into this binary, looked up
// in absl's registry. "version" and "only_check_args", which absl handles
// itself but does not list, are reported as kBool.
FlagKind KindOfFlag(absl::string_view name);

// Runs absl::ParseCommandLine over `args` (PreprocessArgs() output, help
// already handled) and returns the positional arguments, argv[0] first.
// On a bad flag absl prints the problem; this adds the --help hint and
// exits the process with kExitUsage. Call once, from main's thread.
std::vector<std::string> ParseFlagsOrExit(std::vector<std::string> args);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_ARGS_H_
