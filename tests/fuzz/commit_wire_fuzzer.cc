// Copyright 2026 The kvstore Authors.
//
// Fuzzes the RDMA commit protocol (common/protocol/commit_wire.h): the
// server's ParseCommit of a client's SEND and the client's ParseAck of the
// server's reply, both untrusted, and the encoders they invert.
//
// Checks, besides "no crash, no sanitizer report":
//   * ParseCommit accepts only the right magic and a known op; a delete's
//     key is non-empty, key_len long, and lies inside the message;
//   * an accepted commit re-encodes (EncodePutCommit/EncodeDeleteCommit) to
//     a message that parses to the same fields;
//   * ParseAck gives a canonical code and a message inside the ack;
//   * EncodeAck -> ParseAck keeps the id, the code and the message (cut to
//     what fits kAckBytes).
// Input: the whole input is parsed as a commit and as an ack; then a
// request id, a code byte, a key and a message are taken from it for the
// encode/decode round trips.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/protocol/commit_wire.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

using wire::CommitOp;

// A replica commit that parsed: its node id (and a delete's key) lie inside
// `bytes` within their limits, and encoding it again parses to the same.
void CheckParsedReplicaCommit(absl::string_view bytes, const wire::ParsedCommit& c) {
  auto inside = [&](absl::string_view v) {
    return v.data() >= bytes.data() && v.data() + v.size() <= bytes.data() + bytes.size();
  };
  KV_FUZZ_CHECK(!c.primary_node_id.empty() &&
                c.primary_node_id.size() <= wire::kMaxReplicaNodeIdBytes &&
                c.primary_node_id.size() == c.tag.node_len && inside(c.primary_node_id));
  wire::ReplicaCommit tag;
  tag.shard_id = c.tag.shard_id;
  tag.shard_epoch = c.tag.shard_epoch;
  tag.seq = c.tag.seq;
  tag.primary_node_id = c.primary_node_id;
  tag.primary_incarnation = c.tag.primary_incarnation;
  std::vector<char> out(wire::CommitBytes(65535));
  size_t n;
  if (c.header.op == static_cast<uint8_t>(CommitOp::kReplicaDelete)) {
    KV_FUZZ_CHECK(!c.key.empty() && c.key.size() == c.header.key_len && inside(c.key));
    n = wire::EncodeReplicaDeleteCommit(c.header.request_id, c.key, tag, out.data());
  } else {
    KV_FUZZ_CHECK(c.key.empty());
    wire::PutCommit put;
    put.request_id = c.header.request_id;
    put.key_len = c.header.key_len;
    put.lease_id = c.header.lease_id;
    put.offset = c.header.offset;
    put.size = c.header.size;
    n = wire::EncodeReplicaPutCommit(put, tag, out.data());
  }
  auto again = wire::ParseCommit(absl::string_view(out.data(), n));
  KV_FUZZ_CHECK(again.ok() && again->header.op == c.header.op && again->key == c.key);
  KV_FUZZ_CHECK(again->primary_node_id == c.primary_node_id && again->tag.seq == c.tag.seq &&
                again->tag.shard_id == c.tag.shard_id &&
                again->tag.shard_epoch == c.tag.shard_epoch &&
                again->tag.primary_incarnation == c.tag.primary_incarnation &&
                again->header.request_id == c.header.request_id);
}

// A parsed kReplicaPutBatch: its records lie inside the message, and it
// re-encodes to the same writes.
void CheckParsedReplicaBatch(absl::string_view bytes, const wire::ParsedCommit& c) {
  KV_FUZZ_CHECK(c.batch_count >= 1 && c.batch_count <= wire::kMaxReplicaBatch);
  KV_FUZZ_CHECK(c.batch_writes.size() == c.batch_count * sizeof(wire::ReplicaBatchWrite));
  KV_FUZZ_CHECK(c.batch_writes.data() >= bytes.data() &&
                c.batch_writes.data() + c.batch_writes.size() <= bytes.data() + bytes.size());
  KV_FUZZ_CHECK(!c.primary_node_id.empty() &&
                c.primary_node_id.size() <= wire::kMaxReplicaNodeIdBytes);
  std::vector<wire::ReplicaBatchWrite> writes;
  for (size_t i = 0; i < c.batch_count; ++i) writes.push_back(wire::BatchWrite(c, i));
  std::vector<char> out(wire::ReplicaBatchBytes(writes.size(), c.primary_node_id.size()));
  const size_t n = wire::EncodeReplicaPutBatch(c.header.request_id, writes, c.primary_node_id,
                                               c.tag.primary_incarnation, out.data());
  auto again = wire::ParseCommit(absl::string_view(out.data(), n));
  KV_FUZZ_CHECK(again.ok() && again->batch_count == c.batch_count &&
                again->primary_node_id == c.primary_node_id &&
                again->tag.primary_incarnation == c.tag.primary_incarnation);
  for (size_t i = 0; i < c.batch_count; ++i) {
    const wire::ReplicaBatchWrite a = wire::BatchWrite(*again, i);
    KV_FUZZ_CHECK(a.lease_id == writes[i].lease_id && a.offset == writes[i].offset &&
                  a.size == writes[i].size && a.seq == writes[i].seq &&
                  a.shard_epoch == writes[i].shard_epoch && a.shard_id == writes[i].shard_id);
  }
}

