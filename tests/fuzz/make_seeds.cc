// Copyright 2026 The kvstore Authors.
//
// Writes the binary seeds of tests/fuzz/corpus/ with the real encoders, so
// that the seeds are frames the code really produces (a fuzzer mutates from
// there). Text seeds (RESP) are plain files written by hand.
//
// Usage: make_seeds OUT_DIR   (OUT_DIR = tests/fuzz/corpus; files are
// overwritten). Exit status 0, or 1 when a file cannot be written.

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/protocol/commit_wire.h"
#include "common/protocol/layout.h"
#include "proto/kv_cluster.pb.h"
#include "proto/kv_control.pb.h"

namespace kvstore {
namespace {

bool ok = true;

void Write(const std::string& dir, const std::string& name, absl::string_view bytes) {
  std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "make_seeds: cannot write %s/%s\n", dir.c_str(), name.c_str());
    ok = false;
  }
}

void CommitSeeds(const std::string& dir) {
  std::vector<char> buf(wire::CommitBytes(1024));
  wire::PutCommit put{/*request_id=*/7, /*key_len=*/3, /*lease_id=*/9, /*offset=*/4096,
                      /*size=*/layout::EntryBytes(3, 5)};
  Write(dir, "put", absl::string_view(buf.data(), wire::EncodePutCommit(put, buf.data())));
  Write(dir, "delete",
        absl::string_view(buf.data(), wire::EncodeDeleteCommit(8, "key", buf.data())));
  // A delete whose key_len says more than was sent.
  size_t n = wire::EncodeDeleteCommit(8, "keykeykey", buf.data());
  Write(dir, "delete_short", absl::string_view(buf.data(), n - 4));
  std::vector<char> ack(wire::kAckBytes);
  Write(dir, "ack_ok",
        absl::string_view(ack.data(), wire::EncodeAck(7, absl::OkStatus(), ack.data())));
  Write(dir, "ack_error",
        absl::string_view(ack.data(),
                          wire::EncodeAck(7, absl::NotFoundError("lease 9 expired"), ack.data())));
}

// Input layout of entry_verify_fuzzer: key, 8 bucket words, split, value
// limit / 16, flip (2 bytes), arena.
std::string EntryInput(absl::string_view key, absl::string_view value, uint64_t arena_offset,
                       bool good_slot) {
  std::string in(1, static_cast<char>(key.size()));
  in.append(key.data(), key.size());
  const uint64_t size = layout::EntryBytes(key.size(), value.size());
  const layout::KeyHash h = layout::HashKey(key, 7, 1);
  uint64_t words[layout::kSlotsPerBucket] = {};
  words[3] = layout::EncodeSlot({h.fingerprint, arena_offset, size});
  if (!good_slot) words[5] = layout::EncodeSlot({h.fingerprint, arena_offset + 64, size * 2});
  in.append(reinterpret_cast<const char*>(words), sizeof(words));
  in.push_back(2);                       // regions split at 128
  in.push_back(static_cast<char>(100));  // max value 1600 bytes
  in.append("\x05\x00", 2);              // flip byte 5
  std::string arena(arena_offset, '\0');
  std::vector<char> entry(size);
  layout::EncodeEntry(entry.data(), key, value, 1);
  arena.append(entry.data(), entry.size());
  in += arena;
  return in;
}

void EntrySeeds(const std::string& dir) {
  Write(dir, "one_entry", EntryInput("key", "value", 0, true));
  Write(dir, "entry_at_64", EntryInput("user:1", std::string(40, 'v'), 64, true));
  Write(dir, "straddles_regions", EntryInput("k", std::string(100, 'x'), 64, true));
  Write(dir, "slot_past_arena", EntryInput("key", "value", 0, false));
  std::string torn = EntryInput("key", "value", 0, true);
  torn[torn.size() - 40] ^= 0x20;  // a byte of the value: checksum mismatch
  Write(dir, "torn_value", torn);
}

// Input layout of control_request_fuzzer: type, max key, value base, value
// shift, message.
void Control(const std::string& dir, const std::string& name, uint8_t type,
             const google::protobuf::Message& m) {
  std::string in = {static_cast<char>(type), 16, 1, 10};
  in += m.SerializeAsString();
  Write(dir, name, in);
}

