// Copyright 2026 The kvstore Authors.

#include "tests/testing/fake_resp_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/protocol/resp.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {

FakeRespServer::Reply FakeRespServer::Reply::Bulk(const std::string& value) {
  std::string out;
  resp::AppendBulk(&out, value);
  return Raw(std::move(out));
}

FakeRespServer::FakeRespServer() {
  any_other_ = [](const Request&) { return Reply::Ok(); };
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "fake RESP server cannot listen on 127.0.0.1";
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeRespServer::~FakeRespServer() {
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  DropConnections();
  // Joined outside mu_: the connection threads take it.
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(connection_threads_);
  }
  for (std::thread& t : threads) t.join();
  // Closed only now: a number closed earlier could be reused by another
  // descriptor of the test before DropConnections() shuts it down.
  absl::MutexLock lock(&mu_);
  for (int fd : fds_) close(fd);
  close(listen_fd_);
}

void FakeRespServer::On(const std::string& command, Handler handler) {
  absl::MutexLock lock(&mu_);
  handlers_[absl::AsciiStrToUpper(command)] = std::move(handler);
}

void FakeRespServer::OnAnyOther(Handler handler) {
  absl::MutexLock lock(&mu_);
  any_other_ = std::move(handler);
}

std::string FakeRespServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::vector<FakeRespServer::Request> FakeRespServer::received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

std::vector<std::string> FakeRespServer::first_commands() const {
  absl::MutexLock lock(&mu_);
  return first_commands_;
}

void FakeRespServer::DropConnections() {
  absl::MutexLock lock(&mu_);
  for (int fd : fds_) shutdown(fd, SHUT_RDWR);
}

FakeRespServer::Handler FakeRespServer::HandlerFor(const std::string& command) const {
  absl::MutexLock lock(&mu_);
  auto it = handlers_.find(absl::AsciiStrToUpper(command));
  return it != handlers_.end() ? it->second : any_other_;
}

void FakeRespServer::AcceptLoop() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;  // shut down by the destructor
    absl::MutexLock lock(&mu_);
    const size_t connection = first_commands_.size();
    first_commands_.emplace_back();
    fds_.push_back(fd);
    connection_threads_.emplace_back([this, fd, connection] { Serve(fd, connection); });
    accepted_++;
  }
}

// Parses every complete request in the buffer (a SET's value is read as a
// streamed value, then added to its arguments), records it, and answers it.
void FakeRespServer::Serve(int fd, size_t connection) {
  std::string buf;
  char chunk[16384];
  for (;;) {
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
    for (;;) {
      const resp::ParsedRequest r = resp::ParseRequest(buf, resp::RequestLimits());
      size_t total = r.consumed;
      if (r.kind == resp::ParsedRequest::Kind::kSetValue) total += r.value_len + 2;
      if (r.kind == resp::ParsedRequest::Kind::kNeedMore ||
          r.kind == resp::ParsedRequest::Kind::kError || buf.size() < total || r.args.empty()) {
        break;
      }
      Request request{connection, std::vector<std::string>(r.args.begin(), r.args.end())};
      if (r.kind == resp::ParsedRequest::Kind::kSetValue) {
        request.args.push_back(buf.substr(r.consumed, r.value_len));
      }
      buf.erase(0, total);
      {
        absl::MutexLock lock(&mu_);
        received_.push_back(request);
        if (first_commands_[connection].empty()) {
          first_commands_[connection] = absl::StrJoin(request.args, " ");
        }
      }
      const Reply reply = HandlerFor(request.args[0])(request);
      if (reply.hang_up) {
        shutdown(fd, SHUT_RDWR);
        return;
      }
      if (!reply.bytes.empty()) {
        (void)!send(fd, reply.bytes.data(), reply.bytes.size(), MSG_NOSIGNAL);
      }
    }
  }
}

}  // namespace testing
}  // namespace kvstore
