// Copyright 2026 The kvstore Authors.
//
// KvControlServiceImpl::Delete and ::Expire, the gRPC slow path's other
// writes, as callback RPCs like Put (control_service_put.cc): no thread of
// gRPC's pool waits for a replication round. A Delete starts its write
// (KvStore::StartDelete) and the write hook's answer ends the call on the
// thread that read it; a Delete StartDelete declines (a busy key, a
// migration, a syncing replica) runs on the service's workers. An Expire is
// a read-modify-write (KvStore::Update), which waits for its round: in
// cluster mode it runs on those workers too, in single-node mode on the
// calling thread (there is nothing to wait for).

#include <algorithm>
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

grpc::ServerUnaryReactor* KvControlServiceImpl::Delete(grpc::CallbackServerContext* context,
                                                       const pb::DeleteRequest* request,
                                                       pb::DeleteResponse* /*response*/) {
  deletes_->Increment();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = auth_.Check(context, "kvstore.v1.KvControl/Delete"); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const absl::Time start = absl::Now();
  // `request` and `reactor` live until Finish(), the last use of either.
  auto finish = [this, reactor, start](const absl::Status& s) {
    delete_requests_.Record(absl::Now() - start);
    reactor->Finish(ToGrpcStatus(s));
  };
  KvStore* const store = deps_.store;
  // KvStore::Delete() checks the key against the limits itself.
  if (absl::Status routed = RouteKey(request->key()); !routed.ok()) {
    finish(routed);
    return reactor;
  }
  auto deleted = [this, request, finish](absl::Status s) {
    finish(RerouteRefusal(request->key(), std::move(s)));
  };
  if (store->options().write_hook == nullptr) {
    deleted(store->Delete(request->key()));  // single-node: nothing to wait for
    return reactor;
  }
  if (store->StartDelete(request->key(), deleted)) return reactor;
  put_workers_->Submit([store, request, deleted] { deleted(store->Delete(request->key())); });
  return reactor;
}

grpc::ServerUnaryReactor* KvControlServiceImpl::Expire(grpc::CallbackServerContext* context,
                                                       const pb::ExpireRequest* request,
                                                       pb::ExpireResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = auth_.Check(context, "kvstore.v1.KvControl/Expire"); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  auto run = [this, reactor, request, response] {
    reactor->Finish(ToGrpcStatus(ExpireNow(*request, response)));
  };
  if (deps_.store->options().write_hook == nullptr) {
    run();
  } else {
    put_workers_->Submit(std::move(run));
  }
  return reactor;
}

absl::Status KvControlServiceImpl::ExpireNow(const pb::ExpireRequest& request,
                                             pb::ExpireResponse* response) {
  KV_RETURN_IF_ERROR(deps_.store->limits().CheckKey(request.key()));
  KV_RETURN_IF_ERROR(RouteKey(request.key()));
  const uint64_t ttl = std::min<uint64_t>(request.ttl_ms(), layout::kMaxExpiresAtMs);
  const uint64_t at = ttl == 0 ? 0 : static_cast<uint64_t>(deps_.store->NowMs()) + ttl;
  PutWriter& w = writers_[next_writer_.fetch_add(1, std::memory_order_relaxed) % kPutWriters];
  absl::MutexLock lock(&w.mu);
  if (w.writer == nullptr) w.writer = deps_.store->NewWriter();
  bool applied = false;
  KV_RETURN_IF_ERROR(RerouteRefusal(
      request.key(), deps_.store->Update(w.writer.get(), request.key(),
                                         [&](const CurrentValue& cur) -> absl::StatusOr<KeyUpdate> {
                                           if (!cur.exists || (at == 0 && cur.expires_at_ms == 0)) {
                                             return KeyUpdate();
                                           }
                                           applied = true;
                                           KeyUpdate u;
                                           u.action = KeyUpdate::Action::kWrite;
                                           u.value = {cur.value};
                                           u.expires_at_ms = at;
                                           return u;
                                         })));
  response->set_applied(applied);
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
