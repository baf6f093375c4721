// Copyright 2026 The kvstore Authors.
//
// AnswerHttp on request heads, byte for byte: what the endpoint serves,
// what it refuses, and that it never needs more than the head.

#include "server/metrics/http_exchange.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr size_t kMaxHead = 8192;

// Status of the answer to `request`, or 0 when the head is still incomplete.
// Fails the test if the metrics text is produced for anything but a 200.
int StatusOf(absl::string_view request) {
  bool produced = false;
  auto answer = AnswerHttp(request, kMaxHead, [&] {
    produced = true;
    return std::string("kvstore_up 1\n");
  });
  if (!answer.has_value()) return 0;
  EXPECT_EQ(produced, answer->status == 200 && !absl::StartsWith(request, "HEAD")) << request;
  return answer->status;
}

TEST(AnswerHttpTest, ServesGetAndHeadOfMetrics) {
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n"), 200);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.0\r\n\r\n"), 200);
  EXPECT_EQ(StatusOf("GET /metrics?x=1 HTTP/1.1\r\n\r\n"), 200);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), 200);
  auto answer = AnswerHttp("GET /metrics HTTP/1.1\r\n\r\n", kMaxHead, [] { return "a 1\n"; });
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->bytes,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
            "4\r\nConnection: close\r\n\r\na 1\n");
}

TEST(AnswerHttpTest, WaitsForTheWholeHead) {
  const std::string head = "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n";
  for (size_t n = 0; n < head.size(); ++n) {
    EXPECT_EQ(StatusOf(head.substr(0, n)), 0) << "answered after " << n << " bytes";
  }
  EXPECT_EQ(StatusOf(head), 200);
}

TEST(AnswerHttpTest, RefusesEverythingElse) {
  EXPECT_EQ(StatusOf("POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n"), 405);
  EXPECT_EQ(StatusOf("DELETE /metrics HTTP/1.1\r\n\r\n"), 405);
  EXPECT_EQ(StatusOf("OPTIONS /metrics HTTP/1.1\r\n\r\n"), 405);
  EXPECT_EQ(StatusOf("get /metrics HTTP/1.1\r\n\r\n"), 405);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nContent-Length: 1\r\n\r\n"), 413);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n"), 413);
  EXPECT_EQ(StatusOf("HEAD /metrics HTTP/1.1\r\nContent-Length: 7\r\n\r\n"), 413);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(StatusOf("GET /metrics/ HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(StatusOf("GET /metricsx HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/2.0\r\n\r\n"), 505);
  // Malformed: each a 400.
  for (const char* bad : {
           "GET /metrics\r\n\r\n",                              // no version
           "GET  /metrics HTTP/1.1\r\n\r\n",                    // two spaces
           "GET metrics HTTP/1.1\r\n\r\n",                      // not origin-form
           "GET /metrics HTTP/1.1 \r\n\r\n",                    // trailing space
           "GET /metrics HTTP/x.1\r\n\r\n",                     // version
           "GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n",          // field
           "GET /metrics HTTP/1.1\r\nBad Name: x\r\n\r\n",      // space in name
           "GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n",         // space before colon
           "GET /metrics HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",  // obs-fold
           "GET /metrics HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
           "GET /metrics HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n",
           "GET /metrics HTTP/1.1\r\nA: \x01\r\n\r\n",  // control byte
       }) {
    EXPECT_EQ(StatusOf(bad), 400) << bad;
  }
  // A bare LF is refused as soon as it is seen, without waiting for more.
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\n"), 400);
}

// The 405 names what is allowed; no refusal carries the metrics.
TEST(AnswerHttpTest, RefusalsSayWhy) {
  auto answer =
      AnswerHttp("POST /metrics HTTP/1.1\r\n\r\n", kMaxHead, [] { return std::string("SECRET"); });
  ASSERT_TRUE(answer.has_value());
  EXPECT_THAT(answer->bytes, StartsWith("HTTP/1.1 405 Method Not Allowed\r\n"));
  EXPECT_THAT(answer->bytes, HasSubstr("\r\nAllow: GET, HEAD\r\n"));
  EXPECT_THAT(answer->bytes, HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_THAT(answer->bytes, ::testing::Not(HasSubstr("SECRET")));
}

// Whatever follows the head (a body the client sent anyway) changes
// nothing: it is never looked at.
TEST(AnswerHttpTest, BytesAfterTheHeadAreIgnored) {
  const std::string head = "POST /metrics HTTP/1.1\r\nContent-Length: 100\r\n\r\n";
  auto a = AnswerHttp(head, kMaxHead, [] { return std::string(); });
  auto b = AnswerHttp(head + std::string(100, '\n'), kMaxHead, [] { return std::string(); });
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->bytes, b->bytes);
}

TEST(AnswerHttpTest, HeadOverTheLimitIs431) {
  const std::string start = "GET /metrics HTTP/1.1\r\nX: ";
  EXPECT_EQ(StatusOf(start + std::string(kMaxHead - start.size() - 1, 'a')), 0);
  EXPECT_EQ(StatusOf(start + std::string(kMaxHead - start.size(), 'a')), 431);
  // Complete, but longer than the limit (a caller that read more than asked).
  EXPECT_EQ(StatusOf(start + std::string(kMaxHead, 'a') + "\r\n\r\n"), 431);
}

}  // namespace
}  // namespace metrics
}  // namespace kvstore
