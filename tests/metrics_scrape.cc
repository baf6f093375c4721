// Copyright 2026 The kvstore Authors.

#include "tests/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kvstore {
namespace testing {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";

// CI=true (or 1), as .ci/run sets it; the BUILD rules pass CI through with
// env_inherit, since Bazel's test environment drops it otherwise.
bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && (std::string(ci) == "true" || std::string(ci) == "1");
}

}  // namespace

// A hand-written client on purpose: the test checks what a scraper that
// knows nothing of cpp-httplib receives over a plain TCP socket.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  // Loopback only: the test servers listen on 127.0.0.1 (test_cluster.h).
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to metrics port ", port, ": ", err));
  }
  // Connection: close makes EOF the end of the reply, so no framing is
  // needed here, whatever the server's keep-alive default.
  const std::string req =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("short send of the HTTP request");
  }
  // The whole reply (head and body) until the server closes.
  std::string reply;
  char buf[16384];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) reply.append(buf, n);
  close(fd);
  // Head and body split at the first empty line; the status line is the
  // head's first line ("HTTP/1.1 200 OK").
  const size_t head_end = reply.find("\r\n\r\n");
  if (head_end == std::string::npos) return absl::DataLossError("no HTTP header in the reply");
  const std::string status_line = reply.substr(0, reply.find("\r\n"));
  if (!absl::StrContains(status_line, " 200 ")) {
    return absl::FailedPreconditionError(absl::StrCat("GET ", path, ": ", status_line));
  }
  return reply.substr(head_end + 4);
}

absl::Status PromtoolCheck(const std::string& body) {
  if (access(kPromtool, X_OK) != 0) {
    if (InCi()) {
      return absl::FailedPreconditionError(
          absl::StrCat(kPromtool,
                       " is missing and CI=true: install Debian's prometheus package "
                       "(deploy/setup.sh does); the exposition check must run in CI"));
    }
    return absl::UnimplementedError(absl::StrCat(kPromtool, " not installed"));
  }
  // promtool reads stdin; a file in the test's scratch directory keeps the
  // body for a post-mortem when the check fails.
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  const std::string dir = tmpdir != nullptr ? tmpdir : "/tmp";
  const std::string in = absl::StrCat(dir, "/metrics.", getpid(), ".txt");
  const std::string out = in + ".promtool";
  {
    std::ofstream f(in, std::ios::binary);
    f << body;
  }
  const std::string cmd = absl::StrCat(kPromtool, " check metrics < ", in, " > ", out, " 2>&1");
  const int rc = std::system(cmd.c_str());
  std::ifstream r(out);
  const std::string output((std::istreambuf_iterator<char>(r)), std::istreambuf_iterator<char>());
  // promtool exits 0 only when the body parses and has no lint findings.
  if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("promtool check metrics failed:\n", output));
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> ParsePrometheusText(const std::string& body) {
  std::map<std::string, std::string> samples;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    // # HELP and # TYPE lines describe families; only samples carry values.
    if (absl::StartsWith(line, "#")) continue;
    // Label values of kvstore's series hold no space, so the last space
    // separates the series from its value.
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    samples[std::string(line.substr(0, space))] = std::string(line.substr(space + 1));
  }
  return samples;
}

std::map<std::string, std::string> ParseInfoMetrics(const std::string& info) {
  std::map<std::string, std::string> samples;
  // INFO has several "# Section" headers; only lines under # Metrics count.
  bool in_metrics = false;
  for (absl::string_view line : absl::StrSplit(info, '\n', absl::SkipEmpty())) {
    // redis-cli passes the reply's CRLF line ends through.
    line = absl::StripSuffix(line, "\r");
    if (absl::StartsWith(line, "#")) {
      in_metrics = line == "# Metrics";
      continue;
    }
    if (!in_metrics) continue;
    // The value follows the last ':' (series keys hold none, but be safe).
    const size_t colon = line.rfind(':');
    if (colon == absl::string_view::npos) continue;
    samples[std::string(line.substr(0, colon))] = std::string(line.substr(colon + 1));
  }
  return samples;
}

}  // namespace testing
}  // namespace kvstore
