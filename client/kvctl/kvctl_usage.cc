// Copyright 2026 The kvstore Authors.
//
// kvctl's help text. absl's generated --help lists flags by source file,
// which means nothing to a user; kvctl groups them by command instead, and
// takes each flag's help string and default from its definition so that
// the text cannot drift from the code.

#include "client/kvctl/kvctl_usage.h"

#include <string>

#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace kvstore {
namespace client {
namespace kvctl {
namespace {

// The flags, in --help order. `command` is empty for global flags.
struct FlagHelp {
  const char* name;  // as absl knows it (underscores)
  const char* command;
  const char* value;  // metavariable, or nullptr for booleans
};

// Every flag of kvctl_flags.cc must be listed here, or --help omits it and
// CheckFlagsApply() treats it as global.
// clang-format off
constexpr FlagHelp kFlagHelp[] = {
    {"server",      "",      "HOST:PORT"},
    {"transport",   "",      "MODE"},
    {"timeout",     "",      "DURATION"},
    {"rdma_device", "",      "NAME"},
    {"rdma_location_cache_entries", "", "N"},
    {"rdma_read_in_pieces", "", nullptr},
    {"json",        "",      nullptr},
    {"verbose",     "",      nullptr},
    {"token_file",  "",      "PATH"},
    {"tls_ca",      "",      "PATH"},
    {"tls_cert",    "",      "PATH"},
    {"tls_key",     "",      "PATH"},
    {"tls_server_name", "",  "NAME"},
    {"file",        "put",   "PATH"},
    {"prefix",      "scan",  "P"},
    {"count",       "scan",  "N"},
    {"keys",        "bench", "N"},
    {"value_size",  "bench", "BYTES"},
    {"get_ratio",   "bench", "R"},
    {"concurrency", "bench", "C"},
    {"duration",    "bench", "D"},
    {"ops",         "bench", "N"},
    {"preload",     "bench", nullptr},
    {"seed",        "bench", "S"},
    {"zero_copy",   "bench", nullptr},
    {"shard",       "cluster", "N"},
    {"to",          "cluster", "NODE"},
    {"dry_run",     "cluster", nullptr},
    {"yes",         "cluster", nullptr},
    {"wait",        "cluster", nullptr},
    {"wait_timeout", "cluster", "D"},
    {"admin_token_file", "cluster", "PATH"},
};
// clang-format on

constexpr size_t kHelpWidth = 80;

// Word-wraps `text` to lines of at most kHelpWidth columns, assuming the
// first line starts at column `indent`; continuation lines are indented by
// `indent` spaces. Explicit newlines in `text` are kept. A word longer than
// the line is not broken; it overflows.
std::string Wrap(absl::string_view text, size_t indent) {
  std::string out;
  bool first_line = true;
  for (absl::string_view paragraph : absl::StrSplit(text, '\n')) {
    size_t column = indent;
    if (!first_line) absl::StrAppend(&out, "\n", std::string(indent, ' '));
    first_line = false;
    bool line_empty = true;
    for (absl::string_view word : absl::StrSplit(paragraph, ' ', absl::SkipEmpty())) {
      // Break before a word that would pass the margin, unless it is the
      // first on its line (it would not fit on the next one either).
      if (!line_empty && column + 1 + word.size() > kHelpWidth) {
        absl::StrAppend(&out, "\n", std::string(indent, ' '));
        column = indent;
        line_empty = true;
      }
      if (!line_empty) {
        out.push_back(' ');
        ++column;
      }
      absl::StrAppend(&out, word);
      column += word.size();
      line_empty = false;
    }
  }
  return out;
}

// The user's spelling of a flag name: hyphens, as --help shows them.
std::string Hyphenated(absl::string_view name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

// One flag's entry in --help: "  --name=VALUE  help Default: x." with the
// help wrapped at column 27, or on its own lines when the left part is too
// long for its column.
std::string FlagLine(const FlagHelp& f) {
  const std::string spelled = Hyphenated(f.name);
  std::string left =
      f.value == nullptr ? absl::StrCat("--", spelled) : absl::StrCat("--", spelled, "=", f.value);
  // Defaults come from the flag definitions, so the text cannot drift.
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f.name);
  std::string help = flag == nullptr ? "" : flag->Help();
  const std::string def = flag == nullptr ? "" : flag->DefaultValue();
  if (!def.empty()) absl::StrAppend(&help, " Default: ", def, ".");
  if (left.size() > 24) return absl::StrFormat("  %s\n%27s%s\n", left, "", Wrap(help, 27));
  return absl::StrFormat("  %-24s %s\n", left, Wrap(help, 27));
}

// The text after the flag sections: flag syntax (what PreprocessArgs
// accepts) and the exit codes, which must match kvctl_io.h.
constexpr char kHelpTrailer[] =
    "\n"
    "Flags may come before or after the command. Names take '-' or '_'\n"
    "(--value-size or --value_size); booleans take --name, --name=false or\n"
    "--no-name. Arguments after \"--\" are never flags: kvctl get -- -key\n"
    "\n"
    "Exit codes:\n"
    "  0  success; for get and exists, the key exists\n"
    "  1  the key does not exist (get, del, exists, ttl, expire)\n"
    "  2  usage error: unknown command or flag, bad flag value, wrong arguments\n"
    "  3  any other error, reported on stderr as \"kvctl: CODE: message\"\n"
    "     (e.g. UNAVAILABLE when the server cannot be reached; UNKNOWN\n"
    "     \"outcome unknown: ...\" for a put or del of a cluster that may or may\n"
    "     not have been applied: kvctl never sends it again); bench also\n"
    "     exits 3 when any operation failed, after printing its report\n"
    "  4  the server refused kvctl's credentials: UNAUTHENTICATED (no token\n"
    "     or the wrong one; pass --token_file or set KVSTORE_TOKEN_FILE) or\n"
    "     PERMISSION_DENIED (the token's user may not do that: a read-only user\n"
    "     writing, or a cluster admin command without --admin_token_file)\n";

}  // namespace

std::string HelpText(absl::Span<const Command> commands) {
  std::string out =
      "Usage: kvctl [flags] COMMAND [args]\n"
      "\n"
      "kvctl reads and writes a kvstore server through the kvstore client library.\n"
      "Against a cluster, --server may name any node: the client fetches the cluster\n"
      "map from it and routes each key to its shard's primary.\n"
      "\n"
      "Commands:\n";
  // Synopses take 30 columns; the help starts at column 33.
  for (const Command& c : commands) {
    absl::StrAppendFormat(&out, "  %-30s %s\n", c.synopsis, Wrap(c.help, 33));
  }

  // One section per command that has flags, global flags first; --help
  // itself is not an absl flag of ours, so it is added by hand.
  for (const char* section : {"", "put", "scan", "bench", "cluster"}) {
    absl::StrAppend(
        &out, "\n",
        *section == '\0' ? std::string("Global flags:") : absl::StrCat("Flags of ", section, ":"),
        "\n");
    for (const FlagHelp& f : kFlagHelp) {
      if (absl::string_view(f.command) == section) absl::StrAppend(&out, FlagLine(f));
    }
    if (*section == '\0') {
      absl::StrAppendFormat(&out, "  %-24s %s\n", "--help, -h", "Print this text and exit.");
    }
  }
  absl::StrAppend(&out, kHelpTrailer);
  return out;
}

absl::Status CheckFlagsApply(absl::string_view command, const std::set<std::string>& given) {
  // A command-specific flag given to another command is a mistake worth
  // reporting (e.g. `kvctl get k --prefix p`); absl alone would accept it.
  for (const FlagHelp& f : kFlagHelp) {
    if (*f.command != '\0' && command != f.command && given.count(f.name) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", Hyphenated(f.name), " applies only to ", f.command));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