void CheckParsedCommit(absl::string_view bytes) {
  auto c = wire::ParseCommit(bytes);
  if (!c.ok()) {
    KV_FUZZ_CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  KV_FUZZ_CHECK(c->header.magic == wire::kCommitMagic);
  std::vector<char> out(wire::CommitBytes(65535));
  if (c->header.op == static_cast<uint8_t>(CommitOp::kDelete)) {
    KV_FUZZ_CHECK(!c->key.empty() && c->key.size() == c->header.key_len);
    KV_FUZZ_CHECK(c->key.data() >= bytes.data() &&
                  c->key.data() + c->key.size() <= bytes.data() + bytes.size());
    const size_t n = wire::EncodeDeleteCommit(c->header.request_id, c->key, out.data());
    auto again = wire::ParseCommit(absl::string_view(out.data(), n));
    KV_FUZZ_CHECK(again.ok() && again->key == c->key);
    KV_FUZZ_CHECK(again->header.request_id == c->header.request_id);
    return;
  }
  if (c->header.op == static_cast<uint8_t>(CommitOp::kReplicaPut) ||
      c->header.op == static_cast<uint8_t>(CommitOp::kReplicaDelete)) {
    CheckParsedReplicaCommit(bytes, *c);
    return;
  }
  if (c->header.op == static_cast<uint8_t>(CommitOp::kReplicaPutBatch)) {
    CheckParsedReplicaBatch(bytes, *c);
    return;
  }
  KV_FUZZ_CHECK(c->header.op == static_cast<uint8_t>(CommitOp::kPut));
  wire::PutCommit put;
  put.request_id = c->header.request_id;
  put.key_len = c->header.key_len;
  put.lease_id = c->header.lease_id;
  put.offset = c->header.offset;
  put.size = c->header.size;
  const size_t n = wire::EncodePutCommit(put, out.data());
  auto again = wire::ParseCommit(absl::string_view(out.data(), n));
  KV_FUZZ_CHECK(again.ok() && again->key.empty());
  KV_FUZZ_CHECK(again->header.request_id == put.request_id &&
                again->header.lease_id == put.lease_id && again->header.offset == put.offset &&
                again->header.size == put.size && again->header.key_len == put.key_len);
}

void CheckParsedAck(absl::string_view bytes) {
  auto a = wire::ParseAck(bytes);
  if (!a.ok()) {
    KV_FUZZ_CHECK(a.status().code() == absl::StatusCode::kDataLoss);
    return;
  }
  const int code = static_cast<int>(a->status.code());
  KV_FUZZ_CHECK(code >= 0 && code <= 16);
  KV_FUZZ_CHECK(a->status.message().size() <= bytes.size() - sizeof(wire::CommitAck));
}

void CheckRoundTrips(fuzz::FuzzInput& in) {
  const uint64_t request_id = in.Int<uint64_t>();
  const auto code = static_cast<absl::StatusCode>(in.Int<uint8_t>() % 17);
  // Longer than an ack holds, sometimes: EncodeAck must cut, not overflow.
  const absl::string_view message = in.Take(in.Int<uint16_t>() % 400);
  const absl::Status status(code, message);
  std::vector<char> ack(wire::kAckBytes);
  const size_t n = wire::EncodeAck(request_id, status, ack.data());
  KV_FUZZ_CHECK(n <= wire::kAckBytes);
  auto parsed = wire::ParseAck(absl::string_view(ack.data(), n));
  KV_FUZZ_CHECK(parsed.ok() && parsed->request_id == request_id);
  KV_FUZZ_CHECK(parsed->status.code() == code);
  // absl drops the message of an OK status; otherwise it is the prefix
  // that fitted.
  if (code != absl::StatusCode::kOk) {
    const size_t room = wire::kAckBytes - sizeof(wire::CommitAck);
    KV_FUZZ_CHECK(parsed->status.message() == message.substr(0, room));
  }

  const absl::string_view key = in.Rest();
  if (key.empty()) return;
  std::vector<char> del(wire::CommitBytes(key.size()));
  const size_t m = wire::EncodeDeleteCommit(request_id, key.substr(0, 65535), del.data());
  auto c = wire::ParseCommit(absl::string_view(del.data(), m));
  KV_FUZZ_CHECK(c.ok() && c->key == key.substr(0, 65535) && c->header.request_id == request_id);
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  kvstore::CheckParsedCommit(bytes);
  kvstore::CheckParsedAck(bytes);
  kvstore::fuzz::FuzzInput in(data, size);
  kvstore::CheckRoundTrips(in);
  return 0;
}
