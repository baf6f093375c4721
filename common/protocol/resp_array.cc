// Copyright 2026 The kvstore Authors.

#include "common/protocol/resp_array.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp_head.h"

namespace kvstore {
namespace resp {
namespace internal {

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
void SetError(ParsedRequest* out, std::string msg) {
  out->kind = ParsedRequest::Kind::kError;
  out->args.clear();
  out->error = std::move(msg);
}

// ParseUsualRequest()'s parse, inlined into ParseArray().
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ParseUsual(absl::string_view buf,
                                                    const RequestLimits& limits,
                                                    UsualRequest* out) {
  const head::Usual usual = head::Match(buf);
  if (usual == head::Usual::kNone) return false;
  const bool is_set = usual == head::Usual::kSet;
  if (limits.max_args < (is_set ? 3u : 2u) || limits.max_bulk_bytes < 3) return false;
  size_t pos = head::kKeyLine;
  absl::string_view key;
  if (!head::ReadBulk(buf, &pos, &key)) return false;
  if (key.size() > limits.max_bulk_bytes || key.size() + 3 > limits.max_buffered_bytes) {
    return false;
  }
  uint64_t value_len = 0;
  if (is_set && !head::ReadNumberLine(buf, &pos, '$', &value_len)) return false;
  out->is_set = is_set;
  out->name = buf.substr(head::kName, 3);
  out->key = key;
  out->value_len = value_len;
  out->consumed = pos;
  return true;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void FillUsual(const UsualRequest& u, ParsedRequest* out) {
  out->kind = u.is_set ? ParsedRequest::Kind::kSetValue : ParsedRequest::Kind::kCommand;
  out->value_len = u.value_len;
  out->args.push_back(u.name);
  out->args.push_back(u.key);
  out->consumed = u.consumed;
}

}  // namespace

void ParseArray(absl::string_view buf, const RequestLimits& limits, ParsedRequest* out) {
  UsualRequest usual;
  if (ParseUsual(buf, limits, &usual)) {
    FillUsual(usual, out);
  } else {
    ParseFieldByField(buf, limits, out);
  }
}

void ParseFieldByField(absl::string_view buf, const RequestLimits& limits, ParsedRequest* out) {
  std::string error;
  int64_t argc = 0;
  size_t pos = 0;
  switch (ReadLength(buf, 0, '*', &argc, &pos, &error)) {
    case LineResult::kNeedMore:
      return;
    case LineResult::kBad:
      return SetError(out, std::move(error));
    case LineResult::kOk:
      break;
  }
  // Checked before any argument is read: a huge argc costs nothing until
  // arguments arrive, and the limit rejects it up front.
  if (argc <= 0 || static_cast<uint64_t>(argc) > limits.max_args) {
    return SetError(out, absl::StrCat("Protocol error: invalid multibulk length ", argc,
                                      " (must be 1..", limits.max_args, ")"));
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
        out->args.clear();
        return;
      case LineResult::kBad:
        return SetError(out, std::move(error));
      case LineResult::kOk:
        break;
    }
    // Null bulk strings ("$-1") are replies only; in a request they are bad.
    if (len < 0) return SetError(out, absl::StrCat("Protocol error: invalid bulk length ", len));
    // SET key value: the value is handed to the caller to stream into pool
    // memory instead of being buffered here. The caller checks its length
    // against the value limit (and can name that limit in its reply).
    if (i == 2 && argc == 3 && CommandIs(out->args[0], "SET")) {
      out->kind = ParsedRequest::Kind::kSetValue;
      out->consumed = body;
      out->value_len = static_cast<uint64_t>(len);
      return;
    }
    // Both limits are checked before waiting for the body, so a declared
    // length alone is enough to refuse a request without buffering it.
    if (static_cast<uint64_t>(len) > limits.max_bulk_bytes) {
      return SetError(out, absl::StrCat("Protocol error: invalid bulk length ", len, " (limit ",
                                        limits.max_bulk_bytes, ")"));
    }
    buffered += static_cast<uint64_t>(len);
    if (buffered > limits.max_buffered_bytes) {
      return SetError(
          out, absl::StrCat("Protocol error: request larger than ", limits.max_buffered_bytes,
                            " bytes (use SET for large values)"));
    }
    // Incomplete: drop the views collected so far, since the caller will
    // parse again from the start once more bytes arrive.
    if (buf.size() < body + static_cast<uint64_t>(len) + 2) {
      out->args.clear();
      return;
    }
    if (buf[body + len] != '\r' || buf[body + len + 1] != '\n') {
      return SetError(out, "Protocol error: bulk string not terminated by CRLF");
    }
    // Views into `buf`: valid until the caller consumes those bytes.
    out->args.push_back(buf.substr(body, static_cast<size_t>(len)));
    pos = body + static_cast<size_t>(len) + 2;
  }
  out->kind = ParsedRequest::Kind::kCommand;
  // `pos` is past the last argument's CRLF: the next request starts there.
  out->consumed = pos;
}

}  // namespace internal

// A matched head (resp_head.h), then a key and (for a SET) the value's
// length line of at most 12 digits, within the limits ParseFieldByField()
// checks for the name and the key: argc, each bulk's size, and both
// together. Anything else, a request cut short too, is left to it.
bool ParseUsualRequest(absl::string_view buf, const RequestLimits& limits, UsualRequest* out) {
  return internal::ParseUsual(buf, limits, out);
}

void FillParsed(const UsualRequest& u, ParsedRequest* out) { internal::FillUsual(u, out); }

}  // namespace resp
}  // namespace kvstore
