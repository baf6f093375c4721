// Copyright 2026 The kvstore Authors.
//
// chaos_load: the cluster tests' workload and history checker as a program,
// for clusters this process does not own (the compose cluster; the chaos is
// done by deploy/compose/chaos.sh from outside, with docker kill/pause).
//
//   chaos_load --servers=kvserver1:7300,kvserver2:7300 --token_file=F
//              [--tls_ca=CA --tls_cert=CERT --tls_key=KEY] [--transport=rdma] [--clients=4]
//              [--keys=16] [--seed=N]
//              [--duration=30s | commands on stdin] [--history=FILE]
//              [--expect_transport=rdma|tcp] [--key_prefix=P]
//
// It runs Workload (tests/cluster/workload.h) against the seeds, prints
// "chaos_load: load running" once writes are acknowledged, and then either
// runs for --duration or reads commands from stdin, one a line:
//   prepare NODE       note which of the workload's keys NODE leads now
//                      (the map is read from the seeds), before a fault
//   fault LABEL [NS]   a fault was injected at NS (CLOCK_REALTIME ns; now
//                      when absent) on the node of the last `prepare`;
//                      reported: the first acknowledged write on its keys
//   await LABEL SECS   wait (at most SECS) until a write on fault LABEL's
//                      keys was acknowledged after it; prints
//                      "chaos_load: recovered LABEL" or "... not recovered
//                      LABEL" (the chaos script waits for that line instead
//                      of sleeping a fixed time)
//   stop, or EOF       end the load
// Then it reads every key once (FinalReads) and checks the whole history
// (HistoryChecker, final reads required) and prints the verdict.
//
// Clocks: containers share the kernel's CLOCK_REALTIME with the host that
// runs docker, so a fault time taken by the chaos script compares with the
// history's timestamps.
//
// Exit status: 0 no violation, writes acknowledged, every fault followed by
// an acknowledged write on its keys, final reads done, and with
// --expect_transport every operation on that transport; 1 otherwise;
// 2 bad usage, an unreadable token or unusable TLS files.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth/token.h"
#include "common/cluster/cluster_map.h"
#include "common/tls/grpc_tls.h"
#include "grpcpp/grpcpp.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "tests/cluster/history.h"
#include "tests/cluster/history_checker.h"
#include "tests/cluster/workload.h"

ABSL_FLAG(std::string, servers, "", "comma-separated control addresses (seeds)");
ABSL_FLAG(std::string, token_file, "", "the cluster's token (default $KVSTORE_TOKEN_FILE)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA of the servers' certificates: the control connections use TLS (the compose "
          "cluster's default)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate (with --tls_key), for servers that require one (mutual TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, transport, "auto", "client transport: auto, rdma or tcp");
ABSL_FLAG(std::string, expect_transport, "",
          "rdma or tcp: fail unless every data operation ran on it");
ABSL_FLAG(int, clients, 4, "client threads, each with its own KvClient");
ABSL_FLAG(int, keys, 16, "keys the workload uses");
ABSL_FLAG(uint32_t, seed, 0, "workload seed (0: random, printed)");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "run this long and ignore stdin (0: until `stop` or EOF on stdin)");
ABSL_FLAG(absl::Duration, op_timeout, absl::Seconds(3), "per-operation deadline");
ABSL_FLAG(absl::Duration, final_read_timeout, absl::Seconds(90), "how long FinalReads may retry");
ABSL_FLAG(std::string, history, "", "write the history here as JSON lines");
ABSL_FLAG(std::string, key_prefix, "key",
          "the workload's keys are PREFIX0..; the history check assumes they are absent at the "
          "start, so each run against a long-lived cluster needs its own prefix");

