// Copyright 2026 The kvstore Authors.

#include "server/resp/resp_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace resp_test {

using resp::Reply;

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void Send(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    data.remove_prefix(n);
  }
}

std::vector<Reply> Read(int fd, size_t n) {
  std::vector<Reply> out;
  std::string buf;
  char tmp[65536];
  while (out.size() < n) {
    auto r = resp::ParseReply(buf, resp::ReplyLimits());
    if (r.ok() && r->complete) {
      out.push_back(r->reply);
      buf.erase(0, r->consumed);
      continue;
    }
    ssize_t got = recv(fd, tmp, sizeof(tmp), 0);
    if (got <= 0) break;
    buf.append(tmp, got);
  }
  return out;
}

std::string ReadRaw(int fd, size_t n) {
  std::string buf;
  size_t done = 0, at = 0;
  char tmp[65536];
  while (done < n) {
    auto r = resp::ParseReply(absl::string_view(buf).substr(at), resp::ReplyLimits());
    if (r.ok() && r->complete) {
      at += r->consumed;
      ++done;
      continue;
    }
    if (!r.ok()) break;
    ssize_t got = recv(fd, tmp, sizeof(tmp), 0);
    if (got <= 0) break;
    buf.append(tmp, got);
  }
  return buf;
}

bool ReadsToEof(int fd) {
  char tmp[4096];
  for (;;) {
    const ssize_t got = recv(fd, tmp, sizeof(tmp), 0);
    if (got == 0) return true;
    if (got < 0) return errno == ECONNRESET;
  }
}

void SetReceiveTimeout(int fd, int seconds) {
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

std::string Cmd(std::vector<absl::string_view> args) {
  std::string out;
  resp::AppendCommand(&out, args);
  return out;
}

std::string RedisCli(const std::vector<std::string>& args, const std::string& input) {
  const std::string in_path = absl::StrCat(::testing::TempDir(), "/redis-cli-in-", getpid());
  std::ofstream(in_path) << input;
  std::vector<std::string> quoted;
  for (const std::string& a : args) quoted.push_back("'" + a + "'");
  const std::string cmd =
      absl::StrCat("timeout 30 redis-cli ", absl::StrJoin(quoted, " "), " <'", in_path, "' 2>&1");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace resp_test
}  // namespace kvstore
