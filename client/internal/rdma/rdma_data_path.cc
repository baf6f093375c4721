// Copyright 2026 The kvstore Authors.

#include "client/internal/rdma/rdma_data_path.h"

#include <infiniband/verbs.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/internal/buffer_access.h"
#include "common/grpc_status.h"
#include "common/protocol/commit_wire.h"
#include "common/protocol/layout.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/device.h"
#include "common/rdma/gid.h"
#include "common/rdma/queue_pair.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"

namespace kvstore {
namespace client {

// The device and protection domain, shared by every path of a client and by
// everything registered with them (user buffers may outlive a path).
class RdmaContext {
 public:
  RdmaContext(rdma::Device d, rdma::ProtectionDomain p) : device(std::move(d)), pd(std::move(p)) {}
  rdma::Device device;
  rdma::ProtectionDomain pd;  // declared after the device: destroyed first
};

namespace {

using Context = RdmaContext;

using layout::Slot;

constexpr int kSlots = 64;          // operations in flight per queue pair
constexpr int kMaxGetAttempts = 8;  // one-sided tries before the server answers
constexpr size_t kBatch = 16;       // keys per MultiGet/MultiPut round
constexpr size_t kBucketArea = 2 * layout::kBucketBytes;
constexpr size_t kSmallEntryArea = 4096;

// wr_id layout: bit 63 = receive; bits 0..15 = slot; bits 16..17 = kind.
constexpr uint64_t kRecvTag = uint64_t{1} << 63;
constexpr uint64_t kKindRead = uint64_t{1} << 16;
constexpr uint64_t kKindWrite = uint64_t{2} << 16;
constexpr uint64_t kKindSend = uint64_t{3} << 16;
constexpr uint64_t kKindMask = uint64_t{3} << 16;

// A registered allocation; MR declared after the memory so it goes first.
struct Block {
  std::unique_ptr<char, decltype(&std::free)> mem{nullptr, &std::free};
  size_t size = 0;
  std::optional<rdma::MemoryRegion> mr;
  std::shared_ptr<Context> context;  // keeps the PD alive for the MR
};

absl::StatusOr<std::unique_ptr<Block>> NewBlock(const std::shared_ptr<Context>& ctx, size_t size) {
  auto b = std::make_unique<Block>();
  b->size = (size + 4095) / 4096 * 4096;
  b->mem.reset(static_cast<char*>(std::aligned_alloc(4096, b->size)));
  if (!b->mem)
    return absl::ResourceExhaustedError(absl::StrCat("out of memory for ", size, " bytes"));
  std::memset(b->mem.get(), 0, b->size);
  b->context = ctx;
  KV_ASSIGN_OR_RETURN(auto mr, rdma::MemoryRegion::Register(ctx->pd, b->mem.get(), b->size,
                                                            IBV_ACCESS_LOCAL_WRITE));
  b->mr.emplace(std::move(mr));
  return b;
}

// Registered buffers for entries too large for a slot's scratch, reused by
// power-of-two size class (registration is far too slow per operation).
class BufferPool {
 public:
  explicit BufferPool(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {}

  absl::StatusOr<std::unique_ptr<Block>> Acquire(size_t bytes) {
    size_t cls = 64 * 1024;
    while (cls < bytes) cls *= 2;
    {
      absl::MutexLock lock(&mu_);
      auto& list = free_[cls];
      if (!list.empty()) {
        auto b = std::move(list.back());
        list.pop_back();
        cached_ -= b->size;
        return b;
      }
    }
    return NewBlock(ctx_, cls);
  }
  void Release(std::unique_ptr<Block> b) {
    absl::MutexLock lock(&mu_);
    if (cached_ + b->size > kMaxCached) return;  // dropped: deregistered
    cached_ += b->size;
    free_[b->size].push_back(std::move(b));
  }

 private:
  static constexpr size_t kMaxCached = 512ull << 20;
  std::shared_ptr<Context> ctx_;
  absl::Mutex mu_;
  std::map<size_t, std::vector<std::unique_ptr<Block>>> free_ ABSL_GUARDED_BY(mu_);
  size_t cached_ ABSL_GUARDED_BY(mu_) = 0;
};

// One operation's state and scratch memory (inside the slot arena MR).
struct OpSlot {
  int index = 0;
  char* scratch = nullptr;  // buckets | commit message | small entry
  uint64_t generation = 0;
  uint64_t request_id = 0;
  std::atomic<bool> done{false};
  ibv_wc_status wc_status = IBV_WC_SUCCESS;
  absl::Status ack;
};

struct Lease {
  uint64_t id = 0;
  uint64_t arena_offset = 0;
  uint64_t length = 0;
  uint64_t write_addr = 0;
  uint32_t rkey = 0;
  uint64_t used = 0;
  int inflight = 0;
  absl::Time expires;
  bool dead = false;  // the server refused a commit into it
};

// Where one entry goes.
struct LeaseSpace {
  std::shared_ptr<Lease> lease;
  uint64_t arena_offset = 0;
  uint64_t remote_addr = 0;
};

struct DataRegion {
  uint64_t arena_offset;
  uint64_t length;
  uint64_t addr;
  uint32_t rkey;
};

class RdmaDataPathImpl final : public RdmaDataPath {
 public:
  RdmaDataPathImpl(v1::KvControl::Stub* stub, const v1::HandshakeResponse& hs,
                   std::string client_name, uint64_t lease_bytes, absl::Duration rpc_timeout)
      : stub_(stub),
        hs_(hs),
        client_name_(std::move(client_name)),
        lease_bytes_(lease_bytes),
        rpc_timeout_(rpc_timeout) {}

  ~RdmaDataPathImpl() override {
    {
      absl::MutexLock lock(&lease_mu_);
      stopping_ = true;
    }
    if (lease_thread_.joinable()) lease_thread_.join();
    // Best effort: give the leases back and close the connection, so the
    // server frees them now rather than at expiry.
    // Skipped on a broken path: the server may be gone (each RPC would wait
    // out its deadline) and expires the leases anyway.
    if (!broken_) {
      std::vector<std::shared_ptr<Lease>> all = retired_;
      if (cur_) all.push_back(cur_);
      if (next_) all.push_back(next_);
      for (auto& l : all) ReleaseLease(*l);
    }
    if (connection_id_ != 0 && !broken_) {
      v1::DisconnectQpRequest req;
      req.set_epoch(hs_.epoch());
      req.set_connection_id(connection_id_);
      v1::DisconnectQpResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
      (void)stub_->DisconnectQp(&ctx, req, &resp);
    }
  }

