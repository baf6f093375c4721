// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/fake_clock.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace jepsen {

absl::Status FakeClocks::Available() {
  if (access(kLibrary, R_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kLibrary, " is missing (apt-get install libfaketime; deploy/setup.sh)"));
  }
  return absl::OkStatus();
}

FakeClocks::FakeClocks(std::string dir) : dir_(std::move(dir)) { mkdir(dir_.c_str(), 0755); }

std::string FakeClocks::Path(int node) const { return absl::StrCat(dir_, "/clock.n", node + 1); }

std::vector<std::string> FakeClocks::Env(int node) {
  if (access(Path(node).c_str(), R_OK) != 0) (void)Step(node, absl::ZeroDuration());
  return {absl::StrCat("LD_PRELOAD=", kLibrary), "FAKETIME_TIMESTAMP_FILE=" + Path(node),
          "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_CACHE_DURATION=1"};
}

absl::Status FakeClocks::Step(int node, absl::Duration offset) {
  const int64_t s = absl::ToInt64Seconds(offset);
  const std::string tmp = Path(node) + ".new";
  {
    std::ofstream f(tmp, std::ios::trunc);
    // libfaketime's relative form: "+0", "+6s", "-6s".
    f << (s == 0 ? std::string("+0") : absl::StrCat(s > 0 ? "+" : "", s, "s")) << "\n";
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), Path(node).c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp));
  }
  return absl::OkStatus();
}

}  // namespace jepsen
}  // namespace kvstore
