// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/etcd/etcd_watch.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/sync/thread_name.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace internal {
namespace {

using EventsCallback = std::function<void(absl::StatusOr<std::vector<WatchEvent>>)>;

std::vector<WatchEvent> ToEvents(const etcdserverpb::WatchResponse& resp) {
  std::vector<WatchEvent> events;
  events.reserve(resp.events_size());
  for (const mvccpb::Event& e : resp.events()) {
    WatchEvent ev;
    ev.type =
        e.type() == mvccpb::Event::DELETE ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
    ev.kv = ToKeyValue(e.kv());
    events.push_back(std::move(ev));
  }
  return events;
}

class GrpcWatch final : public WatchHandle {
 public:
  GrpcWatch(const std::string& address, const EtcdStubs& stubs, const std::string& token,
            EventsCallback on_events)
      : address_(address),
        stub_(etcdserverpb::Watch::NewStub(stubs.channel)),
        on_events_(std::move(on_events)) {
    ctx_.AddMetadata(std::string(kRequireLeaderKey), std::string(kRequireLeaderValue));
    if (!token.empty()) ctx_.AddMetadata(std::string(kTokenKey), token);
  }

  ~GrpcWatch() override {
    stopping_ = true;
    ctx_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }

  // Everything that talks to etcd, stream creation included, runs on the
  // thread: a hung etcd can block any step, and only the thread may block.
  // Here we wait at most `timeout` for etcd's confirmation.
  absl::Status Start(etcdserverpb::WatchRequest create, absl::Duration timeout) {
    thread_ = std::thread([this, create = std::move(create)] {
      NameThread("kv-etcd-watch");
      Run(create);
    });
    absl::MutexLock lock(&mu_);
    auto decided = [this] { return state_ != State::kStarting; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&decided), timeout)) {
      return absl::UnavailableError(absl::StrCat("etcd ", address_, " Watch: not confirmed within ",
                                                 absl::FormatDuration(timeout)));
    }
    return state_ == State::kCreated ? absl::OkStatus() : start_error_;
  }

  // etcd answers with a response that has no events (a progress notice),
  // which ReadLoop delivers as an empty batch. A write that fails means the
  // stream is broken: the read side reports that.
  void RequestProgress() override {
    // One write at a time on a stream (reads run alongside on the thread).
    // Busy: the create request is still being written; the owner asks
    // again later.
    if (!write_mu_.TryLock()) return;
    if (stream_ != nullptr) {
      etcdserverpb::WatchRequest req;
      req.mutable_progress_request();
      (void)stream_->Write(req);
    }
    write_mu_.Unlock();
  }

 private:
  enum class State { kStarting, kCreated, kFailed };

  void Run(const etcdserverpb::WatchRequest& create) {
    auto stream = stub_->Watch(&ctx_);
    absl::Status error;
    bool written;
    {
      absl::MutexLock lock(&write_mu_);
      written = stream->Write(create);
      if (written) stream_ = stream.get();
    }
    if (written) error = ReadLoop(stream.get());
    {
      absl::MutexLock lock(&write_mu_);
      stream_ = nullptr;
    }
    if (error.ok()) {
      // The stream broke: its status says why.
      error = FromGrpc(stream->Finish(), address_, "Watch");
      if (error.ok())
        error = absl::UnavailableError(absl::StrCat("etcd ", address_, " Watch: stream ended"));
    } else {
      // etcd cancelled the watch but the stream is still open; close it.
      ctx_.TryCancel();
      etcdserverpb::WatchResponse ignored;
      while (stream->Read(&ignored)) {
      }
      (void)stream->Finish();
    }
    Fail(std::move(error));
  }

  // Reads until the stream breaks (returns OK) or etcd cancels the watch
  // (returns why).
  absl::Status ReadLoop(
      grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>* stream) {
    etcdserverpb::WatchResponse resp;
    while (stream->Read(&resp)) {
      if (resp.created()) {
        absl::MutexLock lock(&mu_);
        if (state_ == State::kStarting) state_ = State::kCreated;
      }
      if (resp.canceled()) {
        if (resp.compact_revision() > 0) {
          return absl::OutOfRangeError(absl::StrCat(
              "etcd ", address_, " Watch: revision compacted up to ", resp.compact_revision()));
        }
        return absl::UnavailableError(
            absl::StrCat("etcd ", address_, " Watch: cancelled by etcd: ", resp.cancel_reason()));
      }
      if (resp.created()) continue;
      // No events: a progress notice (requested or periodic); the empty
      // batch tells the owner the watch is alive and caught up.
      if (!stopping_) on_events_(ToEvents(resp));
    }
    return absl::OkStatus();
  }

  // Reports the end of the watch once: to Start() while it still waits,
  // else to the callback (unless the handle is being destroyed).
  void Fail(absl::Status error) {
    {
      absl::MutexLock lock(&mu_);
      if (state_ == State::kStarting) {
        state_ = State::kFailed;
        start_error_ = std::move(error);
        return;
      }
    }
    if (!stopping_) on_events_(std::move(error));
  }

  const std::string address_;
  const std::unique_ptr<etcdserverpb::Watch::Stub> stub_;
  const EventsCallback on_events_;
  grpc::ClientContext ctx_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  absl::Mutex mu_;
  State state_ = State::kStarting;  // guarded by mu_
  absl::Status start_error_;        // guarded by mu_
  // Not mu_: a write may block, and Start() must time out meanwhile.
  absl::Mutex write_mu_;
  // The open stream while ReadLoop runs (for RequestProgress's writes).
  grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>* stream_ =
      nullptr;  // guarded by write_mu_
};

}  // namespace

absl::StatusOr<std::unique_ptr<WatchHandle>> StartWatch(
    const std::string& address, std::shared_ptr<const EtcdStubs> stubs, const std::string& token,
    absl::string_view prefix, int64_t start_revision, absl::Duration rpc_timeout,
    EventsCallback on_events) {
  etcdserverpb::WatchRequest req;
  etcdserverpb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(prefix.empty() ? std::string(1, '\0') : std::string(prefix));
  create->set_range_end(PrefixEnd(prefix));
  create->set_start_revision(start_revision);
  // etcd then also sends progress notices on its own (every 10 minutes by
  // default); owners that need a tighter bound call RequestProgress().
  create->set_progress_notify(true);
  auto watch = std::make_unique<GrpcWatch>(address, *stubs, token, std::move(on_events));
  absl::Status s = watch->Start(std::move(req), rpc_timeout);
  if (!s.ok()) return s;  // ~GrpcWatch cancels the stream and joins
  return std::unique_ptr<WatchHandle>(std::move(watch));
}

}  // namespace internal
}  // namespace etcd
}  // namespace server
}  // namespace kvstore