  absl::Status Init(std::shared_ptr<Context> ctx) {
    limits_.max_key_bytes = hs_.limits().max_key_bytes();
    limits_.max_value_bytes = hs_.limits().max_value_bytes();
    limits_.max_batch_keys = hs_.limits().max_batch_keys();
    geometry_.bucket_count = hs_.index().bucket_count();
    geometry_.seed = hs_.index().seed();
    max_read_span_ = absl::Milliseconds(std::max<uint32_t>(1, hs_.limits().max_read_span_ms()));
    lease_ttl_ = absl::Milliseconds(std::max<uint32_t>(100, hs_.limits().lease_ttl_ms()));
    if (hs_.index().layout_version() != layout::kLayoutVersion ||
        hs_.index().bucket_bytes() != layout::kBucketBytes) {
      return absl::FailedPreconditionError(absl::StrCat("server uses memory layout version ",
                                                        hs_.index().layout_version(),
                                                        ", this client ", layout::kLayoutVersion));
    }
    bool have_index = false;
    for (const auto& r : hs_.regions()) {
      if (r.kind() == v1::REGION_KIND_INDEX) {
        index_addr_ = r.addr();
        index_rkey_ = r.rkey();
        have_index = r.length() >= geometry_.bucket_count * layout::kBucketBytes;
      } else if (r.kind() == v1::REGION_KIND_DATA) {
        data_.push_back({r.arena_offset(), r.length(), r.addr(), r.rkey()});
      }
    }
    std::sort(data_.begin(), data_.end(), [](const DataRegion& a, const DataRegion& b) {
      return a.arena_offset < b.arena_offset;
    });
    if (!have_index || data_.empty() || hs_.endpoints().rdma_gid().size() != 16) {
      return absl::UnavailableError("the server publishes no RDMA regions");
    }
    data_arena_bytes_ = hs_.data_arena_bytes();

    ctx_ = std::move(ctx);
    pool_ = std::make_unique<BufferPool>(ctx_);
    KV_ASSIGN_OR_RETURN(auto cq,
                        rdma::CompletionQueue::Create(ctx_->device, 4 * kSlots + 512, nullptr));
    cq_.emplace(std::move(cq));

    commit_area_ = (wire::CommitBytes(limits_.max_key_bytes) + 63) / 64 * 64;
    scratch_bytes_ = kBucketArea + commit_area_ + kSmallEntryArea;
    KV_ASSIGN_OR_RETURN(slot_arena_, NewBlock(ctx_, scratch_bytes_ * kSlots));
    for (int i = 0; i < kSlots; ++i) {
      slots_[i].index = i;
      slots_[i].scratch = slot_arena_->mem.get() + i * scratch_bytes_;
      free_slots_.push_back(i);
    }

    int gid_index = 0;
    auto found = rdma::FindRoceV2GidIndex(ctx_->device, ctx_->device.port(), "");
    if (found.ok()) gid_index = *found;
    rdma::QpCaps caps;
    caps.max_send_wr = 4 * kSlots + 64;
    caps.max_recv_wr = 256;
    caps.max_send_sge = 3;
    caps.max_recv_sge = 1;
    caps.max_inline = 64;
    KV_ASSIGN_OR_RETURN(
        auto qp, rdma::QueuePair::CreateRc(ctx_->device, ctx_->pd, *cq_, *cq_, caps, gid_index));
    qp_.emplace(std::move(qp));

    // ConnectQp: exchange endpoints over the control plane.
    const rdma::QpEndpoint local = qp_->local();
    v1::ConnectQpRequest req;
    req.set_epoch(hs_.epoch());
    req.set_client_name(client_name_);
    req.mutable_client()->set_qpn(local.qpn);
    req.mutable_client()->set_psn(local.psn);
    req.mutable_client()->set_gid(std::string(reinterpret_cast<const char*>(local.gid.data()), 16));
    req.mutable_client()->set_lid(local.lid);
    // 8 bytes the server may WRITE to check we are alive (idle probes): the
    // only client memory remotely writable, and only by this connection.
    probe_word_ = std::make_unique<uint64_t[]>(8);
    KV_ASSIGN_OR_RETURN(auto probe_mr, rdma::MemoryRegion::Register(
                                           ctx_->pd, probe_word_.get(), 64,
                                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    probe_mr_.emplace(std::move(probe_mr));
    req.set_probe_addr(reinterpret_cast<uint64_t>(probe_word_.get()));
    req.set_probe_rkey(probe_mr_->rkey());
    v1::ConnectQpResponse resp;
    grpc::ClientContext gctx;
    gctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->ConnectQp(&gctx, req, &resp)));
    connection_id_ = resp.connection_id();
    credits_ = std::max<uint32_t>(1, resp.commit_credits());
    if (resp.max_commit_bytes() < wire::CommitBytes(limits_.max_key_bytes)) {
      return absl::FailedPreconditionError("server commit buffers are smaller than the key limit");
    }
    rdma::QpEndpoint remote;
    remote.qpn = resp.server().qpn();
    remote.psn = resp.server().psn();
    std::memcpy(remote.gid.data(), resp.server().gid().data(),
                std::min<size_t>(16, resp.server().gid().size()));
    remote.lid = static_cast<uint16_t>(resp.server().lid());
    KV_RETURN_IF_ERROR(qp_->Connect(remote, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    // Receives for the acks, one per commit credit (a QP takes receives
    // from INIT on; nothing is sent before this).
    const size_t acks = std::min<uint32_t>(credits_, caps.max_recv_wr);
    KV_ASSIGN_OR_RETURN(ack_arena_, NewBlock(ctx_, acks * wire::kAckBytes));
    for (size_t i = 0; i < acks; ++i) {
      rdma::Sge sge{reinterpret_cast<uint64_t>(ack_arena_->mem.get() + i * wire::kAckBytes),
                    static_cast<uint32_t>(wire::kAckBytes), ack_arena_->mr->lkey()};
      KV_RETURN_IF_ERROR(qp_->PostRecv(sge, kRecvTag | i));
    }
    credits_ = static_cast<uint32_t>(acks);
    lease_thread_ = std::thread([this] { LeaseLoop(); });
    return absl::OkStatus();
  }

  // --- DataPath --------------------------------------------------------------

  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override {
    KV_RETURN_IF_ERROR(limits_.CheckKey(key));
    std::string out;
    KV_RETURN_IF_ERROR(GetImpl(key, deadline, &out, nullptr, false).status());
    return out;
  }

  absl::StatusOr<bool> Exists(absl::string_view key, absl::Time deadline) override {
    KV_RETURN_IF_ERROR(limits_.CheckKey(key));
    auto r = GetImpl(key, deadline, nullptr, nullptr, /*header_only=*/true);
    if (r.ok()) return true;
    if (r.status().code() == absl::StatusCode::kNotFound) return false;
    return r.status();
  }

  absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline) override {
    return PutImpl(key, value, 0, deadline);
  }

  absl::Status Delete(absl::string_view key, absl::Time deadline) override {
    KV_RETURN_IF_ERROR(limits_.CheckKey(key));
    ops_++;
    if (broken_) return NotSent(absl::UnavailableError("RDMA data path broken; reconnecting"));
    OpSlot* s = AcquireSlots(1)[0];
    SlotGuard guard(this, {s});
    char* msg = s->scratch + kBucketArea;
    wire::CommitRequest req{};
    req.magic = wire::kCommitMagic;
    req.op = static_cast<uint8_t>(wire::CommitOp::kDelete);
    req.key_len = static_cast<uint16_t>(key.size());
    req.request_id = NewRequest(s);
    std::memcpy(msg, &req, sizeof(req));
    std::memcpy(msg + sizeof(req), key.data(), key.size());
    if (absl::Status c = AcquireCredit(deadline); !c.ok()) return NotSent(c);
    CreditGuard credit(this);
    rdma::Sge sge{reinterpret_cast<uint64_t>(msg), static_cast<uint32_t>(sizeof(req) + key.size()),
                  slot_arena_->mr->lkey()};
    if (absl::Status p = Post(qp_->PostSend(absl::MakeConstSpan(&sge, 1), kKindSend | s->index,
                                            true, sge.length <= 64));
        !p.ok()) {
      return NotSent(p);
    }
    KV_RETURN_IF_ERROR(Wait(s, deadline));
    return s->ack;
  }

  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time deadline) override {
    for (const auto& k : keys) KV_RETURN_IF_ERROR(limits_.CheckKey(k));
    std::vector<absl::StatusOr<std::string>> out(keys.size(), absl::UnknownError(""));
    for (size_t begin = 0; begin < keys.size(); begin += kBatch) {
      const size_t n = std::min(kBatch, keys.size() - begin);
      KV_RETURN_IF_ERROR(MultiGetBatch(keys.subspan(begin, n), deadline, &out[begin]));
    }
    return out;
  }

