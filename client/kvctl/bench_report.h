// Copyright 2026 The kvstore Authors.
//
// How `kvctl bench` shows its figures: the progress line on stderr, and the
// final report on stdout as text or as one line of JSON. Pure functions of
// their arguments; safe to call from any thread.

#ifndef KVSTORE_CLIENT_KVCTL_BENCH_REPORT_H_
#define KVSTORE_CLIENT_KVCTL_BENCH_REPORT_H_

#include <string>

#include "client/kvctl/bench_runner.h"

namespace kvstore {
namespace client {

// One line describing `progress`, without a line ending, e.g.
// "bench    3.0s  1234567 ops  411522 ops/s" or
// "preload    5.0s  5000/10000 keys  1000 keys/s".
std::string FormatProgressLine(const BenchProgress& progress);

// The human-readable report: several lines, each ending in '\n'.
std::string FormatBenchReport(const BenchResult& result);

// The result as one line of JSON (no trailing newline). Invalid UTF-8 in
// the first error's message is replaced, never thrown on. Field names are
// stable; scripts may rely on them:
//
//   transport        string   "rdma" or "tcp"
//   seed             integer
//   keys             integer  key space
//   value_size       integer  bytes
//   get_ratio        number
//   concurrency      integer
//   preload_keys     integer  keys PUT before the timed run
//   preload_seconds  number
//   seconds          number   length of the timed run
//   ops              integer  operations in the timed run
//   ops_per_sec      number   answered operations (ops - errors) per second
//   gets, puts       integer
//   misses           integer  GETs answered NOT_FOUND
//   errors           integer  operations failing otherwise
//   first_error      string   "" when errors is 0, else "CODE: message"
//   interrupted      boolean  stopped early by Ctrl-C
//   value_bytes      integer  value bytes moved by GETs and PUTs
//   gb_per_sec       number   value_bytes / seconds / 1e9
//   latency_us       object   {"get": L, "put": L, "all": L} where L is
//                             {"count", "mean", "p50", "p99", "p999", "max"}
//                             in microseconds (count is an integer)
std::string BenchResultToJson(const BenchResult& result);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_BENCH_REPORT_H_
