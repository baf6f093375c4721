// Copyright 2026 The kvstore Authors.
//
// AnswerHttp: what the metrics endpoint answers to the bytes one client has
// sent, decided from the request head alone. A pure function (no sockets,
// no clock), so that the whole request grammar the endpoint accepts is in
// one place and can be fuzzed (tests/fuzz/metrics_http_fuzzer.cc).
//
// The endpoint serves one thing: GET (or HEAD) of /metrics, optionally with
// a query string, which scrapers sometimes add. Everything else is refused
// from the head, before any body could matter:
//
//   400  a malformed request line or header (bare LF line ends included)
//   405  any method but GET and HEAD (with "Allow: GET, HEAD"), whatever
//        its body: the body is never read, so a gzip or chunked upload costs
//        the server nothing but its head
//   413  GET/HEAD announcing a body (Content-Length other than 0, or any
//        Transfer-Encoding)
//   404  any path but /metrics
//   431  no complete head within `max_head_bytes`
//   505  an HTTP version other than 1.0 and 1.1
//
// Every answer says "Connection: close": one request per connection keeps
// the server free of keep-alive state, and a scraper reconnects each
// interval anyway.
//
// Thread safety: a pure function; `metrics_text` is called at most once,
// and only for a 200 answer.

#ifndef KVSTORE_SERVER_METRICS_HTTP_EXCHANGE_H_
#define KVSTORE_SERVER_METRICS_HTTP_EXCHANGE_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace metrics {

struct HttpAnswer {
  int status = 0;
  // The whole response: status line, headers, and the body unless HEAD.
  std::string bytes;
};

// `received` is everything read so far on one connection (the caller reads
// at most `max_head_bytes` of it). Returns nullopt while the head is
// incomplete and could still fit; otherwise the answer. Bytes after the
// head's blank line are ignored: they would be a body, which is refused.
std::optional<HttpAnswer> AnswerHttp(absl::string_view received, size_t max_head_bytes,
                                     const std::function<std::string()>& metrics_text);

}  // namespace metrics
}  // namespace kvstore

#endif  // KVSTORE_SERVER_METRICS_HTTP_EXCHANGE_H_
