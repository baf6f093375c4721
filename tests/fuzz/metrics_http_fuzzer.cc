// Copyright 2026 The kvstore Authors.
//
// Fuzzes metrics::AnswerHttp, the whole request grammar of the metrics
// endpoint, which anyone who reaches the port may send (no credential).
// The input is the bytes a client sends on one connection; the endpoint's
// loop reads at most max_head_bytes of them and asks AnswerHttp after every
// read, so every prefix is a state the endpoint can be in.
//
// Besides "no crash, no sanitizer report", it checks:
//   * one answer per connection: once a prefix is answered, every longer
//     prefix gets the same answer byte for byte (so when the loop reads
//     does not matter, and bytes after the decision are never looked at);
//   * nothing is answered from nothing: an empty input is incomplete, and
//     an input that is still incomplete at max_head_bytes is answered 431;
//   * the answer is well-formed HTTP/1.1 with "Connection: close" and a
//     Content-Length that matches its body (no body for HEAD);
//   * only GET or HEAD get a 200, and the metrics text is produced at most
//     once, for a 200 only;
//   * a request that announces a body (Content-Length other than 0, or any
//     Transfer-Encoding) never gets a 200.
// Input: byte 0 picks max_head_bytes (small, to reach the 431 path within
// libFuzzer's -max_len); the rest is the stream.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "server/metrics/http_exchange.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

constexpr absl::string_view kText = "kvstore_up 1\n";

struct Outcome {
  std::optional<metrics::HttpAnswer> answer;
  int text_calls = 0;
};

Outcome Ask(absl::string_view received, size_t max_head) {
  Outcome o;
  o.answer = metrics::AnswerHttp(received, max_head, [&o] {
    ++o.text_calls;
    return std::string(kText);
  });
  return o;
}

// The answer's framing: status line, Connection: close, and a body whose
// length is what Content-Length says. A HEAD request gets no body, unless
// it was refused before its request line could be read (a bare LF, a head
// too long), when the method is not known.
void CheckWellFormed(const metrics::HttpAnswer& a, bool head_only) {
  KV_FUZZ_CHECK(absl::StartsWith(a.bytes, "HTTP/1.1 "));
  KV_FUZZ_CHECK(a.status >= 200 && a.status <= 599);
  KV_FUZZ_CHECK(a.bytes.substr(9, 3) == std::to_string(a.status));
  const size_t end = a.bytes.find("\r\n\r\n");
  KV_FUZZ_CHECK(end != std::string::npos);
  const absl::string_view head = absl::string_view(a.bytes).substr(0, end);
  const absl::string_view body = absl::string_view(a.bytes).substr(end + 4);
  KV_FUZZ_CHECK(absl::StrContains(head, "\r\nConnection: close"));
  const size_t cl = head.find("\r\nContent-Length: ");
  KV_FUZZ_CHECK(cl != absl::string_view::npos);
  absl::string_view value = head.substr(cl + 18);
  value = value.substr(0, value.find("\r\n"));
  size_t length = 0;
  KV_FUZZ_CHECK(absl::SimpleAtoi(value, &length));
  KV_FUZZ_CHECK(body.size() == length || (head_only && body.empty()));
}

// Whether the head (up to its blank line) has a field announcing a body.
bool AnnouncesBody(absl::string_view head) {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view name = line.substr(0, colon);
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) return true;
    if (absl::EqualsIgnoreCase(name, "Content-Length") &&
        value.find_first_not_of('0') != absl::string_view::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kvstore::Ask;
  using kvstore::Outcome;
  namespace metrics = kvstore::metrics;
  kvstore::fuzz::FuzzInput in(data, size);
  // 64..319 bytes: the server refuses less than 64.
  const size_t max_head = 64 + in.Int<uint8_t>();
  // The loop never reads more than max_head bytes of a connection.
  const absl::string_view stream = in.Rest().substr(0, max_head);

  KV_FUZZ_CHECK(!Ask("", max_head).answer.has_value());
  const Outcome whole = Ask(stream, max_head);
  if (!whole.answer.has_value()) {
    // Incomplete: the loop reads on, and only while there is room.
    KV_FUZZ_CHECK(stream.size() < max_head);
  } else {
    const metrics::HttpAnswer& a = *whole.answer;
    const bool head_only = absl::StartsWith(stream, "HEAD ");
    kvstore::CheckWellFormed(a, head_only);
    // HEAD needs the text too, for its Content-Length.
    KV_FUZZ_CHECK(whole.text_calls == (a.status == 200 ? 1 : 0));
    if (a.status == 200) {
      KV_FUZZ_CHECK(absl::StartsWith(stream, "GET ") || head_only);
      KV_FUZZ_CHECK(absl::EndsWith(a.bytes, head_only ? "\r\n\r\n" : kvstore::kText));
      const size_t end = stream.find("\r\n\r\n");
      KV_FUZZ_CHECK(end != absl::string_view::npos);
      KV_FUZZ_CHECK(!kvstore::AnnouncesBody(stream.substr(0, end)));
    }
  }
  // Every prefix: undecided, or decided exactly as the whole.
  bool decided = false;
  for (size_t n = 1; n <= stream.size(); ++n) {
    const Outcome o = Ask(stream.substr(0, n), max_head);
    if (!o.answer.has_value()) {
      KV_FUZZ_CHECK(!decided);
      continue;
    }
    decided = true;
    KV_FUZZ_CHECK(whole.answer.has_value());
    KV_FUZZ_CHECK(o.answer->status == whole.answer->status);
    KV_FUZZ_CHECK(o.answer->bytes == whole.answer->bytes);
  }
  return 0;
}
