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
#include "common/protocol/resp_array.h"
#include "common/protocol/resp_inline.h"

namespace kvstore {
namespace resp {

bool CommandIs(absl::string_view arg, absl::string_view name) {
  return absl::EqualsIgnoreCase(arg, name);
}

ParsedRequest ParseRequest(absl::string_view buf, const RequestLimits& limits) {
  // One named result, returned from one place: the caller's object is
  // built in place (no move of the argument vector per request).
  ParsedRequest out;
  ParseRequestInto(buf, limits, &out);
  return out;
}

void ParseRequestInto(absl::string_view buf, const RequestLimits& limits, ParsedRequest* out) {
  // Redis decides by the first byte alone: '*' is the array form, anything
  // else a line of text (resp_inline.cc).
  if (!buf.empty() && buf[0] != '*') {
    *out = internal::ParseInline(buf, limits);
  } else {
    internal::ParseArray(buf, limits, out);
  }
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
