// Copyright 2026 The kvstore Authors.
//
// kvctl's --help text, and which command each command-specific flag
// belongs to. Both read the flag definitions (help strings, defaults) from
// absl's registry, so they must run after main() starts.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_USAGE_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_USAGE_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/kvctl/kvctl_context.h"

namespace kvstore {
namespace client {
namespace kvctl {

// The full `kvctl --help` text, wrapped to 80 columns: usage line,
// `commands` (synopsis and help, in the given order), the flags by section
// with their defaults, the flag syntax and the exit codes.
std::string HelpText(absl::Span<const Command> commands);

// kInvalidArgument ("--prefix applies only to scan") if a flag in `given`
// (underscore names) belongs to a command other than `command`; OK
// otherwise. Global flags apply to every command.
absl::Status CheckFlagsApply(absl::string_view command, const std::set<std::string>& given);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_USAGE_H_
