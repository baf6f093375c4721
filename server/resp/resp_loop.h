// Copyright 2026 The kvstore Authors.
//
// RespLoop: one epoll event loop of the RESP data port, run on a thread of
// its own. It accepts from the listening socket it shares with the other
// loops (EPOLLEXCLUSIVE: the kernel wakes one waiting loop per incoming
// connection, and whichever loop accepts keeps the connection for its
// lifetime), reads requests, runs them (commands.h, streamed_set.h) and
// writes the replies with writev, without a thread per connection.
//
// Defensive: every length is checked by the parser before anything is
// allocated; a malformed request gets "ERR Protocol error: ..." and its
// connection is closed without affecting others; reads stop while a
// connection's queued replies exceed max_pending_output; idle connections,
// half-sent requests and clients that stop reading are timed out. The
// RespLimits bounds (resp_options.h) are enforced here: max_clients and
// max_unauthenticated_clients at accept and login (resp_loop_admission.cc;
// with a password a connection moves from the second to the first when AUTH
// succeeds), max_query_buffer while parsing, output and pin limits and
// auth_timeout in the once-a-second sweep (resp_loop_limits.cc). Running
// out of file descriptors at accept is answered with a reserve descriptor
// (accept and close with an error) and a short pause of the listener, never
// a spin, and logged at most once per 10 s.
//
// Requests are arrays or inline lines (resp::ParseRequest); an empty inline
// line is skipped. Every connection is registered with the port's
// ClientRegistry (client_registry.h) for CLIENT LIST / KILL; a CLIENT KILL
// run on any loop marks the connection and writes this loop's kill eventfd,
// and this loop closes it (CloseKilled): only a connection's own loop ever
// closes it.
//
// Cluster mode: a streamed SET's commit waits for its replication round, so
// the loop parks it (commit_pool.h) and serves its other connections, and
// the connection's next pipelined SETs of other keys, which are parked too
// and so replicated together; every other request of the connection waits
// (unread input with it) until its parked SETs are answered, and replies
// leave in request order (Connection::Hold). Any other write command (SET
// with options, MSET, DEL, INCR, ...) whose key's shard would wait for
// other nodes is parked whole (ParkCommand): a worker runs it and the
// connection runs nothing else until it is answered. A write the hook said
// would not wait, but that finds its key locked by a parked SET, reads the
// replication replies this loop is lent while it waits (ServeFor), since
// the SET's round may end only with them.
//
// Ownership and thread safety: owned by RespServer. Init() and then Run()
// on the loop's thread; Wake() from any thread makes Run() return. The
// listening socket and the registry are borrowed (the server closes and
// destroys them after the loops); connections, their sockets and the
// loop's KvStore writer are owned and released on destruction, which must
// come after Run() has returned.

#ifndef KVSTORE_SERVER_RESP_RESP_LOOP_H_
#define KVSTORE_SERVER_RESP_RESP_LOOP_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/protocol/resp.h"
#include "common/sync/handoff_mutex.h"
#include "server/net/fd_watch.h"
#include "server/resp/client_registry.h"
#include "server/resp/commit_pool.h"
#include "server/resp/connection.h"
#include "server/resp/limits.h"
#include "server/resp/lookahead.h"
#include "server/resp/resp_counters.h"
#include "server/resp/resp_options.h"
#include "server/resp/streamed_set.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// A LockWaitService (common/sync/handoff_mutex.h) for its own thread: a
// key lock this loop waits for may be held by a write whose backup reply
// only this loop reads (ServeFor, resp_loop_watches.cc).
class RespLoop final : private LockWaitService {
 public:
  // Nothing is owned; all must outlive the loop. `listen_fd` is a
  // non-blocking listening socket; `budgets` are shared by the port's loops;
  // `ids` the server's users (null: none, every connection an admin);
  // `clients` the port's registry of connections (null: none, and CLIENT
  // answers only for what needs none).
  RespLoop(KvStore* store, const RespServerOptions& options, const auth::Identities* ids,
           Counters* counters, SharedBudgets* budgets, int listen_fd,
           ClientRegistry* clients = nullptr);
  ~RespLoop();
  RespLoop(const RespLoop&) = delete;
  RespLoop& operator=(const RespLoop&) = delete;

  // Creates the epoll set and wake-up eventfd and the loop's store writer.
  // Internal error if the kernel refuses epoll/eventfd. Call once, first.
  absl::Status Init();

  // Serves connections until Wake(). Blocks; call on the loop's own thread.
  void Run();

  // Asks Run() to return (within one epoll wait). Any thread; idempotent.
  void Wake();

  // Serves `fd`, a connected non-blocking socket accepted elsewhere (the
  // plaintext end of a TLS connection, tls_front.h), as if this loop had
  // accepted it: the same limits, AUTH and commands. `addr` and `laddr`
  // are the addresses CLIENT LIST shows for it (the TLS client's, not the
  // socketpair's; empty: read from `fd`). Any thread; the loop owns (and
  // closes) it from now on, also when it stops first.
  void Adopt(int fd, std::string addr = "", std::string laddr = "");

