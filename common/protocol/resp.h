// Copyright 2026 The kvstore Authors.
//
// RESP2 (the Redis serialization protocol) codec: a defensive request parser
// for the server, a reply parser for the client, and encoders for both.
//
// Requests are arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").
// Inline commands are refused: every request must start with '*'. Every
// length is validated before anything is buffered or allocated for it.
//
// Errors travel as "-<CODEWORD> message\r\n". StatusToRespError and
// RespErrorToStatus are the only places that know which code word stands for
// which absl::StatusCode, so the server and the TCP client cannot disagree.
// A cluster refusal (common/cluster/refusal.h) is written and read in Redis
// Cluster's words by the refusal codec, which both call first.
//
// Thread safety: every function here is stateless and may be called from any
// thread.

#ifndef KVSTORE_COMMON_PROTOCOL_RESP_H_
#define KVSTORE_COMMON_PROTOCOL_RESP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace resp {

// Longest "*N\r\n" / "$N\r\n" line accepted (digits plus framing).
inline constexpr size_t kMaxLengthLine = 24;

// Bounds checked against each request's declared lengths before its bytes
// are buffered.
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
// Each appends one complete RESP2 element, CRLF included, to `out` (which
// must not be null) and never fails.
void AppendSimple(std::string* out, absl::string_view s);  // +s; s must hold no CR/LF
void AppendOk(std::string* out);                           // +OK
// -msg. A CR or LF in `msg` is replaced by a space: an error line cannot
// carry them, and a peer-supplied name echoed in an error must not be able to
// forge a second reply.
void AppendError(std::string* out, absl::string_view msg);
void AppendInteger(std::string* out, int64_t n);         // :n
void AppendBulk(std::string* out, absl::string_view s);  // $len s
// $len\r\n alone: the caller sends the len bytes and the closing CRLF
// itself (the server's zero-copy GET reply sends them from pool memory).
void AppendBulkHeader(std::string* out, uint64_t len);
void AppendBulkTrailer(std::string* out);              // the CRLF closing a bulk body
void AppendNull(std::string* out);                     // $-1 (null bulk: "no such key")
void AppendArrayHeader(std::string* out, uint64_t n);  // *n; n elements must follow
// A request: *N then each argument as a bulk string.
void AppendCommand(std::string* out, const std::vector<absl::string_view>& args);

// --- Status <-> RESP error ---------------------------------------------------
// The text of a RESP error reply (without the leading '-' and the CRLF; the
// shape Reply::str has for kError and AppendError takes) for a non-OK
// Status: "<CODEWORD> <message>". The code words, by absl::StatusCode:
//   InvalidArgument ERR        ResourceExhausted OOM     Unavailable TRYAGAIN
//   DataLoss        DATALOSS   NotFound          NOTFOUND
//   DeadlineExceeded TIMEOUT   Cancelled         CANCELLED
//   AlreadyExists   ALREADYEXISTS  PermissionDenied NOPERM
//   Unauthenticated NOAUTH     FailedPrecondition PRECONDITION
//   Aborted         ABORTED    OutOfRange        OUTOFRANGE
//   Unimplemented   UNIMPLEMENTED  Internal      INTERNAL
//   Unknown         UNKNOWN
// ERR, OOM, TRYAGAIN and DATALOSS are the words redis-cli users have always
// seen from this server (the store only returns those four codes to RESP
// commands), so their replies are unchanged. An OK status (not an error) or
// a code absl may add later is reported as UNKNOWN. A status carrying a
// refusal with a RESP form is written as cluster::RespText words it
// ("MOVED 12 10.0.0.2:6379", no code word of ours in front).
std::string StatusToRespError(const absl::Status& s);

// The reverse: a refusal's text (cluster::ParseRespText) becomes the
// refusal's status (cluster::ToStatus, payload included); otherwise maps the
// first word of a RESP error text (as above, without
// '-' and CRLF) back to its code; the rest of the text is the message (the
// whole text if there is no space). Only the word is looked at, never the
// message: every "ERR ..." is InvalidArgument, including the server's
// protocol-error and connection-timeout notices. Also accepts NOPROTO (HELLO
// with an unsupported protocol) as Unimplemented. An unrecognised word (a
// plain Redis "WRONGTYPE ...", say) gives Unknown with the whole text as
// message. Never returns OK.
absl::Status RespErrorToStatus(absl::string_view error);

// AppendError(out, StatusToRespError(s)).
void AppendStatusError(std::string* out, const absl::Status& s);

// --- Replies (client side) ---------------------------------------------------
struct Reply {
  enum class Type { kSimple, kError, kInteger, kBulk, kNull, kArray };
  Type type = Type::kNull;
  std::string str;  // simple, error, bulk
  int64_t integer = 0;
  std::vector<Reply> elements;
};

// The outcome of ParseReply: with complete == false nothing was consumed
// (read more and call again); otherwise `reply` is owned (copied out of the
// buffer) and `consumed` bytes may be dropped.
struct ParsedReply {
  bool complete = false;
  size_t consumed = 0;
  Reply reply;
};

// Bounds on a server's reply, which the client does not trust either:
// bulk size, array length, and array nesting depth.
struct ReplyLimits {
  uint64_t max_bulk_bytes = 512ull << 20;
  uint64_t max_elements = 1 << 20;
  int max_depth = 4;
};

// Parses one reply from the start of `buffer`. kDataLoss for malformed
// input or input beyond `limits` (the connection must then be dropped).
// Stateless, like ParseRequest: an incomplete reply is parsed again from
// the start on the next call.
absl::StatusOr<ParsedReply> ParseReply(absl::string_view buffer, const ReplyLimits& limits);

}  // namespace resp
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_RESP_H_
