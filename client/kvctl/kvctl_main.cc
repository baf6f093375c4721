// Copyright 2026 The kvstore Authors.
//
// kvctl: the kvstore command-line tool.
//
//   kvctl [flags] COMMAND [args]
//
// Commands: put, get, del, exists, scan, stat, bench. `kvctl --help` prints
// the full usage, including the exit codes:
//
//   0  success; get/exists: the key exists
//   1  the key does not exist (get, del, exists)
//   2  usage error
//   3  any other error, reported on stderr as "kvctl: CODE: message"
//
// Values and keys are bytes: put reads files and stdin in binary and get
// writes the value to stdout exactly, adding a newline only for a terminal.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "client/kvctl/kvctl_bench.h"
#include "client/options.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

// Global flags.
ABSL_FLAG(std::string, server, "127.0.0.1:7300", "Control-plane address of the server.");
ABSL_FLAG(std::string, transport, "auto",
          "Data path: auto (RDMA when both sides have a device, else TCP), rdma or tcp.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(10), "Bound on connecting and on each operation.");
ABSL_FLAG(std::string, rdma_device, "",
          "RDMA device for auto/rdma (default: the first with an active port).");
ABSL_FLAG(bool, json, false, "Print stat and bench results as one JSON object.");
ABSL_FLAG(bool, verbose, false, "Log the client library's informational messages to stderr.");

// put
ABSL_FLAG(std::string, file, "", "Read the value from this file.");

// scan
ABSL_FLAG(std::string, prefix, "", "List only keys starting with this prefix.");
ABSL_FLAG(uint32_t, count, 1000, "Keys asked for per Scan call (page size).");

// bench
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

namespace kvstore {
namespace client {
namespace {

// The documented exit codes (see --help).
constexpr int kExitOk = 0;
constexpr int kExitNotFound = 1;
constexpr int kExitUsage = 2;
constexpr int kExitError = 3;

// ---------------------------------------------------------------------------
// Errors and I/O

int UsageError(absl::string_view message) {
  absl::FPrintF(stderr, "kvctl: %s\nRun 'kvctl --help' for usage.\n", message);
  return kExitUsage;
}

// Prints "kvctl: CODE: message" on stderr and returns `exit_code`.
int Report(const absl::Status& status, int exit_code) {
  absl::FPrintF(stderr, "kvctl: %s: %s\n", absl::StatusCodeToString(status.code()),
                status.message());
  return exit_code;
}

int Failure(const absl::Status& status) { return Report(status, kExitError); }

absl::StatusOr<std::string> ReadAll(int fd, absl::string_view what) {
  std::string data;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    data.reserve(static_cast<size_t>(st.st_size));
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      data.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      return data;
    } else if (errno != EINTR) {
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", what));
    }
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  absl::StatusOr<std::string> data = ReadAll(fd, path);
  close(fd);
  return data;
}

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno != EINTR) {
      return absl::ErrnoToStatus(errno, "writing stdout");
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Connecting

// What every command needs from the global flags.
struct Context {
  Options options;
  bool json = false;
  // The flags that appeared on the command line (underscore names).
  std::set<std::string> given;
};

absl::StatusOr<std::unique_ptr<KvClient>> ConnectClient(const Context& context) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = KvClient::Connect(context.options);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("connecting to ", context.options.servers[0], " (",
                                     TransportModeName(context.options.transport),
                                     "): ", client.status().message()));
  }
  return client;
}

// ---------------------------------------------------------------------------
// Commands. Each gets its positional arguments (count already checked) and
// returns an exit code.

