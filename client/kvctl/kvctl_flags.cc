// Copyright 2026 The kvstore Authors.
//
// The definitions of kvctl's flags. The help strings are user-facing: they
// appear in `kvctl --help`, followed by " Default: <value>." when the
// default is not empty, so each ends with a full stop and none states its
// own default value.
// The BUILD target is alwayslink so that the flags are registered even in
// a binary that only looks them up by name.

#include "client/kvctl/kvctl_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"

// Global flags.
ABSL_FLAG(std::string, server, "127.0.0.1:7300",
          "Control-plane address of the server; in a cluster, of any node (keys are then "
          "routed to their shard's primary by the cluster map).");
ABSL_FLAG(std::string, transport, "auto",
          "Data path: auto (RDMA when both sides have a device, else TCP), rdma or tcp.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(10), "Bound on connecting and on each operation.");
ABSL_FLAG(std::string, rdma_device, "",
          "RDMA device for auto/rdma (default: the first with an active port).");
ABSL_FLAG(bool, rdma_read_in_pieces, false,
          "READ values of 512 KiB and more in up to four pieces, checksumming each as it "
          "lands (for NICs; on Soft-RoCE it does not help).");
ABSL_FLAG(uint64_t, rdma_location_cache_entries, 65536,
          "Keys whose entry location an RDMA path caches, so a repeated GET is one READ "
          "(0: off, every GET reads the index first).");
ABSL_FLAG(bool, json, false, "Print stat, bench and cluster results as one JSON object.");
ABSL_FLAG(bool, verbose, false, "Log the client library's informational messages to stderr.");

// Security. --token_file has no default of its own: kvctl_context.cc falls
// back to $KVSTORE_TOKEN_FILE, so a shell can set it once.
ABSL_FLAG(std::string, token_file, "",
          "File holding the server's token, sent as the gRPC bearer token and as the RESP AUTH "
          "password (default: the file named by $KVSTORE_TOKEN_FILE, if set).");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM file of the CA that signed the server's certificate; set, the control "
          "connection uses TLS.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS (with --tls-key and --tls-ca).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name the server's certificate must carry when it differs from the host of "
          "--server (e.g. connecting by IP to a certificate issued for a name).");

// put
ABSL_FLAG(std::string, file, "", "Read the value from this file.");
ABSL_FLAG(absl::Duration, ttl, absl::ZeroDuration(),
          "put: the key expires this long after the server stores it (e.g. 30s, 500ms, 2h); "
          "0: never.");

// scan
ABSL_FLAG(std::string, prefix, "", "List only keys starting with this prefix.");
ABSL_FLAG(uint32_t, count, 1000, "Keys asked for per Scan call (page size).");

// bench. value_size and get_ratio are strings because they take suffixes
// ("4K", "90%") that absl's numeric flag parsers do not.
ABSL_FLAG(uint64_t, keys, 10000, "Key space: keys bench:00000000 up to N-1.");
ABSL_FLAG(std::string, value_size, "4096",
          "Bytes per PUT value; suffixes K, M, G (powers of 1024).");
ABSL_FLAG(std::string, get_ratio, "0.9", "Fraction of operations that are GETs: 0..1 or 0%..100%.");
ABSL_FLAG(int, concurrency, 32, "Threads issuing operations, all sharing one client.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10),
          "Length of the run (e.g. 30s, 2m); excludes --ops.");
ABSL_FLAG(uint64_t, ops, 0, "Total operations to run instead of --duration.");
ABSL_FLAG(bool, preload, true, "PUT every key once before the run (--no-preload to skip).");
ABSL_FLAG(uint64_t, seed, 0, "Seed for keys, operations and values; 0 picks one (printed).");
ABSL_FLAG(bool, zero_copy, false,
          "GET with KvClient::GetInto into a registered buffer per thread (over RDMA the NIC "
          "writes the value there; nothing copies it) instead of Get() returning a copy.");

// cluster
ABSL_FLAG(int, shard, -1, "cluster failover: the shard to fail over (required; -1: none given).");
ABSL_FLAG(std::string, to, "",
          "cluster failover: the in-sync backup to promote (default: the one with the newest "
          "data).");
ABSL_FLAG(bool, dry_run, false,
          "cluster rebalance: print the planned migrations without queueing them.");
ABSL_FLAG(bool, wait, false,
          "cluster rebalance: poll the map every 0.5 s, printing progress, until every planned "
          "migration is done (or --wait_timeout passes).");
ABSL_FLAG(bool, yes, false,
          "cluster accept-loss: confirm that the shard's keys are given up (without it the "
          "command only says what it would cost).");
ABSL_FLAG(std::string, admin_token_file, "",
          "cluster: file holding the servers' admin token (their --admin_token_file), sent "
          "instead of --token_file by the cluster commands; failover, remove-node, add-node, "
          "rebalance and accept-loss need it (default: the file named by "
          "$KVSTORE_ADMIN_TOKEN_FILE, if set).");
ABSL_FLAG(absl::Duration, wait_timeout, absl::Minutes(30),
          "cluster rebalance --wait: give up (exit 3) after this long.");
