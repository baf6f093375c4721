// Copyright 2026 The kvstore Authors.

#include "common/protocol/resp_inline.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvstore {
namespace resp {
namespace internal {

namespace {

// Skipped between arguments: C's isspace, as Redis skips them, and NUL,
// which Redis's C-string splitter cannot carry either.
bool IsGap(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\0';
}

// Ends an unquoted argument. Narrower than IsGap, as in Redis: a vertical
// tab or form feed inside an argument is part of it.
bool EndsPlain(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0'; }

// A control byte cannot start a command anyone types: it is a TLS
// handshake or binary junk, refused at once instead of waiting for a line
// feed that may never come. Whitespace is not refused (Redis skips it).
bool IsControl(unsigned char c) {
  return (c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r') || c == 0x7f;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  return absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10;
}

// The byte a backslash escape inside double quotes stands for.
char Unescaped(char c) {
  switch (c) {
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'b':
      return '\b';
    case 'a':
      return '\a';
    default:
      return c;  // \" \\ and any other escaped byte stand for themselves
  }
}

enum class Quote { kNone, kDouble, kSingle };

// One argument starting at line[*pos] (not a gap), appended to *bytes;
// *pos ends past it. False on unbalanced quotes. A quote may open in the
// middle of an argument (a"b c" is `ab c`), as in Redis.
bool ReadArgument(absl::string_view line, size_t* pos, std::string* bytes) {
  const size_t n = line.size();
  size_t p = *pos;
  Quote quote = Quote::kNone;
  for (;;) {
    if (p == n) {
      if (quote != Quote::kNone) return false;  // never closed
      break;
    }
    const char c = line[p];
    if (quote == Quote::kDouble) {
      if (c == '\\' && p + 3 < n && line[p + 1] == 'x' && absl::ascii_isxdigit(line[p + 2]) &&
          absl::ascii_isxdigit(line[p + 3])) {
        bytes->push_back(static_cast<char>(HexValue(line[p + 2]) * 16 + HexValue(line[p + 3])));
        p += 4;
      } else if (c == '\\' && p + 1 < n) {
        bytes->push_back(Unescaped(line[p + 1]));
        p += 2;
      } else if (c == '"') {
        // The closing quote must end the argument.
        if (p + 1 < n && !IsGap(line[p + 1])) return false;
        ++p;
        break;
      } else {
        bytes->push_back(c);
        ++p;
      }
    } else if (quote == Quote::kSingle) {
      if (c == '\\' && p + 1 < n && line[p + 1] == '\'') {
        bytes->push_back('\'');
        p += 2;
      } else if (c == '\'') {
        if (p + 1 < n && !IsGap(line[p + 1])) return false;
        ++p;
        break;
      } else {
        bytes->push_back(c);
        ++p;
      }
    } else if (EndsPlain(c)) {
      ++p;
      break;
    } else if (c == '"') {
      quote = Quote::kDouble;
      ++p;
    } else if (c == '\'') {
      quote = Quote::kSingle;
      ++p;
    } else {
      bytes->push_back(c);
      ++p;
    }
  }
  *pos = p;
  return true;
}

ParsedRequest Refuse(std::string msg) {
  ParsedRequest r;
  r.kind = ParsedRequest::Kind::kError;
  r.error = std::move(msg);
  return r;
}

// The request line's arguments against the request limits, as the array
// form's are checked against them; the texts name the inline form.
std::string CheckLimits(const std::vector<std::pair<size_t, size_t>>& spans,
                        const RequestLimits& limits) {
  if (spans.size() > limits.max_args) {
    return absl::StrCat("Protocol error: inline request of ", spans.size(), " arguments (limit ",
                        limits.max_args, ")");
  }
  uint64_t total = 0;
  for (const auto& [offset, len] : spans) {
    if (len > limits.max_bulk_bytes) {
      return absl::StrCat("Protocol error: inline argument of ", len, " bytes (limit ",
                          limits.max_bulk_bytes, ")");
    }
    total += len;
  }
  // The loop recognises this text as the query-buffer bound (it names the
  // flag), as it does for the array form's.
  if (total > limits.max_buffered_bytes) {
    return absl::StrCat("Protocol error: request larger than ", limits.max_buffered_bytes,
                        " bytes");
  }
  return "";
}

}  // namespace

bool SplitInline(absl::string_view line, std::string* bytes,
                 std::vector<std::pair<size_t, size_t>>* spans) {
  size_t pos = 0;
  for (;;) {
    while (pos < line.size() && IsGap(line[pos])) ++pos;
    if (pos == line.size()) return true;
    const size_t start = bytes->size();
    if (!ReadArgument(line, &pos, bytes)) return false;
    spans->emplace_back(start, bytes->size() - start);
  }
}

// Nothing is split until the whole line is there, so every prefix of a
// complete line asks for more bytes, as with the array form.
ParsedRequest ParseInline(absl::string_view buf, const RequestLimits& limits) {
  const unsigned char first = static_cast<unsigned char>(buf[0]);
  if (IsControl(first)) {
    return Refuse(absl::StrCat("Protocol error: expected '*' or an inline command, got '\\x",
                               absl::Hex(first, absl::kZeroPad2), "'"));
  }
  // The line feed is looked for only within the bound, so a peer that
  // never sends one costs at most kMaxInlineBytes of buffer.
  const size_t window = std::min(buf.size(), kMaxInlineBytes + 1);
  const size_t lf = buf.substr(0, window).find('\n');
  if (lf == absl::string_view::npos) {
    if (buf.size() > kMaxInlineBytes) return Refuse("Protocol error: too big inline request");
    return ParsedRequest();  // kNeedMore
  }
  absl::string_view line = buf.substr(0, lf);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // Unescaping never lengthens an argument: the line's size is enough.
  auto bytes = std::make_shared<std::string>();
  bytes->reserve(line.size());
  std::vector<std::pair<size_t, size_t>> spans;
  if (!SplitInline(line, bytes.get(), &spans)) {
    return Refuse("Protocol error: unbalanced quotes in request");
  }
  ParsedRequest out;
  out.consumed = lf + 1;
  if (spans.empty()) {
    out.kind = ParsedRequest::Kind::kEmptyLine;
    return out;
  }
  const absl::string_view name(bytes->data() + spans[0].first, spans[0].second);
  if (absl::EqualsIgnoreCase(name, "POST") || absl::EqualsIgnoreCase(name, "Host:")) {
    return Refuse(absl::StrCat("Protocol error: HTTP request ('", name, "') on the RESP port"));
  }
  if (std::string err = CheckLimits(spans, limits); !err.empty()) return Refuse(std::move(err));
  // Views are taken only now that *bytes no longer grows.
  out.args.reserve(spans.size());
  for (const auto& [offset, len] : spans) out.args.emplace_back(bytes->data() + offset, len);
  out.inline_args = std::move(bytes);
  out.kind = ParsedRequest::Kind::kCommand;
  return out;
}

}  // namespace internal
}  // namespace resp
}  // namespace kvstore
