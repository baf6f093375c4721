// Copyright 2026 The kvstore Authors.
//
// StreamedSet: "SET key value" without buffering the value. The parser stops
// at the value's length line (resp::ParsedRequest::Kind::kSetValue); from
// there the value goes straight into a pool entry reserved for it: bytes
// already buffered with the request are copied once, the rest is recv()'d
// into the entry itself. The entry is then sealed (checksummed) and committed
// through KvStore::Commit, the same path as RDMA commits.
//
// The per-connection progress lives in Connection (state, reservation,
// value_done, value_len, discard_left); this class holds what is shared by
// every connection of one loop.
//
// The entry is reserved lazily, when the first value byte arrives (or at
// once for an empty value): a SET header alone holds no pool memory. Its
// bytes count against a budget shared by every loop of the port
// (RespLimits::max_inflight_set_bytes); a SET that would pass it is answered
// "-OOM ... resp_max_inflight_set_bytes ..." and its value skipped, so
// clients that declare huge values and send them slowly (or never) can hold
// at most that share of the pool, never the memory committed data needs.
//
// Cluster mode: the key is routed (cluster_routing.h) as soon as the header
// is parsed, before any value byte is received or any pool reserved; a key
// this node does not serve as primary is answered its route's refusal at
// once and its value skipped in bounded reads (never buffered whole). A
// refusal of the write hook at commit is answered the same way.
//
// Errors: a key or value over its limit, or a full store, is answered with
// the error its Status maps to and the value is skipped (kDiscard), so the
// connection stays usable. A store full only of segments that are waiting
// out their grace period (overwrites faster than the grace period lets
// space come back) is not refused at once: the SET is held back, its
// connection not read, and the loop tries again as segments come due, for
// up to a grace period (and 100 ms); only then is it refused; a value over max_value_bytes is not
// worth reading: the error is sent and the connection closed. A value not followed by CRLF is a
// protocol error (the caller replies and closes).
//
// Cluster mode: the commit waits for the write's replication round, so it
// is parked (commit_pool.h): run on a worker while the loop serves its
// other connections and the connection's next pipelined SETs (of other
// keys); its reply keeps its place in the output (Connection::Hold) and
// Unpark() fills it.
//
// Thread safety: one instance per RespLoop, used only on that loop's thread.

#ifndef KVSTORE_SERVER_RESP_STREAMED_SET_H_
#define KVSTORE_SERVER_RESP_STREAMED_SET_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/resp/commit_pool.h"
#include "server/resp/connection.h"
#include "server/resp/limits.h"
#include "server/resp/resp_counters.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {
namespace resp_internal {

class StreamedSet {
 public:
  // None of the pointers is owned; all must outlive this object. `writer`
  // is the loop's own (KvStore writers are per thread); `budget` is shared
  // by the port's loops; `cluster` is null in single-node mode.
  // `parking`: where the commits go (cluster mode: they wait for a
  // replication round); null: committed on the loop's thread.
  StreamedSet(KvStore* store, KvStore::Writer* writer, Counters* counters, Budget* budget,
              const ClusterState* cluster = nullptr, CommitPool* parking = nullptr)
      : store_(store),
        writer_(writer),
        counters_(counters),
        budget_(budget),
        cluster_(cluster),
        parking_(parking) {}

  // Starts the SET of `key` whose value_len-byte value (then CRLF) follows
  // in the stream. On return `c` is in kValue/kValueCrlf (entry reserved),
  // kDiscard (refused, error queued) or marked to close (value over limit).
  // In kValue the entry may not be reserved yet (see Reserved()). `key` may
  // point into c->in: it is used before anything moves the input, and copied
  // (c->pending_key) when the reservation has to wait for later reads.
  // `key_hash`: null, or KvIndex::Hash(key), which the commit then uses.
  void Begin(Connection* c, absl::string_view key, uint64_t value_len,
             const layout::KeyHash* key_hash = nullptr);

  enum class Progress {
    kNeedMore,       // all buffered input used; the SET continues
    kDone,           // back in kCommands (SET committed and answered, or skipped)
    kBadTerminator,  // value not followed by CRLF; entry given up
    kHeldBack,       // no room yet, but some is due soon: try again later
  };
  // Feeds buffered input c->in[c->start..] to the SET in progress.
  // Precondition: c->state != kCommands.
  Progress ConsumeBuffered(Connection* c);

  // Whether the last SET this loop finished was parked for its
  // replication round. Then the loop does not prefetch the index places of
  // the SETs behind it: a parked SET touches the index only when its reply
  // comes back, long after a prefetch made now would have been evicted, and
  // the reply's own hint (ReplicationStream::SendWrite's hash_hint) loads
  // the place just before the publish.
  bool last_parked() const { return last_parked_; }

  // Whether c's SET has its entry (the zero-copy receive needs one).
  static bool Reserved(const Connection& c) { return c.reservation.ptr != nullptr; }

  // The zero-copy receive: recv() straight into the entry, at most the rest
  // of the value. Precondition: c->state == kValue, Reserved(*c) and nothing
  // buffered.
  // Returns recv()'s result (errno intact for the caller when <= 0).
  ssize_t ReceiveDirect(Connection* c);

  // Releases the entry of an unfinished SET (the connection is going away);
  // the space stays dead until its segment is reclaimed. No-op without one.
  void Abandon(Connection* c);

  // A parked SET's commit came back (commit_pool.h): gives its entry and
  // budget back and, when its connection `c` is still open (null: closed
  // meanwhile), answers the SET and unparks it.
  void Unpark(Connection* c, CommitPool::Done& done);

 private:
  // Where the next value byte goes inside the reserved entry.
  static char* ValueCursor(const Connection& c);
  // Seals and commits the complete entry and answers the SET; with
  // parking, when the write would wait for other nodes, hands the commit
  // to the pool and parks the connection.
  void Finish(Connection* c);
  // The write hook's WaitsForPeers() for the key of c's sealed entry.
  bool WaitsForPeers(const Connection& c) const;
  // The key in c's reserved entry (its header is written).
  static absl::string_view KeyOf(const Connection& c);
  enum class ReserveResult { kYes, kRefused, kHeldBack };
  // Reserves the entry of c's SET (budget, then pool) and writes its header
  // and `key` (a view into c->in, or c->pending_key). A refusal queues the error and switches to
  // kDiscard. With `may_wait`, a pool full only of segments whose grace period ends within a grace
  // period (and 100 ms) from the first attempt holds the SET back instead (c->space_wait_until), to
  // be tried again by the loop.
  ReserveResult Reserve(Connection* c, absl::string_view key, bool may_wait);
  // Whether a SET refused with `refusal` should wait (see Reserve()).
  bool HoldBack(Connection* c, const absl::Status& refusal);
  // Gives up c's entry (uncommitted or committed) and its budget share.
  void Release(Connection* c);

  KvStore* const store_;
  KvStore::Writer* const writer_;
  bool last_parked_ = false;
  Counters* const counters_;
  Budget* const budget_;
  const ClusterState* const cluster_;
  CommitPool* const parking_;
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_STREAMED_SET_H_
