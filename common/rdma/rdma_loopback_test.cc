// Copyright 2026 The kvstore Authors.
//
// Two RC queue pairs of one device connected to each other in one process
// (client and server roles), exercising the common/rdma wrappers end to end.
// Needs a verbs device: run it through tests/rxe/run-rdma-tests.sh, which
// sets KV_RDMA_DEVICE (default: the first active device) and KV_RDMA_IP (the
// IPv4 address whose RoCE v2 GID to use; rxe does not work over 127.0.0.1).

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/device.h"
#include "common/rdma/gid.h"
#include "common/rdma/memory_window.h"
#include "common/rdma/queue_pair.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace rdma {
namespace {

using ::testing::HasSubstr;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;
constexpr absl::Duration kCompletionTimeout = absl::Seconds(20);

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Page-aligned, zeroed heap buffer.
struct Buffer {
  explicit Buffer(size_t n) : size(n) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, n) != 0) std::abort();
    std::memset(p, 0, n);
    data = static_cast<char*>(p);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint64_t addr(size_t offset = 0) const { return reinterpret_cast<uint64_t>(data + offset); }
  char* data;
  size_t size;
};

void Fill(char* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    p[i] = static_cast<char>(x >> 24);
  }
}

bool AllBytes(const char* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<unsigned char>(p[i]) != v) return false;
  }
  return true;
}

// One client QP and one server QP connected to each other. Declaration order
// is destruction order reversed: QPs go before their CQs.
struct Pair {
  CompletionQueue client_cq;
  CompletionQueue server_cq;
  QueuePair client;
  QueuePair server;
};

// Server QPs accept remote READ and WRITE; rkeys decide per MR/window.
constexpr int kServerAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
constexpr int kClientAccess = 0;

class RdmaLoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test_start_ = absl::Now();
    const std::string name = Env("KV_RDMA_DEVICE");
    absl::StatusOr<Device> device = Device::Open(name);
    if (!device.ok() && name.empty() && device.status().code() == absl::StatusCode::kUnavailable) {
      GTEST_SKIP() << "\n#### SKIPPED: no RDMA device (" << device.status()
                   << "). Run through tests/rxe/run-rdma-tests.sh. ####";
    }
    ASSERT_TRUE(device.ok()) << device.status();
    device_.emplace(std::move(*device));
    absl::StatusOr<ProtectionDomain> pd = ProtectionDomain::Create(*device_);
    ASSERT_TRUE(pd.ok()) << pd.status();
    pd_.emplace(std::move(*pd));
    absl::StatusOr<int> gid_index =
        FindRoceV2GidIndex(*device_, device_->port(), Env("KV_RDMA_IP"));
    ASSERT_TRUE(gid_index.ok()) << gid_index.status();
    gid_index_ = *gid_index;
  }

  absl::StatusOr<std::unique_ptr<Pair>> MakePair(CompletionChannel* server_channel = nullptr,
                                                 QpCaps caps = {}) {
    const int depth = 2 * static_cast<int>(caps.max_send_wr + caps.max_recv_wr);
    absl::StatusOr<CompletionQueue> ccq = CompletionQueue::Create(*device_, depth, nullptr);
    if (!ccq.ok()) return ccq.status();
    absl::StatusOr<CompletionQueue> scq = CompletionQueue::Create(*device_, depth, server_channel);
    if (!scq.ok()) return scq.status();
    absl::StatusOr<QueuePair> client =
        QueuePair::CreateRc(*device_, *pd_, *ccq, *ccq, caps, gid_index_);
    if (!client.ok()) return client.status();
    absl::StatusOr<QueuePair> server =
        QueuePair::CreateRc(*device_, *pd_, *scq, *scq, caps, gid_index_);
    if (!server.ok()) return server.status();
    auto pair = std::make_unique<Pair>(
        Pair{std::move(*ccq), std::move(*scq), std::move(*client), std::move(*server)});
    if (absl::Status s = ConnectPair(*pair); !s.ok()) return s;
    return pair;
  }

  // Both sides exchange local() and connect (also after Reset()).
  static absl::Status ConnectPair(Pair& p) {
    const QpEndpoint c = p.client.local();
    const QpEndpoint s = p.server.local();
    if (absl::Status st = p.client.Connect(s, kClientAccess); !st.ok()) return st;
    return p.server.Connect(c, kServerAccess);
  }

  // Polls `cq` for one completion; checks its wr_id and returns its status.
  static absl::Status Wait(CompletionQueue& cq, uint64_t wr_id, absl::string_view what,
                           ibv_wc* out = nullptr) {
    absl::StatusOr<ibv_wc> wc = cq.PollOne(kCompletionTimeout);
    if (!wc.ok()) return wc.status();
    if (out != nullptr) *out = *wc;
    if (wc->wr_id != wr_id) {
      return absl::InternalError(
          absl::StrCat(what, ": completion for wr_id 0x", absl::Hex(wc->wr_id), ", expected 0x",
                       absl::Hex(wr_id), " (", WcStatusToStatus(*wc).ToString(), ")"));
    }
    return WcStatusToStatus(*wc, what);
  }

  // Waits up to 5 s for `qp` to reach `want`.
  static ibv_qp_state WaitForState(const QueuePair& qp, ibv_qp_state want) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    ibv_qp_state st = IBV_QPS_UNKNOWN;
    while (absl::Now() < deadline) {
      absl::StatusOr<ibv_qp_state> s = qp.state();
      if (!s.ok()) return IBV_QPS_UNKNOWN;
      st = *s;
      if (st == want) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return st;
  }

  // Discards whatever completions are left in both CQs of `p`.
  static int Drain(Pair& p) {
    ibv_wc wc[16];
    int total = 0;
    for (CompletionQueue* cq : {&p.client_cq, &p.server_cq}) {
      int n;
      while ((n = cq->Poll(wc, 16)) > 0) total += n;
    }
    return total;
  }

  absl::StatusOr<MemoryRegion> Register(Buffer& buf, int access) {
    return MemoryRegion::Register(*pd_, buf.data, buf.size, access);
  }

  // Declared in destruction order reversed: the PD goes before the device.
  std::optional<Device> device_;
  std::optional<ProtectionDomain> pd_;
  int gid_index_ = -1;
  absl::Time test_start_;
};

