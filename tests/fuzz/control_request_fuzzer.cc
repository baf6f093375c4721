// Copyright 2026 The kvstore Authors.
//
// Fuzzes the pure parts of the control plane's input handling:
//   * the request messages a gRPC peer sends (ConnectQp, GrantLease,
//     RenewLease, ReleaseLease, DisconnectQp, Get, Put, Delete, Scan):
//     protobuf parsing, a serialize/parse round trip, and the limits checks
//     the service runs on keys and values (common/protocol/limits.h);
//   * the server's HandshakeResponse as a client reads it (untrusted too):
//     ServerLayout::FromHandshake and the invariants the RDMA reader relies
//     on (an index region covering every bucket, data ranges that Resolve()
//     keeps inside the arena);
//   * Limits::Validate and the Check* functions on fuzzed limits.
// The checks that control_service.cc runs inline (epoch, endpoint qpn/gid,
// Scan's count cap) are not reachable from here without a server; see
// tests/fuzz/README.md.
//
// Input: byte 0 picks the message type, bytes 1-3 the limits; the rest is
// the serialized message.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/protocol/layout.h"
#include "common/protocol/limits.h"
#include "common/rdma/initiator/server_layout.h"
#include "google/protobuf/message.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/kv_control.pb.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

namespace pb = ::kvstore::v1;

// The limits checks agree with the limits they check.
void CheckKeyAndValue(const Limits& limits, absl::string_view key, uint64_t value_len) {
  const bool key_ok = limits.CheckKey(key).ok();
  KV_FUZZ_CHECK(key_ok == (!key.empty() && key.size() <= limits.max_key_bytes));
  KV_FUZZ_CHECK(key_ok == limits.CheckKeyLength(key.size()).ok());
  KV_FUZZ_CHECK(limits.CheckValueLength(value_len).ok() == (value_len <= limits.max_value_bytes));
}

// Parses `bytes` as M; a parsed message must serialize and parse back to
// the same bytes (unknown fields included).
template <typename M>
bool Parse(absl::string_view bytes, M* m) {
  if (!m->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
  const std::string once = m->SerializeAsString();
  M again;
  KV_FUZZ_CHECK(again.ParseFromString(once));
  KV_FUZZ_CHECK(again.SerializeAsString() == once);
  return true;
}

// What a client may rely on once FromHandshake accepted a server's reply.
void CheckHandshake(absl::string_view bytes) {
  pb::HandshakeResponse hs;
  if (!Parse(bytes, &hs)) return;
  auto l = initiator::ServerLayout::FromHandshake(hs);
  if (!l.ok()) return;
  // The reader READs bucket i at index_addr + i * 64 for i < bucket_count
  // (HashKey treats 0 as 1): the last index region must cover them all.
  uint64_t index_len = 0;
  for (const auto& r : hs.regions()) {
    if (r.kind() == pb::REGION_KIND_INDEX) index_len = r.length();
  }
  const uint64_t buckets = l->geometry.bucket_count == 0 ? 1 : l->geometry.bucket_count;
  KV_FUZZ_CHECK(index_len / layout::kBucketBytes >= buckets);
  KV_FUZZ_CHECK(!l->data.empty());
  // Resolve() never hands out a range outside the region it names.
  for (const initiator::DataRegion& r : l->data) {
    const initiator::DataRegion* got = l->Resolve(r.arena_offset, layout::kEntryAlign);
    if (got == nullptr) continue;
    KV_FUZZ_CHECK(got->arena_offset <= r.arena_offset);
    KV_FUZZ_CHECK(r.arena_offset - got->arena_offset + layout::kEntryAlign <= got->length);
    KV_FUZZ_CHECK(r.arena_offset + layout::kEntryAlign <= l->data_arena_bytes);
  }
}

void CheckRequest(uint8_t type, absl::string_view bytes, const Limits& limits) {
  switch (type % 10) {
    case 0: {
      pb::PutRequest m;
      if (Parse(bytes, &m)) CheckKeyAndValue(limits, m.key(), m.value().size());
      return;
    }
    case 1: {
      pb::GetRequest m;
      if (Parse(bytes, &m)) CheckKeyAndValue(limits, m.key(), 0);
      return;
    }
    case 2: {
      pb::DeleteRequest m;
      if (Parse(bytes, &m)) CheckKeyAndValue(limits, m.key(), 0);
      return;
    }
    case 3: {
      pb::ScanRequest m;
      Parse(bytes, &m);
      return;
    }
    case 4: {
      pb::ConnectQpRequest m;
      if (Parse(bytes, &m)) KV_FUZZ_CHECK(m.client().gid().size() <= bytes.size());
      return;
    }
    case 5: {
      pb::GrantLeaseRequest m;
      Parse(bytes, &m);
      return;
    }
    case 6: {
      pb::RenewLeaseRequest m;
      Parse(bytes, &m);
      return;
    }
    case 7: {
      pb::ReleaseLeaseRequest m;
      Parse(bytes, &m);
      return;
    }
    case 8: {
      pb::DisconnectQpRequest m;
      Parse(bytes, &m);
      return;
    }
    default:
      CheckHandshake(bytes);
      return;
  }
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Proto3 strings with invalid UTF-8 make protobuf log an error per input.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  kvstore::fuzz::FuzzInput in(data, size);
  const uint8_t type = in.Int<uint8_t>();
  kvstore::Limits limits;
  limits.max_key_bytes = in.Int<uint8_t>();
  limits.max_value_bytes = uint64_t{in.Int<uint8_t>()} << in.Int<uint8_t>() % 40;
  const absl::Status valid = limits.Validate();
  KV_FUZZ_CHECK(valid.ok() == (limits.max_key_bytes >= 1 &&
                               limits.max_value_bytes <= kvstore::kCeilingValueBytes));
  kvstore::CheckRequest(type, in.Rest(), limits);
  return 0;
}
