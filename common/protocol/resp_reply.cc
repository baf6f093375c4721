// Copyright 2026 The kvstore Authors.
//
// resp::ParseReply: the client's reader of a server's replies, RESP2 and
// RESP3 (resp.h says how each RESP3 type is represented). The server is not
// trusted: lengths, element counts and nesting are bounded by ReplyLimits.

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp.h"

namespace kvstore {
namespace resp {

namespace {

// Where one parse attempt is: the buffer, the read position, and whether
// the reply turned out incomplete (not an error: read more, parse again).
struct Cursor {
  absl::string_view buf;
  size_t pos = 0;
  bool need_more = false;
};

absl::Status ParseOne(Cursor* in, const ReplyLimits& limits, int depth, Reply* out);

// "-123" or "456": a big number's text. absl has no arbitrary-size integer
// type, so only the shape is checked and the digits kept as text.
bool IsBigNumber(absl::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A RESP3 double: "inf", "-inf", "nan" or a decimal number.
bool ParseDouble(absl::string_view s, double* d) {
  if (s == "inf") {
    *d = HUGE_VAL;
  } else if (s == "-inf") {
    *d = -HUGE_VAL;
  } else if (s == "nan") {
    *d = std::nan("");
  } else {
    return absl::SimpleAtod(s, d);
  }
  return true;
}

// The types whose value is the rest of their line.
absl::Status ParseLine(char type, absl::string_view line, Reply* out) {
  switch (type) {
    case '+':
    case '-':
      // Simple strings and errors cannot contain CR or LF, so the line is
      // the whole value; no length to validate.
      out->type = type == '+' ? Reply::Type::kSimple : Reply::Type::kError;
      out->str = std::string(line);
      return absl::OkStatus();
    case ':':
      out->type = Reply::Type::kInteger;
      if (!absl::SimpleAtoi(line, &out->integer)) return absl::DataLossError("bad RESP integer");
      return absl::OkStatus();
    case '_':
      out->type = Reply::Type::kNull;
      if (!line.empty()) return absl::DataLossError("bad RESP3 null");
      return absl::OkStatus();
    case '#':
      out->type = Reply::Type::kBool;
      if (line != "t" && line != "f") return absl::DataLossError("bad RESP3 boolean");
      out->integer = line == "t" ? 1 : 0;
      return absl::OkStatus();
    case ',':
      out->type = Reply::Type::kDouble;
      out->str = std::string(line);
      if (!ParseDouble(line, &out->number)) return absl::DataLossError("bad RESP3 double");
      return absl::OkStatus();
    case '(':
      out->type = Reply::Type::kBigNumber;
      out->str = std::string(line);
      if (!IsBigNumber(line)) return absl::DataLossError("bad RESP3 big number");
      return absl::OkStatus();
  }
  return absl::DataLossError(
      absl::StrCat("unexpected RESP type byte 0x", absl::Hex(static_cast<unsigned char>(type))));
}

// The length-prefixed types: bulk string "$", verbatim string "=", blob
// error "!"; `body` is where the length line ends.
absl::Status ParseBlob(Cursor* in, char type, int64_t len, size_t body, const ReplyLimits& limits,
                       Reply* out) {
  if (len < -1 || (len >= 0 && static_cast<uint64_t>(len) > limits.max_bulk_bytes) ||
      (len == -1 && type != '$')) {
    return absl::DataLossError("bad RESP bulk length");
  }
  if (len == -1) {  // RESP2's null bulk
    out->type = Reply::Type::kNull;
    in->pos = body;
    return absl::OkStatus();
  }
  // len <= max_bulk_bytes here, so the sum cannot overflow.
  if (in->buf.size() < body + len + 2) {
    in->need_more = true;
    return absl::OkStatus();
  }
  if (in->buf[body + len] != '\r' || in->buf[body + len + 1] != '\n') {
    return absl::DataLossError("RESP bulk not terminated by CRLF");
  }
  absl::string_view data = in->buf.substr(body, static_cast<size_t>(len));
  out->type = Reply::Type::kBulk;
  if (type == '!') out->type = Reply::Type::kError;
  if (type == '=') {
    // "txt:" or "mkd:" first: three bytes of format and a colon.
    if (data.size() < 4 || data[3] != ':') return absl::DataLossError("bad RESP3 verbatim string");
    out->type = Reply::Type::kVerbatim;
    data.remove_prefix(4);
  }
  out->str = std::string(data);
  in->pos = body + len + 2;
  return absl::OkStatus();
}

// The aggregates: array "*", set "~", push ">", map "%" (2 elements per
// pair), and an attribute "|" (a map read and dropped, then the reply it
// annotates, one level deeper so a chain of them stays bounded).
absl::Status ParseAggregate(Cursor* in, char type, int64_t n, const ReplyLimits& limits, int depth,
                            Reply* out) {
  const int64_t per = (type == '%' || type == '|') ? 2 : 1;
  if (n < -1 || (n == -1 && type != '*') ||
      (n > 0 && static_cast<uint64_t>(n) > limits.max_elements / per)) {
    return absl::DataLossError("bad RESP aggregate length");
  }
  // "*-1" is RESP2's null array, which this client reads as a null reply.
  if (n == -1) {
    out->type = Reply::Type::kNull;
    return absl::OkStatus();
  }
  out->elements.clear();
  for (int64_t i = 0; i < n * per; ++i) {
    // Invariant: elements[0..i) parsed completely. On need_more the partial
    // aggregate is discarded by ParseReply, which starts over next time.
    out->elements.emplace_back();
    absl::Status s = ParseOne(in, limits, depth + 1, &out->elements.back());
    if (!s.ok() || in->need_more) return s;
  }
  switch (type) {
    case '|':
      *out = Reply();
      return ParseOne(in, limits, depth + 1, out);
    case '%':
      out->type = Reply::Type::kMap;
      break;
    case '~':
      out->type = Reply::Type::kSet;
      break;
    case '>':
      out->type = Reply::Type::kPush;
      break;
    default:
      out->type = Reply::Type::kArray;
  }
  return absl::OkStatus();
}

// Recursive reply parser; sets in->need_more when incomplete.
absl::Status ParseOne(Cursor* in, const ReplyLimits& limits, int depth, Reply* out) {
  // Bounded recursion: a server's reply is untrusted input too, and deep
  // nesting must not exhaust the client's stack.
  if (depth > limits.max_depth) return absl::DataLossError("RESP reply nested too deeply");
  if (in->pos >= in->buf.size()) {
    in->need_more = true;
    return absl::OkStatus();
  }
  const char type = in->buf[in->pos];
  const size_t eol = in->buf.find("\r\n", in->pos);
  if (eol == absl::string_view::npos) {
    // No line-based reply this client parses (status, error, integer, length)
    // comes near 64 KiB; anything longer is garbage, not a slow peer.
    if (in->buf.size() - in->pos > 64 * 1024) return absl::DataLossError("RESP line too long");
    in->need_more = true;
    return absl::OkStatus();
  }
  const absl::string_view line = in->buf.substr(in->pos + 1, eol - in->pos - 1);
  switch (type) {
    case '$':
    case '=':
    case '!':
    case '*':
    case '%':
    case '~':
    case '>':
    case '|': {
      int64_t n;
      if (!absl::SimpleAtoi(line, &n)) return absl::DataLossError("bad RESP length");
      if (type == '$' || type == '=' || type == '!') {
        return ParseBlob(in, type, n, eol + 2, limits, out);
      }
      in->pos = eol + 2;
      return ParseAggregate(in, type, n, limits, depth, out);
    }
    default: {
      absl::Status s = ParseLine(type, line, out);
      if (s.ok()) in->pos = eol + 2;
      return s;
    }
  }
}

}  // namespace

absl::StatusOr<ParsedReply> ParseReply(absl::string_view buffer, const ReplyLimits& limits) {
  ParsedReply out;
  Cursor in;
  in.buf = buffer;
  absl::Status s = ParseOne(&in, limits, 0, &out.reply);
  if (!s.ok()) return s;
  // Incomplete: report nothing consumed; the caller appends more bytes and
  // calls again with the same buffer start.
  if (in.need_more) return ParsedReply();
  out.complete = true;
  out.consumed = in.pos;
  return out;
}

}  // namespace resp
}  // namespace kvstore