#define ASSERT_OK(expr)                            \
  do {                                             \
    const absl::Status _st = (expr);               \
    ASSERT_TRUE(_st.ok()) << #expr << ": " << _st; \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr)                             \
  auto lhs##_or = (expr);                                           \
  ASSERT_TRUE(lhs##_or.ok()) << #expr << ": " << lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

TEST_F(RdmaLoopbackTest, ReportsDeviceLimits) {
  std::cout << "device " << device_->name() << " port " << int{device_->port()} << ": "
            << DeviceLimitsToString(device_->limits()) << "\n";
  ASSERT_OK_AND_ASSIGN(gid, QueryGid(*device_, device_->port(), gid_index_));
  std::cout << "RoCE v2 GID index " << gid_index_ << " = " << GidToString(gid)
            << " (KV_RDMA_IP=" << Env("KV_RDMA_IP") << ")\n";
  ibv_port_attr port;
  ASSERT_EQ(ibv_query_port(device_->context(), device_->port(), &port), 0);
  std::cout << "active_mtu=" << (128 << port.active_mtu) << " B, gid_tbl_len=" << port.gid_tbl_len
            << "\n";
  ASSERT_OK_AND_ASSIGN(pair, MakePair());
  const QpCaps& caps = pair->client.caps();
  std::cout << "granted QpCaps: send_wr=" << caps.max_send_wr << " recv_wr=" << caps.max_recv_wr
            << " send_sge=" << caps.max_send_sge << " recv_sge=" << caps.max_recv_sge
            << " inline=" << caps.max_inline << "\n";
  std::cout << "client " << QpEndpointToString(pair->client.local()) << "\nserver "
            << QpEndpointToString(pair->server.local()) << "\n";
  EXPECT_GT(device_->limits().max_qp_wr, 0u);
  EXPECT_GE(caps.max_send_wr, QpCaps{}.max_send_wr);
  EXPECT_GE(caps.max_inline, QpCaps{}.max_inline);
  EXPECT_EQ(*pair->client.state(), IBV_QPS_RTS);
  EXPECT_EQ(*pair->server.state(), IBV_QPS_RTS);
  if (!Env("KV_RDMA_IP").empty()) {
    EXPECT_EQ(GidToString(gid), "::ffff:" + Env("KV_RDMA_IP"));
  }
  EXPECT_EQ(FindRoceV2GidIndex(*device_, device_->port(), "192.0.2.123").status().code(),
            absl::StatusCode::kNotFound);
  std::cout << FindRoceV2GidIndex(*device_, device_->port(), "192.0.2.123").status() << "\n";
}

TEST_F(RdmaLoopbackTest, WriteThenRead1MiB) {
  Buffer client_buf(2 * kMiB), server_buf(kMiB);
  ASSERT_OK_AND_ASSIGN(client_mr, Register(client_buf, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_OK_AND_ASSIGN(server_mr, Register(server_buf, kServerAccess));
  ASSERT_OK_AND_ASSIGN(p, MakePair());

  Fill(client_buf.data, kMiB, 1);
  const Sge src{client_buf.addr(), static_cast<uint32_t>(kMiB), client_mr.lkey()};
  absl::Time t0 = absl::Now();
  ASSERT_OK(p->client.PostWrite({&src, 1}, server_buf.addr(), server_mr.rkey(), 1, true));
  ASSERT_OK(Wait(p->client_cq, 1, "WRITE 1 MiB"));
  const absl::Duration write_time = absl::Now() - t0;
  ASSERT_EQ(std::memcmp(server_buf.data, client_buf.data, kMiB), 0);

  const Sge dst{client_buf.addr(kMiB), static_cast<uint32_t>(kMiB), client_mr.lkey()};
  t0 = absl::Now();
  ASSERT_OK(p->client.PostRead({&dst, 1}, server_buf.addr(), server_mr.rkey(), 2, true));
  ibv_wc wc;
  ASSERT_OK(Wait(p->client_cq, 2, "READ 1 MiB", &wc));
  const absl::Duration read_time = absl::Now() - t0;
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(std::memcmp(client_buf.data + kMiB, server_buf.data, kMiB), 0);
  std::cout << "1 MiB WRITE " << absl::FormatDuration(write_time) << ", READ "
            << absl::FormatDuration(read_time) << "\n";
}

TEST_F(RdmaLoopbackTest, SendRecvWithCompletionChannel) {
  ASSERT_OK_AND_ASSIGN(channel, CompletionChannel::Create(*device_));
  EXPECT_GE(channel.fd(), 0);
  Buffer client_buf(64 * kKiB), server_buf(64 * kKiB);
  ASSERT_OK_AND_ASSIGN(client_mr, Register(client_buf, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_OK_AND_ASSIGN(server_mr, Register(server_buf, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_OK_AND_ASSIGN(p, MakePair(&channel));
  ASSERT_TRUE(p->server_cq.has_channel());
  EXPECT_EQ(p->client_cq.RequestNotify().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_OK(p->server_cq.RequestNotify());
  // Nothing posted yet: the wait times out.
  absl::StatusOr<bool> fired = p->server_cq.WaitForEvent(absl::Milliseconds(50));
  ASSERT_TRUE(fired.ok()) << fired.status();
  EXPECT_FALSE(*fired);

  for (int i = 0; i < 2; ++i) {
    ASSERT_OK(p->server.PostRecv({server_buf.addr(i * 4096), 4096, server_mr.lkey()}, 100 + i));
  }
  // A regular SEND of 1000 bytes.
  Fill(client_buf.data, 1000, 7);
  const Sge msg{client_buf.addr(), 1000, client_mr.lkey()};
  ASSERT_OK(p->client.PostSend({&msg, 1}, 10, /*signaled=*/true));
  fired = p->server_cq.WaitForEvent(kCompletionTimeout);
  ASSERT_TRUE(fired.ok()) << fired.status();
  ASSERT_TRUE(*fired);
  ibv_wc wc;
  int n = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while ((n = p->server_cq.Poll(&wc, 1)) == 0 && absl::Now() < deadline) {
  }
  ASSERT_EQ(n, 1);
  ASSERT_OK(WcStatusToStatus(wc));
  EXPECT_EQ(wc.wr_id, 100u);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 1000u);
  EXPECT_EQ(std::memcmp(server_buf.data, client_buf.data, 1000), 0);
  ASSERT_OK(Wait(p->client_cq, 10, "SEND"));

  // An inline SEND: the source may be overwritten right after posting.
  Fill(client_buf.data + 8192, 48, 8);
  std::string expect(client_buf.data + 8192, 48);
  const Sge small{client_buf.addr(8192), 48, 0};
  ASSERT_OK(p->client.PostSend({&small, 1}, 11, true, /*inline_data=*/true));
  std::memset(client_buf.data + 8192, 0, 48);
  fired = p->server_cq.WaitForEvent(kCompletionTimeout);
  ASSERT_TRUE(fired.ok() && *fired);
  ASSERT_OK(Wait(p->server_cq, 101, "RECV inline"));
  EXPECT_EQ(std::string(server_buf.data + 4096, 48), expect);
  ASSERT_OK(Wait(p->client_cq, 11, "SEND inline"));

  // Too much inline data is refused before posting.
  const Sge big{client_buf.addr(), p->client.caps().max_inline + 1, 0};
  EXPECT_EQ(p->client.PostSend({&big, 1}, 12, true, true).code(),
            absl::StatusCode::kInvalidArgument);
}

// The commit protocol's premise: on one RC QP, when the receiver sees a SEND,
// the WRITEs posted before it are in place.
TEST_F(RdmaLoopbackTest, WriteThenSendIsOrdered) {
  constexpr int kIterations = 1000;
  constexpr size_t kArea = kMiB;
  constexpr int kRecvSlots = 8;
  struct Header {
    uint64_t iteration, offset, size, source;
  };
  Buffer client_buf(kArea + 4096), server_buf(kArea + kRecvSlots * 64);
  ASSERT_OK_AND_ASSIGN(client_mr, Register(client_buf, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_OK_AND_ASSIGN(server_mr, Register(server_buf, kServerAccess));
  ASSERT_OK_AND_ASSIGN(p, MakePair());

  uint64_t seed = std::random_device{}();
  if (!Env("KV_TEST_SEED").empty()) seed = std::strtoull(Env("KV_TEST_SEED").c_str(), nullptr, 0);
  SCOPED_TRACE(absl::StrCat("seed ", seed, " (KV_TEST_SEED to repeat)"));
  std::mt19937_64 rng(seed);

  char* recv_area = server_buf.data + kArea;
  for (int i = 0; i < kRecvSlots; ++i) {
    ASSERT_OK(p->server.PostRecv({server_buf.addr(kArea + i * 64), 64, server_mr.lkey()}, i));
  }
  Header* header = reinterpret_cast<Header*>(client_buf.data + kArea);
  uint64_t bytes = 0;
  int mismatches = 0;
  const absl::Time t0 = absl::Now();
  for (int it = 0; it < kIterations; ++it) {
    // Sizes spread over 1 B .. 256 KiB (log-uniform), at any offset.
    const int log2 = static_cast<int>(rng() % 19);
    const size_t size = 1 + rng() % (size_t{1} << log2);
    const size_t offset = rng() % (kArea - size + 1);
    const size_t source = rng() % (kArea - size + 1);
    Fill(client_buf.data + source, size, static_cast<uint32_t>(it));
    // Split into up to 3 WRITEs, unsignalled; the SEND is signalled.
    const int writes = 1 + static_cast<int>(rng() % 3);
    size_t done = 0;
    for (int w = 0; w < writes; ++w) {
      const size_t chunk = w == writes - 1 ? size - done : (size - done) / 2;
      const Sge sge{client_buf.addr(source + done), static_cast<uint32_t>(chunk), client_mr.lkey()};
      ASSERT_OK(p->client.PostWrite({&sge, 1}, server_buf.addr(offset + done), server_mr.rkey(),
                                    1000 + w, /*signaled=*/false));
      done += chunk;
    }
    *header = Header{static_cast<uint64_t>(it), offset, size, source};
    const Sge hs{client_buf.addr(kArea), sizeof(Header), client_mr.lkey()};
    ASSERT_OK(p->client.PostSend({&hs, 1}, 2000 + it, /*signaled=*/true));

    ibv_wc wc;
    ASSERT_OK(Wait(p->server_cq, it % kRecvSlots, "RECV commit", &wc));
    ASSERT_EQ(wc.byte_len, sizeof(Header));
    Header got;
    std::memcpy(&got, recv_area + (it % kRecvSlots) * 64, sizeof got);
    ASSERT_EQ(got.iteration, static_cast<uint64_t>(it));
    // Check at once, before anything else happens.
    if (std::memcmp(server_buf.data + got.offset, client_buf.data + got.source, got.size) != 0) {
      ++mismatches;
      ADD_FAILURE() << "iteration " << it << ": " << got.size << " B at offset " << got.offset
                    << " not in place when the SEND arrived";
    }
    ASSERT_OK(p->server.PostRecv(
        {server_buf.addr(kArea + (it % kRecvSlots) * 64), 64, server_mr.lkey()}, it % kRecvSlots));
    ASSERT_OK(Wait(p->client_cq, 2000 + it, "SEND commit"));
    bytes += size;
  }
  const absl::Duration took = absl::Now() - t0;
  EXPECT_EQ(mismatches, 0);
  std::cout << kIterations << " WRITE(s)+SEND iterations, " << bytes / kKiB << " KiB in "
            << absl::FormatDuration(took) << "\n";
}

TEST_F(RdmaLoopbackTest, BatchedReadsOneDoorbellLastSignaled) {
  constexpr int kReads = 16;
  Buffer client_buf(kMiB), server_buf(kMiB);
  ASSERT_OK_AND_ASSIGN(client_mr, Register(client_buf, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_OK_AND_ASSIGN(server_mr, Register(server_buf, kServerAccess));
  ASSERT_OK_AND_ASSIGN(p, MakePair());
  Fill(server_buf.data, kMiB, 3);
  std::memset(client_buf.data, 0, kMiB);

  // Read i: (i+1)*1000 bytes at server offset i*40 KiB + i into client offset
  // i*32 KiB. Read 0 scatters into two SGEs (header part and value part), as a
  // zero-copy GET does.
  std::vector<std::vector<Sge>> sges(kReads);
  std::vector<ReadOp> ops(kReads);
  for (int i = 0; i < kReads; ++i) {
    const uint32_t len = (i + 1) * 1000;
    if (i == 0) {
      sges[i] = {{client_buf.addr(0), 64, client_mr.lkey()},
                 {client_buf.addr(16 * kKiB), len - 64, client_mr.lkey()}};
    } else {
      sges[i] = {{client_buf.addr(i * 32 * kKiB), len, client_mr.lkey()}};
    }
    ops[i].local = sges[i];
    ops[i].remote_addr = server_buf.addr(i * 40 * kKiB + i);
    ops[i].rkey = server_mr.rkey();
    ops[i].wr_id = 500 + i;
    ops[i].signaled = i == kReads - 1;
  }
  ASSERT_OK(p->client.PostReads(ops));
  ibv_wc wc;
  ASSERT_OK(Wait(p->client_cq, 500 + kReads - 1, "last READ of the batch", &wc));
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  // RC completes in order: every earlier READ has landed.
  EXPECT_EQ(std::memcmp(client_buf.data, server_buf.data, 64), 0);
  EXPECT_EQ(std::memcmp(client_buf.data + 16 * kKiB, server_buf.data + 64, 1000 - 64), 0);
  for (int i = 1; i < kReads; ++i) {
    EXPECT_EQ(std::memcmp(client_buf.data + i * 32 * kKiB, server_buf.data + i * 40 * kKiB + i,
                          (i + 1) * 1000),
              0)
        << "read " << i;
  }
  // And the unsignalled ones produced no completions.
  EXPECT_EQ(p->client_cq.PollOne(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  // The same as WRITEs, back to the server.
  Fill(client_buf.data, kMiB, 4);
  std::vector<WriteOp> writes(ops.begin(), ops.end());
  ASSERT_OK(p->client.PostWrites(writes));
  ASSERT_OK(Wait(p->client_cq, 500 + kReads - 1, "last WRITE of the batch"));
  EXPECT_EQ(
      std::memcmp(server_buf.data + 15 * 40 * kKiB + 15, client_buf.data + 15 * 32 * kKiB, 16000),
      0);

  // A batch larger than the send queue is refused before posting.
  std::vector<ReadOp> too_many(p->client.caps().max_send_wr + 1, ops[1]);
  EXPECT_EQ(p->client.PostReads(too_many).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RdmaLoopbackTest, WriteWithoutRemoteWriteIsPermissionDenied) {
  Buffer client_buf(64 * kKiB), ro_buf(64 * kKiB);
  std::memset(ro_buf.data, 0xEE, ro_buf.size);
  ASSERT_OK_AND_ASSIGN(client_mr, Register(client_buf, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_OK_AND_ASSIGN(ro_mr, Register(ro_buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
  ASSERT_OK_AND_ASSIGN(p, MakePair());

  Fill(client_buf.data, 4096, 5);
  const Sge sge{client_buf.addr(), 4096, client_mr.lkey()};
  ASSERT_OK(p->client.PostWrite({&sge, 1}, ro_buf.addr(), ro_mr.rkey(), 77, true));
  ibv_wc wc;
  absl::Status s = Wait(p->client_cq, 77, "WRITE to a read-only MR", &wc);
  std::cout << "error completion: " << s << " (wc.opcode as reported: " << WcOpcodeName(wc.opcode)
            << ")\n";
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_THAT(std::string(s.message()), HasSubstr(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)));
  EXPECT_TRUE(AllBytes(ro_buf.data, ro_buf.size, 0xEE)) << "the refused WRITE landed";

  // The requester QP is now in the error state (and on rxe the responder too).
  EXPECT_EQ(WaitForState(p->client, IBV_QPS_ERR), IBV_QPS_ERR);
  const ibv_qp_state server_state = WaitForState(p->server, IBV_QPS_ERR);
  std::cout << "after the access error: client " << QpStateName(*p->client.state()) << ", server "
            << QpStateName(server_state) << "\n";
  if (device_->name().rfind("rxe", 0) == 0) {
    EXPECT_EQ(server_state, IBV_QPS_ERR);
  }
  // Later WRs are flushed.
  ASSERT_OK(p->client.PostRead({&sge, 1}, ro_buf.addr(), ro_mr.rkey(), 78, true));
  s = Wait(p->client_cq, 78, "READ on an errored QP");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR)));

  // A fresh pair works: READ through the same (read-only) MR rkey.
  {
    ASSERT_OK_AND_ASSIGN(fresh, MakePair());
    std::memset(client_buf.data, 0, 4096);
    ASSERT_OK(fresh->client.PostRead({&sge, 1}, ro_buf.addr(), ro_mr.rkey(), 79, true));
    ASSERT_OK(Wait(fresh->client_cq, 79, "READ on a fresh pair"));
    EXPECT_TRUE(AllBytes(client_buf.data, 4096, 0xEE));
  }

  // So does the old pair after Reset() + Connect() on both sides.
  Drain(*p);
  ASSERT_OK(p->client.Reset());
  ASSERT_OK(p->server.Reset());
  EXPECT_EQ(*p->client.state(), IBV_QPS_RESET);
  ASSERT_OK(ConnectPair(*p));
  EXPECT_EQ(*p->client.state(), IBV_QPS_RTS);
  std::memset(client_buf.data, 0, 4096);
  ASSERT_OK(p->client.PostRead({&sge, 1}, ro_buf.addr(4096), ro_mr.rkey(), 80, true));
  ASSERT_OK(Wait(p->client_cq, 80, "READ after Reset+Connect"));
  EXPECT_TRUE(AllBytes(client_buf.data, 4096, 0xEE));
}

// A PUT lease: a per-lease MR without remote write, and a type-2 window over
// it bound to the server's QP. Checks what the lease protocol relies on, and
// that tearing everything down does not hang (windows go before QPs).
TEST_F(RdmaLoopbackTest, MemoryWindowLease) {
  if (!device_->limits().mw_type2) GTEST_SKIP() << device_->name() << " has no type-2 windows";
  constexpr size_t kPool = kMiB, kLeaseOffset = 256 * kKiB, kLeaseLen = 64 * kKiB;
  const absl::Time start = absl::Now();
  Buffer client_buf(kPool), pool(kPool);
  std::memset(pool.data, 0xEE, kPool);
  ASSERT_OK_AND_ASSIGN(client_mr, Register(client_buf, IBV_ACCESS_LOCAL_WRITE));
  {
    // Destruction order (reverse of declaration): window, pair (QPs, CQs), MR.
    ASSERT_OK_AND_ASSIGN(lease_mr,
                         MemoryRegion::Register(*pd_, pool.data + kLeaseOffset, kLeaseLen,
                                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
    ASSERT_OK_AND_ASSIGN(p, MakePair());
    ASSERT_OK_AND_ASSIGN(mw_value, MemoryWindow::Alloc(*pd_));
    std::optional<MemoryWindow> mw(std::move(mw_value));
    EXPECT_FALSE(mw->bound());

    // Bind over the whole lease MR, remote write only.
    ASSERT_OK_AND_ASSIGN(k1, p->server.PostBindMw(*mw, lease_mr, lease_mr.addr(), lease_mr.length(),
                                                  IBV_ACCESS_REMOTE_WRITE, 0xB1));
    ibv_wc wc;
    ASSERT_OK(Wait(p->server_cq, 0xB1, "BIND_MW", &wc));
    EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
    EXPECT_EQ(mw->rkey(), k1);
    EXPECT_TRUE(mw->bound());
    EXPECT_EQ(mw->bound_qp_num(), p->server.qp_num());
    EXPECT_EQ(mw->get()->rkey, k1) << "ibv_mw::rkey must track the bound key";
    std::cout << "lease MR rkey 0x" << std::hex << lease_mr.rkey() << ", window rkey 0x" << k1
              << std::dec << "\n";

    // Refused up front (either would kill the QP): binding a bound window,
    // binding outside the MR.
    EXPECT_EQ(
        p->server.PostBindMw(*mw, lease_mr, lease_mr.addr(), 4096, IBV_ACCESS_REMOTE_WRITE, 0xB2)
            .status()
            .code(),
        absl::StatusCode::kFailedPrecondition);
    ASSERT_OK_AND_ASSIGN(mw2_value, MemoryWindow::Alloc(*pd_));
    EXPECT_EQ(p->server
                  .PostBindMw(mw2_value, lease_mr, lease_mr.addr() + 4096, kLeaseLen,
                              IBV_ACCESS_REMOTE_WRITE, 0xB3)
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument);

    // The client writes the whole lease, and its last byte, through the window.
    Fill(client_buf.data, kLeaseLen, 11);
    const Sge whole{client_buf.addr(), static_cast<uint32_t>(kLeaseLen), client_mr.lkey()};
    ASSERT_OK(p->client.PostWrite({&whole, 1}, lease_mr.addr(), k1, 1, true));
    ASSERT_OK(Wait(p->client_cq, 1, "WRITE through the window"));
    EXPECT_EQ(std::memcmp(pool.data + kLeaseOffset, client_buf.data, kLeaseLen), 0);
    client_buf.data[kLeaseLen] = 0x5A;
    const Sge one{client_buf.addr(kLeaseLen), 1, client_mr.lkey()};
    ASSERT_OK(p->client.PostWrite({&one, 1}, lease_mr.addr() + kLeaseLen - 1, k1, 2, true));
    ASSERT_OK(Wait(p->client_cq, 2, "WRITE of the lease's last byte"));
    EXPECT_EQ(pool.data[kLeaseOffset + kLeaseLen - 1], 0x5A);
    EXPECT_TRUE(AllBytes(pool.data, kLeaseOffset, 0xEE));
    EXPECT_TRUE(
        AllBytes(pool.data + kLeaseOffset + kLeaseLen, kPool - kLeaseOffset - kLeaseLen, 0xEE));

    // The server revokes the lease; the same WRITE now fails and changes
    // nothing.
    ASSERT_OK(p->server.PostLocalInvalidate(*mw, 0x1417));
    EXPECT_FALSE(mw->bound());
    ASSERT_OK(Wait(p->server_cq, 0x1417, "LOCAL_INV", &wc));
    EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
    std::memset(pool.data + kLeaseOffset, 0xEE, kLeaseLen);
    ASSERT_OK(p->client.PostWrite({&whole, 1}, lease_mr.addr(), k1, 3, true));
    absl::Status s = Wait(p->client_cq, 3, "WRITE with the invalidated rkey");
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_TRUE(AllBytes(pool.data, kPool, 0xEE)) << "the revoked WRITE landed";

    // Both QPs are in error now; reconnect them in place.
    EXPECT_EQ(WaitForState(p->client, IBV_QPS_ERR), IBV_QPS_ERR);
    WaitForState(p->server, IBV_QPS_ERR);
    Drain(*p);
    ASSERT_OK(p->client.Reset());
    ASSERT_OK(p->server.Reset());
    ASSERT_OK(ConnectPair(*p));

    // Re-binding the invalidated window gives a new rkey (same window index,
    // next key byte) that works.
    ASSERT_OK_AND_ASSIGN(k2, p->server.PostBindMw(*mw, lease_mr, lease_mr.addr(), lease_mr.length(),
                                                  IBV_ACCESS_REMOTE_WRITE, 0xB4));
    ASSERT_OK(Wait(p->server_cq, 0xB4, "re-BIND_MW"));
    EXPECT_NE(k2, k1);
    EXPECT_EQ(k2 & ~0xffu, k1 & ~0xffu);
    EXPECT_EQ(k2, ibv_inc_rkey(k1));
    Fill(client_buf.data, kLeaseLen, 12);
    ASSERT_OK(p->client.PostWrite({&whole, 1}, lease_mr.addr(), k2, 4, true));
    ASSERT_OK(Wait(p->client_cq, 4, "WRITE through the re-bound window"));
    EXPECT_EQ(std::memcmp(pool.data + kLeaseOffset, client_buf.data, kLeaseLen), 0);

    // A WRITE beyond the lease MR through the window fails (on rxe the MR,
    // not the window, bounds it) and the neighbouring memory is untouched.
    const Sge page{client_buf.addr(), 4096, client_mr.lkey()};
    ASSERT_OK(p->client.PostWrite({&page, 1}, lease_mr.addr() + kLeaseLen - 2048, k2, 5, true));
    s = Wait(p->client_cq, 5, "WRITE straddling the lease end");
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_TRUE(
        AllBytes(pool.data + kLeaseOffset + kLeaseLen, kPool - kLeaseOffset - kLeaseLen, 0xEE))
        << "a WRITE beyond the lease MR landed";
    EXPECT_TRUE(AllBytes(pool.data, kLeaseOffset, 0xEE));

    // The window is still bound (to the now errored server QP). Deallocate
    // it before the QPs are destroyed; that is what the declaration order
    // does at the end of this scope too.
    EXPECT_TRUE(mw->bound());
    absl::Time t0 = absl::Now();
    mw.reset();
    std::cout << "ibv_dealloc_mw of the bound window: " << absl::FormatDuration(absl::Now() - t0)
              << "\n";
    t0 = absl::Now();
    p.reset();
    const absl::Duration destroy = absl::Now() - t0;
    std::cout << "destroying the pair: " << absl::FormatDuration(destroy) << "\n";
    EXPECT_LT(destroy, absl::Seconds(5)) << "a window was still bound to a QP";
  }
  const absl::Duration total = absl::Now() - start;
  std::cout << "MemoryWindowLease total " << absl::FormatDuration(total) << "\n";
  EXPECT_LT(total, absl::Seconds(30)) << "teardown hung (bound window?)";
}

// A failed bind (MR without MW_BIND) leaves the device's key unchanged;
// RollbackBind() brings the window's bookkeeping back so that the next bind
// (which must present the key the device holds) succeeds.
TEST_F(RdmaLoopbackTest, FailedBindRollsBackTheWindow) {
  if (!device_->limits().mw_type2) GTEST_SKIP() << device_->name() << " has no type-2 windows";
  Buffer lease(64 * kKiB), client_buf(4096);
  ASSERT_OK_AND_ASSIGN(client_mr, Register(client_buf, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_OK_AND_ASSIGN(no_bind_mr, Register(lease, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_OK_AND_ASSIGN(bind_mr,
                       MemoryRegion::Register(*pd_, lease.data, lease.size,
                                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
  ASSERT_OK_AND_ASSIGN(p, MakePair());
  ASSERT_OK_AND_ASSIGN(mw, MemoryWindow::Alloc(*pd_));
  const uint32_t initial = mw.rkey();

  ASSERT_OK_AND_ASSIGN(attempted,
                       p->server.PostBindMw(mw, no_bind_mr, no_bind_mr.addr(), no_bind_mr.length(),
                                            IBV_ACCESS_REMOTE_WRITE, 0xB5));
  ibv_wc wc;
  absl::Status s = Wait(p->server_cq, 0xB5, "BIND_MW on an MR without MW_BIND", &wc);
  std::cout << "bind on an MR without MW_BIND: " << s << "\n";
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(attempted, ibv_inc_rkey(initial));
  mw.RollbackBind();
  EXPECT_FALSE(mw.bound());
  EXPECT_EQ(mw.rkey(), initial);
  EXPECT_EQ(mw.get()->rkey, initial);

  // Recover the server QP and bind properly: the window still works.
  EXPECT_EQ(WaitForState(p->server, IBV_QPS_ERR), IBV_QPS_ERR);
  Drain(*p);
  ASSERT_OK(p->client.Reset());
  ASSERT_OK(p->server.Reset());
  ASSERT_OK(ConnectPair(*p));
  ASSERT_OK_AND_ASSIGN(rkey, p->server.PostBindMw(mw, bind_mr, bind_mr.addr(), bind_mr.length(),
                                                  IBV_ACCESS_REMOTE_WRITE, 0xB6));
  ASSERT_OK(Wait(p->server_cq, 0xB6, "BIND_MW after the rollback"));
  EXPECT_EQ(rkey, ibv_inc_rkey(initial));
  Fill(client_buf.data, 4096, 21);
  const Sge sge{client_buf.addr(), 4096, client_mr.lkey()};
  ASSERT_OK(p->client.PostWrite({&sge, 1}, bind_mr.addr() + 4096, rkey, 7, true));
  ASSERT_OK(Wait(p->client_cq, 7, "WRITE through the window"));
  EXPECT_EQ(std::memcmp(lease.data + 4096, client_buf.data, 4096), 0);
  // Invalidate with the raw-rkey overload before teardown.
  ASSERT_OK(p->server.PostLocalInvalidate(rkey, 0x1418));
  ASSERT_OK(Wait(p->server_cq, 0x1418, "LOCAL_INV by rkey"));
  mw.MarkInvalidated();
}

// Owners that get the member order right tear down quickly even with a bound
// window: the window is declared last and destroyed first.
TEST_F(RdmaLoopbackTest, OwnerMemberOrderTearsDownBoundWindowQuickly) {
  if (!device_->limits().mw_type2) GTEST_SKIP() << device_->name() << " has no type-2 windows";
  Buffer lease(64 * kKiB);
  struct Lease {
    MemoryRegion mr;
    std::unique_ptr<Pair> pair;  // QPs and their CQs
    MemoryWindow mw;             // last: deallocated first
  };
  ASSERT_OK_AND_ASSIGN(mr, Register(lease, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
  ASSERT_OK_AND_ASSIGN(p, MakePair());
  ASSERT_OK_AND_ASSIGN(mw, MemoryWindow::Alloc(*pd_));
  auto owner = std::make_unique<Lease>(Lease{std::move(mr), std::move(p), std::move(mw)});
  ASSERT_OK_AND_ASSIGN(
      rkey, owner->pair->server.PostBindMw(owner->mw, owner->mr, owner->mr.addr(),
                                           owner->mr.length(), IBV_ACCESS_REMOTE_WRITE, 1));
  ASSERT_OK(Wait(owner->pair->server_cq, 1, "BIND_MW"));
  EXPECT_TRUE(owner->mw.bound());
  EXPECT_NE(rkey, 0u);
  const absl::Time t0 = absl::Now();
  owner.reset();
  const absl::Duration took = absl::Now() - t0;
  std::cout << "owner teardown with a bound window: " << absl::FormatDuration(took) << "\n";
  EXPECT_LT(took, absl::Seconds(5));
}

}  // namespace
}  // namespace rdma
}  // namespace kvstore