int RunPut(const Context& context, const std::vector<std::string>& args) {
  const std::string file = absl::GetFlag(FLAGS_file);
  const bool has_value_arg = args.size() == 2;
  std::string value;
  if (context.given.count("file") > 0) {
    if (file.empty()) return UsageError("put: --file needs a path");
    if (has_value_arg) return UsageError("put: give either VALUE or --file, not both");
    absl::StatusOr<std::string> data = ReadFile(file);
    if (!data.ok()) return Failure(data.status());
    value = *std::move(data);
  } else if (has_value_arg && args[1] != "-") {
    value = args[1];
  } else {
    // "-" always means stdin; an omitted VALUE only when stdin is not a
    // terminal, so that a forgotten argument does not wait for typing.
    if (!has_value_arg && isatty(STDIN_FILENO)) {
      return UsageError("put: no value: give VALUE, --file PATH, or pipe it to stdin");
    }
    absl::StatusOr<std::string> data = ReadAll(STDIN_FILENO, "stdin");
    if (!data.ok()) return Failure(data.status());
    value = *std::move(data);
  }

  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  const absl::Status status = (*client)->Put(args[0], value);
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

int RunGet(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<std::string> value = (*client)->Get(args[0]);
  if (absl::IsNotFound(value.status())) return Report(value.status(), kExitNotFound);
  if (!value.ok()) return Failure(value.status());
  absl::Status status = WriteAll(STDOUT_FILENO, *value);
  if (status.ok() && isatty(STDOUT_FILENO)) status = WriteAll(STDOUT_FILENO, "\n");
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

int RunDel(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  const absl::Status status = (*client)->Delete(args[0]);
  if (absl::IsNotFound(status)) return Report(status, kExitNotFound);
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

int RunExists(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<bool> exists = (*client)->Exists(args[0]);
  if (!exists.ok()) return Failure(exists.status());
  const absl::Status status = WriteAll(STDOUT_FILENO, *exists ? "1\n" : "0\n");
  if (!status.ok()) return Failure(status);
  return *exists ? kExitOk : kExitNotFound;
}

int RunScan(const Context& context, const std::vector<std::string>& /*args*/) {
  const uint32_t count = absl::GetFlag(FLAGS_count);
  if (count == 0) return UsageError("--count must be positive");
  const std::string prefix = absl::GetFlag(FLAGS_prefix);
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());

  uint64_t cursor = 0;
  do {
    absl::StatusOr<ScanPage> page = (*client)->Scan(cursor, count, prefix);
    if (!page.ok()) return Failure(page.status());
    // A server that hands back the cursor it was given, with nothing on the
    // page, would keep us here forever.
    if (page->keys.empty() && page->cursor != 0 && page->cursor == cursor) {
      return Failure(absl::InternalError(
          absl::StrCat("scan made no progress: the server returned cursor ", cursor, " again")));
    }
    for (const std::string& key : page->keys) {
      std::fwrite(key.data(), 1, key.size(), stdout);
      std::fputc('\n', stdout);
    }
    cursor = page->cursor;
  } while (cursor != 0);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return Failure(absl::ErrnoToStatus(errno, "writing stdout"));
  }
  return kExitOk;
}

int RunStat(const Context& context, const std::vector<std::string>& /*args*/) {
  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  absl::StatusOr<ServerStats> stats = (*client)->Stats();
  if (!stats.ok()) return Failure(stats.status());
  const ClientCounters c = (*client)->counters();
  const std::vector<std::pair<const char*, uint64_t>> client_counters = {
      {"gets", c.gets},
      {"puts", c.puts},
      {"deletes", c.deletes},
      {"tcp_ops", c.tcp_ops},
      {"rdma_ops", c.rdma_ops},
      {"tcp_fallbacks", c.tcp_fallbacks},
      {"checksum_retries", c.checksum_retries},
      {"span_retries", c.span_retries},
      {"server_fallback_gets", c.server_fallback_gets},
      {"leases_granted", c.leases_granted},
      {"leases_released", c.leases_released},
      {"leases_renewed", c.leases_renewed},
      {"lease_aborts", c.lease_aborts},
      {"reconnects", c.reconnects},
  };

  std::string out;
  if (context.json) {
    // Field names: transport, server.info.*, server.counters.*, client.*
    // (the ClientCounters field names).
    nlohmann::ordered_json j;
    j["transport"] = (*client)->transport_name();
    j["server"]["info"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : stats->info) j["server"]["info"][name] = value;
    j["server"]["counters"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : stats->counters) j["server"]["counters"][name] = value;
    for (const auto& [name, value] : client_counters) j["client"][name] = value;
    out = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    out.push_back('\n');
  } else {
    absl::StrAppendFormat(&out, "transport %s\n", (*client)->transport_name());
    absl::StrAppend(&out, "server info:\n");
    for (const auto& [name, value] : stats->info) {
      absl::StrAppendFormat(&out, "  %-30s %s\n", name, value);
    }
    absl::StrAppend(&out, "server counters:\n");
    for (const auto& [name, value] : stats->counters) {
      absl::StrAppendFormat(&out, "  %-30s %d\n", name, value);
    }
    absl::StrAppend(&out, "client counters:\n");
    for (const auto& [name, value] : client_counters) {
      absl::StrAppendFormat(&out, "  %-30s %d\n", name, value);
    }
  }
  const absl::Status status = WriteAll(STDOUT_FILENO, out);
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

// Drives a KvClient from the benchmark. KvClient is thread-safe, so one
// instance serves every bench thread.
class KvClientBenchTarget : public BenchTarget {
 public:
  explicit KvClientBenchTarget(KvClient* client) : client_(client) {}

  absl::StatusOr<uint64_t> Get(absl::string_view key) override {
    absl::StatusOr<std::string> value = client_->Get(key);
    if (!value.ok()) return value.status();
    return value->size();
  }

  absl::Status Put(absl::string_view key, absl::string_view value) override {
    return client_->Put(key, value);
  }

 private:
  KvClient* const client_;
};

// Set by SIGINT during bench. A lock-free atomic store is async-signal-safe.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnSigint(int /*signo*/) { g_interrupted.store(true, std::memory_order_relaxed); }

// Prints progress lines to stderr: rewritten in place with '\r' on a
// terminal, one per line otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(STDERR_FILENO)) {}

  void Print(const BenchProgress& progress) {
    if (tty_ && open_line_ && progress.preloading != last_preloading_) std::fputc('\n', stderr);
    const std::string line = FormatProgressLine(progress);
    if (tty_) {
      absl::FPrintF(stderr, "\r%s\x1b[K", line);  // ESC[K clears the rest of the line
      open_line_ = true;
    } else {
      absl::FPrintF(stderr, "%s\n", line);
    }
    last_preloading_ = progress.preloading;
    std::fflush(stderr);
  }

  // Ends a line left open by Print().
  void Finish() {
    if (open_line_) std::fputc('\n', stderr);
    open_line_ = false;
  }

 private:
  const bool tty_;
  bool open_line_ = false;
  bool last_preloading_ = false;
};

int RunBench(const Context& context, const std::vector<std::string>& /*args*/) {
  BenchFlags flags;
  flags.keys = absl::GetFlag(FLAGS_keys);
  flags.value_size = absl::GetFlag(FLAGS_value_size);
  flags.get_ratio = absl::GetFlag(FLAGS_get_ratio);
  flags.concurrency = absl::GetFlag(FLAGS_concurrency);
  flags.duration = absl::GetFlag(FLAGS_duration);
  flags.duration_given = context.given.count("duration") > 0;
  flags.ops = absl::GetFlag(FLAGS_ops);
  flags.ops_given = context.given.count("ops") > 0;
  flags.preload = absl::GetFlag(FLAGS_preload);
  flags.seed = absl::GetFlag(FLAGS_seed);
  // A drawn seed stays below 2^53 so that JSON readers which hold numbers
  // as doubles (jq, JavaScript) print it back exactly.
  absl::BitGen entropy;
  const uint64_t random_seed = absl::Uniform<uint64_t>(entropy, 1, uint64_t{1} << 53);
  absl::StatusOr<BenchConfig> config = MakeBenchConfig(flags, random_seed);
  if (!config.ok()) return UsageError(config.status().message());

  absl::StatusOr<std::unique_ptr<KvClient>> client = ConnectClient(context);
  if (!client.ok()) return Failure(client.status());
  KvClientBenchTarget target(client->get());
  const std::string transport = (*client)->transport_name();

  absl::FPrintF(
      stderr,
      "bench: server %s, transport %s, seed %d, %d keys, %d-byte values, "
      "%g%% GET, %d threads, %s\n",
      context.options.servers[0], transport, config->seed, config->keys, config->value_size,
      config->get_ratio * 100, config->concurrency,
      config->ops > 0 ? absl::StrCat(config->ops, " ops") : absl::FormatDuration(config->duration));

  // Ctrl-C ends the run early; SA_RESETHAND makes a second one fatal, so a
  // hung operation can still be escaped.
  struct sigaction action = {};
  action.sa_handler = OnSigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);

  ProgressPrinter printer;
  absl::StatusOr<BenchResult> result = RunBench(
      *config, target, transport, [&](const BenchProgress& p) { printer.Print(p); },
      &g_interrupted);
  printer.Finish();
  signal(SIGINT, SIG_DFL);
  if (!result.ok()) return Failure(result.status());

  const std::string report =
      context.json ? BenchResultToJson(*result) + "\n" : FormatBenchReport(*result);
  const absl::Status status = WriteAll(STDOUT_FILENO, report);
  if (!status.ok()) return Failure(status);
  if (result->errors > 0) {
    return Failure(absl::Status(result->first_error.code(),
                                absl::StrCat(result->errors, " operations failed; the first: ",
                                             result->first_error.message())));
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// Dispatch

struct Command {
  const char* name;
  const char* synopsis;
  const char* help;  // one paragraph; HelpText() wraps it
  size_t min_args;   // positional arguments after the command name
  size_t max_args;
  int (*run)(const Context& context, const std::vector<std::string>& args);
};

constexpr Command kCommands[] = {
    {"put", "put KEY [VALUE]",
     "Store a value under KEY. The value is VALUE, or the contents of --file PATH, or stdin "
     "when VALUE is \"-\" or omitted and stdin is not a terminal. Any bytes, NUL included.",
     1, 2, RunPut},
    {"get", "get KEY",
     "Write the value of KEY to stdout byte for byte; a newline is added only when stdout is "
     "a terminal.",
     1, 1, RunGet},
    {"del", "del KEY", "Delete KEY.", 1, 1, RunDel},
    {"exists", "exists KEY", "Print 1 if KEY exists, 0 if not.", 1, 1, RunExists},
    {"scan", "scan [--prefix P] [--count N]",
     "Print every key (starting with P), one per line, as raw bytes, paging through the "
     "listing N keys at a time until it is complete.",
     0, 0, RunScan},
    {"stat", "stat",
     "Print the server's info and counters, this client's counters and the transport in use.", 0, 0,
     RunStat},
    {"bench", "bench",
     "Load generator: --concurrency threads sharing one client GET and PUT keys chosen "
     "uniformly from --keys keys, for --duration or --ops. Progress goes to stderr once per "
     "second, the report to stdout: ops/s, GET and PUT counts, p50/p99/p99.9 latency in "
     "microseconds, GB/s of values, misses, errors, transport and seed. Ctrl-C ends the run "
     "early and still reports.",
     0, 0, RunBench},
};

// ---------------------------------------------------------------------------
// Help

// The flags, in --help order. `command` is empty for global flags.
struct FlagHelp {
  const char* name;  // as absl knows it (underscores)
  const char* command;
  const char* value;  // metavariable, or nullptr for booleans
};

// clang-format off
constexpr FlagHelp kFlagHelp[] = {
    {"server",      "",      "HOST:PORT"},
    {"transport",   "",      "MODE"},
    {"timeout",     "",      "DURATION"},
    {"rdma_device", "",      "NAME"},
    {"json",        "",      nullptr},
    {"verbose",     "",      nullptr},
    {"file",        "put",   "PATH"},
    {"prefix",      "scan",  "P"},
    {"count",       "scan",  "N"},
    {"keys",        "bench", "N"},
    {"value_size",  "bench", "BYTES"},
    {"get_ratio",   "bench", "R"},
    {"concurrency", "bench", "C"},
    {"duration",    "bench", "D"},
    {"ops",         "bench", "N"},
    {"preload",     "bench", nullptr},
    {"seed",        "bench", "S"},
};
// clang-format on

constexpr size_t kHelpWidth = 80;

// Word-wraps `text` to lines of at most kHelpWidth columns, assuming the
// first line starts at column `indent`; continuation lines are indented by
// `indent` spaces. Explicit newlines in `text` are kept.
std::string Wrap(absl::string_view text, size_t indent) {
  std::string out;
  bool first_line = true;
  for (absl::string_view paragraph : absl::StrSplit(text, '\n')) {
    size_t column = indent;
    if (!first_line) absl::StrAppend(&out, "\n", std::string(indent, ' '));
    first_line = false;
    bool line_empty = true;
    for (absl::string_view word : absl::StrSplit(paragraph, ' ', absl::SkipEmpty())) {
      if (!line_empty && column + 1 + word.size() > kHelpWidth) {
        absl::StrAppend(&out, "\n", std::string(indent, ' '));
        column = indent;
        line_empty = true;
      }
      if (!line_empty) {
        out.push_back(' ');
        ++column;
      }
      absl::StrAppend(&out, word);
      column += word.size();
      line_empty = false;
    }
  }
  return out;
}

std::string HelpText() {
  std::string out =
      "Usage: kvctl [flags] COMMAND [args]\n"
      "\n"
      "kvctl reads and writes a kvstore server through the kvstore client library.\n"
      "\n"
      "Commands:\n";
  for (const Command& c : kCommands) {
    absl::StrAppendFormat(&out, "  %-30s %s\n", c.synopsis, Wrap(c.help, 33));
  }

  // Defaults come from the flag definitions, so the text cannot drift.
  auto flag_line = [](const FlagHelp& f) {
    std::string spelled = absl::StrReplaceAll(f.name, {{"_", "-"}});
    std::string left = f.value == nullptr ? absl::StrCat("--", spelled)
                                          : absl::StrCat("--", spelled, "=", f.value);
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f.name);
    std::string help = flag == nullptr ? "" : flag->Help();
    const std::string def = flag == nullptr ? "" : flag->DefaultValue();
    if (!def.empty()) absl::StrAppend(&help, " Default: ", def, ".");
    if (left.size() > 24) return absl::StrFormat("  %s\n%27s%s\n", left, "", Wrap(help, 27));
    return absl::StrFormat("  %-24s %s\n", left, Wrap(help, 27));
  };
  for (const char* section : {"", "put", "scan", "bench"}) {
    absl::StrAppend(
        &out, "\n",
        *section == '\0' ? std::string("Global flags:") : absl::StrCat("Flags of ", section, ":"),
        "\n");
    for (const FlagHelp& f : kFlagHelp) {
      if (absl::string_view(f.command) == section) absl::StrAppend(&out, flag_line(f));
    }
    if (*section == '\0') {
      absl::StrAppendFormat(&out, "  %-24s %s\n", "--help, -h", "Print this text and exit.");
    }
  }
  absl::StrAppend(&out,
                  "\n"
                  "Flags may come before or after the command. Names take '-' or '_'\n"
                  "(--value-size or --value_size); booleans take --name, --name=false or\n"
                  "--no-name. Arguments after \"--\" are never flags: kvctl get -- -key\n"
                  "\n"
                  "Exit codes:\n"
                  "  0  success; for get and exists, the key exists\n"
                  "  1  the key does not exist (get, del, exists)\n"
                  "  2  usage error: unknown command or flag, bad flag value, wrong arguments\n"
                  "  3  any other error, reported on stderr as \"kvctl: CODE: message\"\n"
                  "     (e.g. UNAVAILABLE when the server cannot be reached); bench also\n"
                  "     exits 3 when any operation failed, after printing its report\n");
  return out;
}

FlagKind KindOf(absl::string_view name) {
  // absl acts on these itself (and exits) but FindCommandLineFlag does not
  // list them; Main() rejects them.
  if (name == "version" || name == "only_check_args") return FlagKind::kBool;
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) return FlagKind::kUnknown;
  return flag->IsOfType<bool>() ? FlagKind::kBool : FlagKind::kTakesValue;
}

