// Copyright 2026 The kvstore Authors.
//
// RunLog: what a fault-suite run prints. Each line gets the seconds since
// the log was made, goes to stdout at once (a run that hangs has shown how
// far it got) and into `sink` (the report a failing test prints).
//
// Thread safety: not thread-safe; the run's main thread writes it.

#ifndef KVSTORE_TESTS_JEPSEN_RUN_LOG_H_
#define KVSTORE_TESTS_JEPSEN_RUN_LOG_H_

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kvstore {
namespace jepsen {

class RunLog {
 public:
  // `sink` is not owned and outlives the log.
  explicit RunLog(std::string* sink) : sink_(sink), start_(absl::Now()) {}
  template <typename... Args>
  void operator()(const absl::FormatSpec<Args...>& format, const Args&... args) {
    std::string line = absl::StrFormat("[%6.1fs] ", absl::ToDoubleSeconds(absl::Now() - start_));
    absl::StrAppendFormat(&line, format, args...);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    absl::StrAppend(sink_, line, "\n");
  }

 private:
  std::string* sink_;
  absl::Time start_;
};

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_RUN_LOG_H_
