// Copyright 2026 The kvstore Authors.

#include "server/resp/client_registry.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/resp/commands.h"
#include "server/resp/connection.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

// "ip:port" of an IPv4 or IPv6 socket address; "?:0" for anything else
// (a socketpair has no address to show).
std::string AddressText(const sockaddr_storage& a) {
  char ip[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof(ip));
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof(ip));
    port = ntohs(v6->sin6_port);
  }
  return absl::StrCat(ip, ":", port);
}

// Whether `e` passes `f`. Reads `user`: under the registry's mutex.
bool Matches(const ClientFilter& f, const ClientEntry& e) {
  if (f.nobody) return false;
  if (!f.ids.empty() && std::find(f.ids.begin(), f.ids.end(), e.id) == f.ids.end()) return false;
  if (!f.addr.empty() && f.addr != e.addr) return false;
  if (!f.laddr.empty() && f.laddr != e.laddr) return false;
  return f.user.empty() || f.user == e.user;
}

// Redis's flag letters for what kvstore has: r (READONLY, cluster mode),
// e (no-evict), T (no-touch); N when none.
std::string Flags(const ClientEntry& e) {
  std::string flags;
  if (e.readonly.load(std::memory_order_relaxed)) flags += 'r';
  if (e.no_evict) flags += 'e';
  if (e.no_touch) flags += 'T';
  return flags.empty() ? "N" : flags;
}

// "get", "client|setname", or Redis's "NULL" before the first command.
std::string CommandText(const ClientEntry& e) {
  const CommandSpec* spec = e.last_command.load(std::memory_order_relaxed);
  if (spec == nullptr) return "NULL";
  std::string text = absl::AsciiStrToLower(spec->name);
  const char* sub = e.last_subcommand.load(std::memory_order_relaxed);
  if (text == "client" && sub != nullptr) absl::StrAppend(&text, "|", sub);
  return text;
}

int64_t Seconds(absl::Duration d) { return std::max<int64_t>(0, absl::ToInt64Seconds(d)); }

}  // namespace

ClientHandle& ClientHandle::operator=(ClientHandle&& other) noexcept {
  if (this != &other) {
    if (registry_ != nullptr) registry_->Unregister(entry_);
    registry_ = std::exchange(other.registry_, nullptr);
    entry_ = std::exchange(other.entry_, nullptr);
  }
  return *this;
}

ClientHandle::~ClientHandle() {
  if (registry_ != nullptr) registry_->Unregister(entry_);
}

ClientHandle ClientRegistry::Register(int fd, absl::Time now, int wake_fd, std::string addr,
                                      std::string laddr) {
  auto e = std::make_unique<ClientEntry>();
  e->fd = fd;
  e->created = now;
  e->wake_fd = wake_fd;
  e->last_interaction_ns.store(absl::ToUnixNanos(now), std::memory_order_relaxed);
  // Read once here, not per listing: by then another thread could be
  // asking about a descriptor its loop has closed and reused.
  if (addr.empty()) addr = SocketAddress(fd, /*peer=*/true);
  if (laddr.empty()) laddr = SocketAddress(fd, /*peer=*/false);
  e->addr = std::move(addr);
  e->laddr = std::move(laddr);
  ClientEntry* raw = e.get();
  absl::MutexLock lock(&mu_);
  e->id = next_id_++;
  entries_.emplace(e->id, std::move(e));
  return ClientHandle(this, raw);
}

void ClientRegistry::Unregister(ClientEntry* entry) {
  absl::MutexLock lock(&mu_);
  entries_.erase(entry->id);
}

void ClientRegistry::Update(ClientEntry* entry, absl::FunctionRef<void(ClientEntry&)> change) {
  absl::MutexLock lock(&mu_);
  change(*entry);
}

// Formatting every line under the lock keeps each entry alive and its
// names stable while read; a listing of thousands of connections holds the
// other loops' Update() calls (not their requests) for that long.
void ClientRegistry::List(const ClientFilter& filter, absl::Time now, std::string* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : entries_) {
    if (Matches(filter, *e)) out->append(FormatClientLine(*e, now));
  }
}

