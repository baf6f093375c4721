// Copyright 2026 The kvstore Authors.
//
// kvctl's command-line flags, defined in kvctl_flags.cc and declared here
// for the code that reads them (absl::GetFlag(FLAGS_name)). Which command
// each flag belongs to, and its metavariable in --help, is kvctl_usage.cc's
// business.
//
// Thread safety: as for any absl flag; kvctl reads them from the main
// thread after absl::ParseCommandLine().

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_FLAGS_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/time/time.h"

// Global flags.
ABSL_DECLARE_FLAG(std::string, server);
ABSL_DECLARE_FLAG(std::string, transport);
ABSL_DECLARE_FLAG(absl::Duration, timeout);
ABSL_DECLARE_FLAG(std::string, rdma_device);
ABSL_DECLARE_FLAG(uint64_t, rdma_location_cache_entries);
ABSL_DECLARE_FLAG(bool, rdma_read_in_pieces);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(bool, verbose);

// Global security flags (docs/security.md).
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_server_name);

// put
ABSL_DECLARE_FLAG(std::string, file);
ABSL_DECLARE_FLAG(absl::Duration, ttl);

// scan
ABSL_DECLARE_FLAG(std::string, prefix);
ABSL_DECLARE_FLAG(uint32_t, count);

// bench
ABSL_DECLARE_FLAG(uint64_t, keys);
ABSL_DECLARE_FLAG(std::string, value_size);
ABSL_DECLARE_FLAG(std::string, get_ratio);
ABSL_DECLARE_FLAG(int, concurrency);
ABSL_DECLARE_FLAG(absl::Duration, duration);
ABSL_DECLARE_FLAG(uint64_t, ops);
ABSL_DECLARE_FLAG(bool, preload);
ABSL_DECLARE_FLAG(bool, zero_copy);
ABSL_DECLARE_FLAG(uint64_t, seed);

// cluster
ABSL_DECLARE_FLAG(int, shard);
ABSL_DECLARE_FLAG(std::string, to);
ABSL_DECLARE_FLAG(bool, dry_run);
ABSL_DECLARE_FLAG(bool, wait);
ABSL_DECLARE_FLAG(bool, yes);
ABSL_DECLARE_FLAG(std::string, admin_token_file);
ABSL_DECLARE_FLAG(absl::Duration, wait_timeout);

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_FLAGS_H_
