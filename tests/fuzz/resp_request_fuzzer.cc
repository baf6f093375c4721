// Copyright 2026 The kvstore Authors.
//
// Fuzzes resp::ParseRequest, the server's parser of bytes from any TCP peer,
// the way the RESP port drives it: parse a request, drop its bytes (and a
// streamed SET value), parse the next, until an error or a partial request.
// Both forms: arrays ('*') and inline lines (anything else).
//
// Besides "no crash, no sanitizer report", it checks:
//   * consumed never exceeds the buffer, and a command has 1..max_args args
//     each within max_bulk_bytes; an inline line is at most kMaxInlineBytes
//     and an empty one (kEmptyLine) has no args;
//   * statelessness: every strict prefix of a complete request (or empty
//     line) parses as kNeedMore (the port re-parses a growing buffer, so a
//     prefix reading as an error or as another command would break a slow
//     client);
//   * round trip: AppendCommand(args) parses back to the same args, and so
//     does the inline line QuoteInline(args) writes (every byte escaped);
//   * one answer: an array request's fast path for the usual GET and SET
//     (resp_head.h) decides every buffer as the field-by-field path does.
// Input: byte 0 picks tight or default limits; the rest is the stream.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/protocol/resp.h"
#include "common/protocol/resp_array.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

using resp::ParsedRequest;
using Kind = ParsedRequest::Kind;

// Prefixes of a complete request must all ask for more bytes. Checking each
// one is quadratic, so long requests are sampled.
void CheckPrefixes(absl::string_view request, const resp::RequestLimits& limits) {
  const size_t n = request.size();
  const size_t step = n <= 256 ? 1 : n / 64;
  for (size_t k = 0; k < n; k += step) {
    ParsedRequest p = resp::ParseRequest(request.substr(0, k), limits);
    KV_FUZZ_CHECK(p.kind == Kind::kNeedMore);
  }
}

void CheckRoundTrip(const ParsedRequest& p, const resp::RequestLimits& limits) {
  std::string encoded;
  resp::AppendCommand(&encoded, p.args);
  ParsedRequest again = resp::ParseRequest(encoded, limits);
  // An inline "SET k v" is a command; as an array it is the streamed SET.
  if (p.args.size() == 3 && resp::CommandIs(p.args[0], "SET")) {
    KV_FUZZ_CHECK(again.kind == Kind::kSetValue);
    KV_FUZZ_CHECK(again.value_len == p.args[2].size());
    KV_FUZZ_CHECK(encoded.substr(again.consumed) == absl::StrCat(p.args[2], "\r\n"));
    return;
  }
  KV_FUZZ_CHECK(again.kind == Kind::kCommand);
  KV_FUZZ_CHECK(again.consumed == encoded.size());
  KV_FUZZ_CHECK(again.args == p.args);
}

// An inline line that must split back into `args`: each argument double-
// quoted with every byte as \xHH, the one spelling that needs no thought.
std::string QuoteInline(absl::Span<const absl::string_view> args) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string line;
  for (absl::string_view a : args) {
    line += line.empty() ? "\"" : " \"";
    for (unsigned char c : a) {
      line += "\\x";
      line += kHex[c >> 4];
      line += kHex[c & 15];
    }
    line += '"';
  }
  return line + "\r\n";
}

void CheckInlineRoundTrip(const ParsedRequest& p, const resp::RequestLimits& limits) {
  // An inline POST or Host: is refused as HTTP, whatever its spelling.
  if (absl::EqualsIgnoreCase(p.args[0], "POST") || absl::EqualsIgnoreCase(p.args[0], "Host:")) {
    return;
  }
  const std::string line = QuoteInline(p.args);
  // The bound counts the line's CR, not its LF.
  if (line.size() > resp::kMaxInlineBytes + 1) return;
  ParsedRequest again = resp::ParseRequest(line, limits);
  KV_FUZZ_CHECK(again.kind == Kind::kCommand);
  KV_FUZZ_CHECK(again.consumed == line.size());
  KV_FUZZ_CHECK(again.args == p.args);
}

