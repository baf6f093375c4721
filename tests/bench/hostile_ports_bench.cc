// Copyright 2026 The kvstore Authors.
//
// hostile_ports_bench: what clients without a credential can do to one
// kvserver's ports, measured from an authenticated client's side. A
// measurement, not a test: it prints a table and gates nothing.
//
//   bazel run //tests/bench:hostile_ports_bench -- --kvserver=$PWD/bazel-bin/server/kvserver
//
// It starts the kvserver binary given by --kvserver (any build, so an older
// one can be measured the same way) on 127.0.0.1 with a token, TCP only,
// and its descriptor limit set to --max_descriptors (soft and hard, as
// `prlimit --nofile=N:N` would); a new server for each phase, so that what
// one load broke does not show in the next row. The phases:
//
//   idle             nothing else;
//   idle-control     --idle_sockets idle TCP connections to the control port;
//   idle-resp        ... to the RESP port;
//   idle-metrics     ... to the metrics port;
//   uploads          --uploaders concurrent unauthenticated gRPC Puts of
//                    --upload_mib MiB each, in a loop;
//   gzip-bomb        a POST to /metrics whose ~1 MiB gzip body inflates to
//                    1 GiB (Content-Encoding: gzip), in a loop;
//   large-put        no hostile load: --large_puts authenticated gRPC Puts of
//                    --large_put_mib MiB each, one at a time (the throughput a
//                    smaller HTTP/2 window would cost), printed below the table.
//
// In each phase an authenticated client (one gRPC channel and one RESP
// connection, both connected before the hostile clients come) runs gRPC Put/Get and
// RESP SET/GET of --value_bytes values, --ops of each or for at most
// --phase_seconds; the server's VmRSS is sampled every 20 ms. "new conn"
// says whether a Handshake over a new gRPC connection succeeded during the
// phase, and after the hostile clients were gone (within 20 s).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/kv_control.grpc.pb.h"

ABSL_FLAG(std::string, kvserver, "", "the kvserver binary to measure (required)");
ABSL_FLAG(int, max_descriptors, 256,
          "the server's RLIMIT_NOFILE, soft and hard (0: inherit this process's)");
ABSL_FLAG(std::string, server_flags, "",
          "more kvserver flags, space-separated (e.g. \"--auth_failure_delay=0\" to measure "
          "the server without its refusal delay)");
ABSL_FLAG(std::string, pool_size, "256M", "the server's --pool_size");
ABSL_FLAG(int, ops, 500, "operations of each kind per phase");
ABSL_FLAG(int, phase_seconds, 20, "at most this long measuring in one phase");
ABSL_FLAG(int, value_bytes, 1024, "value size of the authenticated client's writes");
ABSL_FLAG(int, idle_sockets, 300, "idle connections per port in the idle-* phases");
ABSL_FLAG(int, uploaders, 16, "concurrent unauthenticated uploads in the uploads phase");
ABSL_FLAG(int, upload_mib, 60, "size of each unauthenticated upload, MiB");
ABSL_FLAG(std::string, phases, "",
          "comma-separated phases to run (idle, idle-control, idle-resp, idle-metrics, uploads, "
          "gzip-bomb, large-put); empty: all");
ABSL_FLAG(int, large_put_mib, 16, "value size of the authenticated gRPC Puts in large-put, MiB");
ABSL_FLAG(int, large_puts, 10, "authenticated gRPC Puts in the large-put phase");