void ControlSeeds(const std::string& dir) {
  v1::PutRequest put;
  put.set_key("key");
  put.set_value("value");
  Control(dir, "put", 0, put);
  put.set_key(std::string(17, 'k'));  // over the seed's 16-byte key limit
  Control(dir, "put_long_key", 0, put);
  v1::GetRequest get;
  get.set_key("key");
  Control(dir, "get", 1, get);
  v1::DeleteRequest del;
  Control(dir, "delete_empty_key", 2, del);
  v1::ScanRequest scan;
  scan.set_cursor(5);
  scan.set_count(100000);
  scan.set_prefix("user:");
  Control(dir, "scan", 3, scan);
  v1::ConnectQpRequest qp;
  qp.set_epoch(42);
  qp.set_session_id(99);
  qp.mutable_client()->set_qpn(17);
  qp.mutable_client()->set_gid(std::string(16, '\1'));
  qp.set_probe_addr(0x1000);
  qp.set_probe_rkey(5);
  Control(dir, "connect_qp", 4, qp);
  v1::GrantLeaseRequest grant;
  grant.set_epoch(42);
  grant.set_bytes(1 << 20);
  grant.set_connection_id(3);
  grant.set_session_id(99);
  Control(dir, "grant_lease", 5, grant);
  v1::HandshakeResponse hs;
  hs.set_epoch(42);
  hs.mutable_limits()->set_max_key_bytes(1024);
  hs.mutable_limits()->set_max_value_bytes(1 << 20);
  hs.mutable_index()->set_bucket_count(16);
  hs.mutable_index()->set_layout_version(layout::kLayoutVersion);
  hs.mutable_index()->set_bucket_bytes(layout::kBucketBytes);
  auto* index = hs.add_regions();
  index->set_kind(v1::REGION_KIND_INDEX);
  index->set_length(16 * layout::kBucketBytes);
  auto* data = hs.add_regions();
  data->set_kind(v1::REGION_KIND_DATA);
  data->set_length(1 << 20);
  hs.mutable_endpoints()->set_rdma_gid(std::string(16, '\2'));
  hs.set_data_arena_bytes(1 << 20);
  Control(dir, "handshake", 9, hs);
  // Indexes that do not cover the buckets the reader would READ: no
  // buckets at all (read as one) and a count whose byte size wraps to 64.
  hs.mutable_index()->set_bucket_count(0);
  index->set_length(0);
  Control(dir, "handshake_no_buckets", 9, hs);
  hs.mutable_index()->set_bucket_count((uint64_t{1} << 58) + 1);
  index->set_length(layout::kBucketBytes);
  Control(dir, "handshake_bucket_bytes_wrap", 9, hs);
}

// Replication batches as a primary sends them on a peer socket: one write,
// a put and a delete with their times left, and an empty batch.
void ReplicateSeeds(const std::string& dir) {
  v1::ReplicateBatch batch;
  v1::ReplicateRequest* put = batch.add_writes();
  put->set_shard_id(3);
  put->set_shard_epoch(12);
  put->set_seq(1001);
  put->set_op(v1::REPLICA_OP_PUT);
  put->set_key("user:1");
  std::string entry(layout::EntryBytes(6, 5), '\0');
  layout::EncodeEntry(entry.data(), "user:1", "hello", /*version=*/7, /*expires_at_ms=*/0);
  put->set_entry(entry);
  put->set_primary_node_id("n1");
  put->set_primary_incarnation(99);
  batch.add_timeout_micros(950000);
  Write(dir, "one_put", batch.SerializeAsString());
  v1::ReplicateRequest* del = batch.add_writes();
  del->set_shard_id(3);
  del->set_shard_epoch(12);
  del->set_seq(1002);
  del->set_op(v1::REPLICA_OP_DELETE);
  del->set_key("user:2");
  del->set_primary_node_id("n1");
  del->set_primary_incarnation(99);
  del->set_resent_after_rdma(true);
  batch.add_timeout_micros(-5);  // already late: a ten-byte varint
  Write(dir, "put_and_delete", batch.SerializeAsString());
  Write(dir, "empty", "");
}

}  // namespace
}  // namespace kvstore

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  kvstore::CommitSeeds(out + "/commit_wire");
  kvstore::EntrySeeds(out + "/entry_verify");
  kvstore::ControlSeeds(out + "/control_request");
  kvstore::ReplicateSeeds(out + "/replicate_batch");
  return kvstore::ok ? 0 : 1;
}