  absl::Status MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs,
                        absl::Time deadline) override {
    for (const auto& [k, v] : pairs) {
      KV_RETURN_IF_ERROR(limits_.CheckKey(k));
      KV_RETURN_IF_ERROR(limits_.CheckValueLength(v.size()));
    }
    for (size_t begin = 0; begin < pairs.size(); begin += kBatch) {
      const size_t n = std::min(kBatch, pairs.size() - begin);
      KV_RETURN_IF_ERROR(MultiPutBatch(pairs.subspan(begin, n), deadline));
    }
    return absl::OkStatus();
  }

  // --- Zero copy -------------------------------------------------------------

  absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size) override {
    if (data == nullptr || size == 0) return absl::InvalidArgumentError("empty buffer");
    KV_ASSIGN_OR_RETURN(auto mr,
                        rdma::MemoryRegion::Register(ctx_->pd, data, size, IBV_ACCESS_LOCAL_WRITE));
    struct Registration {
      std::shared_ptr<Context> ctx;
      rdma::MemoryRegion mr;
    };
    const uint32_t lkey = mr.lkey();
    auto reg = std::make_shared<Registration>(Registration{ctx_, std::move(mr)});
    return KvClientInternal::MakeBuffer(static_cast<char*>(data), size, reg, lkey);
  }

  absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                 size_t offset, size_t capacity, absl::Time deadline) override {
    KV_RETURN_IF_ERROR(limits_.CheckKey(key));
    if (offset > buffer.size() || capacity > buffer.size() - offset) {
      return absl::InvalidArgumentError("range outside the registered buffer");
    }
    UserDest dest{buffer.data() + offset, capacity, KvClientInternal::lkey(buffer)};
    return GetImpl(key, deadline, nullptr, &dest, false);
  }

  absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                       size_t length, absl::Time deadline) override {
    if (offset > buffer.size() || length > buffer.size() - offset) {
      return absl::InvalidArgumentError("range outside the registered buffer");
    }
    return PutImpl(key, absl::string_view(buffer.data() + offset, length),
                   KvClientInternal::lkey(buffer), deadline);
  }

  bool broken() const override { return broken_.load(); }
  uint64_t epoch() const override { return hs_.epoch(); }
  RdmaPathCounters counters() const override {
    RdmaPathCounters c;
    c.ops = ops_;
    c.checksum_retries = checksum_retries_;
    c.span_retries = span_retries_;
    c.server_fallback_gets = fallbacks_;
    c.leases_granted = leases_granted_;
    c.leases_released = leases_released_;
    c.leases_renewed = leases_renewed_;
    c.lease_aborts = lease_aborts_;
    return c;
  }

 private:
  struct UserDest {
    char* data;
    size_t capacity;
    uint32_t lkey;
  };

  // Returns slots to the free list when an operation ends.
  class SlotGuard {
   public:
    SlotGuard(RdmaDataPathImpl* p, std::vector<OpSlot*> s) : p_(p), s_(std::move(s)) {}
    ~SlotGuard() { p_->ReleaseSlots(s_); }

   private:
    RdmaDataPathImpl* p_;
    std::vector<OpSlot*> s_;
  };
  class CreditGuard {
   public:
    explicit CreditGuard(RdmaDataPathImpl* p, int n = 1) : p_(p), n_(n) {}
    ~CreditGuard() {
      absl::MutexLock lock(&p_->credit_mu_);
      p_->credits_used_ -= n_;
    }

   private:
    RdmaDataPathImpl* p_;
    int n_;
  };

  // --- slots, completions ------------------------------------------------------

  std::vector<OpSlot*> AcquireSlots(size_t n) {
    absl::MutexLock lock(&slot_mu_);
    auto enough = [this, n]()
                      ABSL_SHARED_LOCKS_REQUIRED(slot_mu_) { return free_slots_.size() >= n; };
    slot_mu_.Await(absl::Condition(&enough));
    std::vector<OpSlot*> out;
    for (size_t i = 0; i < n; ++i) {
      out.push_back(&slots_[free_slots_.back()]);
      free_slots_.pop_back();
    }
    return out;
  }
  void ReleaseSlots(const std::vector<OpSlot*>& s) {
    absl::MutexLock lock(&slot_mu_);
    for (OpSlot* x : s) free_slots_.push_back(x->index);
  }

  uint64_t NewRequest(OpSlot* s) {
    s->generation++;
    s->request_id = (s->generation << 16) | static_cast<uint64_t>(s->index);
    s->done.store(false, std::memory_order_relaxed);
    s->ack = absl::OkStatus();
    s->wc_status = IBV_WC_SUCCESS;
    return s->request_id;
  }
  void Arm(OpSlot* s) {
    s->done.store(false, std::memory_order_relaxed);
    s->wc_status = IBV_WC_SUCCESS;
  }

  absl::Status AcquireCredit(absl::Time deadline, int n = 1) {
    absl::MutexLock lock(&credit_mu_);
    auto ok = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(credit_mu_) {
      return credits_used_ + n <= static_cast<int>(credits_);
    };
    if (!credit_mu_.AwaitWithDeadline(absl::Condition(&ok), deadline)) {
      return absl::DeadlineExceededError("no commit credit before the deadline");
    }
    credits_used_ += n;
    return absl::OkStatus();
  }

  // Marks a failure that happened before the request left this client, so
  // that even a non-idempotent operation may be retried on a new path.
  static absl::Status NotSent(absl::Status s) {
    s.SetPayload(kNotSentPayload, absl::Cord("1"));
    return s;
  }

  void ReturnCredit() {
    absl::MutexLock lock(&credit_mu_);
    credits_used_--;
  }

  absl::Status Post(absl::Status s) {
    if (!s.ok()) {
      broken_ = true;
      return absl::UnavailableError(absl::StrCat("RDMA post failed: ", s.message()));
    }
    return s;
  }

