// Copyright 2026 The kvstore Authors.

#include "server/metrics/http_exchange.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/metrics/exposition.h"

namespace kvstore {
namespace metrics {

namespace {

constexpr absl::string_view kErrorContentType = "text/plain; charset=utf-8";

// RFC 9110 tchar: the characters of a method or a header name.
bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  return absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// A field value or request target may hold visible characters, spaces and
// tabs (targets: no spaces), and bytes >= 0x80; never other controls.
bool IsFieldValue(absl::string_view s) {
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

bool IsTarget(absl::string_view s) {
  if (s.empty() || s[0] != '/') return false;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 505:
      return "HTTP Version Not Supported";
  }
  return "Error";
}

HttpAnswer Respond(int status, absl::string_view content_type, absl::string_view body,
                   bool head_only) {
  HttpAnswer a;
  a.status = status;
  a.bytes =
      absl::StrCat("HTTP/1.1 ", status, " ", Reason(status), "\r\nContent-Type: ", content_type,
                   "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n");
  if (status == 405) absl::StrAppend(&a.bytes, "Allow: GET, HEAD\r\n");
  a.bytes += "\r\n";
  if (!head_only) absl::StrAppend(&a.bytes, body);
  return a;
}

HttpAnswer Refuse(int status, absl::string_view why, bool head_only) {
  return Respond(status, kErrorContentType,
                 absl::StrCat(status, " ", Reason(status), ": ", why, "\n"), head_only);
}

// What the head's fields say about a body; `malformed` for a field that
// is not "name: value" or a Content-Length that is not a number.
struct Fields {
  bool malformed = false;
  bool has_body = false;
};

Fields ReadFields(const std::vector<absl::string_view>& lines) {
  Fields f;
  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    const size_t colon = line.find(':');
    // No name, or whitespace before the colon (a smuggling vector), or a
    // folded continuation line: all malformed.
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon)) ||
        !IsFieldValue(line.substr(colon + 1))) {
      f.malformed = true;
      return f;
    }
    const absl::string_view name = line.substr(0, colon);
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      f.has_body = true;
    } else if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      if (value.empty()) f.malformed = true;
      for (char c : value) {
        if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
          f.malformed = true;
        } else if (c != '0') {
          f.has_body = true;
        }
      }
      if (f.malformed) return f;
    }
  }
  return f;
}

}  // namespace

std::optional<HttpAnswer> AnswerHttp(absl::string_view received, size_t max_head_bytes,
                                     const std::function<std::string()>& metrics_text) {
  const size_t end = received.find("\r\n\r\n");
  const absl::string_view seen =
      end == absl::string_view::npos ? received : received.substr(0, end + 4);
  // A bare LF ends no line here: refused as soon as it is seen, rather than
  // waiting for a blank line in a grammar the client does not speak.
  for (size_t i = seen.find('\n'); i != absl::string_view::npos; i = seen.find('\n', i + 1)) {
    if (i == 0 || seen[i - 1] != '\r') return Refuse(400, "lines must end with CRLF", false);
  }
  if (end == absl::string_view::npos || end + 4 > max_head_bytes) {
    if (received.size() < max_head_bytes) return std::nullopt;
    return Refuse(431, absl::StrCat("the request head is over ", max_head_bytes, " bytes"), false);
  }
  const std::vector<absl::string_view> lines =
      absl::StrSplit(received.substr(0, end), absl::ByString("\r\n"));
  const std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3 || !IsToken(parts[0]) || !IsTarget(parts[1])) {
    return Refuse(400, "malformed request line", false);
  }
  const absl::string_view method = parts[0];
  const absl::string_view version = parts[2];
  const bool head_only = method == "HEAD";
  if (version.size() != 8 || !absl::StartsWith(version, "HTTP/") ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[5])) || version[6] != '.' ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[7]))) {
    return Refuse(400, "malformed HTTP version", head_only);
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return Refuse(505, "only HTTP/1.0 and HTTP/1.1 are served", head_only);
  }
  const Fields fields = ReadFields(lines);
  if (fields.malformed) return Refuse(400, "malformed header field", head_only);
  if (method != "GET" && !head_only) {
    return Refuse(405, "only GET and HEAD of /metrics are served", false);
  }
  if (fields.has_body) return Refuse(413, "requests with a body are not accepted", head_only);
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") return Refuse(404, "only /metrics is served", head_only);
  return Respond(200, kPrometheusTextContentType, metrics_text(), head_only);
}

}  // namespace metrics
}  // namespace kvstore
