// Copyright 2026 The kvstore Authors.
//
// KvControlServiceImpl::Put, the gRPC slow-path write, as a callback RPC:
// no thread waits for the write's replication round. Before, each Put held
// a thread of gRPC's pool and one of four writers (under its mutex) for the
// whole round, so at most four replicated Puts were ever in flight and the
// replication stream had nothing to batch. Now the handler reserves the
// entry through the shared writer, encodes it and starts its commit; the
// backups' answer (on the thread that reads it) ends the call. Only what
// has to block runs on the service's own workers: a commit StartCommit
// declines, and a Put that waits for pool space.

#include <memory>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/protocol/layout.h"
#include "common/status_macros.h"
#include "server/control/control_service.h"

namespace kvstore {
namespace server {

namespace pb = ::kvstore::v1;

grpc::ServerUnaryReactor* KvControlServiceImpl::Put(grpc::CallbackServerContext* context,
                                                    const pb::PutRequest* request,
                                                    pb::PutResponse* /*response*/) {
  puts_->Increment();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = auth_.Check(context, "kvstore.v1.KvControl/Put"); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const absl::Time start = absl::Now();
  // `request` and `reactor` live until Finish(), the last use of either;
  // nothing of the service is touched after it (Shutdown() may then end).
  auto finish = [this, reactor, start](const absl::Status& s) {
    put_requests_.Record(absl::Now() - start);
    reactor->Finish(ToGrpcStatus(s));
  };
  KvStore* const store = deps_.store;
  const std::string& key = request->key();
  const std::string& value = request->value();
  // Limits first, so an oversized request allocates nothing.
  absl::Status checked = store->limits().CheckKey(key);
  if (checked.ok()) checked = store->limits().CheckValueLength(value.size());
  if (checked.ok()) checked = RouteKey(key);
  if (!checked.ok()) {
    finish(checked);
    return reactor;
  }
  // The expiry is reckoned on this server's clock, never the client's.
  const uint64_t expires_at_ms =
      request->ttl_ms() == 0 ? 0
                             : static_cast<uint64_t>(store->NowMs()) +
                                   std::min<uint64_t>(request->ttl_ms(), layout::kMaxExpiresAtMs);
  absl::StatusOr<Reservation> reserved = put_writer_->Reserve(key.size(), value.size());
  if (!reserved.ok()) {
    const absl::Duration wait = SpaceWait(context);
    if (absl::IsResourceExhausted(reserved.status()) && wait > absl::ZeroDuration()) {
      put_workers_->Submit([this, request, wait, expires_at_ms, finish] {
        finish(PutWaitingForSpace(*request, wait, expires_at_ms));
      });
      return reactor;
    }
    finish(reserved.status());
    return reactor;
  }
  auto entry = std::make_shared<Reservation>(std::move(*reserved));
  layout::EncodeEntry(entry->ptr, key, value, store->Version(), expires_at_ms);
  // Done() either way: after a failed commit the bytes are dead space.
  auto committed = [this, entry, request, finish](absl::Status s) {
    put_writer_->Done(*entry);
    finish(RerouteRefusal(request->key(), std::move(s)));
  };
  // EncodeEntry() has just computed the checksum over these very bytes.
  if (store->options().write_hook == nullptr) {
    // Single-node: nothing to wait for, the commit is the write.
    committed(store->Commit(entry->offset, entry->size, /*verify_checksum=*/false));
    return reactor;
  }
  if (store->StartCommit(entry->offset, entry->size, /*verify_checksum=*/false, committed)) {
    return reactor;
  }
  put_workers_->Submit([store, entry, committed] {
    committed(store->Commit(entry->offset, entry->size, /*verify_checksum=*/false));
  });
  return reactor;
}

// Round robin: cheap, and a large value waiting for space blocks at most
// 1/kPutWriters of the others.
absl::Status KvControlServiceImpl::PutWaitingForSpace(const pb::PutRequest& request,
                                                      absl::Duration space_wait,
                                                      uint64_t expires_at_ms) {
  PutWriter& w = writers_[next_writer_.fetch_add(1, std::memory_order_relaxed) % kPutWriters];
  absl::MutexLock lock(&w.mu);
  // Created on first use: an idle writer would hold a segment open.
  if (w.writer == nullptr) w.writer = deps_.store->NewWriter();
  return RerouteRefusal(
      request.key(),
      deps_.store->Put(w.writer.get(), request.key(), request.value(), space_wait, expires_at_ms));
}

}  // namespace server
}  // namespace kvstore