namespace kvstore {
namespace {

namespace pb = ::kvstore::v1;

constexpr char kToken[] = "hostile-ports-bench-token-0123456789";

using Clock = std::chrono::steady_clock;

struct Server {
  pid_t pid = -1;
  int control = 0, resp = 0, metrics = 0;
  std::string log;
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool StartServer(Server* s) {
  const std::string dir = absl::StrCat("/tmp/hostile_ports_bench.", getpid());
  mkdir(dir.c_str(), 0700);
  const std::string token = dir + "/token", ready = dir + "/ready";
  s->log = dir + "/kvserver.log";
  {
    std::ofstream t(token);
    t << kToken;
  }
  chmod(token.c_str(), 0600);
  unlink(ready.c_str());
  std::vector<std::string> argv = {absl::GetFlag(FLAGS_kvserver),
                                   "--listen=127.0.0.1",
                                   "--control_port=0",
                                   "--resp_port=0",
                                   "--metrics_port=0",
                                   "--transport=tcp",
                                   "--pool_size=" + absl::GetFlag(FLAGS_pool_size),
                                   "--auth_token_file=" + token,
                                   "--ready_file=" + ready};
  // After the fixed ones, so they can override them.
  for (absl::string_view extra :
       absl::StrSplit(absl::GetFlag(FLAGS_server_flags), ' ', absl::SkipEmpty())) {
    argv.emplace_back(extra);
  }
  const int limit = absl::GetFlag(FLAGS_max_descriptors);
  s->pid = fork();
  if (s->pid == 0) {
    int fd = open(s->log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (limit > 0) {
      rlimit r{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
      if (setrlimit(RLIMIT_NOFILE, &r) != 0) _exit(126);
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    std::ifstream f(ready);
    std::string line;
    while (std::getline(f, line)) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
      if (kv.first == "control_port") (void)absl::SimpleAtoi(kv.second, &s->control);
      if (kv.first == "resp_port") (void)absl::SimpleAtoi(kv.second, &s->resp);
      if (kv.first == "metrics_port") (void)absl::SimpleAtoi(kv.second, &s->metrics);
    }
    if (s->control > 0 && s->resp > 0 && s->metrics > 0) return true;
    int status;
    if (waitpid(s->pid, &status, WNOHANG) == s->pid) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::fprintf(stderr, "kvserver did not start:\n%s\n", Slurp(s->log).c_str());
  return false;
}

uint64_t RssKib(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      uint64_t kib = 0;
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2) (void)absl::SimpleAtoi(parts[1], &kib);
      return kib;
    }
  }
  return 0;
}

// The process's user + system CPU time, in clock ticks; 0 if unreadable.
uint64_t CpuTicks(pid_t pid) {
  const std::string stat = Slurp(absl::StrCat("/proc/", pid, "/stat"));
  // Fields after the command name, which ends at the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ', absl::SkipEmpty());
  uint64_t utime = 0, stime = 0;
  // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return 0;
  }
  return utime + stime;
}

// Bytes received so far by the server's sockets on `port` (bytes_received
// of `ss -ti`): recvmsg does not count in /proc/<pid>/io. Sockets closed
// meanwhile are not counted.
uint64_t ReceivedOnPort(int port) {
  FILE* p = popen(
      absl::StrCat("ss -tinH state established sport = :", port, " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return 0;
  uint64_t total = 0;
  char buf[4096];
  while (fgets(buf, sizeof(buf), p) != nullptr) {
    const char* at = strstr(buf, "bytes_received:");
    uint64_t n = 0;
    if (at != nullptr && absl::SimpleAtoi(std::string(at + 15, strcspn(at + 15, " \n")), &n)) {
      total += n;
    }
  }
  pclose(p);
  return total;
}

int Connect(int port, bool nonblocking) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && !nonblocking) {
    close(fd);
    return -1;
  }
  return fd;
}

std::shared_ptr<grpc::Channel> NewChannel(int port) {
  static std::atomic<int> unique{0};
  grpc::ChannelArguments args;
  args.SetInt("hostile_ports_bench.unique", unique++);  // a connection of its own
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials(), args);
}

// A Handshake over a new connection within 3 s.
bool FreshHandshake(int port) {
  auto stub = pb::KvControl::NewStub(NewChannel(port));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  pb::HandshakeResponse resp;
  return stub->Handshake(&ctx, pb::HandshakeRequest(), &resp).ok();
}

// The authenticated RESP connection: blocking, 10 s receive timeout.
class Resp {
 public:
  bool Open(int port) {
    fd_ = Connect(port, false);
    if (fd_ < 0) return false;
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return Command({"AUTH", kToken}) == "+OK";
  }
  // The reply's first line (a bulk reply's value replaces "$N").
  std::string Command(const std::vector<std::string>& args) {
    std::string req = absl::StrCat("*", args.size(), "\r\n");
    for (const auto& a : args) absl::StrAppend(&req, "$", a.size(), "\r\n", a, "\r\n");
    if (send(fd_, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
      return "";
    }
    std::string line = ReadLine();
    if (line.empty() || line[0] != '$') return line;
    int64_t n = 0;
    if (!absl::SimpleAtoi(line.substr(1), &n) || n < 0) return line;
    std::string value;
    while (static_cast<int64_t>(buf_.size()) < n + 2) {
      if (!Fill()) return "";
    }
    value = buf_.substr(0, n);
    buf_.erase(0, n + 2);
    return value;
  }

 private:
  bool Fill() {
    char tmp[65536];
    ssize_t r = recv(fd_, tmp, sizeof(tmp), 0);
    if (r <= 0) return false;
    buf_.append(tmp, r);
    return true;
  }
  std::string ReadLine() {
    for (;;) {
      size_t pos = buf_.find("\r\n");
      if (pos != std::string::npos) {
        std::string line = buf_.substr(0, pos);
        buf_.erase(0, pos + 2);
        return line;
      }
      if (!Fill()) return "";
    }
  }
  int fd_ = -1;
  std::string buf_;
};

struct Latencies {
  std::vector<double> ms;
  int errors = 0;
  std::string Cell() const {
    if (ms.empty()) return absl::StrFormat("%20s", "- / -");
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    auto q = [&v](double p) {
      return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
    };
    return absl::StrFormat("%9.2f / %8.2f", q(0.50), q(0.99));
  }
};

struct PhaseResult {
  std::string name;
  Latencies grpc_put, grpc_get, resp_set, resp_get;
  uint64_t rss_peak_kib = 0;
  double cpu_ms_per_op = 0;
  double large_put_mib_s = 0;  // large-put only
  uint64_t hostile_calls = 0;  // uploads only: unauthenticated calls finished
  uint64_t read_bytes = 0;     // what the control port received meanwhile
  double seconds = 0;          // how long the measurement ran
  bool fresh_during = false;
  std::string fresh_after;
};

// Hostile load: Start() it, Stop() it; runs on its own threads.
class Load {
 public:
  virtual ~Load() = default;
  virtual void Start() = 0;
  virtual void Stop() = 0;
  virtual uint64_t calls() const { return 0; }  // requests made so far
};

class IdleSockets : public Load {
 public:
  IdleSockets(int port, int n) : port_(port), n_(n) {}
  void Start() override {
    for (int i = 0; i < n_; ++i) fds_.push_back(Connect(port_, true));
    absl::SleepFor(absl::Seconds(2));  // let the server accept what it will
  }
  void Stop() override {
    for (int fd : fds_) close(fd);
    fds_.clear();
  }