// absl::ParseCommandLine reports a bad flag on stderr and calls
// std::exit(1), but 1 means "not found" here and usage errors are 2. While
// it runs, this exit handler turns any exit into kExitUsage. (--help, the
// one successful early exit, is handled before absl sees it.)
std::atomic<bool> g_parsing_flags{false};

void ExitUsageIfParsingFlags() {
  if (g_parsing_flags.load()) {
    std::fputs("Run 'kvctl --help' for usage.\n", stderr);
    std::fflush(nullptr);
    std::_Exit(kExitUsage);  // exit() must not be re-entered from a handler
  }
}

int Main(int argc, char** argv) {
  PreprocessedArgs pre = PreprocessArgs(std::vector<std::string>(argv, argv + argc), &KindOf);
  if (pre.help) {
    std::fputs(HelpText().c_str(), stdout);
    return kExitOk;
  }
  for (const char* unsupported : {"version", "only_check_args"}) {
    if (pre.given.count(unsupported) > 0) {
      return UsageError(absl::StrCat("--", unsupported, " is not supported"));
    }
  }

  std::vector<char*> c_argv;
  c_argv.reserve(pre.argv.size() + 1);
  for (std::string& arg : pre.argv) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  absl::SetProgramUsageMessage("kvctl [flags] COMMAND [args]; run 'kvctl --help' for details");
  std::atexit(ExitUsageIfParsingFlags);
  g_parsing_flags.store(true);
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(c_argv.size() - 1), c_argv.data());
  g_parsing_flags.store(false);

  // The client library logs through glog; a command-line tool keeps quiet
  // about anything below ERROR unless asked, and never writes log files.
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = absl::GetFlag(FLAGS_verbose) ? google::GLOG_INFO : google::GLOG_ERROR;
  google::InitGoogleLogging(argv[0]);

  if (positional.size() < 2) return UsageError("no command given");
  const std::string name = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  const Command* command = nullptr;
  for (const Command& c : kCommands) {
    if (name == c.name) command = &c;
  }
  if (command == nullptr) return UsageError(absl::StrCat("unknown command \"", name, "\""));
  if (args.size() < command->min_args || args.size() > command->max_args) {
    return UsageError(absl::StrCat("wrong number of arguments; usage: kvctl ", command->synopsis));
  }
  // A command-specific flag given to another command is a mistake worth
  // reporting (e.g. `kvctl get k --prefix p`).
  for (const FlagHelp& f : kFlagHelp) {
    if (*f.command != '\0' && name != f.command && pre.given.count(f.name) > 0) {
      return UsageError(absl::StrCat("--", absl::StrReplaceAll(f.name, {{"_", "-"}}),
                                     " applies only to ", f.command));
    }
  }

  Context context;
  context.json = absl::GetFlag(FLAGS_json);
  const std::string server = absl::GetFlag(FLAGS_server);
  if (server.empty()) return UsageError("--server must not be empty");
  context.options.servers = {server};
  absl::StatusOr<TransportMode> mode = ParseTransportMode(absl::GetFlag(FLAGS_transport));
  if (!mode.ok()) return UsageError(absl::StrCat("--transport: ", mode.status().message()));
  context.options.transport = *mode;
  context.options.rdma_device = absl::GetFlag(FLAGS_rdma_device);
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  if (timeout <= absl::ZeroDuration()) return UsageError("--timeout must be positive");
  context.options.connect_timeout = timeout;
  context.options.op_timeout = timeout;

  context.given = std::move(pre.given);
  return command->run(context, args);
}

}  // namespace
}  // namespace client
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::client::Main(argc, argv); }