  // Watches `watch`'s descriptor on this loop (net/fd_watch.h) from its
  // next iteration until OnReadable() returns false or the loop stops
  // (OnUnwatched(), as Run() returns). Any thread. False once Run() has
  // returned: nothing will watch it.
  bool Watch(std::shared_ptr<net::FdWatch> watch);

 private:
  void Accept();
  // Serves the descriptors Adopt() queued and watches what Watch() did.
  void TakeAdopted();
  // Watches what Watch() queued since.
  void AddQueuedWatches();
  // Runs the watch of `fd`, if it has one; false if it has none.
  bool OnWatched(int fd);
  // While this thread waits for a handoff lock (Run() installs this loop
  // for it): runs the watches that have something to read, waiting at most
  // `wait` for one, after starting the batches this thread holds back.
  void ServeFor(absl::Duration wait) override;
  // As Run() returns: every watch, on or queued, gets OnUnwatched(), so
  // that its owner reads for itself again (a parked SET's commit waits on
  // a reply a stream may read here).
  void Unwatch();
  // Registers an accepted socket as a connection (or refuses it at
  // max_clients); `addr`/`laddr` as for Adopt().
  void AddConnection(int fd, std::string addr = "", std::string laddr = "");
  // Closes the connections CLIENT KILL marked (client_registry.h).
  void CloseKilled();
  // At the unauthenticated cap: closes this loop's oldest unauthenticated
  // connection (telling it why) to make room for a new one.
  void DropOldestUnauthenticated();
  // AUTH/HELLO on an unauthenticated connection: takes a max_clients slot
  // first (refusing and closing when there is none), keeps it if the
  // command logged the connection in, gives it back otherwise.
  void ExecuteLogin(Connection* c, const resp::ParsedRequest& req);
  // accept4() failed with `err` (not EAGAIN/EINTR): see the header comment.
  void OnAcceptError(int err);
  // Takes the listener out of / back into the epoll set (the accept pause).
  void PauseListener();
  void MaybeResumeListener(absl::Time now);
  // The parse limits for `c`: tighter before AUTH.
  const resp::RequestLimits& LimitsFor(const Connection& c) const {
    return c.authenticated ? limits_ : unauth_limits_;
  }
  // Cluster mode: hands `req`, a write command whose key's shard would
  // wait for other nodes, to a worker (resp_loop_waits.cc) and parks `c`
  // behind its held reply; false (nothing done) for any other request,
  // which the loop runs itself. `spec`: FindCommand(req.args[0]).
  bool ParkCommand(Connection* c, const resp::ParsedRequest& req, const CommandSpec* spec);
  // Process()'s steps (resp_loop.cc): a value fed to the SET in progress,
  // the input buffer given back once all is parsed, a streamed SET begun.
  bool FeedSet(Connection* c);
  void LendInputBack(Connection* c);
  bool StartSet(Connection* c, absl::string_view buf, const resp::RequestLimits& limits,
                absl::string_view key, uint64_t value_len, size_t consumed,
                const layout::KeyHash* key_hash);
  // Starts the streamed SET just parsed, or refuses it before AUTH.
  // `key_hash`: null, or KvIndex::Hash() of `key` (the look-ahead's).
  void BeginSet(Connection* c, absl::string_view key, uint64_t value_len,
                const layout::KeyHash* key_hash);
  // Output-side bounds of one connection at sweep time `now`; returns the
  // reason to close it, or nullptr to keep it. May copy pinned values out.
  const char* CheckOutputLimits(Connection* c, absl::Time now);
  void OnEvent(Connection* c, uint32_t events);
  // Reads what the socket has. Returns false once the connection is closed
  // (or will close after its last replies).
  bool ReadSome(Connection* c);
  // One recv() into c->in, compacting it first. Returns recv()'s result.
  ssize_t ReceiveBuffered(Connection* c);
  // Runs every complete request in c->in, up to the output limit.
  void Process(Connection* c);
  // Process()'s answer to a request that is incomplete or malformed.
  void NotRunnable(Connection* c, resp::ParsedRequest& req, size_t buffered);
  void Execute(Connection* c, const resp::ParsedRequest& req);
  // Cache hints for the pipelined GET/SET requests at the start of `rest`,
  // parsed under `limits` for their turn (see lookahead.h).
  void PrefetchAhead(const resp::RequestLimits& limits, absl::string_view rest);
  // Writes queued replies. Returns false once the connection is closed.
  bool Flush(Connection* c);
  void UpdateInterest(Connection* c);
  // Whether `c` takes more input now: not while its output is over the
  // limit, its SET waits for space or its next request waits for parked
  // SETs (the input would only pile up in its buffer).
  bool WantsInput(const Connection& c) const;
  // Retries the SETs held back for space (streamed_set.h).
  void RetryHeldBack();
  // Answers the parked SETs whose commits came back (commit_pool.h) and
  // resumes their connections.
  // `read_eventfd`: false when called for FinishedOnLoop(), with no
  // eventfd written.
  void Unpark(bool read_eventfd = true);
  // As the loop goes: lets every parked write finish, workers joined.
  void StopParking();
  // Whether a streamed SET of `key` may be parked while `c` has parked
  // ones: not one of their keys (its write must follow theirs), and fewer
  // than kMaxParkedPerConnection parked.
  static bool MayParkBehind(const Connection& c, absl::string_view key);
  void Close(Connection* c);
  // The once-a-second sweep (resp_loop_limits.cc): timeouts and output
  // bounds; closes the connections that broke them.
  void CheckTimeouts();
  // Replies "ERR <msg>", then stops reading and closes after the flush.
  void ProtocolError(Connection* c, absl::string_view msg);

