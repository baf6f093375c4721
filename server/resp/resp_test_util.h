// Copyright 2026 The kvstore Authors.
//
// Test helpers for the RESP port (testonly): a blocking client socket on
// 127.0.0.1, request encoding, reply parsing, and the real redis-cli run
// with commands on its stdin. Failures are reported through gtest.
//
// Thread safety: plain functions; one socket per caller.

#ifndef KVSTORE_SERVER_RESP_RESP_TEST_UTIL_H_
#define KVSTORE_SERVER_RESP_RESP_TEST_UTIL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/protocol/resp.h"

namespace kvstore {
namespace resp_test {

// A connected socket to 127.0.0.1:`port` with a 5 s receive timeout.
int Connect(int port);
// Sends all of `data` (a test failure if the socket refuses).
void Send(int fd, absl::string_view data);
// Reads `n` complete replies (fewer on EOF, an error or a 5 s silence).
std::vector<resp::Reply> Read(int fd, size_t n);
// The raw bytes of the next `n` replies, RESP2 or RESP3 (fewer on EOF, an
// error or a receive timeout), for tests of exact bytes.
std::string ReadRaw(int fd, size_t n);
// Whether the server closes `fd`: reads (and drops) whatever comes until
// EOF; false if the receive timeout ends the wait first.
bool ReadsToEof(int fd);
// A socket receive timeout of `seconds` (Connect sets 5): waits end as
// soon as the bytes come; this bounds only how long a broken test hangs.
void SetReceiveTimeout(int fd, int seconds);
// `args` as one RESP request.
std::string Cmd(std::vector<absl::string_view> args);
// Runs `redis-cli <args>` (Debian redis-tools, on PATH) with `input` on
// stdin, one command per line, under a 30 s timeout; stdout and stderr.
std::string RedisCli(const std::vector<std::string>& args, const std::string& input);

}  // namespace resp_test
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RESP_TEST_UTIL_H_
