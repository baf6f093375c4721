// Copyright 2026 The kvstore Authors.
//
// The messages of the RDMA commit protocol, carried by SENDs on the RC queue
// pair a client connected with ConnectQp:
//
//   client -> server  CommitRequest [+ key bytes for kDelete]
//   primary -> backup CommitRequest + ReplicaTag + node id [+ key bytes for
//                     kReplicaDelete]
//   primary -> backup CommitRequest + ReplicaBatchHeader + node id +
//                     count x ReplicaBatchWrite (kReplicaPutBatch)
//   server -> client  CommitAck [+ message bytes] [+ refusal payload]
//
// A PUT is an RDMA WRITE of a complete entry (common/protocol/layout.h) into the
// client's write lease followed, on the same queue pair, by a kPut commit
// naming the lease and the entry's range; RC ordering guarantees the WRITE's
// data is in place when the SEND arrives. The server validates (lease owner
// and expiry, bounds, entry checksum, key and limits), publishes the slot and
// acks. Everything received is untrusted: Parse* check every length.
//
// kReplicaPut / kReplicaDelete are server-to-server replication (cluster
// mode, architecture §19.3): a shard's primary, connected to a backup as an
// RDMA client, WRITEs the entry it committed (byte for byte, version and
// checksum included) into a lease on the backup and commits it with the
// write's shard, shard epoch, seq and its own identity, which the backup
// checks exactly as it checks a Replicate RPC.
// kReplicaPutBatch commits several such WRITEs with one SEND: the backup
// installs them in order and answers once (architecture §19.3.1). Only sent
// to a backup whose ConnectQp answer says it takes them
// (ConnectQpResponse.replica_batch_commits).
// Little-endian, fixed layout; kWireVersion changes with any edit here.
//
// Thread-safety: stateless functions over caller-owned buffers;
// thread-safe.

