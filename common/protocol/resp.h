// Copyright 2026 The kvstore Authors.
//
// RESP2 (the Redis serialization protocol) codec: a defensive request parser
// for the server, a reply parser for the client, and encoders for both.
//
// Requests are arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").
// Inline commands are refused: every request must start with '*'. Every
// length is validated before anything is buffered or allocated for it.

#ifndef KVSTORE_COMMON_PROTOCOL_RESP_H_
#define KVSTORE_COMMON_PROTOCOL_RESP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace resp {

// Longest "*N\r\n" / "$N\r\n" line accepted (digits plus framing).
inline constexpr size_t kMaxLengthLine = 24;

struct RequestLimits {
  // Arguments in one request (MSET k v k v ... counts every argument).
  uint64_t max_args = 2 * 4096 + 1;
  // Largest single bulk string.
  uint64_t max_bulk_bytes = 64ull << 20;
  // Largest request buffered whole (all of its bulk strings together).
  // SET values are streamed, not buffered, so they are exempt.
  uint64_t max_buffered_bytes = (64ull << 20) + (1 << 20);
};

// The outcome of one parse attempt over the start of a buffer.
struct ParsedRequest {
  enum class Kind {
    kNeedMore,  // no complete request yet; call again with more bytes
    kCommand,   // args hold a complete request of `consumed` bytes
    kSetValue,  // "SET key <value>": consumed covers everything up to the
                // value's first byte; args = {SET, key}; value_len bytes
                // and then "\r\n" follow and are the caller's to read;
                // value_len is not checked against max_bulk_bytes: the
                // caller applies its own value limit (and names it)
    kError,     // protocol error: reply with `error` and close
  };
  Kind kind = Kind::kNeedMore;
  size_t consumed = 0;
  std::vector<absl::string_view> args;  // views into the parsed buffer
  uint64_t value_len = 0;
  std::string error;  // without the leading "-" and trailing CRLF
};

// Parses at most one request from the start of `buffer`. Stateless: after
// kNeedMore, call again on the grown buffer.
ParsedRequest ParseRequest(absl::string_view buffer, const RequestLimits& limits);

// ASCII case-insensitive command name comparison.
bool CommandIs(absl::string_view arg, absl::string_view name);

// --- Encoders (append to `out`) --------------------------------------------
void AppendSimple(std::string* out, absl::string_view s);   // +s
void AppendError(std::string* out, absl::string_view msg);  // -msg
void AppendInteger(std::string* out, int64_t n);            // :n
void AppendBulk(std::string* out, absl::string_view s);     // $len s
void AppendBulkHeader(std::string* out, uint64_t len);      // $len\r\n
void AppendNull(std::string* out);                          // $-1
void AppendArrayHeader(std::string* out, uint64_t n);       // *n
// A request: *N then each argument as a bulk string.
void AppendCommand(std::string* out, const std::vector<absl::string_view>& args);

// --- Replies (client side) ---------------------------------------------------
struct Reply {
  enum class Type { kSimple, kError, kInteger, kBulk, kNull, kArray };
  Type type = Type::kNull;
  std::string str;  // simple, error, bulk
  int64_t integer = 0;
  std::vector<Reply> elements;
};

struct ParsedReply {
  bool complete = false;
  size_t consumed = 0;
  Reply reply;
};

struct ReplyLimits {
  uint64_t max_bulk_bytes = 512ull << 20;
  uint64_t max_elements = 1 << 20;
  int max_depth = 4;
};

// Parses one reply from the start of `buffer`. kDataLoss for malformed
// input (the connection must then be dropped).
absl::StatusOr<ParsedReply> ParseReply(absl::string_view buffer, const ReplyLimits& limits);

}  // namespace resp
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_RESP_H_
