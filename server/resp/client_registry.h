// Copyright 2026 The kvstore Authors.
//
// ClientRegistry: every connection of one RESP port, across all of its
// loops, as CLIENT ID, CLIENT LIST and CLIENT KILL see them
// (client_commands.h). A loop registers each connection it takes
// (Register) and keeps the ClientHandle in the Connection; destroying the
// Connection unregisters it, however it ends, so a listing never shows a
// connection that is gone.
//
// Who writes what in a ClientEntry (one writer per field):
//   * fixed at Register(): id, fd, the addresses, the birth time and the
//     owning loop's wake-up descriptor;
//   * names and settings a command changes (name, lib-name, lib-ver, user,
//     protocol, no-evict, no-touch): written by the owning loop through
//     Update(), under the registry's mutex; read under it by List() from
//     any loop, and by the owner without it (it is the only writer);
//   * what changes all the time (the last interaction, the last command,
//     the buffer figures, the read-only flag): relaxed atomics, stored by
//     the owner and read by anyone without a lock. The interaction and the
//     command are stored as they happen; the buffer figures by the owner's
//     once-a-second sweep and just before its own CLIENT INFO / LIST
//     (PublishStats), so another connection's qbuf/omem in a listing can be
//     up to a sweep old. A line may mix moments; it is a listing, not a
//     snapshot;
//   * the kill mark: set by Kill() from any loop, read by the owner, which
//     closes the connection when its wake-up descriptor fires.
//
// Ownership: RespServer owns the registry, which must outlive every loop
// (their connections unregister when destroyed). The registry owns the
// entries; a ClientHandle is the owning Connection's claim on one.
//
// Thread safety: every ClientRegistry method may be called from any thread.

#ifndef KVSTORE_SERVER_RESP_CLIENT_REGISTRY_H_
#define KVSTORE_SERVER_RESP_CLIENT_REGISTRY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvstore {
namespace server {
namespace resp_internal {

struct CommandSpec;  // commands.h
struct Connection;   // connection.h

// One connection as CLIENT LIST shows it. See the file comment for which
// thread writes which field and how the others read it.
struct ClientEntry {
  // Fixed at Register().
  uint64_t id = 0;
  int fd = -1;
  std::string addr;    // the peer, "ip:port" ("?:0" when unknown)
  std::string laddr;   // this end, "ip:port"
  absl::Time created;  // loop time (LoopTime())
  int wake_fd = -1;    // the owning loop's eventfd, written by Kill()

  // Written by the owner under the registry's mutex (Update()).
  std::string name;
  std::string lib_name;
  std::string lib_ver;
  std::string user = "default";
  int protocol = 2;
  bool no_evict = false;
  bool no_touch = false;

  // Relaxed atomics: stored by the owner, read by anyone.
  std::atomic<int64_t> last_interaction_ns{0};            // loop time, absl::ToUnixNanos
  std::atomic<const CommandSpec*> last_command{nullptr};  // null: none yet
  // A static lower-case name, the subcommand of a CLIENT last_command.
  std::atomic<const char*> last_subcommand{nullptr};
  std::atomic<uint64_t> qbuf{0};
  std::atomic<uint64_t> qbuf_free{0};
  std::atomic<uint64_t> argv_mem{0};
  std::atomic<uint64_t> oll{0};
  std::atomic<uint64_t> omem{0};
  std::atomic<uint64_t> tot_mem{0};
  std::atomic<bool> reading{true};
  std::atomic<bool> writing{false};
  std::atomic<bool> readonly{false};

  // Set by Kill() (any thread); the owner closes the connection.
  std::atomic<bool> kill_requested{false};
};

// Which connections CLIENT LIST shows or CLIENT KILL closes: all the
// criteria given must hold.
struct ClientFilter {
  std::vector<uint64_t> ids;  // one of these ids (empty: any)
  std::string addr;           // this peer address (empty: any)
  std::string laddr;          // this local address (empty: any)
  std::string user;           // this user (empty: any)
  bool nobody = false;        // TYPE master/replica/pubsub: none of ours is
};

class ClientRegistry;

// The owning Connection's registration: unregisters on destruction. Empty
// (no registry) for connections built without one, as in unit tests.
class ClientHandle {
 public:
  ClientHandle() = default;
  ClientHandle(ClientRegistry* registry, ClientEntry* entry) : registry_(registry), entry_(entry) {}
  ClientHandle(ClientHandle&& other) noexcept { *this = std::move(other); }
  ClientHandle& operator=(ClientHandle&& other) noexcept;
  ~ClientHandle();

  ClientEntry* get() const { return entry_; }
  ClientRegistry* registry() const { return registry_; }

 private:
  ClientRegistry* registry_ = nullptr;
  ClientEntry* entry_ = nullptr;
};

class ClientRegistry {
 public:
  ClientRegistry() = default;
  ClientRegistry(const ClientRegistry&) = delete;
  ClientRegistry& operator=(const ClientRegistry&) = delete;

  // Registers the connected socket `fd` of the loop whose eventfd is
  // `wake_fd`, born at loop time `now`: the next id (1, 2, ... in order of
  // registration, never reused) and its addresses, read from the socket
  // here, unless `addr`/`laddr` are given (a TLS connection's plaintext end
  // is a socketpair, and only the TLS front knows the real peer).
  ClientHandle Register(int fd, absl::Time now, int wake_fd, std::string addr = "",
                        std::string laddr = "");

  // Runs `change` on `entry` under the mutex: how the owner changes the
  // fields others read under it.
  void Update(ClientEntry* entry, absl::FunctionRef<void(ClientEntry&)> change);

  // Appends one line per connection `filter` keeps, in id order
  // (FormatClientLine, each ending in '\n'); `now` is the caller's loop time.
  void List(const ClientFilter& filter, absl::Time now, std::string* out) const;

  // Marks the connections `filter` keeps to be closed by their loops, and
  // wakes those loops. `self` (the caller's own entry) is never marked: it
  // is counted in the result when it matches and `skip_self` is false, and
  // *self_matched says so, for the caller to close itself after its reply.
  // A connection marked before (its loop has yet to close it) is not
  // counted again.
  size_t Kill(const ClientFilter& filter, const ClientEntry* self, bool skip_self,
              bool* self_matched);

  size_t size() const;

 private:
  friend class ClientHandle;
  void Unregister(ClientEntry* entry);

  mutable absl::Mutex mu_;
  std::map<uint64_t, std::unique_ptr<ClientEntry>> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// "ip:port" of the peer (`peer`) or local end of socket `fd`; "?:0" when
// it has none (a socketpair).
std::string SocketAddress(int fd, bool peer);

// The CLIENT INFO / CLIENT LIST line of `e` at loop time `now`, in Redis's
// field order, ending in '\n'. Reads the fields the owner writes under the
// mutex: the caller holds it, or is the owner.
std::string FormatClientLine(const ClientEntry& e, absl::Time now);

// The owner's steps that keep its entry current (no-ops without one):
// after a read, the interaction time; before a command, its row of the
// command table (FindCommand(); null, an unknown command, leaves the last
// known one); for a CLIENT subcommand, its static lower-case name.
void NoteInteraction(const Connection& c);
void NoteCommand(const Connection& c, const CommandSpec* spec);
void NoteSubcommand(const Connection& c, const char* static_name);
// Publishes c's buffer figures (and read-only flag); `argv_bytes` are the
// arguments of the command being run, 0 between commands.
void PublishStats(const Connection& c, uint64_t argv_bytes);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_CLIENT_REGISTRY_H_