 private:
  int port_, n_;
  std::vector<int> fds_;
};

class Uploads : public Load {
 public:
  Uploads(int port, int n, int mib) : port_(port), n_(n) {
    pb::PutRequest req;
    req.set_key("hostile-upload");
    req.set_value(std::string(static_cast<size_t>(mib) << 20, 'u'));
    const std::string bytes = req.SerializeAsString();
    body_ = grpc::Slice(bytes);
  }
  void Start() override {
    stop_ = false;
    for (int i = 0; i < n_; ++i) threads_.emplace_back([this] { Run(); });
    absl::SleepFor(absl::Seconds(2));
  }
  void Stop() override {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  uint64_t calls() const override { return calls_; }

 private:
  void Run() {
    grpc::GenericStub stub(NewChannel(port_));
    while (!stop_) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::CompletionQueue cq;
      grpc::ByteBuffer request(&body_, 1);  // shares the slice: no copy
      auto call = stub.PrepareUnaryCall(&ctx, "/kvstore.v1.KvControl/Put", request, &cq);
      call->StartCall();
      grpc::ByteBuffer response;
      grpc::Status status;
      call->Finish(&response, &status, reinterpret_cast<void*>(1));
      void* tag;
      bool ok;
      cq.Next(&tag, &ok);
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
      ++calls_;
    }
  }
  int port_, n_;
  grpc::Slice body_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> calls_{0};
  std::vector<std::thread> threads_;
};

class GzipBomb : public Load {
 public:
  explicit GzipBomb(int port) : port_(port) {
    // 1 GiB of zeros, gzip-compressed (about 1 MiB).
    z_stream z{};
    deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY);
    std::string zeros(1 << 20, '\0');
    std::string out(4 << 20, '\0');
    size_t used = 0;
    for (int i = 0; i < 1024; ++i) {
      z.next_in = reinterpret_cast<Bytef*>(zeros.data());
      z.avail_in = zeros.size();
      const int flush = i == 1023 ? Z_FINISH : Z_NO_FLUSH;
      do {
        if (out.size() - used < 65536) out.resize(out.size() * 2);
        z.next_out = reinterpret_cast<Bytef*>(out.data() + used);
        z.avail_out = out.size() - used;
        deflate(&z, flush);
        used = out.size() - z.avail_out;
      } while (z.avail_in > 0 || (flush == Z_FINISH && z.avail_out == 0));
    }
    deflateEnd(&z);
    out.resize(used);
    body_ = std::move(out);
  }
  void Start() override {
    stop_ = false;
    thread_ = std::thread([this] {
      while (!stop_) {
        int fd = Connect(port_, false);
        if (fd < 0) {
          absl::SleepFor(absl::Milliseconds(100));
          continue;
        }
        timeval tv{30, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        const std::string head = absl::StrCat(
            "POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: gzip\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: ",
            body_.size(), "\r\nConnection: close\r\n\r\n");
        (void)!send(fd, head.data(), head.size(), MSG_NOSIGNAL);
        (void)!send(fd, body_.data(), body_.size(), MSG_NOSIGNAL);
        char buf[4096];
        while (recv(fd, buf, sizeof(buf), 0) > 0) {
        }
        close(fd);
        ++posts_;
      }
    });
    absl::SleepFor(absl::Seconds(1));
  }
  void Stop() override {
    stop_ = true;
    thread_.join();
  }
  size_t bytes() const { return body_.size(); }

 private:
  int port_;
  std::string body_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> posts_{0};
  std::thread thread_;
};

// --large_puts authenticated Puts of --large_put_mib MiB, one at a time,
// into r->grpc_put; their throughput into r->large_put_mib_s.
void LargePuts(pb::KvControl::Stub* stub, PhaseResult* r) {
  const std::string value(static_cast<size_t>(absl::GetFlag(FLAGS_large_put_mib)) << 20, 'L');
  double total_ms = 0;
  for (int i = 0; i < absl::GetFlag(FLAGS_large_puts); ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    pb::PutRequest req;
    req.set_key(absl::StrCat("large:", i % 4));
    req.set_value(value);
    pb::PutResponse out;
    const auto t0 = Clock::now();
    const bool ok = stub->Put(&ctx, req, &out).ok();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (ok) {
      r->grpc_put.ms.push_back(ms);
      total_ms += ms;
    } else {
      ++r->grpc_put.errors;
    }
  }
  if (total_ms > 0) {
    r->large_put_mib_s =
        r->grpc_put.ms.size() * absl::GetFlag(FLAGS_large_put_mib) / (total_ms / 1000.0);
  }
}

PhaseResult RunPhase(const std::string& name, Load* load, const Server& server,
                     pb::KvControl::Stub* stub, Resp* resp, bool large_puts) {
  PhaseResult r;
  r.name = name;
  std::atomic<bool> sampling{true};
  std::atomic<uint64_t> peak{RssKib(server.pid)};
  std::thread sampler([&] {
    while (sampling) {
      peak = std::max<uint64_t>(peak, RssKib(server.pid));
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  {
    // Connected before the hostile clients come: the rows measure what
    // they do to an established client ("new conn" to a new one).
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    pb::StatsResponse out;
    (void)stub->Stats(&ctx, pb::StatsRequest(), &out);
  }
  if (load != nullptr) load->Start();
  r.fresh_during = FreshHandshake(server.control);
  const uint64_t cpu_before = CpuTicks(server.pid);
  const uint64_t read_before = ReceivedOnPort(server.control);
  const uint64_t calls_before = load != nullptr ? load->calls() : 0;
  const absl::Time start = absl::Now();
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');
  const int ops = absl::GetFlag(FLAGS_ops);
  const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_phase_seconds));
  auto timed = [](Latencies* l, const std::function<bool()>& op) {
    const auto t0 = Clock::now();
    const bool ok = op();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (ok) {
      l->ms.push_back(ms);
    } else {
      ++l->errors;
    }
  };
  if (large_puts) LargePuts(stub, &r);
  for (int i = 0; i < ops && absl::Now() < end && !large_puts; ++i) {
    const std::string key = absl::StrCat("bench:", i % 64);
    auto context = [] {
      auto ctx = std::make_unique<grpc::ClientContext>();
      ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      ctx->AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
      return ctx;
    };
    timed(&r.grpc_put, [&] {
      auto ctx = context();
      pb::PutRequest req;
      req.set_key(key);
      req.set_value(value);
      pb::PutResponse out;
      return stub->Put(ctx.get(), req, &out).ok();
    });
    timed(&r.grpc_get, [&] {
      auto ctx = context();
      pb::GetRequest req;
      req.set_key(key);
      pb::GetResponse out;
      return stub->Get(ctx.get(), req, &out).ok() && out.value().size() == value.size();
    });
    timed(&r.resp_set, [&] { return resp->Command({"SET", key, value}) == "+OK"; });
    timed(&r.resp_get, [&] { return resp->Command({"GET", key}).size() == value.size(); });
  }
  const size_t done =
      r.grpc_put.ms.size() + r.grpc_get.ms.size() + r.resp_set.ms.size() + r.resp_get.ms.size();
  const uint64_t cpu_ticks = CpuTicks(server.pid) - cpu_before;
  if (done > 0) r.cpu_ms_per_op = 1000.0 * cpu_ticks / sysconf(_SC_CLK_TCK) / done;
  r.read_bytes = ReceivedOnPort(server.control) - read_before;
  r.hostile_calls = load != nullptr ? load->calls() - calls_before : 0;
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (load != nullptr) load->Stop();
  sampling = false;
  sampler.join();
  r.rss_peak_kib = peak;
  const absl::Time t0 = absl::Now();
  r.fresh_after = "no (20 s)";
  while (absl::Now() - t0 < absl::Seconds(20)) {
    if (FreshHandshake(server.control)) {
      r.fresh_after = absl::StrFormat("yes (%.1f s)", absl::ToDoubleSeconds(absl::Now() - t0));
      break;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  return r;
}

enum class Kind { kNone, kIdleControl, kIdleResp, kIdleMetrics, kUploads, kGzipBomb, kLargePut };

// One phase on a server of its own, so that what one load broke (a dead
// listener, a bloated heap) does not show up in the next phase's row.
bool Phase(const std::string& name, Kind kind, std::vector<PhaseResult>* results,
           uint64_t* idle_rss_kib) {
  Server server;
  if (!StartServer(&server)) return false;
  auto stub = pb::KvControl::NewStub(NewChannel(server.control));
  Resp resp;
  if (!resp.Open(server.resp)) {
    std::fprintf(stderr, "RESP AUTH failed\n");
    kill(server.pid, SIGKILL);
    waitpid(server.pid, nullptr, 0);
    return false;
  }
  if (idle_rss_kib != nullptr) *idle_rss_kib = RssKib(server.pid);
  const int n = absl::GetFlag(FLAGS_idle_sockets);
  std::unique_ptr<Load> load;
  switch (kind) {
    case Kind::kNone:
      break;
    case Kind::kIdleControl:
      load = std::make_unique<IdleSockets>(server.control, n);
      break;
    case Kind::kIdleResp:
      load = std::make_unique<IdleSockets>(server.resp, n);
      break;
    case Kind::kIdleMetrics:
      load = std::make_unique<IdleSockets>(server.metrics, n);
      break;
    case Kind::kUploads:
      load = std::make_unique<Uploads>(server.control, absl::GetFlag(FLAGS_uploaders),
                                       absl::GetFlag(FLAGS_upload_mib));
      break;
    case Kind::kGzipBomb:
      load = std::make_unique<GzipBomb>(server.metrics);
      break;
    case Kind::kLargePut:
      break;
  }
  results->push_back(
      RunPhase(name, load.get(), server, stub.get(), &resp, kind == Kind::kLargePut));
  kill(server.pid, SIGKILL);
  waitpid(server.pid, nullptr, 0);
  return true;
}

int Main() {
  std::printf("kvserver %s %s, descriptor limit %d, a new server per phase\n",
              absl::GetFlag(FLAGS_kvserver).c_str(), absl::GetFlag(FLAGS_server_flags).c_str(),
              absl::GetFlag(FLAGS_max_descriptors));
  std::vector<PhaseResult> results;
  uint64_t idle_rss = 0;
  const std::vector<std::pair<std::string, Kind>> all = {
      {"idle", Kind::kNone},          {"idle-control", Kind::kIdleControl},
      {"idle-resp", Kind::kIdleResp}, {"idle-metrics", Kind::kIdleMetrics},
      {"uploads", Kind::kUploads},    {"gzip-bomb", Kind::kGzipBomb},
      {"large-put", Kind::kLargePut}};
  const std::string wanted = absl::GetFlag(FLAGS_phases);
  std::vector<std::string> names = absl::StrSplit(wanted, ',', absl::SkipEmpty());
  for (const std::string& n : names) {
    if (std::none_of(all.begin(), all.end(), [&n](const auto& p) { return p.first == n; })) {
      std::fprintf(stderr, "--phases: unknown phase '%s'\n", n.c_str());
      return 2;
    }
  }
  for (const auto& [name, kind] : all) {
    if (!names.empty() && std::find(names.begin(), names.end(), name) == names.end()) continue;
    if (!Phase(name, kind, &results, idle_rss == 0 ? &idle_rss : nullptr)) return 1;
  }
  std::printf(
      "\nserver RSS idle: %.1f MiB; uploads: %d x %d MiB unauthenticated; gzip bomb: "
      "~1 MiB on the wire, 1 GiB inflated\n",
      idle_rss / 1024.0, absl::GetFlag(FLAGS_uploaders), absl::GetFlag(FLAGS_upload_mib));
  std::printf("latencies in ms, p50 / p99; err = failed operations (all four kinds)\n\n");
  std::printf("%-13s %-20s %-20s %-20s %-20s %5s %10s %7s %-8s %-12s\n", "phase", "gRPC PUT",
              "gRPC GET", "RESP SET", "RESP GET", "err", "RSS peak", "CPU/op", "new conn",
              "new conn after");
  for (const PhaseResult& r : results) {
    const int errors =
        r.grpc_put.errors + r.grpc_get.errors + r.resp_set.errors + r.resp_get.errors;
    std::printf("%-13s %-20s %-20s %-20s %-20s %5d %6.0f MiB %4.2f ms %-8s %-12s\n", r.name.c_str(),
                r.grpc_put.Cell().c_str(), r.grpc_get.Cell().c_str(), r.resp_set.Cell().c_str(),
                r.resp_get.Cell().c_str(), errors, r.rss_peak_kib / 1024.0, r.cpu_ms_per_op,
                r.fresh_during ? "yes" : "no", r.fresh_after.c_str());
  }
  for (const PhaseResult& r : results) {
    if (r.hostile_calls > 0) {
      std::printf(
          "\n%s: %llu unauthenticated calls in %.1f s; the control port received %.0f MiB "
          "(%.0f KiB per call)\n",
          r.name.c_str(), static_cast<unsigned long long>(r.hostile_calls), r.seconds,
          r.read_bytes / 1048576.0, r.read_bytes / 1024.0 / r.hostile_calls);
    }
    if (r.large_put_mib_s > 0) {
      std::printf("\nlarge-put: %d authenticated gRPC Puts of %d MiB, one at a time: %.0f MiB/s\n",
                  absl::GetFlag(FLAGS_large_puts), absl::GetFlag(FLAGS_large_put_mib),
                  r.large_put_mib_s);
    }
  }
  return 0;
}

}  // namespace
}  // namespace kvstore

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "hostile_ports_bench --kvserver=PATH: an authenticated client's latency and the server's "
      "RSS under idle sockets, unauthenticated uploads and a gzip bomb (see the file comment)");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_kvserver).empty()) {
    std::fprintf(stderr, "--kvserver=PATH is required\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  return kvstore::Main();
}
