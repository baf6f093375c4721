// Copyright 2026 The kvstore Authors.

#include "common/protocol/commit_wire.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"

namespace kvstore {
namespace wire {

absl::StatusOr<ParsedCommit> ParseCommit(absl::string_view bytes) {
  ParsedCommit out;
  if (bytes.size() < sizeof(CommitRequest)) {
    return absl::InvalidArgumentError(absl::StrCat("commit message of ", bytes.size(), " bytes"));
  }
  // Copied out rather than cast: the receive buffer need not be aligned for
  // CommitRequest's 64-bit fields.
  std::memcpy(&out.header, bytes.data(), sizeof(CommitRequest));
  if (out.header.magic != kCommitMagic) return absl::InvalidArgumentError("bad commit magic");
  const auto op = static_cast<CommitOp>(out.header.op);
  if (op != CommitOp::kPut && op != CommitOp::kDelete && op != CommitOp::kReplicaPut &&
      op != CommitOp::kReplicaDelete && op != CommitOp::kReplicaPutBatch) {
    return absl::InvalidArgumentError(absl::StrCat("unknown commit op ", out.header.op));
  }
  // `bytes` is what the SEND delivered (wc.byte_len), so a sender cannot make
  // the server read past its own message. Every length below is 16 bits and
  // `pos` stays within `bytes`, so no sum can overflow.
  size_t pos = sizeof(CommitRequest);
  if (op == CommitOp::kReplicaPutBatch) {
    ReplicaBatchHeader batch;
    if (bytes.size() - pos < sizeof(batch)) {
      return absl::InvalidArgumentError("replica batch shorter than its header");
    }
    std::memcpy(&batch, bytes.data() + pos, sizeof(batch));
    pos += sizeof(batch);
    if (batch.node_len == 0 || batch.node_len > kMaxReplicaNodeIdBytes ||
        batch.node_len > bytes.size() - pos) {
      return absl::InvalidArgumentError("replica batch node id length out of bounds");
    }
    out.primary_node_id = bytes.substr(pos, batch.node_len);
    pos += batch.node_len;
    // count <= 256 records of 48 bytes: no overflow.
    if (batch.count == 0 || batch.count > kMaxReplicaBatch ||
        size_t{batch.count} * sizeof(ReplicaBatchWrite) > bytes.size() - pos) {
      return absl::InvalidArgumentError("replica batch write count out of bounds");
    }
    out.tag.primary_incarnation = batch.primary_incarnation;
    out.tag.node_len = batch.node_len;
    out.batch_count = batch.count;
    out.batch_writes = bytes.substr(pos, size_t{batch.count} * sizeof(ReplicaBatchWrite));
    return out;
  }
  if (op == CommitOp::kReplicaPut || op == CommitOp::kReplicaDelete) {
    if (bytes.size() - pos < sizeof(ReplicaTag)) {
      return absl::InvalidArgumentError("replica commit shorter than its tag");
    }
    std::memcpy(&out.tag, bytes.data() + pos, sizeof(ReplicaTag));
    pos += sizeof(ReplicaTag);
    if (out.tag.node_len == 0 || out.tag.node_len > kMaxReplicaNodeIdBytes ||
        out.tag.node_len > bytes.size() - pos) {
      return absl::InvalidArgumentError("replica commit node id length out of bounds");
    }
    out.primary_node_id = bytes.substr(pos, out.tag.node_len);
    pos += out.tag.node_len;
  }
  if (op == CommitOp::kDelete || op == CommitOp::kReplicaDelete) {
    if (out.header.key_len == 0 || out.header.key_len > bytes.size() - pos) {
      return absl::InvalidArgumentError("delete commit key length out of bounds");
    }
    out.key = bytes.substr(pos, out.header.key_len);
  }
  // A put's fields (lease, offset, size) are checked by the server against
  // its lease table and pool; the wire layer only checks the framing.
  return out;
}

ReplicaBatchWrite BatchWrite(const ParsedCommit& parsed, size_t i) {
  ReplicaBatchWrite w;
  std::memcpy(&w, parsed.batch_writes.data() + i * sizeof(w), sizeof(w));
  return w;
}

size_t EncodePutCommit(const PutCommit& commit, char* out) {
  // Value-initialised so the reserved byte and any padding go out as zero.
  CommitRequest req{};
  req.magic = kCommitMagic;
  req.op = static_cast<uint8_t>(CommitOp::kPut);
  req.key_len = commit.key_len;
  req.request_id = commit.request_id;
  req.lease_id = commit.lease_id;
  req.offset = commit.offset;
  req.size = commit.size;
  std::memcpy(out, &req, sizeof(req));
  return sizeof(req);
}

size_t EncodeDeleteCommit(uint64_t request_id, absl::string_view key, char* out) {
  CommitRequest req{};
  req.magic = kCommitMagic;
  req.op = static_cast<uint8_t>(CommitOp::kDelete);
  // REQUIRES (see header): key.size() <= 65535, or key_len wraps and the
  // server reads a shorter key.
  req.key_len = static_cast<uint16_t>(key.size());
  req.request_id = request_id;
  std::memcpy(out, &req, sizeof(req));
  // The key travels right behind the fixed header (see ParseCommit).
  std::memcpy(out + sizeof(req), key.data(), key.size());
  return sizeof(req) + key.size();
}

namespace {

// The tag and node id behind a replica commit's header, at `out`.
size_t EncodeReplicaTag(const ReplicaCommit& replica, char* out) {
  ReplicaTag tag{};
  tag.shard_id = replica.shard_id;
  tag.node_len = static_cast<uint16_t>(replica.primary_node_id.size());
  tag.shard_epoch = replica.shard_epoch;
  tag.seq = replica.seq;
  tag.primary_incarnation = replica.primary_incarnation;
  std::memcpy(out, &tag, sizeof(tag));
  std::memcpy(out + sizeof(tag), replica.primary_node_id.data(), replica.primary_node_id.size());
  return sizeof(tag) + replica.primary_node_id.size();
}

}  // namespace

size_t EncodeReplicaPutCommit(const PutCommit& put, const ReplicaCommit& replica, char* out) {
  size_t n = EncodePutCommit(put, out);
  out[offsetof(CommitRequest, op)] = static_cast<char>(CommitOp::kReplicaPut);
  return n + EncodeReplicaTag(replica, out + n);
}

size_t EncodeReplicaDeleteCommit(uint64_t request_id, absl::string_view key,
                                 const ReplicaCommit& replica, char* out) {
  CommitRequest req{};
  req.magic = kCommitMagic;
  req.op = static_cast<uint8_t>(CommitOp::kReplicaDelete);
  req.key_len = static_cast<uint16_t>(key.size());
  req.request_id = request_id;
  std::memcpy(out, &req, sizeof(req));
  size_t n = sizeof(req) + EncodeReplicaTag(replica, out + sizeof(req));
  std::memcpy(out + n, key.data(), key.size());
  return n + key.size();
}

size_t EncodeReplicaPutBatch(uint64_t request_id, absl::Span<const ReplicaBatchWrite> writes,
                             absl::string_view primary_node_id, uint64_t primary_incarnation,
                             char* out) {
  CommitRequest req{};
  req.magic = kCommitMagic;
  req.op = static_cast<uint8_t>(CommitOp::kReplicaPutBatch);
  req.request_id = request_id;
  std::memcpy(out, &req, sizeof(req));
  size_t n = sizeof(req);
  ReplicaBatchHeader batch{};
  batch.count = static_cast<uint16_t>(writes.size());
  batch.node_len = static_cast<uint16_t>(primary_node_id.size());
  batch.primary_incarnation = primary_incarnation;
  std::memcpy(out + n, &batch, sizeof(batch));
  n += sizeof(batch);
  std::memcpy(out + n, primary_node_id.data(), primary_node_id.size());
  n += primary_node_id.size();
  for (const ReplicaBatchWrite& w : writes) {
    ReplicaBatchWrite record = w;
    record.reserved = 0;
    std::memcpy(out + n, &record, sizeof(record));
    n += sizeof(record);
  }
  return n;
}

size_t EncodeAck(uint64_t request_id, const absl::Status& status, char* out,
                 uint16_t batch_applied) {
  CommitAck ack{};
  ack.magic = kAckMagic;
  ack.batch_applied = batch_applied;
  ack.code = static_cast<int32_t>(status.code());
  ack.request_id = request_id;
  const size_t room = kAckBytes - sizeof(CommitAck);
  // The refusal first: the client classifies by it. Its detail is only for
  // people (the message has it too), so it goes when space is short.
  std::string refusal;
  if (std::optional<cluster::Refusal> r = cluster::FromStatus(status)) {
    refusal = cluster::EncodePayload(*r);
    if (refusal.size() > room) {
      r->detail.clear();
      refusal = cluster::EncodePayload(*r);
    }
    if (refusal.size() > room) refusal.clear();  // node ids are far shorter
  }
  ack.refusal_len = static_cast<uint16_t>(refusal.size());
  // Truncate the message rather than fail: the ack must fit the client's
  // fixed-size receive buffer, and the code matters more than the text.
  ack.message_len = static_cast<uint16_t>(std::min(room - refusal.size(), status.message().size()));
  std::memcpy(out, &ack, sizeof(ack));
  // An OK status's message is a null view: memcpy from null is undefined
  // even for 0 bytes.
  if (ack.message_len > 0) std::memcpy(out + sizeof(ack), status.message().data(), ack.message_len);
  if (!refusal.empty()) {
    std::memcpy(out + sizeof(ack) + ack.message_len, refusal.data(), refusal.size());
  }
  return sizeof(ack) + ack.message_len + ack.refusal_len;
}

absl::StatusOr<ParsedAck> ParseAck(absl::string_view bytes) {
  CommitAck ack;
  if (bytes.size() < sizeof(ack)) return absl::DataLossError("short commit ack");
  std::memcpy(&ack, bytes.data(), sizeof(ack));
  if (ack.magic != kAckMagic) return absl::DataLossError("bad commit ack magic");
  // 0..16 are absl's canonical codes (kOk .. kUnauthenticated). An ack
  // carrying kOk with a message still yields an OK status.
  if (ack.code < 0 || ack.code > 16) return absl::DataLossError("bad status code in commit ack");
  if (sizeof(ack) + ack.message_len + ack.refusal_len > bytes.size()) {
    return absl::DataLossError("ack message out of bounds");
  }
  ParsedAck out;
  out.request_id = ack.request_id;
  out.batch_applied = ack.batch_applied;
  out.status = absl::Status(static_cast<absl::StatusCode>(ack.code),
                            absl::string_view(bytes.data() + sizeof(ack), ack.message_len));
  const absl::string_view refusal = bytes.substr(sizeof(ack) + ack.message_len, ack.refusal_len);
  // Attached only when it decodes: a refusal this build does not know is
  // just an error with its code.
  if (!out.status.ok() && !refusal.empty() && cluster::DecodePayload(refusal).has_value()) {
    out.status.SetPayload(cluster::kRefusalPayload, absl::Cord(refusal));
  }
  return out;
}

}  // namespace wire
}  // namespace kvstore
