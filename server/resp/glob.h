// Copyright 2026 The kvstore Authors.
//
// Glob patterns as Redis's KEYS and SCAN MATCH read them: '*' any run, '?'
// any one byte, "[abc]", "[^abc]" and "[a-z]" classes, and '\' quoting the
// next byte. Matching is on bytes and case-sensitive.
//
// Thread safety: pure functions.

#ifndef KVSTORE_SERVER_RESP_GLOB_H_
#define KVSTORE_SERVER_RESP_GLOB_H_

#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// Whether `text` matches `pattern`. Bounded: backtracking over '*' is
// linear per star (the usual greedy-with-one-restart-point walk), so a
// pattern of many stars cannot make a request run for long.
bool GlobMatch(absl::string_view pattern, absl::string_view text);

// The bytes every match must start with: the pattern up to its first
// special character (with '\' quotes resolved). Lets a scan compare a
// prefix before running the matcher.
std::string GlobLiteralPrefix(absl::string_view pattern);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_GLOB_H_