// The mark is an atomic the owner reads on its own thread; the write to
// its eventfd makes the owner look now rather than at its next sweep. A
// failed write means a wake-up is already pending.
size_t ClientRegistry::Kill(const ClientFilter& filter, const ClientEntry* self, bool skip_self,
                            bool* self_matched) {
  *self_matched = false;
  size_t killed = 0;
  std::set<int> wake;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, e] : entries_) {
      // One marked already is going away: not killed twice.
      if (!Matches(filter, *e) || e->kill_requested.load(std::memory_order_relaxed)) continue;
      if (e.get() == self) {
        if (skip_self) continue;
        *self_matched = true;
      } else {
        e->kill_requested.store(true, std::memory_order_relaxed);
        wake.insert(e->wake_fd);
      }
      ++killed;
    }
  }
  for (int fd : wake) {
    uint64_t one = 1;
    if (fd >= 0) (void)!write(fd, &one, sizeof(one));
  }
  return killed;
}

size_t ClientRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

std::string SocketAddress(int fd, bool peer) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                     : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return r == 0 ? AddressText(a) : "?:0";
}

std::string FormatClientLine(const ClientEntry& e, absl::Time now) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  const absl::Time last = absl::FromUnixNanos(e.last_interaction_ns.load(kRelaxed));
  std::string events;
  if (e.reading.load(kRelaxed)) events += 'r';
  if (e.writing.load(kRelaxed)) events += 'w';
  // Fields kvstore has no counterpart for (databases, pub/sub,
  // transactions, tracking) are at the values Redis shows for a plain
  // client; multi-mem and obl are 0 because nothing is buffered that way.
  return absl::StrCat(
      "id=", e.id, " addr=", e.addr, " laddr=", e.laddr, " fd=", e.fd, " name=", e.name,
      " age=", Seconds(now - e.created), " idle=", Seconds(now - last), " flags=", Flags(e),
      " db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=", e.qbuf.load(kRelaxed),
      " qbuf-free=", e.qbuf_free.load(kRelaxed), " argv-mem=", e.argv_mem.load(kRelaxed),
      " multi-mem=0 obl=0 oll=", e.oll.load(kRelaxed), " omem=", e.omem.load(kRelaxed),
      " tot-mem=", e.tot_mem.load(kRelaxed), " events=", events, " cmd=", CommandText(e),
      " user=", e.user, " redir=-1 resp=", e.protocol, " lib-name=", e.lib_name,
      " lib-ver=", e.lib_ver, "\n");
}

void NoteInteraction(const Connection& c) {
  if (ClientEntry* e = c.client.get()) {
    e->last_interaction_ns.store(absl::ToUnixNanos(c.last_activity), std::memory_order_relaxed);
  }
}

void NoteCommand(const Connection& c, const CommandSpec* spec) {
  ClientEntry* e = c.client.get();
  if (e == nullptr || spec == nullptr) return;
  e->last_command.store(spec, std::memory_order_relaxed);
}

void NoteSubcommand(const Connection& c, const char* static_name) {
  if (ClientEntry* e = c.client.get()) {
    e->last_subcommand.store(static_name, std::memory_order_relaxed);
  }
}

void PublishStats(const Connection& c, uint64_t argv_bytes) {
  ClientEntry* e = c.client.get();
  if (e == nullptr) return;
  constexpr auto kRelaxed = std::memory_order_relaxed;
  uint64_t out_capacity = c.out.capacity() * sizeof(OutChunk);
  for (const OutChunk& chunk : c.out) out_capacity += chunk.owned.capacity();
  uint64_t spare_bytes = 0;
  for (const std::string& spare : c.out_spares) spare_bytes += spare.capacity();
  e->qbuf.store(c.in.size() - c.start, kRelaxed);
  e->qbuf_free.store(c.in.capacity() - c.in.size(), kRelaxed);
  e->argv_mem.store(argv_bytes, kRelaxed);
  e->oll.store(c.out.size(), kRelaxed);
  e->omem.store(c.out_bytes, kRelaxed);
  e->tot_mem.store(sizeof(Connection) + c.in.capacity() + out_capacity + spare_bytes + argv_bytes,
                   kRelaxed);
  e->reading.store((c.epoll_events & EPOLLIN) != 0, kRelaxed);
  e->writing.store((c.epoll_events & EPOLLOUT) != 0, kRelaxed);
  e->readonly.store(c.readonly, kRelaxed);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
