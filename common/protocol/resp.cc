// Copyright 2026 The kvstore Authors.

#include "common/protocol/resp.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"
#include "common/protocol/resp_inline.h"

namespace kvstore {
namespace resp {

namespace {

// kNeedMore is not an error: the connection reads more bytes and parses
// the whole request again from its start.
enum class LineResult { kOk, kNeedMore, kBad };

// Reads "<prefix><digits>\r\n" at `pos`. Only an optional '-' and decimal
// digits are accepted, at most kMaxLengthLine bytes in all.
LineResult ReadLength(absl::string_view buf, size_t pos, char prefix, int64_t* value, size_t* next,
                      std::string* error) {
  if (pos >= buf.size()) return LineResult::kNeedMore;
  // Nearly every line is the prefix, a few digits and CRLF, all received:
  // read it in one pass. Anything else (a sign, a bad byte, too many digits,
  // an incomplete line) takes the checking path below, which decides it the
  // same way for these lines: 1-18 digits make a line of at most 21 bytes,
  // inside kMaxLengthLine.
  static_assert(kMaxLengthLine >= 1 + 18 + 2, "an 18-digit line must fit the checked window");
  if (buf[pos] == prefix) {
    const char* const first = buf.data() + pos + 1;
    const char* const end = buf.data() + buf.size();
    const char* d = first;
    int64_t v = 0;
    while (d < end && d - first < 18 && static_cast<unsigned char>(*d - '0') < 10) {
      v = v * 10 + (*d - '0');
      ++d;
    }
    if (d != first && end - d >= 2 && d[0] == '\r' && d[1] == '\n') {
      *value = v;
      *next = static_cast<size_t>(d + 2 - buf.data());
      return LineResult::kOk;
    }
  }
  if (buf[pos] != prefix) {
    char c = buf[pos];
    *error = absl::StrCat(
        "Protocol error: expected '", std::string(1, prefix), "', got '",
        absl::ascii_isprint(static_cast<unsigned char>(c))
            ? std::string(1, c)
            : absl::StrCat("\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2)),
        "'");
    return LineResult::kBad;
  }
  // Look for '\r' only within kMaxLengthLine bytes: a peer that never sends
  // CRLF must not make the server buffer an unbounded line.
  const size_t limit = std::min(buf.size(), pos + kMaxLengthLine);
  size_t end = pos + 1;
  while (end < limit && buf[end] != '\r') ++end;
  if (end >= limit) {
    // A full window without '\r' is bad; a shorter buffer may still complete.
    if (buf.size() >= pos + kMaxLengthLine) {
      *error = "Protocol error: length line too long";
      return LineResult::kBad;
    }
    return LineResult::kNeedMore;
  }
  // '\r' seen but its '\n' not yet received.
  if (end + 1 >= buf.size()) return LineResult::kNeedMore;
  if (buf[end + 1] != '\n') {
    *error = "Protocol error: length line not terminated by CRLF";
    return LineResult::kBad;
  }
  absl::string_view digits = buf.substr(pos + 1, end - pos - 1);
  bool negative = !digits.empty() && digits[0] == '-';
  absl::string_view body = negative ? digits.substr(1) : digits;
  // At most 18 digits: 10^18 - 1 fits int64_t, so the loop below cannot
  // overflow. Real lengths are far smaller and the callers' limits reject
  // them anyway.
  if (body.empty() || body.size() > 18) {
    *error =
        absl::StrCat("Protocol error: invalid ", prefix == '*' ? "multibulk" : "bulk", " length");
    return LineResult::kBad;
  }
  int64_t v = 0;
  // Hand-rolled instead of SimpleAtoi, which accepts '+' and whitespace that
  // RESP does not allow.
  for (char c : body) {
    if (c < '0' || c > '9') {
      *error =
          absl::StrCat("Protocol error: invalid ", prefix == '*' ? "multibulk" : "bulk", " length");
      return LineResult::kBad;
    }
    v = v * 10 + (c - '0');
  }
  *value = negative ? -v : v;
  *next = end + 2;
  return LineResult::kOk;
}

// kError carries no position: the caller replies with the message and
// closes the connection, since the parser cannot find the next request.
ParsedRequest Error(std::string msg) {
  ParsedRequest r;
  r.kind = ParsedRequest::Kind::kError;
  r.error = std::move(msg);
  return r;
}

}  // namespace

bool CommandIs(absl::string_view arg, absl::string_view name) {
  return absl::EqualsIgnoreCase(arg, name);
}

ParsedRequest ParseRequest(absl::string_view buf, const RequestLimits& limits) {
  // Redis decides by the first byte alone: '*' is the array form, anything
  // else a line of text (resp_inline.cc).
  if (!buf.empty() && buf[0] != '*') return internal::ParseInline(buf, limits);
  ParsedRequest out;
  std::string error;
  int64_t argc = 0;
  size_t pos = 0;
  switch (ReadLength(buf, 0, '*', &argc, &pos, &error)) {
    case LineResult::kNeedMore:
      return out;
    case LineResult::kBad:
      return Error(std::move(error));
    case LineResult::kOk:
      break;
  }
  // Checked before any argument is read: a huge argc costs nothing until
  // arguments arrive, and the limit rejects it up front.
  if (argc <= 0 || static_cast<uint64_t>(argc) > limits.max_args) {
    return Error(absl::StrCat("Protocol error: invalid multibulk length ", argc, " (must be 1..",
                              limits.max_args, ")"));
  }
  // Total bulk bytes of this request so far: bounds the memory a connection
  // holds for one request, independently of each bulk's own limit.
  uint64_t buffered = 0;
  // Not reserved up front: argc is peer-supplied and only bounds the loop.
  for (int64_t i = 0; i < argc; ++i) {
    int64_t len = 0;
    size_t body = 0;
    switch (ReadLength(buf, pos, '$', &len, &body, &error)) {
      case LineResult::kNeedMore:
        out.args.clear();
        return out;
      case LineResult::kBad:
        return Error(std::move(error));
      case LineResult::kOk:
        break;
    }
    // Null bulk strings ("$-1") are replies only; in a request they are bad.
    if (len < 0) return Error(absl::StrCat("Protocol error: invalid bulk length ", len));
    // SET key value: the value is handed to the caller to stream into pool
    // memory instead of being buffered here. The caller checks its length
    // against the value limit (and can name that limit in its reply).
    if (i == 2 && argc == 3 && CommandIs(out.args[0], "SET")) {
      out.kind = ParsedRequest::Kind::kSetValue;
      out.consumed = body;
      out.value_len = static_cast<uint64_t>(len);
      return out;
    }
    // Both limits are checked before waiting for the body, so a declared
    // length alone is enough to refuse a request without buffering it.
    if (static_cast<uint64_t>(len) > limits.max_bulk_bytes) {
      return Error(absl::StrCat("Protocol error: invalid bulk length ", len, " (limit ",
                                limits.max_bulk_bytes, ")"));
    }
    buffered += static_cast<uint64_t>(len);
    if (buffered > limits.max_buffered_bytes) {
      return Error(absl::StrCat("Protocol error: request larger than ", limits.max_buffered_bytes,
                                " bytes (use SET for large values)"));
    }
    // Incomplete: drop the views collected so far, since the caller will
    // parse again from the start once more bytes arrive.
    if (buf.size() < body + static_cast<uint64_t>(len) + 2) {
      out.args.clear();
      return out;
    }
    if (buf[body + len] != '\r' || buf[body + len + 1] != '\n') {
      return Error("Protocol error: bulk string not terminated by CRLF");
    }
    // Views into `buf`: valid until the caller consumes those bytes.
    out.args.push_back(buf.substr(body, static_cast<size_t>(len)));
    pos = body + static_cast<size_t>(len) + 2;
  }
  out.kind = ParsedRequest::Kind::kCommand;
  // `pos` is past the last argument's CRLF: the next request starts there.
  out.consumed = pos;
  return out;
}

void AppendSimple(std::string* out, absl::string_view s) { absl::StrAppend(out, "+", s, "\r\n"); }

void AppendOk(std::string* out) { out->append("+OK\r\n"); }

void AppendError(std::string* out, absl::string_view msg) {
  const size_t begin = out->size() + 1;  // just after the '-'
  absl::StrAppend(out, "-", msg, "\r\n");
  // Scrub in place (the message only, not the trailing CRLF): one append, no
  // temporary copy of the message.
  // A CR or LF inside an error message would end the RESP line early and
  // let the rest be read as another reply, so they become spaces.
  for (size_t i = begin; i + 2 < out->size(); ++i) {
    char& ch = (*out)[i];
    if (ch == '\r' || ch == '\n') ch = ' ';
  }
}

void AppendInteger(std::string* out, int64_t n) { absl::StrAppend(out, ":", n, "\r\n"); }

namespace {

// "<mark><n>\r\n" into `buf` (at least 24 bytes); returns its length. Every
// GET reply starts with one: formatted here, not through StrAppend, whose
// general machinery cost more than the rest of a 4 KiB reply but the copy.
size_t FormatLengthLine(char mark, uint64_t n, char* buf) {
  // Written backwards from the end of a scratch line, then copied out whole.
  char line[24];
  char* p = line + sizeof(line);
  *--p = '\n';
  *--p = '\r';
  do {
    *--p = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n != 0);
  *--p = mark;
  const size_t len = static_cast<size_t>(line + sizeof(line) - p);
  std::memcpy(buf, p, len);
  return len;
}

}  // namespace

void AppendBulkHeader(std::string* out, uint64_t len) {
  char line[24];
  out->append(line, FormatLengthLine('$', len, line));
}

void AppendBulkTrailer(std::string* out) { out->append("\r\n", 2); }

// Bulk strings are length-prefixed, so `s` may hold any bytes, CRLF too.
void AppendBulk(std::string* out, absl::string_view s) {
  AppendBulkHeader(out, s.size());
  out->append(s.data(), s.size());
  AppendBulkTrailer(out);
}

void AppendNull(std::string* out) { out->append("$-1\r\n"); }

void AppendArrayHeader(std::string* out, uint64_t n) {
  char line[24];
  out->append(line, FormatLengthLine('*', n, line));
}

// --- RESP3 -------------------------------------------------------------------

void AppendResp3Null(std::string* out) { out->append("_\r\n"); }

void AppendMapHeader(std::string* out, uint64_t n) { absl::StrAppend(out, "%", n, "\r\n"); }

void AppendSetHeader(std::string* out, uint64_t n) { absl::StrAppend(out, "~", n, "\r\n"); }

void AppendPushHeader(std::string* out, uint64_t n) { absl::StrAppend(out, ">", n, "\r\n"); }

void AppendBool(std::string* out, bool b) { out->append(b ? "#t\r\n" : "#f\r\n"); }

void AppendDouble(std::string* out, double d) {
  absl::StrAppend(out, ",", FormatDouble(d), "\r\n");
}

void AppendBigNumber(std::string* out, absl::string_view digits) {
  absl::StrAppend(out, "(", digits, "\r\n");
}

// Length-prefixed like a bulk string, so the text may hold any bytes.
void AppendVerbatim(std::string* out, absl::string_view format, absl::string_view text) {
  absl::StrAppend(out, "=", format.size() + 1 + text.size(), "\r\n", format, ":", text, "\r\n");
}

// The digits are the shortest that read back as the same double (what
// Redis writes since 7.2; 7.0 wrote 17 significant digits, "1.1" as
// "1.1000000000000001"), laid out as printf's %g would lay out that many:
// plain between 1e-4 and 1e17, else with an exponent. The special values
// are spelled out because libc spellings vary ("-nan").
std::string FormatDouble(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest scientific form: "-1.2345e+17", "1e-05", "0e+00".
  const std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  const absl::string_view sci(buf, r.ptr - buf);
  const size_t e = sci.find('e');
  int exp = 0;
  (void)absl::SimpleAtoi(sci.substr(e + 1), &exp);
  if (exp < -4 || exp >= 17) return std::string(sci);
  absl::string_view mantissa = sci.substr(0, e);
  std::string out;
  if (mantissa[0] == '-') {
    out = "-";
    mantissa.remove_prefix(1);
  }
  std::string digits(mantissa.substr(0, 1));
  if (mantissa.size() > 2) absl::StrAppend(&digits, mantissa.substr(2));  // past the '.'
  if (exp < 0) return absl::StrCat(out, "0.", std::string(-exp - 1, '0'), digits);
  const size_t whole = static_cast<size_t>(exp) + 1;
  if (digits.size() <= whole)
    return absl::StrCat(out, digits, std::string(whole - digits.size(), '0'));
  return absl::StrCat(out, digits.substr(0, whole), ".", digits.substr(whole));
}

void AppendCommand(std::string* out, absl::Span<const absl::string_view> args) {
  AppendArrayHeader(out, args.size());
  // Every argument as a bulk string, so keys and values may hold any bytes.
  for (absl::string_view a : args) AppendBulk(out, a);
}

namespace {

// One row per absl code that has its own word. Order does not matter; a
// linear search over 16 rows is cheaper than building a map, and errors are
// not the hot path.
struct CodeWord {
  absl::StatusCode code;
  absl::string_view word;
};

constexpr CodeWord kCodeWords[] = {
    {absl::StatusCode::kInvalidArgument, "ERR"},
    {absl::StatusCode::kResourceExhausted, "OOM"},
    {absl::StatusCode::kUnavailable, "TRYAGAIN"},
    {absl::StatusCode::kDataLoss, "DATALOSS"},
    {absl::StatusCode::kNotFound, "NOTFOUND"},
    {absl::StatusCode::kDeadlineExceeded, "TIMEOUT"},
    {absl::StatusCode::kCancelled, "CANCELLED"},
    {absl::StatusCode::kAlreadyExists, "ALREADYEXISTS"},
    {absl::StatusCode::kPermissionDenied, "NOPERM"},
    {absl::StatusCode::kUnauthenticated, "NOAUTH"},
    {absl::StatusCode::kFailedPrecondition, "PRECONDITION"},
    {absl::StatusCode::kAborted, "ABORTED"},
    {absl::StatusCode::kOutOfRange, "OUTOFRANGE"},
    {absl::StatusCode::kUnimplemented, "UNIMPLEMENTED"},
    {absl::StatusCode::kInternal, "INTERNAL"},
    {absl::StatusCode::kUnknown, "UNKNOWN"},
};

// HELLO's Redis-defined refusal; only read, never produced from a Status
// (the server writes it literally).
constexpr absl::string_view kNoProtoWord = "NOPROTO";
// A refused AUTH password, in Redis's words; read only, for the same reason.
constexpr absl::string_view kWrongPassWord = "WRONGPASS";

}  // namespace

std::string StatusToRespError(const absl::Status& s) {
  // A cluster refusal in Redis Cluster's words, which cluster-aware clients
  // act on (and an outcome-unknown one in its own).
  if (std::optional<cluster::Refusal> r = cluster::FromStatus(s)) {
    if (std::optional<std::string> text = cluster::RespText(*r)) return *std::move(text);
  }
  absl::string_view word = "UNKNOWN";
  // Codes without a row (kOk cannot be an error) fall back to "UNKNOWN".
  for (const CodeWord& row : kCodeWords) {
    if (row.code == s.code()) {
      word = row.word;
      break;
    }
  }
  return absl::StrCat(word, " ", s.message());
}

absl::Status RespErrorToStatus(absl::string_view error) {
  if (std::optional<cluster::Refusal> r = cluster::ParseRespText(error))
    return cluster::ToStatus(*r);
  // substr(0, npos) is the whole text when it has no space.
  const absl::string_view word = error.substr(0, error.find(' '));
  // No space: the message is the whole text, as the TCP client always did.
  const absl::string_view msg = word.size() < error.size() ? error.substr(word.size() + 1) : error;
  for (const CodeWord& row : kCodeWords) {
    if (row.word == word) return absl::Status(row.code, msg);
  }
  // A server that does not speak RESP3 answers HELLO 3 with NOPROTO.
  if (word == kNoProtoWord) return absl::UnimplementedError(msg);
  if (word == kWrongPassWord) return absl::UnauthenticatedError(msg);
  // Not one of ours: keep everything, the word included, for the caller.
  return absl::UnknownError(error);
}

void AppendStatusError(std::string* out, const absl::Status& s) {
  AppendError(out, StatusToRespError(s));
}

}  // namespace resp
}  // namespace kvstore
