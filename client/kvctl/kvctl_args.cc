// Copyright 2026 The kvstore Authors.
//
// Command-line preprocessing for kvctl. absl does the real parsing (types,
// values, unknown-flag errors); this file only adapts spellings, spots help
// requests before absl can act on them, and fixes absl's exit code.

#include "client/kvctl/kvctl_args.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "client/kvctl/kvctl_io.h"

namespace kvstore {
namespace client {
namespace {

// absl's own help flags. kvctl prints its own help for all of them, so they
// must be caught before absl::ParseCommandLine prints absl's.
bool IsHelpFlag(absl::string_view name) {
  return name == "h" || name == "help" || name == "helpfull" || name == "helpshort" ||
         name == "helppackage" || name == "helpon" || name == "helpmatch";
}

}  // namespace

PreprocessedArgs PreprocessArgs(const std::vector<std::string>& argv,
                                const std::function<FlagKind(absl::string_view)>& kind_of) {
  PreprocessedArgs out;
  out.argv.reserve(argv.size());
  bool flags_ended = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    // argv[0], positionals (a lone "-" too) and everything after "--".
    if (i == 0 || flags_ended || arg.size() < 2 || arg[0] != '-') {
      out.argv.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      out.argv.push_back(arg);
      continue;
    }
    // Split "--name=value" into the name, rewritten to underscores, and the
    // "=value" part, which is passed on untouched.
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const absl::string_view body = absl::string_view(arg).substr(dashes);
    const size_t eq = body.find('=');
    const absl::string_view value_part =
        eq == absl::string_view::npos ? absl::string_view() : body.substr(eq);
    std::string name = absl::StrReplaceAll(body.substr(0, eq), {{"-", "_"}});
    if (IsHelpFlag(name)) {
      out.help = true;
      out.argv.push_back(arg);
      continue;
    }
    FlagKind kind = kind_of(name);
    std::string given = name;
    if (kind == FlagKind::kUnknown) {
      // Negated booleans: --nojson, and the hyphenated --no-json.
      absl::string_view base = name;
      if (absl::ConsumePrefix(&base, "no")) {
        absl::ConsumePrefix(&base, "_");
        if (!base.empty() && kind_of(base) == FlagKind::kBool) {
          kind = FlagKind::kBool;
          given = std::string(base);
          name = absl::StrCat("no", base);
        }
      }
    }
    if (kind == FlagKind::kUnknown) {
      out.argv.push_back(arg);  // absl reports it, under the user's spelling
      continue;
    }
    out.given.insert(given);
    out.argv.push_back(absl::StrCat(std::string(dashes, '-'), name, value_part));
    // The separate value is consumed here so that a value starting with '-'
    // (or spelled like a help flag) is not mistaken for a flag.
    if (kind == FlagKind::kTakesValue && eq == absl::string_view::npos && i + 1 < argv.size()) {
      out.argv.push_back(argv[++i]);  // the value, whatever it looks like
    }
  }
  return out;
}

namespace kvctl {
namespace {

// absl::ParseCommandLine reports a bad flag on stderr and calls
// std::exit(1), but 1 means "not found" here and usage errors are 2. While
// it runs, this exit handler turns any exit into kExitUsage. (--help, the
// one successful early exit, is handled before absl sees it.)
std::atomic<bool> g_parsing_flags{false};

void ExitUsageIfParsingFlags() {
  if (g_parsing_flags.load()) {
    std::fputs("Run 'kvctl --help' for usage.\n", stderr);
    std::fflush(nullptr);
    std::_Exit(kExitUsage);  // exit() must not be re-entered from a handler
  }
}

}  // namespace

FlagKind KindOfFlag(absl::string_view name) {
  // absl acts on these itself (and exits) but FindCommandLineFlag does not
  // list them; kvctl's Main() rejects them.
  if (name == "version" || name == "only_check_args") return FlagKind::kBool;
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) return FlagKind::kUnknown;
  return flag->IsOfType<bool>() ? FlagKind::kBool : FlagKind::kTakesValue;
}

std::vector<std::string> ParseFlagsOrExit(std::vector<std::string> args) {
  // absl wants a mutable, null-terminated char* array; `args` owns the
  // strings for as long as it is used.
  std::vector<char*> c_argv;
  c_argv.reserve(args.size() + 1);
  for (std::string& arg : args) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  absl::SetProgramUsageMessage("kvctl [flags] COMMAND [args]; run 'kvctl --help' for details");
  std::atexit(ExitUsageIfParsingFlags);
  g_parsing_flags.store(true);
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(c_argv.size() - 1), c_argv.data());
  g_parsing_flags.store(false);
  // Copied out: the char* point into `args`, which dies with this call.
  return std::vector<std::string>(positional.begin(), positional.end());
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