  KvStore* const store_;
  const RespServerOptions& options_;
  const auth::Identities* const ids_;
  Counters* const counters_;
  SharedBudgets* const budgets_;
  const int listen_fd_;
  resp::RequestLimits limits_;
  // Before AUTH only AUTH/HELLO/QUIT are served: small requests suffice.
  resp::RequestLimits unauth_limits_;
  // Spare descriptor released to accept (and refuse) a connection when the
  // process is out of descriptors; -1 while in use or unavailable.
  int reserve_fd_ = -1;
  bool listener_paused_ = false;
  // Loop time when epoll_wait last returned: what a read or a write records
  // as its connection's last activity, and a SET's request_started (one
  // clock read per wake-up, not one per read, write and SET). They come at
  // most one loop iteration after it, and what uses these times (idle,
  // unread-reply and request timeouts, CLIENT LIST) counts in seconds; a
  // SET's duration so runs from the wake-up that found its header.
  absl::Time wake_time_ = absl::InfinitePast();
  int64_t wake_ns_ = 0;  // wake_time_ as the clock's SteadyNanos()
  // One clock read for both: LoopTime() is UnixEpoch() + Steady().
  void SetWakeTime() {
    wake_ns_ = store_->clock().SteadyNanos();
    wake_time_ = absl::UnixEpoch() + absl::Nanoseconds(wake_ns_);
  }
  absl::Time listener_resume_ = absl::InfinitePast();
  absl::Time last_accept_log_ = absl::InfinitePast();
  uint64_t accept_errors_unlogged_ = 0;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  int adopt_fd_ = -1;   // eventfd: Adopt() queued descriptors
  int kill_fd_ = -1;    // eventfd: CLIENT KILL marked a connection of ours
  int commit_fd_ = -1;  // eventfd: parked SETs' commits came back (cluster mode)
  absl::Mutex adopt_mu_;
  struct Adopted {
    int fd;
    std::string addr, laddr;
  };
  std::vector<Adopted> adopted_ ABSL_GUARDED_BY(adopt_mu_);
  std::vector<std::shared_ptr<net::FdWatch>> to_watch_ ABSL_GUARDED_BY(adopt_mu_);
  bool watching_closed_ ABSL_GUARDED_BY(adopt_mu_) = false;  // Run() returned
  // Watched descriptors: kept open by their watch while here, so a number
  // here is never also a connection's.
  absl::flat_hash_map<int, std::shared_ptr<net::FdWatch>> watches_;
  ClientRegistry* const clients_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<KvStore::Writer> writer_;
  // Cluster mode: where SETs wait for their replication round (null in
  // single-node mode, where a commit never waits on the network).
  std::unique_ptr<CommitPool> parking_;
  // Unpark()'s: the outcomes taken from parking_ and the connections they
  // answered, kept between calls for their room.
  std::vector<CommitPool::Done> done_scratch_;
  std::vector<std::pair<int, uint64_t>> answered_scratch_;
  // Cluster mode: what parked commands write through, on the workers at
  // once (KvStore::NewSharedWriter; one open segment, not one a worker).
  std::unique_ptr<KvStore::Writer> command_writer_;
  std::unique_ptr<StreamedSet> sets_;  // after writer_ and parking_: uses them
  Lookahead lookahead_;                // PrefetchAhead()'s memory between requests
  uint64_t next_serial_ = 0;           // Connection::serial
  absl::flat_hash_map<int, std::unique_ptr<Connection>> conns_;
  // The unauthenticated connections of this loop, oldest first, and how
  // many may be open at once (this loop's share of the cap).
  std::list<Connection*> unauth_;
  size_t unauth_cap_;
  // Connections whose SET is held back for space (Connection::held_back()).
  absl::flat_hash_set<int> held_back_;
  // The loop's read buffer, always empty: a connection with nothing
  // buffered swaps it in to read and gives it back once all it read is
  // parsed, so thousands of idle connections do not each keep 64 KiB.
  InputBuffer spare_;
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RESP_LOOP_H_
