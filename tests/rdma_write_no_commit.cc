// Copyright 2026 The kvstore Authors.
//
// Fault-test helper: connects over RDMA, takes a write lease, RDMA-WRITEs a
// complete, valid entry for --key into it and then dies by SIGKILL before
// sending the commit. The server must never publish that entry.

#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/protocol/layout.h"
#include "tests/raw_rdma_client.h"

ABSL_FLAG(std::string, server, "127.0.0.1:7300", "control-plane address");
ABSL_FLAG(std::string, key, "zombie", "key of the entry written and never committed");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto c = kvstore::testing::RawRdmaClient::Connect(absl::GetFlag(FLAGS_server));
  if (!c.ok()) {
    std::fprintf(stderr, "connect: %s\n", c.status().ToString().c_str());
    return 2;
  }
  const std::string key = absl::GetFlag(FLAGS_key);
  const std::string value = "written but never committed";
  auto lease = (*c)->Grant(64 * 1024);
  if (!lease.ok()) {
    std::fprintf(stderr, "grant: %s\n", lease.status().ToString().c_str());
    return 2;
  }
  std::string entry(kvstore::layout::EntryBytes(key.size(), value.size()), '\0');
  kvstore::layout::EncodeEntry(entry.data(), key, value, 1);
  absl::Status s = (*c)->Write(lease->write_addr(), lease->write_rkey(), entry);
  if (!s.ok()) {
    std::fprintf(stderr, "write: %s\n", s.ToString().c_str());
    return 2;
  }
  std::printf("written lease=%lu offset=%lu size=%zu\n", lease->lease_id(), lease->arena_offset(),
              entry.size());
  std::fflush(stdout);
  raise(SIGKILL);  // no commit, no release, no disconnect
  return 3;
}