namespace kvstore {
namespace testing {
namespace {

// A fault announced on stdin and the keys its node led just before.
struct Fault {
  std::string label;
  int64_t at_ns = 0;
  std::vector<std::string> keys;
};

// How this process reaches the seeds' control ports for the map.
struct Control {
  std::vector<std::string> seeds;
  std::string token;  // empty: none
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// The cluster map from the first seed that answers.
absl::StatusOr<v1::ClusterMap> FetchMap(const Control& control) {
  absl::Status last = absl::UnavailableError("no seed");
  for (const std::string& seed : control.seeds) {
    auto stub = v1::KvCluster::NewStub(grpc::CreateChannel(seed, control.credentials));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!control.token.empty()) {
      ctx.AddMetadata("authorization", auth::BearerHeader(control.token));
    }
    v1::GetClusterMapResponse resp;
    grpc::Status s = stub->GetClusterMap(&ctx, v1::GetClusterMapRequest(), &resp);
    if (s.ok()) return resp.map();
    last = absl::UnavailableError(absl::StrCat(seed, ": ", s.error_message()));
  }
  return last;
}

// The workload's keys whose shard `node` leads in the current map.
absl::StatusOr<std::vector<std::string>> KeysLedBy(const Control& control,
                                                   const std::vector<std::string>& keys,
                                                   const std::string& node) {
  absl::StatusOr<v1::ClusterMap> map = FetchMap(control);
  if (!map.ok()) return map.status();
  auto view = cluster::ClusterMapView::Build(*std::move(map));
  if (!view.ok()) return view.status();
  std::vector<std::string> led;
  for (const std::string& key : keys) {
    const v1::Shard* shard = (*view)->ShardForKey(key);
    if (shard != nullptr && !shard->replicas().empty() && shard->replicas(0) == node) {
      led.push_back(key);
    }
  }
  return led;
}

uint64_t RequestsOn(const std::map<std::string, uint64_t>& m, const std::string& transport) {
  uint64_t sum = 0;
  const std::string label = absl::StrCat("transport=\"", transport, "\"");
  for (const auto& [series, value] : m) {
    if (series.rfind("kvstore_client_requests_total", 0) == 0 &&
        series.find(label) != std::string::npos) {
      sum += value;
    }
  }
  return sum;
}

// `await`: polls the live history until a write on `f`'s keys was
// acknowledged after it, or `limit` passes. True when one was.
bool AwaitRecovery(const Fault& f, const History& history, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  while (true) {
    if (f.keys.empty() || FirstAcknowledgedWrite(history.Snapshot(), f.keys, f.at_ns)) return true;
    if (absl::Now() >= end) return false;
    absl::SleepFor(absl::Milliseconds(200));
  }
}

// Reads stdin commands until stop/EOF; returns the faults announced.
std::vector<Fault> ReadCommands(const Control& control, const Workload& load,
                                const History& history) {
  std::vector<Fault> faults;
  std::vector<std::string> prepared;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (w.empty()) continue;
    if (w[0] == "stop") break;
    if (w[0] == "prepare" && w.size() == 2) {
      absl::StatusOr<std::vector<std::string>> led = KeysLedBy(control, load.keys(), w[1]);
      if (!led.ok()) {
        std::printf("chaos_load: prepare %s: %s\n", w[1].c_str(), led.status().ToString().c_str());
        prepared.clear();
      } else {
        prepared = *led;
        std::printf("chaos_load: prepared %s: it leads %zu of %d keys\n", w[1].c_str(),
                    prepared.size(), static_cast<int>(load.keys().size()));
      }
    } else if (w[0] == "fault" && (w.size() == 2 || w.size() == 3)) {
      Fault f{w[1], NowNs(), prepared};
      int64_t wall_ns = 0;
      if (w.size() == 3 && absl::SimpleAtoi(w[2], &wall_ns)) {
        // A wall-clock time taken as it is lies decades after every
        // operation of the history: no write could come "after" the fault.
        f.at_ns = SteadyNsFromWallNs(wall_ns);
      }
      std::printf("chaos_load: fault %s noted (%zu keys)\n", f.label.c_str(), f.keys.size());
      faults.push_back(std::move(f));
      prepared.clear();
    } else if (w[0] == "await" && w.size() == 3) {
      int secs = 0;
      auto it = std::find_if(faults.begin(), faults.end(),
                             [&](const Fault& f) { return f.label == w[1]; });
      if (it == faults.end() || !absl::SimpleAtoi(w[2], &secs)) {
        std::printf("chaos_load: await: no fault %s, or SECS is not a number\n", w[1].c_str());
      } else {
        const bool ok = AwaitRecovery(*it, history, absl::Seconds(secs));
        std::printf("chaos_load: %s %s\n", ok ? "recovered" : "not recovered", w[1].c_str());
      }
    } else {
      std::printf("chaos_load: ignored command '%s'\n", line.c_str());
    }
    std::fflush(stdout);
  }
  return faults;
}

// The token from --token_file or $KVSTORE_TOKEN_FILE ("" when neither is set).
absl::StatusOr<std::string> LoadToken() {
  std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (token_file.empty() && std::getenv("KVSTORE_TOKEN_FILE") != nullptr) {
    token_file = std::getenv("KVSTORE_TOKEN_FILE");
  }
  if (token_file.empty()) return std::string();
  return auth::ReadTokenFile(token_file);
}

// Prints each fault's recovery time; false when a fault's keys never saw
// an acknowledged write again.
bool ReportFaults(const std::vector<Fault>& faults, const std::vector<Operation>& during) {
  bool ok = true;
  for (const Fault& f : faults) {
    std::optional<int64_t> first = FirstAcknowledgedWrite(during, f.keys, f.at_ns);
    if (f.keys.empty()) {
      std::printf("chaos_load: fault %s: its node led none of the keys\n", f.label.c_str());
    } else if (first.has_value()) {
      std::printf("chaos_load: fault %s: first acknowledged write on its %zu keys %.0f ms after\n",
                  f.label.c_str(), f.keys.size(), (*first - f.at_ns) / 1e6);
    } else {
      std::printf("chaos_load: FAIL: fault %s: no acknowledged write on its keys after it; %s\n",
                  f.label.c_str(), DistinctErrors(during, f.at_ns).c_str());
      ok = false;
    }
  }
  return ok;
}

int Run(const std::vector<std::string>& seeds) {
  absl::StatusOr<std::string> loaded = LoadToken();
  if (!loaded.ok()) {
    std::fprintf(stderr, "chaos_load: %s\n", loaded.status().ToString().c_str());
    return 2;
  }
  const std::string token = *loaded;
  absl::StatusOr<client::TransportMode> mode =
      client::ParseTransportMode(absl::GetFlag(FLAGS_transport));
  const std::string expect = absl::GetFlag(FLAGS_expect_transport);
  if (!mode.ok() || (!expect.empty() && expect != "rdma" && expect != "tcp")) {
    std::fprintf(stderr, "chaos_load: --transport is auto|rdma|tcp, --expect_transport rdma|tcp\n");
    return 2;
  }
  Control control{seeds, token, grpc::InsecureChannelCredentials()};
  WorkloadOptions w;
  w.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  w.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  w.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  if (!w.tls_ca_file.empty() || !w.tls_cert_file.empty() || !w.tls_key_file.empty()) {
    // The map fetches are few and short-lived: no reload needed, but the
    // helper checks the files (CA present, whole key pair) with clear errors.
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
        tls::ReloadingChannelCredentials({w.tls_cert_file, w.tls_key_file, w.tls_ca_file},
                                         absl::Minutes(1));
    if (!creds.ok()) {
      std::fprintf(stderr, "chaos_load: %s\n", creds.status().ToString().c_str());
      return 2;
    }
    control.credentials = *std::move(creds);
  }
  w.servers = seeds;
  w.auth_token = token;
  w.transport = *mode;
  w.clients = absl::GetFlag(FLAGS_clients);
  w.keys = absl::GetFlag(FLAGS_keys);
  w.key_prefix = absl::GetFlag(FLAGS_key_prefix);
  w.op_timeout = absl::GetFlag(FLAGS_op_timeout);
  w.connect_timeout = w.op_timeout;
  w.seed = absl::GetFlag(FLAGS_seed);
  if (w.seed == 0) w.seed = std::random_device{}() | 1;
  std::printf("chaos_load: seed %u (--seed=%u replays the choices), %d clients, %d keys\n", w.seed,
              w.seed, w.clients, w.keys);

  History history;
  Workload load(w, &history);
  load.Start();
  for (absl::Time end = absl::Now() + absl::Seconds(120);
       load.acknowledged_writes() < 10 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (load.acknowledged_writes() == 0) {
    std::printf("chaos_load: FAIL: no write acknowledged in 120 s: %s; %llu failed connects (%s)\n",
                DistinctErrors(history.Snapshot(), 0).c_str(),
                static_cast<unsigned long long>(load.connect_failures()),
                load.last_connect_error().c_str());
    load.Stop();
    return 1;
  }
  std::printf("chaos_load: load running\n");
  std::fflush(stdout);
  std::vector<Fault> faults;
  if (absl::GetFlag(FLAGS_duration) > absl::ZeroDuration()) {
    absl::SleepFor(absl::GetFlag(FLAGS_duration));
  } else {
    faults = ReadCommands(control, load, history);
  }
  load.Stop();

  bool ok = ReportFaults(faults, history.Snapshot());
  const std::map<std::string, uint64_t> m = load.ClientMetrics();
  const uint64_t rdma = RequestsOn(m, "rdma"), tcp = RequestsOn(m, "tcp");
  std::printf(
      "chaos_load: %llu operations, %llu writes acknowledged; over rdma %llu, over tcp %llu\n",
      static_cast<unsigned long long>(load.operations()),
      static_cast<unsigned long long>(load.acknowledged_writes()),
      static_cast<unsigned long long>(rdma), static_cast<unsigned long long>(tcp));
  if ((expect == "rdma" && (rdma == 0 || tcp > 0)) || (expect == "tcp" && (tcp == 0 || rdma > 0))) {
    std::printf("chaos_load: FAIL: not every operation ran over %s\n", expect.c_str());
    ok = false;
  }
  absl::Status read = load.FinalReads(absl::GetFlag(FLAGS_final_read_timeout));
  if (!read.ok()) {
    std::printf("chaos_load: FAIL: final reads: %s\n", read.ToString().c_str());
    ok = false;
  }
  const std::string dump = absl::GetFlag(FLAGS_history);
  if (!dump.empty() && !history.DumpJsonLines(dump).ok()) {
    std::printf("chaos_load: could not write %s\n", dump.c_str());
  }
  CheckOptions check;
  check.require_final_reads = true;
  const CheckResult result = CheckHistory(history.Snapshot(), check);
  std::printf("chaos_load: history: %s\n", result.Report(20).c_str());
  ok = ok && result.ok() && result.acknowledged_writes > 0;
  std::printf("chaos_load: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace testing
}  // namespace kvstore

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<std::string> seeds =
      absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipEmpty());
  if (seeds.empty()) {
    std::fprintf(stderr, "chaos_load: --servers=HOST:PORT[,HOST:PORT...] is required\n");
    return 2;
  }
  return kvstore::testing::Run(seeds);
}
