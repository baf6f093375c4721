// Copyright 2026 The kvstore Authors.
//
// RESP (the Redis serialization protocol, RESP2 and RESP3) codec: a
// defensive request parser for the server, a reply parser for the client,
// and encoders for both.
//
// Requests are arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
// or inline commands: one line of text split into arguments as Redis splits
// it (what telnet and nc send, "GET k\r\n"; resp_inline.cc). Every length
// is validated before anything is buffered or allocated for it, and an
// inline line is bounded (kMaxInlineBytes) before it is split.
//
// Replies: the RESP2 types, and the RESP3 types a connection gets after
// HELLO 3 (null "_", map "%", set "~", double ",", boolean "#", verbatim
// "=", big number "(", push ">"). Which one a reply uses is the caller's
// choice (the server's Connection knows the connection's protocol); the
// reply parser reads both.
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
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvstore {
namespace resp {

// Longest "*N\r\n" / "$N\r\n" line accepted (digits plus framing).
inline constexpr size_t kMaxLengthLine = 24;

// Longest inline request line, its CR included (Redis's limit, 64 KiB): a
// longer one is "Protocol error: too big inline request", however it arrives.
inline constexpr size_t kMaxInlineBytes = 64 * 1024;

// Bounds checked against each request's declared lengths before its bytes
// are buffered. An inline request is held to the same bounds once its line
// is complete (its unescaped arguments count, not the line's bytes).
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
    kNeedMore,   // no complete request yet; call again with more bytes
    kCommand,    // args hold a complete request of `consumed` bytes
    kSetValue,   // "SET key <value>": consumed covers everything up to the
                 // value's first byte; args = {SET, key}; value_len bytes
                 // and then "\r\n" follow and are the caller's to read;
                 // value_len is not checked against max_bulk_bytes: the
                 // caller applies its own value limit (and names it).
                 // Only the array form streams: an inline "SET k v" is an
                 // ordinary kCommand with three arguments
    kError,      // protocol error: reply with `error` and close
    kEmptyLine,  // an inline line holding no argument (Redis ignores it):
                 // drop `consumed` bytes; there is nothing to run
  };
  Kind kind = Kind::kNeedMore;
  size_t consumed = 0;
  // Views into the parsed buffer (array form), or into inline_args (inline
  // form). Either way valid as long as both the buffer's bytes and this
  // request (or a copy of it) are. Inline for the common commands (GET k,
  // SET k v, DEL k): the parser runs once per request, and growing a heap
  // vector one argument at a time cost three allocations per SET.
  absl::InlinedVector<absl::string_view, 4> args;
  uint64_t value_len = 0;
  std::string error;  // without the leading "-" and trailing CRLF
  // An inline request's arguments, unescaped (quotes and \xHH make them
  // differ from the line's bytes); null for the array form. Shared, so a
  // copy of this request keeps its views valid.
  std::shared_ptr<const std::string> inline_args;
};

// Parses at most one request from the start of `buffer`. Stateless: after
// kNeedMore, call again on the grown buffer. A buffer starting with '*' is
// an array request; anything else is an inline line (ended by LF or CRLF),
// split as Redis splits it: on spaces and tabs, "double quotes" with the
// escapes \n \r \t \b \a \" \\ and \xHH, 'single quotes' with \' only; a
// closing quote must be followed by a space or the end of the line. Inline
// errors, with Redis's texts where Redis has one:
//   Protocol error: unbalanced quotes in request
//   Protocol error: too big inline request        (line over kMaxInlineBytes)
//   Protocol error: expected '*' or an inline command, got '\x16'
//                                 (a control byte first: TLS, binary junk)
//   Protocol error: HTTP request ('POST') on the RESP port
//                                 (an inline POST or Host: line, which Redis
//                                 also closes on: a browser's cross-protocol
//                                 request must not run commands)
//   Protocol error: inline request of N arguments (limit M) / inline
//   argument of N bytes (limit M) / request larger than N bytes (...)
//                                 (the RequestLimits)
ParsedRequest ParseRequest(absl::string_view buffer, const RequestLimits& limits);
// The same into *out, which must be default-constructed (no move of the
// result for a caller that already holds one).
void ParseRequestInto(absl::string_view buffer, const RequestLimits& limits, ParsedRequest* out);

