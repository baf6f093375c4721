// Copyright 2026 The kvstore Authors.

#include "server/control/session_table.h"

#include <sys/random.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {

uint64_t RandomSessionId() {
  for (;;) {
    uint64_t id = 0;
    // 8 bytes never block once the pool is initialized, and a short read
    // cannot happen below 256 bytes; EINTR is retried.
    const ssize_t n = getrandom(&id, sizeof(id), 0);
    if (n < 0 && errno == EINTR) continue;
    CHECK_EQ(n, static_cast<ssize_t>(sizeof(id))) << "getrandom failed: errno " << errno;
    if (id != 0) return id;  // 0 means "no session" on the wire
  }
}

SessionTable::SessionTable(SessionOptions options, metrics::Registry* registry)
    : options_(options) {
  CHECK(registry != nullptr);
  opened_ = registry->AddCounter("kvstore_sessions_opened_total",
                                 "Control-plane sessions opened by Handshake.");
  expired_ = registry->AddCounter("kvstore_sessions_expired_total",
                                  "Sessions expired (idle past the TTL with no live queue pair).");
  active_gauge_ = registry->AddCallbackGauge("kvstore_sessions_active",
                                             "Control-plane sessions open.", {}, [this] {
                                               absl::MutexLock lock(&mu_);
                                               return static_cast<int64_t>(sessions_.size());
                                             });
}

absl::StatusOr<uint64_t> SessionTable::Open(std::string peer, auth::Identity who) {
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= options_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many sessions open (", options_.max_sessions,
                     ", --max_sessions); idle ones expire after --session_ttl"));
  }
  uint64_t id = RandomSessionId();
  // A collision among 2^64 values is all but impossible; draw again anyway.
  while (sessions_.contains(id)) id = RandomSessionId();
  sessions_[id] =
      Entry{std::make_shared<Session>(id, std::move(peer), std::move(who)), absl::Now()};
  opened_->Increment();
  return id;
}

absl::StatusOr<std::shared_ptr<SessionTable::Session>> SessionTable::Use(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (id == 0 || it == sessions_.end()) {
    // The id is not repeated back beyond this: it is the caller's own.
    return cluster::ToStatus(cluster::Refusal::SessionLost(
        absl::StrCat("no live session ", id, " (expired or never opened): handshake again")));
  }
  it->second.last_used = absl::Now();
  return it->second.session;
}

std::vector<SessionTable::Expired> SessionTable::Sweep(absl::Time now,
                                                       const std::function<bool(uint64_t)>& live) {
  // Candidates first (idle past the TTL), without calling out under mu_.
  std::vector<std::shared_ptr<Session>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : sessions_) {
      if (now - entry.last_used >= options_.ttl) idle.push_back(entry.session);
    }
  }
  std::vector<Expired> out;
  for (const std::shared_ptr<Session>& s : idle) {
    Expired e;
    e.id = s->id;
    e.peer = s->peer;
    {
      absl::MutexLock session_lock(&s->mu);
      e.connections.assign(s->connections.begin(), s->connections.end());
    }
    bool any_live = false;
    for (uint64_t c : e.connections) any_live = any_live || live(c);
    if (any_live) continue;
    {
      absl::MutexLock lock(&mu_);
      auto it = sessions_.find(s->id);
      // Used again since it was picked: not idle after all.
      if (it == sessions_.end() || now - it->second.last_used < options_.ttl) continue;
      sessions_.erase(it);
    }
    // A ConnectQp that raced the sweep sees `closed` under the session's
    // lock and gives up; one that finished first is in the list below.
    {
      absl::MutexLock session_lock(&s->mu);
      s->closed = true;
      e.connections.assign(s->connections.begin(), s->connections.end());
    }
    expired_->Increment();
    out.push_back(std::move(e));
  }
  return out;
}

size_t SessionTable::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace server
}  // namespace kvstore
