// Copyright 2026 The kvstore Authors.

#include "client/kvctl/kvctl_bench.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace kvstore {
namespace client {

// ---------------------------------------------------------------------------
// Command-line preprocessing

namespace {

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
    if (kind == FlagKind::kTakesValue && eq == absl::string_view::npos && i + 1 < argv.size()) {
      out.argv.push_back(argv[++i]);  // the value, whatever it looks like
    }
  }
  return out;
}

}  // namespace client
}  // namespace kvstore
