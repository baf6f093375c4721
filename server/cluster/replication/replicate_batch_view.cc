// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replicate_batch_view.h"

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace server {
namespace {

// Protobuf's wire types (the low three bits of a tag).
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

// A cursor over wire bytes. Each reader returns false when the bytes end
// before the value does.
class WireCursor {
 public:
  explicit WireCursor(absl::string_view bytes) : p_(bytes.data()), end_(p_ + bytes.size()) {}
  bool done() const { return p_ == end_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t b = static_cast<uint8_t>(*p_++);
      result |= static_cast<uint64_t>(b & 0x7f) << (shift < 64 ? shift : 63);
      if ((b & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;  // more than ten bytes
  }
  bool Bytes(absl::string_view* v) {
    uint64_t len;
    if (!Varint(&len) || len > left()) return false;
    *v = absl::string_view(p_, static_cast<size_t>(len));
    p_ += len;
    return true;
  }
  // Skips a field of an unknown number.
  bool Skip(uint32_t wire_type) {
    uint64_t ignored;
    absl::string_view ignored_bytes;
    switch (wire_type) {
      case kVarint:
        return Varint(&ignored);
      case kFixed64:
        return Advance(8);
      case kLengthDelimited:
        return Bytes(&ignored_bytes);
      case kFixed32:
        return Advance(4);
      default:
        return false;  // groups (3, 4) are not in this message; 6 and 7 do not exist
    }
  }
  // A tag's field number and wire type; false at a malformed tag.
  bool Tag(uint32_t* field, uint32_t* wire_type) {
    uint64_t tag;
    if (!Varint(&tag) || tag > UINT32_MAX || (tag >> 3) == 0) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    return true;
  }

 private:
  bool Advance(size_t n) {
    if (n > left()) return false;
    p_ += n;
    return true;
  }
  const char* p_;
  const char* end_;
};

// A scalar field read as varint into `*v`; false when it does not parse.
template <typename T>
bool ReadVarintField(WireCursor& c, uint32_t wire_type, T* v) {
  uint64_t raw;
  if (wire_type != kVarint) return c.Skip(wire_type);  // protobuf keeps such a field unknown
  if (!c.Varint(&raw)) return false;
  *v = static_cast<T>(raw);
  return true;
}

bool ParseWrite(absl::string_view bytes, ReplicateWrite* w) {
  WireCursor c(bytes);
  ReplicaCommit& commit = w->commit;
  while (!c.done()) {
    uint32_t field, type;
    if (!c.Tag(&field, &type)) return false;
    bool ok;
    switch (field) {
      case 1:
        ok = ReadVarintField(c, type, &commit.shard_id);
        break;
      case 2:
        ok = ReadVarintField(c, type, &commit.shard_epoch);
        break;
      case 3:
        ok = ReadVarintField(c, type, &commit.seq);
        break;
      case 4:
        ok = ReadVarintField(c, type, &w->op);
        break;
      case 5:
        ok = type == kLengthDelimited ? c.Bytes(&commit.key) : c.Skip(type);
        break;
      case 6:
        ok = type == kLengthDelimited ? c.Bytes(&commit.entry) : c.Skip(type);
        break;
      case 7:
        ok = type == kLengthDelimited ? c.Bytes(&commit.primary_node_id) : c.Skip(type);
        break;
      case 8:
        ok = ReadVarintField(c, type, &commit.primary_incarnation);
        break;
      case 9: {
        uint64_t b = 0;
        ok = ReadVarintField(c, type, &b);
        if (ok && type == kVarint) w->resent_after_rdma = b != 0;
        break;
      }
      default:
        ok = c.Skip(type);
    }
    if (!ok) return false;
  }
  commit.is_delete = w->op == v1::REPLICA_OP_DELETE;
  return true;
}

absl::Status NotABatch(size_t at) {
  return absl::DataLossError(absl::StrCat("replication batch does not parse (at byte ", at, ")"));
}

}  // namespace

absl::Status ParseReplicateBatch(absl::string_view bytes, ReplicateBatchView* out) {
  out->Clear();
  WireCursor c(bytes);
  while (!c.done()) {
    const size_t at = bytes.size() - c.left();
    uint32_t field, type;
    if (!c.Tag(&field, &type)) return NotABatch(at);
    if (field == 1 && type == kLengthDelimited) {
      absl::string_view write;
      if (!c.Bytes(&write)) return NotABatch(at);
      out->writes.emplace_back();
      if (!ParseWrite(write, &out->writes.back())) return NotABatch(at);
    } else if (field == 2 && type == kLengthDelimited) {  // packed
      absl::string_view packed;
      if (!c.Bytes(&packed)) return NotABatch(at);
      WireCursor p(packed);
      while (!p.done()) {
        uint64_t v;
        if (!p.Varint(&v)) return NotABatch(at);
        out->timeout_micros.push_back(static_cast<int64_t>(v));
      }
    } else if (field == 2 && type == kVarint) {  // one unpacked element
      uint64_t v;
      if (!c.Varint(&v)) return NotABatch(at);
      out->timeout_micros.push_back(static_cast<int64_t>(v));
    } else if (!c.Skip(type)) {
      return NotABatch(at);
    }
  }
  return absl::OkStatus();
}

ReplicateWrite ViewOf(const v1::ReplicateRequest& req) {
  ReplicateWrite w;
  w.commit.shard_id = req.shard_id();
  w.commit.shard_epoch = req.shard_epoch();
  w.commit.seq = req.seq();
  w.commit.primary_node_id = req.primary_node_id();
  w.commit.primary_incarnation = req.primary_incarnation();
  w.commit.is_delete = req.op() == v1::REPLICA_OP_DELETE;
  w.commit.key = req.key();
  w.commit.entry = req.entry();
  w.op = req.op();
  w.resent_after_rdma = req.resent_after_rdma();
  return w;
}

v1::ReplicateRequest RequestOf(const ReplicateWrite& write) {
  v1::ReplicateRequest req;
  req.set_shard_id(write.commit.shard_id);
  req.set_shard_epoch(write.commit.shard_epoch);
  req.set_seq(write.commit.seq);
  req.set_op(static_cast<v1::ReplicaOp>(write.op));
  req.set_key(std::string(write.commit.key));
  req.set_entry(std::string(write.commit.entry));
  req.set_primary_node_id(std::string(write.commit.primary_node_id));
  req.set_primary_incarnation(write.commit.primary_incarnation);
  req.set_resent_after_rdma(write.resent_after_rdma);
  return req;
}

void ViewOf(const v1::ReplicateBatch& batch, ReplicateBatchView* out) {
  out->Clear();
  out->writes.reserve(batch.writes_size());
  for (const v1::ReplicateRequest& req : batch.writes()) out->writes.push_back(ViewOf(req));
  out->timeout_micros.assign(batch.timeout_micros().begin(), batch.timeout_micros().end());
}

}  // namespace server
}  // namespace kvstore
