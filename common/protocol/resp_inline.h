// Copyright 2026 The kvstore Authors.
//
// Inline requests: the parsing half of resp::ParseRequest for a buffer that
// does not start with '*' (resp.h states what is accepted and its errors).
// Internal to common/protocol: callers use ParseRequest.
//
// Thread safety: stateless functions, any thread.

#ifndef KVSTORE_COMMON_PROTOCOL_RESP_INLINE_H_
#define KVSTORE_COMMON_PROTOCOL_RESP_INLINE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/protocol/resp.h"

namespace kvstore {
namespace resp {
namespace internal {

// Parses the inline request at the start of `buffer` (non-empty, not
// starting with '*').
ParsedRequest ParseInline(absl::string_view buffer, const RequestLimits& limits);

// Splits one line (its LF or CRLF already removed) into arguments as Redis
// does: each argument is appended to *bytes, unescaped, and its (offset,
// length) in *bytes to *spans. False on unbalanced quotes (a quote never
// closed, or a closing quote followed by something other than a space).
bool SplitInline(absl::string_view line, std::string* bytes,
                 std::vector<std::pair<size_t, size_t>>* spans);

}  // namespace internal
}  // namespace resp
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_RESP_INLINE_H_
