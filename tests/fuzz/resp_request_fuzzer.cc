// Copyright 2026 The kvstore Authors.
//
// Fuzzes resp::ParseRequest, the server's parser of bytes from any TCP peer,
// the way the RESP port drives it: parse a request, drop its bytes (and a
// streamed SET value), parse the next, until an error or a partial request.
//
// Besides "no crash, no sanitizer report", it checks:
//   * consumed never exceeds the buffer, and a command has 1..max_args args
//     each within max_bulk_bytes;
//   * statelessness: every strict prefix of a complete request parses as
//     kNeedMore (the port re-parses a growing buffer, so a prefix reading
//     as an error or as another command would break a slow client);
//   * round trip: AppendCommand(args) parses back to the same args.
// Input: byte 0 picks tight or default limits; the rest is the stream.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/protocol/resp.h"
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
  KV_FUZZ_CHECK(again.kind == Kind::kCommand);
  KV_FUZZ_CHECK(again.consumed == encoded.size());
  KV_FUZZ_CHECK(again.args == p.args);
}

void ParseStream(absl::string_view buf, const resp::RequestLimits& limits) {
  // A bound on the loop in case a parse ever consumed nothing.
  for (int requests = 0; requests < 1000 && !buf.empty(); ++requests) {
    ParsedRequest p = resp::ParseRequest(buf, limits);
    KV_FUZZ_CHECK(p.consumed <= buf.size());
    if (p.kind == Kind::kNeedMore || p.kind == Kind::kError) {
      if (p.kind == Kind::kError) KV_FUZZ_CHECK(!p.error.empty());
      return;
    }
    KV_FUZZ_CHECK(p.consumed > 0);
    CheckPrefixes(buf.substr(0, p.consumed), limits);
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
      // Every view points into the buffer it was parsed from.
      KV_FUZZ_CHECK(a.data() >= buf.data() && a.data() + a.size() <= buf.data() + p.consumed);
      total += a.size();
    }
    KV_FUZZ_CHECK(total <= limits.max_buffered_bytes);
    CheckRoundTrip(p, limits);
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