#ifndef KVSTORE_COMMON_PROTOCOL_COMMIT_WIRE_H_
#define KVSTORE_COMMON_PROTOCOL_COMMIT_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvstore {
namespace wire {

inline constexpr uint32_t kWireVersion = 3;
inline constexpr uint32_t kCommitMagic = 0x4D43564B;  // "KVCM"
inline constexpr uint32_t kAckMagic = 0x4B41564B;     // "KVAK"

enum class CommitOp : uint8_t {
  kPut = 1,
  kDelete = 2,
  kReplicaPut = 3,
  kReplicaDelete = 4,
  kReplicaPutBatch = 5,  // since kWireVersion 3
};

struct CommitRequest {
  uint32_t magic;
  uint8_t op;  // CommitOp
  uint8_t reserved;
  uint16_t key_len;  // kDelete: key bytes follow the struct
  uint64_t request_id;
  uint64_t lease_id;  // kPut
  uint64_t offset;    // kPut: entry offset in the data arena
  uint64_t size;      // kPut: EntryBytes(key_len, value_len)
};
static_assert(sizeof(CommitRequest) == 40);

struct CommitAck {
  uint32_t magic;
  int32_t code;  // absl::StatusCode
  uint64_t request_id;
  uint16_t message_len;  // bytes of message following the struct
  // Bytes of a refusal's payload (common/cluster/refusal.h) following the
  // message; 0: none. Was reserved (always 0) in kWireVersion 1.
  uint16_t refusal_len;
  // kReplicaPutBatch: how many of the batch's writes, from its first, were
  // installed; the status is the next one's refusal (OK: all were). 0 for
  // every other op. Was reserved (always 0) before kWireVersion 3.
  uint16_t batch_applied;
  uint16_t reserved;
};
static_assert(sizeof(CommitAck) == 24);

// Follows the CommitRequest of a kReplicaPut / kReplicaDelete; node_len
// bytes of the primary's node id follow it, then (kReplicaDelete) the key.
// kReplicaPut uses CommitRequest's lease_id, offset and size as kPut does.
struct ReplicaTag {
  uint32_t shard_id;
  uint16_t node_len;
  uint16_t reserved;
  uint64_t shard_epoch;
  uint64_t seq;                  // the write's place in its shard's order
  uint64_t primary_incarnation;  // the sender's, as the map names it
};
static_assert(sizeof(ReplicaTag) == 32);

// Follows the CommitRequest of a kReplicaPutBatch (whose lease_id, offset,
// size and key_len are 0); node_len bytes of the primary's node id follow
// it, then `count` ReplicaBatchWrite records.
struct ReplicaBatchHeader {
  uint16_t count;  // 1..kMaxReplicaBatch
  uint16_t node_len;
  uint32_t reserved;
  uint64_t primary_incarnation;
};
static_assert(sizeof(ReplicaBatchHeader) == 16);

// One write of a kReplicaPutBatch: the entry's lease range, as a
// kReplicaPut's CommitRequest names it, and its tag.
struct ReplicaBatchWrite {
  uint64_t lease_id;
  uint64_t offset;  // entry offset in the data arena
  uint64_t size;    // EntryBytes(key_len, value_len)
  uint32_t shard_id;
  uint32_t reserved;
  uint64_t shard_epoch;
  uint64_t seq;
};
static_assert(sizeof(ReplicaBatchWrite) == 48);

// Most writes one kReplicaPutBatch may carry (batch_applied is 16 bits; a
// receive buffer bounds it far lower: ReplicaBatchCapacity).
inline constexpr size_t kMaxReplicaBatch = 256;

// Bytes of a kReplicaPutBatch of `count` writes from a node id of
// `node_len` bytes.
constexpr size_t ReplicaBatchBytes(size_t count, size_t node_len) {
  return sizeof(CommitRequest) + sizeof(ReplicaBatchHeader) + node_len +
         count * sizeof(ReplicaBatchWrite);
}

// Most writes of one kReplicaPutBatch that fit a receive buffer of
// `commit_bytes` (ConnectQpResponse.max_commit_bytes), at most
// kMaxReplicaBatch; 0 when not even one does.
constexpr size_t ReplicaBatchCapacity(size_t commit_bytes, size_t node_len) {
  const size_t fixed = ReplicaBatchBytes(0, node_len);
  if (commit_bytes <= fixed) return 0;
  const size_t n = (commit_bytes - fixed) / sizeof(ReplicaBatchWrite);
  return n < kMaxReplicaBatch ? n : kMaxReplicaBatch;
}

// Longest primary node id a replica commit carries (node ids are short
// names; the cluster options refuse longer ones).
inline constexpr size_t kMaxReplicaNodeIdBytes = 128;

// Fixed size of every ack buffer; longer messages are truncated.
inline constexpr size_t kAckBytes = 256;

// Size of a receive buffer that holds any commit for keys up to max_key,
// replica commits included.
constexpr size_t CommitBytes(uint64_t max_key_bytes) {
  return sizeof(CommitRequest) + sizeof(ReplicaTag) + kMaxReplicaNodeIdBytes +
         static_cast<size_t>(max_key_bytes);
}

struct ParsedCommit {
  CommitRequest header;
  // kDelete and kReplicaDelete; a view into the received buffer.
  absl::string_view key;
  // kReplicaPut and kReplicaDelete only.
  // kReplicaPut and kReplicaDelete; a kReplicaPutBatch's
  // primary_incarnation too (its other fields are each write's).
  ReplicaTag tag{};
  absl::string_view primary_node_id;  // a view into the received buffer
  // kReplicaPutBatch: batch_count records (ReplicaBatchWrite) in the
  // received buffer; read them with BatchWrite().
  uint16_t batch_count = 0;
  absl::string_view batch_writes;
};

// Write `i` (< parsed.batch_count) of a parsed kReplicaPutBatch.
ReplicaBatchWrite BatchWrite(const ParsedCommit& parsed, size_t i);

// Validates a received commit of `bytes` (magic, op, key length in bounds).
// The inverse of the Encode* functions below. kInvalidArgument for a short
// message, a bad magic, an unknown op, a delete key that is empty or runs
// past `bytes`, or a replica tag whose node id is empty, over
// kMaxReplicaNodeIdBytes or runs past `bytes`. Views borrow `bytes`. Does
// not check the key against Limits, nor a put's lease or range, nor the
// tag's shard and sender: the server does. A kReplicaPutBatch whose count
// is 0 or over kMaxReplicaBatch, or whose records run past `bytes`, is
// kInvalidArgument too.
absl::StatusOr<ParsedCommit> ParseCommit(absl::string_view bytes);

// The fields a kPut commit carries (see CommitRequest).
struct PutCommit {
  uint64_t request_id = 0;
  // Informational only: the server reads the key from the entry itself.
  uint16_t key_len = 0;
  uint64_t lease_id = 0;
  uint64_t offset = 0;  // entry offset in the data arena
  uint64_t size = 0;    // EntryBytes(key_len, value_len)
};

// Encodes a kPut commit into `out`, which must hold sizeof(CommitRequest)
// bytes; returns the bytes written (always sizeof(CommitRequest)). The
// sender's side of ParseCommit: every client builds its commits here.
size_t EncodePutCommit(const PutCommit& commit, char* out);

// Encodes a kDelete commit naming `key` into `out`, which must hold
// CommitBytes(key.size()) bytes; returns the bytes written. REQUIRES:
// key.size() fits the 16-bit key_len field (the key limit guarantees it).
size_t EncodeDeleteCommit(uint64_t request_id, absl::string_view key, char* out);

// What a replica commit says about the write besides its entry or key.
struct ReplicaCommit {
  uint32_t shard_id = 0;
  uint64_t shard_epoch = 0;
  uint64_t seq = 0;
  absl::string_view primary_node_id;  // 1..kMaxReplicaNodeIdBytes bytes
  uint64_t primary_incarnation = 0;
};

// Encodes a kReplicaPut commit (`put` as for kPut, `replica` its tag) into
// `out`, which must hold CommitBytes(0) bytes; returns the bytes written.
// REQUIRES: replica.primary_node_id within kMaxReplicaNodeIdBytes.
size_t EncodeReplicaPutCommit(const PutCommit& put, const ReplicaCommit& replica, char* out);

// Encodes a kReplicaDelete commit naming `key` into `out`, which must hold
// CommitBytes(key.size()) bytes; returns the bytes written.
size_t EncodeReplicaDeleteCommit(uint64_t request_id, absl::string_view key,
                                 const ReplicaCommit& replica, char* out);

// Encodes a kReplicaPutBatch of `writes` (1..kMaxReplicaBatch of them)
// from the node `primary_node_id` (1..kMaxReplicaNodeIdBytes bytes) into
// `out`, which must hold ReplicaBatchBytes(writes.size(), node id size);
// returns the bytes written.
size_t EncodeReplicaPutBatch(uint64_t request_id, absl::Span<const ReplicaBatchWrite> writes,
                             absl::string_view primary_node_id, uint64_t primary_incarnation,
                             char* out);

// Encodes an ack for `status` into `out` (kAckBytes); returns bytes used.
// A refusal `status` carries goes after the message (its detail dropped if
// the whole would not fit), the message cut to the room left.
// `batch_applied`: CommitAck::batch_applied (a kReplicaPutBatch's ack).
size_t EncodeAck(uint64_t request_id, const absl::Status& status, char* out,
                 uint16_t batch_applied = 0);

struct ParsedAck {
  uint64_t request_id;
  absl::Status status;
  uint16_t batch_applied = 0;  // CommitAck::batch_applied
};
// The client's side of EncodeAck: the request id and the status the server
// sent (its message copied out of `bytes`, its refusal payload attached
// when one decodes). kDataLoss for a short ack, a bad magic, a code outside
// absl's canonical range, or a message or refusal length past `bytes`; the
// returned status is then not the server's.
absl::StatusOr<ParsedAck> ParseAck(absl::string_view bytes);

}  // namespace wire
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_COMMIT_WIRE_H_