  void MarkBroken(const absl::Status& why) {
    if (!broken_.exchange(true)) LOG(WARNING) << "RDMA data path broken: " << why;
  }

  // Drains the CQ once. REQUIRES: poll_mu_ held.
  void PollOnce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_) {
    ibv_wc wc[32];
    const int n = cq_->Poll(wc, 32);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = wc[i].wr_id;
      if (id & kRecvTag) {
        if (wc[i].status != IBV_WC_SUCCESS) {
          MarkBroken(rdma::WcStatusToStatus(wc[i], "ack receive"));
          continue;
        }
        const size_t i_buf = id & 0xffff;
        char* buf = ack_arena_->mem.get() + i_buf * wire::kAckBytes;
        auto ack = wire::ParseAck(
            absl::string_view(buf, std::min<uint32_t>(wc[i].byte_len, wire::kAckBytes)));
        if (ack.ok() && ack->request_id != 0) {
          OpSlot& s = slots_[ack->request_id & 0xffff];
          if (s.request_id == ack->request_id) {
            s.ack = ack->status;
            s.done.store(true, std::memory_order_release);
          }
        } else if (!ack.ok()) {
          MarkBroken(ack.status());
        }
        rdma::Sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(wire::kAckBytes),
                      ack_arena_->mr->lkey()};
        if (!qp_->PostRecv(sge, id).ok()) MarkBroken(absl::UnavailableError("repost receive"));
        continue;
      }
      OpSlot& s = slots_[id & 0xffff];
      const uint64_t kind = id & kKindMask;
      if (wc[i].status != IBV_WC_SUCCESS) {
        MarkBroken(rdma::WcStatusToStatus(wc[i], kind == kKindRead ? "RDMA READ" : "RDMA SEND"));
        s.wc_status = wc[i].status;
        s.ack = absl::UnavailableError("RDMA work request failed");
        s.done.store(true, std::memory_order_release);
        continue;
      }
      // A successful signaled SEND (commit) is only bookkeeping: the ack
      // completes the operation.
      if (kind == kKindRead) s.done.store(true, std::memory_order_release);
    }
  }

  absl::Status Wait(OpSlot* s, absl::Time deadline) {
    int idle = 0;
    while (!s->done.load(std::memory_order_acquire)) {
      if (broken_) return absl::UnavailableError("RDMA data path broken; reconnecting");
      if (poll_mu_.TryLock()) {
        PollOnce();
        poll_mu_.Unlock();
      }
      if (s->done.load(std::memory_order_acquire)) break;
      if (++idle > 64) {
        std::this_thread::yield();
        if ((idle & 1023) == 0 && absl::Now() > deadline) {
          MarkBroken(absl::DeadlineExceededError("operation timed out"));
          return absl::DeadlineExceededError("RDMA operation did not complete before the deadline");
        }
      }
    }
    if (s->wc_status != IBV_WC_SUCCESS) {
      return absl::UnavailableError(
          absl::StrCat("RDMA work request failed: ", ibv_wc_status_str(s->wc_status)));
    }
    return absl::OkStatus();
  }

  // --- one-sided reads --------------------------------------------------------

  // The data region holding [offset, offset+len), or null when the range is
  // outside the arena or straddles two regions.
  const DataRegion* Resolve(uint64_t offset, uint64_t len) const {
    if (offset > data_arena_bytes_ || len > data_arena_bytes_ - offset) return nullptr;
    for (const DataRegion& r : data_) {
      if (offset >= r.arena_offset && offset + len <= r.arena_offset + r.length) return &r;
    }
    return nullptr;
  }

  std::vector<Slot> Candidates(const OpSlot* s, const layout::KeyHash& h, size_t key_len) const {
    std::vector<Slot> out;
    const int nb = h.bucket[0] == h.bucket[1] ? 1 : 2;
    for (int b = 0; b < nb; ++b) {
      const char* bucket = s->scratch + b * layout::kBucketBytes;
      for (size_t i = 0; i < layout::kSlotsPerBucket; ++i) {
        uint64_t word;
        std::memcpy(&word, bucket + i * layout::kSlotBytes, sizeof(word));
        if (word == 0) continue;
        Slot slot = layout::DecodeSlot(word);
        if (slot.fingerprint != h.fingerprint) continue;
        out.push_back(slot);
      }
    }
    (void)key_len;
    return out;
  }

  // A slot from remote memory is untrusted: its entry must fit the arena,
  // the key length and the value limit.
  bool Plausible(const Slot& slot, size_t key_len) const {
    return slot.size >= layout::EntryBytes(key_len, 0) &&
           slot.size <= layout::EntryBytes(key_len, limits_.max_value_bytes) &&
           slot.offset <= data_arena_bytes_ && slot.size <= data_arena_bytes_ - slot.offset;
  }

  // One-sided GET. Exactly one of out/dest is set, or neither with
  // header_only (Exists). Returns the value length.
  absl::StatusOr<size_t> GetImpl(absl::string_view key, absl::Time deadline, std::string* out,
                                 const UserDest* dest, bool header_only) {
    ops_++;
    const layout::KeyHash h = layout::HashKey(key, geometry_.seed, geometry_.bucket_count);
    OpSlot* s = AcquireSlots(1)[0];
    SlotGuard guard(this, {s});
    const uint32_t lkey = slot_arena_->mr->lkey();
    for (int attempt = 0; attempt < kMaxGetAttempts; ++attempt) {
      if (attempt > 0) absl::SleepFor(absl::Microseconds(std::min(1000, 5 << attempt)));
      const absl::Time t0 = absl::Now();
      // 1. Both candidate buckets, one doorbell, only the last signaled.
      rdma::Sge b_sges[2] = {{reinterpret_cast<uint64_t>(s->scratch),
                              static_cast<uint32_t>(layout::kBucketBytes), lkey},
                             {reinterpret_cast<uint64_t>(s->scratch + layout::kBucketBytes),
                              static_cast<uint32_t>(layout::kBucketBytes), lkey}};
      rdma::ReadOp reads[2];
      for (int i = 0; i < 2; ++i) {
        reads[i].local = absl::MakeConstSpan(&b_sges[i], 1);
        reads[i].remote_addr = index_addr_ + h.bucket[i] * layout::kBucketBytes;
        reads[i].rkey = index_rkey_;
        reads[i].wr_id = kKindRead | s->index;
        reads[i].signaled = i == 1;
      }
      Arm(s);
      KV_RETURN_IF_ERROR(Post(qp_->PostReads(absl::MakeConstSpan(reads, 2))));
      KV_RETURN_IF_ERROR(Wait(s, deadline));

      // 2. The entries whose fingerprint matches.
      std::vector<Slot> cands = Candidates(s, h, key.size());
      if (cands.empty()) return absl::NotFoundError("key not found");
      bool torn = false;           // a candidate failed its checks
      bool span_exceeded = false;  // too slow to trust what was read
      for (const Slot& slot : cands) {
        if (!Plausible(slot, key.size())) {
          torn = true;
          continue;
        }
        const DataRegion* region =
            Resolve(slot.offset, header_only ? layout::kEntryHeaderBytes + key.size() : slot.size);
        if (region == nullptr) {
          // Larger than a segment and across two memory regions: one READ
          // cannot fetch it, so the server answers.
          fallbacks_++;
          return ServerGet(key, out, dest, deadline);
        }
        const uint64_t remote = region->addr + (slot.offset - region->arena_offset);
        const size_t head = layout::kEntryHeaderBytes + key.size();
        std::unique_ptr<Block> big;
        rdma::Sge sges[3];
        int nsge = 0;
        char* local = nullptr;
        uint64_t read_len = slot.size;
        if (header_only) {
          read_len = head;
          local = s->scratch + kBucketArea + commit_area_;
          if (read_len > kSmallEntryArea) {
            KV_ASSIGN_OR_RETURN(big, pool_->Acquire(read_len));
            local = big->mem.get();
          }
          sges[nsge++] = {reinterpret_cast<uint64_t>(local), static_cast<uint32_t>(read_len),
                          big ? big->mr->lkey() : lkey};
        } else if (dest != nullptr) {
          // Zero copy: header+key to scratch, value straight into the
          // caller's buffer, the padding (or an overflow) to scratch.
          const uint64_t body = slot.size - head;  // value + padding
          if (body > dest->capacity + layout::kEntryAlign) {
            return absl::OutOfRangeError(absl::StrCat("value is at least ",
                                                      body - layout::kEntryAlign + 1,
                                                      " bytes; the buffer holds ", dest->capacity));
          }
          local = s->scratch + kBucketArea + commit_area_;
          if (head + layout::kEntryAlign > kSmallEntryArea) {
            KV_ASSIGN_OR_RETURN(big, pool_->Acquire(head + layout::kEntryAlign));
            local = big->mem.get();
          }
          const uint32_t local_lkey = big ? big->mr->lkey() : lkey;
          const uint64_t into_user = std::min<uint64_t>(body, dest->capacity);
          sges[nsge++] = {reinterpret_cast<uint64_t>(local), static_cast<uint32_t>(head),
                          local_lkey};
          if (into_user > 0) {
            sges[nsge++] = {reinterpret_cast<uint64_t>(dest->data),
                            static_cast<uint32_t>(into_user), dest->lkey};
          }
          if (body > into_user) {
            sges[nsge++] = {reinterpret_cast<uint64_t>(local + head),
                            static_cast<uint32_t>(body - into_user), local_lkey};
          }
        } else {
          local = s->scratch + kBucketArea + commit_area_;
          if (slot.size > kSmallEntryArea) {
            KV_ASSIGN_OR_RETURN(big, pool_->Acquire(slot.size));
            local = big->mem.get();
          }
          sges[nsge++] = {reinterpret_cast<uint64_t>(local), static_cast<uint32_t>(slot.size),
                          big ? big->mr->lkey() : lkey};
        }
        // 3. The entry.
        const absl::Time entry_start = absl::Now();
        Arm(s);
        absl::Status posted = Post(qp_->PostRead(absl::MakeConstSpan(sges, nsge), remote,
                                                 region->rkey, kKindRead | s->index, true));
        if (posted.ok()) posted = Wait(s, deadline);
        if (!posted.ok()) {
          if (big) pool_->Release(std::move(big));
          return posted;
        }
        if (absl::Now() - t0 > max_read_span_) {
          // The entry may have been reclaimed and reused while we read it.
          span_retries_++;
          span_exceeded = true;
          if (big) pool_->Release(std::move(big));
          // If the entry READ alone outlasts the span (a large value on a slow
          // link), trying again cannot help: let the server answer.
          if (absl::Now() - entry_start > max_read_span_) attempt = kMaxGetAttempts;
          break;
        }
        // 4. Verify everything we read.
        absl::StatusOr<size_t> verified = Verify(key, slot, local, dest, out, header_only);
        if (big) pool_->Release(std::move(big));
        if (verified.ok()) return verified;
        if (verified.status().code() == absl::StatusCode::kOutOfRange) return verified.status();
        if (verified.status().code() != absl::StatusCode::kNotFound) torn = true;
      }
      if (span_exceeded) continue;  // counted as a span retry
      if (!torn) return absl::NotFoundError("key not found");
      checksum_retries_++;  // a slot or entry that did not verify
    }
    // Retries exhausted: the server's CPU answers.
    fallbacks_++;
    return ServerGet(key, out, dest, deadline);
  }

  absl::StatusOr<size_t> Verify(absl::string_view key, const Slot& slot, const char* local,
                                const UserDest* dest, std::string* out, bool header_only) {
    layout::EntryHeader h;
    std::memcpy(&h, local, sizeof(h));
    if (h.magic != layout::kEntryMagic) return absl::DataLossError("bad magic");
    if (h.key_len != key.size() ||
        std::memcmp(local + layout::kEntryHeaderBytes, key.data(), key.size()) != 0) {
      return absl::NotFoundError("entry holds another key");
    }
    if (layout::EntryBytes(h.key_len, h.value_len) != slot.size) {
      return absl::DataLossError("entry length does not match its slot");
    }
    if (header_only) return size_t{h.value_len};
    if (dest == nullptr) {
      auto v = layout::VerifyEntry(absl::string_view(local, slot.size), key);
      if (!v.ok()) return v.status();
      out->assign(v->value.data(), v->value.size());
      return v->value.size();
    }
    const size_t head = layout::kEntryHeaderBytes + key.size();
    if (h.value_len > dest->capacity) {
      // The checksum cannot be checked without the whole value; the length
      // came from an entry whose header and key matched.
      return absl::OutOfRangeError(
          absl::StrCat("value is ", h.value_len, " bytes; the buffer holds ", dest->capacity));
    }
    (void)head;
    if (layout::EntryChecksum(h, key, absl::string_view(dest->data, h.value_len)) != h.checksum) {
      return absl::DataLossError("entry checksum mismatch");
    }
    return size_t{h.value_len};
  }

  absl::StatusOr<size_t> ServerGet(absl::string_view key, std::string* out, const UserDest* dest,
                                   absl::Time deadline) {
    v1::GetRequest req;
    req.set_key(std::string(key));
    v1::GetResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Get(&ctx, req, &resp)));
    const std::string& v = resp.value();
    if (dest != nullptr) {
      if (v.size() > dest->capacity) {
        return absl::OutOfRangeError(
            absl::StrCat("value is ", v.size(), " bytes; the buffer holds ", dest->capacity));
      }
      std::memcpy(dest->data, v.data(), v.size());
    } else if (out != nullptr) {
      *out = v;
    }
    return v.size();
  }

  absl::Status MultiGetBatch(absl::Span<const std::string> keys, absl::Time deadline,
                             absl::StatusOr<std::string>* out) {
    ops_ += keys.size();
    const size_t n = keys.size();
    std::vector<OpSlot*> slots = AcquireSlots(n);
    SlotGuard guard(this, slots);
    const uint32_t lkey = slot_arena_->mr->lkey();
    std::vector<layout::KeyHash> hashes(n);
    std::vector<rdma::Sge> sges(2 * n);
    std::vector<rdma::ReadOp> reads(2 * n);
    for (size_t k = 0; k < n; ++k) {
      hashes[k] = layout::HashKey(keys[k], geometry_.seed, geometry_.bucket_count);
      for (int i = 0; i < 2; ++i) {
        sges[2 * k + i] = {reinterpret_cast<uint64_t>(slots[k]->scratch + i * layout::kBucketBytes),
                           static_cast<uint32_t>(layout::kBucketBytes), lkey};
        reads[2 * k + i].local = absl::MakeConstSpan(&sges[2 * k + i], 1);
        reads[2 * k + i].remote_addr = index_addr_ + hashes[k].bucket[i] * layout::kBucketBytes;
        reads[2 * k + i].rkey = index_rkey_;
        reads[2 * k + i].wr_id = kKindRead | slots[n - 1]->index;
        reads[2 * k + i].signaled = false;
      }
    }
    // Selective signalling: on one RC queue pair, the last READ's completion
    // means every earlier one has completed.
    reads.back().signaled = true;
    const absl::Time t0 = absl::Now();
    Arm(slots[n - 1]);
    KV_RETURN_IF_ERROR(Post(qp_->PostReads(reads)));
    KV_RETURN_IF_ERROR(Wait(slots[n - 1], deadline));

    // Entry READs for keys with exactly one plausible small candidate.
    std::vector<rdma::Sge> esges;
    std::vector<rdma::ReadOp> ereads;
    std::vector<std::pair<size_t, Slot>> pending;
    esges.reserve(n);
    for (size_t k = 0; k < n; ++k) {
      std::vector<Slot> cands = Candidates(slots[k], hashes[k], keys[k].size());
      if (cands.empty()) {
        out[k] = absl::NotFoundError("key not found");
        continue;
      }
      if (cands.size() != 1 || cands[0].size > kSmallEntryArea ||
          !Plausible(cands[0], keys[k].size()) ||
          Resolve(cands[0].offset, cands[0].size) == nullptr) {
        continue;  // the single-key path handles it below
      }
      const DataRegion* region = Resolve(cands[0].offset, cands[0].size);
      esges.push_back({reinterpret_cast<uint64_t>(slots[k]->scratch + kBucketArea + commit_area_),
                       static_cast<uint32_t>(cands[0].size), lkey});
      rdma::ReadOp op;
      op.remote_addr = region->addr + (cands[0].offset - region->arena_offset);
      op.rkey = region->rkey;
      op.wr_id = kKindRead | slots[n - 1]->index;
      ereads.push_back(op);
      pending.emplace_back(k, cands[0]);
    }
    for (size_t i = 0; i < ereads.size(); ++i) ereads[i].local = absl::MakeConstSpan(&esges[i], 1);
    if (!ereads.empty()) {
      ereads.back().signaled = true;
      Arm(slots[n - 1]);
      KV_RETURN_IF_ERROR(Post(qp_->PostReads(ereads)));
      KV_RETURN_IF_ERROR(Wait(slots[n - 1], deadline));
      const bool in_span = absl::Now() - t0 <= max_read_span_;
      for (auto& [k, slot] : pending) {
        if (!in_span) continue;
        std::string value;
        auto v = Verify(keys[k], slot, slots[k]->scratch + kBucketArea + commit_area_, nullptr,
                        &value, false);
        if (v.ok()) out[k] = std::move(value);
      }
    }
    // Whatever is still open goes through the single-key path (retries,
    // large entries, collisions, fallback).
    for (size_t k = 0; k < n; ++k) {
      if (out[k].ok() || out[k].status().code() == absl::StatusCode::kNotFound) continue;
      std::string value;
      auto v = GetImpl(keys[k], deadline, &value, nullptr, false);
      ops_--;
      if (v.ok())
        out[k] = std::move(value);
      else if (v.status().code() == absl::StatusCode::kNotFound)
        out[k] = v.status();
      else
        return v.status();
    }
    return absl::OkStatus();
  }

  // --- writes -----------------------------------------------------------------

  absl::Status PutImpl(absl::string_view key, absl::string_view value, uint32_t value_lkey,
                       absl::Time deadline) {
    KV_RETURN_IF_ERROR(limits_.CheckKey(key));
    KV_RETURN_IF_ERROR(limits_.CheckValueLength(value.size()));
    ops_++;
    for (int attempt = 0;; ++attempt) {
      absl::Status s = PutOnce(key, value, value_lkey, deadline);
      if (s.code() != absl::StatusCode::kAborted || attempt > 0) return s;
      lease_aborts_++;  // the lease expired under us: redo with a fresh one
    }
  }

  absl::Status PutOnce(absl::string_view key, absl::string_view value, uint32_t value_lkey,
                       absl::Time deadline) {
    const uint64_t size = layout::EntryBytes(key.size(), value.size());
    KV_ASSIGN_OR_RETURN(LeaseSpace space, ReserveSpace(size, deadline));
    OpSlot* s = AcquireSlots(1)[0];
    SlotGuard guard(this, {s});
    StagedPut staged;
    absl::Status st = Stage(s, key, value, value_lkey, space, &staged);
    if (st.ok()) st = PostStaged(absl::MakeSpan(&staged, 1), deadline);
    if (st.ok()) {
      st = Wait(s, deadline);
      ReturnCredit();
      if (st.ok()) st = s->ack;
    }
    if (staged.big) pool_->Release(std::move(staged.big));
    FinishSpace(space, st);
    return st;
  }

  // One PUT ready to post: where the entry's bytes are and its commit.
  struct StagedPut {
    OpSlot* slot = nullptr;
    rdma::Sge write_sges[2];
    int nwrite = 0;
    rdma::Sge send_sge;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    std::unique_ptr<Block> big;  // staging when the slot's scratch is too small
  };

  // Writes the entry's header (and key, and the value unless it is sent
  // straight from the caller's registered buffer) and the commit message.
  absl::Status Stage(OpSlot* s, absl::string_view key, absl::string_view value, uint32_t value_lkey,
                     const LeaseSpace& space, StagedPut* out) {
    const uint32_t lkey = slot_arena_->mr->lkey();
    const size_t head = layout::kEntryHeaderBytes + key.size();
    const size_t staged_bytes = value_lkey != 0 ? head : head + value.size();
    char* staging = s->scratch + kBucketArea + commit_area_;
    if (staged_bytes > kSmallEntryArea) {
      KV_ASSIGN_OR_RETURN(out->big, pool_->Acquire(staged_bytes));
      staging = out->big->mem.get();
    }
    const uint32_t staging_lkey = out->big ? out->big->mr->lkey() : lkey;
    const layout::EntryHeader header = layout::MakeHeader(key, value, s->generation);
    std::memcpy(staging, &header, sizeof(header));
    std::memcpy(staging + layout::kEntryHeaderBytes, key.data(), key.size());
    out->slot = s;
    if (value_lkey != 0) {
      // Zero copy: gather header+key from staging, the value from the
      // caller's registered buffer.
      out->write_sges[out->nwrite++] = {reinterpret_cast<uint64_t>(staging),
                                        static_cast<uint32_t>(head), staging_lkey};
      if (!value.empty()) {
        out->write_sges[out->nwrite++] = {reinterpret_cast<uint64_t>(value.data()),
                                          static_cast<uint32_t>(value.size()), value_lkey};
      }
    } else {
      if (!value.empty()) std::memcpy(staging + head, value.data(), value.size());
      out->write_sges[out->nwrite++] = {reinterpret_cast<uint64_t>(staging),
                                        static_cast<uint32_t>(staged_bytes), staging_lkey};
    }
    char* msg = s->scratch + kBucketArea;
    wire::CommitRequest req{};
    req.magic = wire::kCommitMagic;
    req.op = static_cast<uint8_t>(wire::CommitOp::kPut);
    req.key_len = static_cast<uint16_t>(key.size());
    req.request_id = NewRequest(s);
    req.lease_id = space.lease->id;
    req.offset = space.arena_offset;
    req.size = layout::EntryBytes(key.size(), value.size());
    std::memcpy(msg, &req, sizeof(req));
    out->send_sge = {reinterpret_cast<uint64_t>(msg), static_cast<uint32_t>(sizeof(req)), lkey};
    out->remote_addr = space.remote_addr;
    out->rkey = space.lease->rkey;
    return absl::OkStatus();
  }

  // Posts the WRITE + commit SEND pairs of `puts` with one doorbell; only the
  // last SEND is signaled (the acks complete the operations). Takes one
  // commit credit per PUT; the caller returns them after waiting.
  absl::Status PostStaged(absl::Span<StagedPut> puts, absl::Time deadline) {
    KV_RETURN_IF_ERROR(AcquireCredit(deadline, static_cast<int>(puts.size())));
    std::vector<rdma::QueuePair::WriteSendOp> ops(puts.size());
    for (size_t i = 0; i < puts.size(); ++i) {
      StagedPut& p = puts[i];
      ops[i].write.local = absl::MakeConstSpan(p.write_sges, p.nwrite);
      ops[i].write.remote_addr = p.remote_addr;
      ops[i].write.rkey = p.rkey;
      ops[i].write.wr_id = kKindWrite | p.slot->index;
      ops[i].write.signaled = false;
      ops[i].send = absl::MakeConstSpan(&p.send_sge, 1);
      ops[i].send_wr_id = kKindSend | p.slot->index;
      ops[i].send_signaled = i + 1 == puts.size();
      ops[i].send_inline = true;  // 40 bytes: the buffer is free at once
    }
    absl::Status st = Post(qp_->PostWriteSends(ops));
    if (!st.ok()) {
      absl::MutexLock lock(&credit_mu_);
      credits_used_ -= static_cast<int>(puts.size());
    }
    return st;
  }

  absl::Status MultiPutBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                             absl::Time deadline) {
    const size_t n = std::min<size_t>(pairs.size(), credits_);
    if (n < pairs.size()) {
      KV_RETURN_IF_ERROR(MultiPutBatch(pairs.subspan(0, n), deadline));
      return MultiPutBatch(pairs.subspan(n), deadline);
    }
    ops_ += n;
    std::vector<LeaseSpace> spaces;
    for (const auto& [k, v] : pairs) {
      KV_ASSIGN_OR_RETURN(LeaseSpace sp,
                          ReserveSpace(layout::EntryBytes(k.size(), v.size()), deadline));
      spaces.push_back(sp);
    }
    std::vector<OpSlot*> slots = AcquireSlots(n);
    SlotGuard guard(this, slots);
    std::vector<StagedPut> staged(n);
    std::vector<absl::Status> results(n);
    absl::Status st;
    for (size_t i = 0; i < n && st.ok(); ++i) {
      st = Stage(slots[i], pairs[i].first, pairs[i].second, 0, spaces[i], &staged[i]);
    }
    if (st.ok()) st = PostStaged(absl::MakeSpan(staged), deadline);
    for (size_t i = 0; i < n; ++i) {
      if (st.ok()) {
        absl::Status w = Wait(slots[i], deadline);
        results[i] = w.ok() ? slots[i]->ack : w;
        ReturnCredit();
      } else {
        results[i] = st;
      }
      if (staged[i].big) pool_->Release(std::move(staged[i].big));
      FinishSpace(spaces[i], results[i]);
    }
    absl::Status first;
    for (size_t i = 0; i < n; ++i) {
      if (results[i].code() == absl::StatusCode::kAborted) {
        lease_aborts_++;  // that lease expired: redo this one alone
        results[i] = PutOnce(pairs[i].first, pairs[i].second, 0, deadline);
      }
      if (!results[i].ok() && first.ok()) first = results[i];
    }
    return first;
  }

  // --- leases -------------------------------------------------------------------

  absl::StatusOr<std::shared_ptr<Lease>> GrantLease(uint64_t bytes) {
    v1::GrantLeaseRequest req;
    req.set_epoch(hs_.epoch());
    req.set_bytes(bytes);
    req.set_client_name(client_name_);
    req.set_connection_id(connection_id_);
    v1::GrantLeaseResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    const absl::Time asked = absl::Now();
    absl::Status granted = FromGrpcStatus(stub_->GrantLease(&ctx, req, &resp));
    if (absl::IsUnavailable(granted)) {
      // Stale epoch (the server restarted) or the server is gone: this path
      // is done; the client handshakes again.
      MarkBroken(granted);
    }
    KV_RETURN_IF_ERROR(granted);
    if (resp.lease().write_rkey() == 0) return absl::InternalError("lease without a write key");
    auto l = std::make_shared<Lease>();
    l->id = resp.lease().lease_id();
    l->arena_offset = resp.lease().arena_offset();
    l->length = resp.lease().length();
    l->write_addr = resp.lease().write_addr();
    l->rkey = resp.lease().write_rkey();
    // Measured from before the request: never later than the server's view.
    l->expires = asked + lease_ttl_;
    leases_granted_++;
    return l;
  }

  void ReleaseLease(const Lease& l) {
    v1::ReleaseLeaseRequest req;
    req.set_epoch(hs_.epoch());
    req.set_lease_id(l.id);
    req.set_connection_id(connection_id_);
    v1::ReleaseLeaseResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    if (stub_->ReleaseLease(&ctx, req, &resp).ok()) leases_released_++;
  }

  // Room for an entry of `size` bytes in a lease (granting one if needed).
  absl::StatusOr<LeaseSpace> ReserveSpace(uint64_t size, absl::Time deadline) {
    absl::MutexLock lock(&lease_mu_);
    for (int round = 0; round < 4; ++round) {
      const absl::Time now = absl::Now();
      // Leave a margin so a commit never races the expiry.
      auto usable = [&](const std::shared_ptr<Lease>& l) {
        return l && !l->dead && l->used + size <= l->length && l->expires - now > lease_ttl_ / 4;
      };
      if (usable(cur_)) {
        LeaseSpace sp{cur_, cur_->arena_offset + cur_->used, cur_->write_addr + cur_->used};
        cur_->used += size;
        cur_->inflight++;
        if (!next_ && cur_->used > cur_->length / 2) refill_wanted_ = true;
        return sp;
      }
      if (cur_) retired_.push_back(std::move(cur_));
      cur_ = nullptr;
      if (usable(next_)) {
        cur_ = std::move(next_);
        next_ = nullptr;
        continue;
      }
      // Nothing ready: grant one now (rare when the refill keeps up).
      const uint64_t want = std::max(size, lease_bytes_);
      lease_mu_.Unlock();
      auto l = GrantLease(want);
      lease_mu_.Lock();
      if (!l.ok()) return l.status();
      if (cur_) retired_.push_back(std::move(cur_));
      cur_ = *l;
    }
    return absl::UnavailableError("could not obtain a write lease");
  }

  void FinishSpace(const LeaseSpace& sp, const absl::Status& result) {
    absl::MutexLock lock(&lease_mu_);
    sp.lease->inflight--;
    if (result.code() == absl::StatusCode::kAborted) sp.lease->dead = true;
  }

  // Background: refill ahead of need, renew before expiry, release drained
  // leases.
  void LeaseLoop() {
    absl::MutexLock lock(&lease_mu_);
    while (!stopping_) {
      auto wake = [this]()
                      ABSL_SHARED_LOCKS_REQUIRED(lease_mu_) { return stopping_ || refill_wanted_; };
      lease_mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Milliseconds(50));
      if (stopping_ || broken_) break;
      if (refill_wanted_ && !next_) {
        refill_wanted_ = false;
        lease_mu_.Unlock();
        auto l = GrantLease(lease_bytes_);
        lease_mu_.Lock();
        if (l.ok()) {
          if (next_)
            retired_.push_back(*l);
          else
            next_ = *l;
        }
      }
      refill_wanted_ = false;
      const absl::Time now = absl::Now();
      for (std::shared_ptr<Lease>* lp : {&cur_, &next_}) {
        std::shared_ptr<Lease> l = *lp;
        if (!l || l->dead || l->expires - now > lease_ttl_ / 2) continue;
        lease_mu_.Unlock();
        v1::RenewLeaseRequest req;
        req.set_epoch(hs_.epoch());
        req.set_lease_id(l->id);
        req.set_connection_id(connection_id_);
        v1::RenewLeaseResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
        const absl::Time asked = absl::Now();
        const bool ok = stub_->RenewLease(&ctx, req, &resp).ok();
        lease_mu_.Lock();
        if (ok) {
          l->expires = asked + lease_ttl_;
          leases_renewed_++;
        } else {
          l->dead = true;
        }
      }
      std::vector<std::shared_ptr<Lease>> drained;
      for (auto it = retired_.begin(); it != retired_.end();) {
        if ((*it)->inflight == 0) {
          drained.push_back(std::move(*it));
          it = retired_.erase(it);
        } else {
          ++it;
        }
      }
      if (!drained.empty()) {
        lease_mu_.Unlock();
        for (auto& l : drained) ReleaseLease(*l);
        lease_mu_.Lock();
      }
    }
  }

  // --- state ------------------------------------------------------------------

  v1::KvControl::Stub* const stub_;
  const v1::HandshakeResponse hs_;
  const std::string client_name_;
  const uint64_t lease_bytes_;
  const absl::Duration rpc_timeout_;
  Limits limits_;
  layout::IndexGeometry geometry_;
  absl::Duration max_read_span_;
  absl::Duration lease_ttl_;
  uint64_t index_addr_ = 0;
  uint32_t index_rkey_ = 0;
  std::vector<DataRegion> data_;
  uint64_t data_arena_bytes_ = 0;
  size_t commit_area_ = 0;
  size_t scratch_bytes_ = 0;

  // Verbs resources, in destruction-safe order: the QP (declared last) goes
  // first, then the registered buffers, the CQ, and the context (PD, device).
  std::shared_ptr<Context> ctx_;
  std::optional<rdma::CompletionQueue> cq_;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<Block> slot_arena_;
  std::unique_ptr<Block> ack_arena_;
  std::unique_ptr<uint64_t[]> probe_word_;
  std::optional<rdma::MemoryRegion> probe_mr_;
  std::optional<rdma::QueuePair> qp_;

  uint64_t connection_id_ = 0;
  uint32_t credits_ = 0;
  absl::Mutex credit_mu_;
  int credits_used_ ABSL_GUARDED_BY(credit_mu_) = 0;

  OpSlot slots_[kSlots];
  absl::Mutex slot_mu_;
  std::vector<int> free_slots_ ABSL_GUARDED_BY(slot_mu_);
  absl::Mutex poll_mu_;
  std::atomic<bool> broken_{false};

  absl::Mutex lease_mu_;
  std::shared_ptr<Lease> cur_ ABSL_GUARDED_BY(lease_mu_);
  std::shared_ptr<Lease> next_ ABSL_GUARDED_BY(lease_mu_);
  std::vector<std::shared_ptr<Lease>> retired_ ABSL_GUARDED_BY(lease_mu_);
  bool refill_wanted_ ABSL_GUARDED_BY(lease_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(lease_mu_) = false;
  std::thread lease_thread_;

  std::atomic<uint64_t> ops_{0}, checksum_retries_{0}, span_retries_{0}, fallbacks_{0},
      leases_granted_{0}, leases_released_{0}, leases_renewed_{0}, lease_aborts_{0};
};

}  // namespace

