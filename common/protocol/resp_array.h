// Copyright 2026 The kvstore Authors.
//
// Array requests ("*<argc>\r\n" then argc bulk strings): the parsing half of
// resp::ParseRequest for a buffer that starts with '*' (resp.h states what
// is accepted and its errors). Callers use ParseRequest; this header is
// for the tests and the request fuzzer, which hold the two paths to one
// answer.
//
// Thread safety: stateless functions, any thread.

#ifndef KVSTORE_COMMON_PROTOCOL_RESP_ARRAY_H_
#define KVSTORE_COMMON_PROTOCOL_RESP_ARRAY_H_

#include "absl/strings/string_view.h"
#include "common/protocol/resp.h"

namespace kvstore {
namespace resp {
namespace internal {

// Parses the array request at the start of `buffer` into *out (a default-
// constructed ParsedRequest): the usual GET and SET through their fast path
// (resp_head.h), everything else, and whatever the fast path does not
// decide, field by field.
void ParseArray(absl::string_view buffer, const RequestLimits& limits, ParsedRequest* out);

// The field-by-field path alone. ParseArray() must give every input the
// same result as this: the tests compare the two.
void ParseFieldByField(absl::string_view buffer, const RequestLimits& limits, ParsedRequest* out);

}  // namespace internal
}  // namespace resp
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_RESP_ARRAY_H_