// The usual GET and SET in array form ("*2\r\n$3\r\nGET\r\n$<n>\r\n<key>\r\n",
// "*3 .. SET .. $<n>\r\n<key>\r\n$<len>\r\n", the name in any case), as
// ParseRequest() decides them: ParseUsualRequest() is true, with *out set,
// exactly when ParseRequest(buffer, limits) returns kCommand {GET, key} or
// kSetValue {SET, key} of `consumed` bytes (and `value_len`) through its fast
// path; false, *out untouched, for anything else or anything it cannot
// decide (the general parser then does). Views point into `buffer`. A
// caller that parsed a request this way ahead of its turn (the RESP loop's
// look-ahead) rebuilds ParseRequest()'s result with FillParsed() instead of
// parsing it again, provided the buffer's bytes and the limits are the same.
struct UsualRequest {
  bool is_set = false;
  absl::string_view name;  // "GET" or "SET" as sent (any case)
  absl::string_view key;
  uint64_t value_len = 0;  // SET only: the value's length line
  size_t consumed = 0;     // up to the key's CRLF (GET), the value's first byte (SET)
};
bool ParseUsualRequest(absl::string_view buffer, const RequestLimits& limits, UsualRequest* out);
// Sets *out (default-constructed) to what ParseRequest() returns for `u`.
void FillParsed(const UsualRequest& u, ParsedRequest* out);

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

// RESP3 only (a RESP2 peer cannot read them; the server's Connection picks
// the RESP2 shape for a RESP2 connection).
void AppendResp3Null(std::string* out);               // _
void AppendMapHeader(std::string* out, uint64_t n);   // %n; n key/value pairs follow
void AppendSetHeader(std::string* out, uint64_t n);   // ~n; n elements follow
void AppendPushHeader(std::string* out, uint64_t n);  // >n; n elements follow
void AppendBool(std::string* out, bool b);            // #t / #f
// ,<FormatDouble(d)>
void AppendDouble(std::string* out, double d);
// (digits: an integer of any size, "-" allowed first; must hold no CR/LF.
void AppendBigNumber(std::string* out, absl::string_view digits);
// =<len>\r\n<format>:<text>: `format` is 3 bytes ("txt", "mkd").
void AppendVerbatim(std::string* out, absl::string_view format, absl::string_view text);
// A double as Redis writes it: "inf", "-inf", "nan", otherwise the shortest
// digits that read back as the same double (as Redis 7.2+), laid out as
// printf's %g lays them out: "1.1", "0.0001", "1e-05", "3", "-0",
// "1.2345678901234568e+17". The RESP3 double's text, and a RESP2 server's
// bulk string for it.
std::string FormatDouble(double d);
// A request: *N then each argument as a bulk string.
void AppendCommand(std::string* out, absl::Span<const absl::string_view> args);

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
// RESP3 types read as: "_" kNull (as RESP2's $-1 and *-1); "!" (blob
// error) kError; "=" kVerbatim with str the text after its "fmt:" prefix;
// "#" kBool with integer 1 or 0; "," kDouble with str as sent and `number`
// parsed; "(" kBigNumber with the digits in str; "%" kMap with elements
// key, value, key, value...; "~" kSet; ">" kPush. An attribute ("|") is
// read and dropped: the reply is the one that follows it.
struct Reply {
  enum class Type {
    kSimple,
    kError,
    kInteger,
    kBulk,
    kNull,
    kArray,
    kDouble,
    kBool,
    kBigNumber,
    kVerbatim,
    kMap,
    kSet,
    kPush,
  };
  Type type = Type::kNull;
  std::string str;              // simple, error, bulk, verbatim, double, big number
  int64_t integer = 0;          // integer, bool
  double number = 0;            // double
  std::vector<Reply> elements;  // array, set, push; map: 2 per pair
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
// bulk size, elements of one aggregate (a map's pair counts twice), and
// nesting depth (an attribute's contents count as one level deeper).
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