// Where a command's arguments may point: into the request bytes (array
// form) or into the request's own unescaped copy (inline form).
bool ViewsOwned(const ParsedRequest& p, absl::string_view request) {
  for (absl::string_view a : p.args) {
    const bool in_request =
        a.data() >= request.data() && a.data() + a.size() <= request.data() + request.size();
    const bool in_copy = p.inline_args != nullptr && a.data() >= p.inline_args->data() &&
                         a.data() + a.size() <= p.inline_args->data() + p.inline_args->size();
    if (!in_request && !in_copy) return false;
  }
  return true;
}

void CheckOneAnswer(absl::string_view buf, const resp::RequestLimits& limits) {
  ParsedRequest fast;
  ParsedRequest slow;
  resp::internal::ParseArray(buf, limits, &fast);
  resp::internal::ParseFieldByField(buf, limits, &slow);
  KV_FUZZ_CHECK(fast.kind == slow.kind && fast.consumed == slow.consumed &&
                fast.value_len == slow.value_len && fast.error == slow.error &&
                fast.args == slow.args);
}

void ParseStream(absl::string_view buf, const resp::RequestLimits& limits) {
  // A bound on the loop in case a parse ever consumed nothing.
  for (int requests = 0; requests < 1000 && !buf.empty(); ++requests) {
    if (buf[0] == '*') CheckOneAnswer(buf, limits);
    ParsedRequest p = resp::ParseRequest(buf, limits);
    KV_FUZZ_CHECK(p.consumed <= buf.size());
    if (p.kind == Kind::kNeedMore || p.kind == Kind::kError) {
      if (p.kind == Kind::kError) KV_FUZZ_CHECK(!p.error.empty());
      return;
    }
    KV_FUZZ_CHECK(p.consumed > 0);
    CheckPrefixes(buf.substr(0, p.consumed), limits);
    if (buf[0] != '*') KV_FUZZ_CHECK(p.consumed <= resp::kMaxInlineBytes + 1);
    if (p.kind == Kind::kEmptyLine) {
      KV_FUZZ_CHECK(p.args.empty() && buf[0] != '*');
      buf.remove_prefix(p.consumed);
      continue;
    }
    if (p.kind == Kind::kSetValue) {
      KV_FUZZ_CHECK(p.args.size() == 2);
      // The port streams value_len bytes and a CRLF into the pool; here
      // they are skipped (or the stream ends, as a slow client's would).
      const uint64_t rest = buf.size() - p.consumed;
      if (p.value_len > rest || rest - p.value_len < 2) return;
      buf.remove_prefix(p.consumed + p.value_len + 2);
      continue;
    }
    KV_FUZZ_CHECK(!p.args.empty() && p.args.size() <= limits.max_args);
    uint64_t total = 0;
    for (absl::string_view a : p.args) {
      KV_FUZZ_CHECK(a.size() <= limits.max_bulk_bytes);
      total += a.size();
    }
    // Every view points into the bytes it was parsed from (or their copy).
    KV_FUZZ_CHECK(ViewsOwned(p, buf.substr(0, p.consumed)));
    KV_FUZZ_CHECK(total <= limits.max_buffered_bytes);
    CheckRoundTrip(p, limits);
    CheckInlineRoundTrip(p, limits);
    buf.remove_prefix(p.consumed);
  }
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvstore::fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.Int<uint8_t>();
  kvstore::resp::RequestLimits limits;
  if (mode & 1) {
    // Tight limits, so that inputs a fuzzer can build cross them.
    limits.max_args = 1 + (mode >> 4);
    limits.max_bulk_bytes = 64;
    limits.max_buffered_bytes = 100;
  }
  kvstore::ParseStream(in.Rest(), limits);
  return 0;
}