absl::StatusOr<std::shared_ptr<RdmaContext>> RdmaDataPath::OpenContext(const std::string& device,
                                                                       uint64_t max_value_bytes) {
  // Every registration pins memory: the slot arenas, bounce buffers for
  // values up to the limit (cached, up to twice), and the caller's own
  // registered buffers. Refuse early with the fix rather than fail mid-PUT.
  rlimit lim;
  if (geteuid() != 0 && getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const uint64_t need = 2 * max_value_bytes + (16ull << 20);
    if (lim.rlim_cur < need) {
      return absl::UnavailableError(
          absl::StrCat("RLIMIT_MEMLOCK is ", lim.rlim_cur, " bytes; an RDMA client needs about ",
                       need, " to pin its buffers (`ulimit -l unlimited`, or --transport=tcp)"));
    }
  }
  KV_ASSIGN_OR_RETURN(auto dev, rdma::Device::Open(device));
  KV_ASSIGN_OR_RETURN(auto pd, rdma::ProtectionDomain::Create(dev));
  return std::make_shared<RdmaContext>(std::move(dev), std::move(pd));
}

absl::StatusOr<std::unique_ptr<RdmaDataPath>> RdmaDataPath::Connect(
    std::shared_ptr<RdmaContext> context, v1::KvControl::Stub* stub,
    const v1::HandshakeResponse& handshake, const std::string& client_name, uint64_t lease_bytes,
    absl::Duration rpc_timeout) {
  auto path =
      std::make_unique<RdmaDataPathImpl>(stub, handshake, client_name, lease_bytes, rpc_timeout);
  KV_RETURN_IF_ERROR(path->Init(std::move(context)));
  return std::unique_ptr<RdmaDataPath>(std::move(path));
}

}  // namespace client
}  // namespace kvstore
