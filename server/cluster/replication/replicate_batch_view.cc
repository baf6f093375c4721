// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replicate_batch_view.h"

#include <cstddef>
#include <cstring>
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
    // One byte: every tag, and most small fields (shard id, op, lengths
    // below 128).
    if (p_ != end_ && (static_cast<uint8_t>(*p_) & 0x80) == 0) {
      *v = static_cast<uint8_t>(*p_++);
      return true;
    }
    uint64_t result = 0;
    if (left() >= 10) {
      // Room for the longest varint: no end check per byte, and a loop the
      // compiler unrolls (sequence numbers, epochs and incarnations are
      // several bytes long).
      for (int i = 0; i < 10; ++i) {
        const uint8_t b = static_cast<uint8_t>(p_[i]);
        result |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
        if ((b & 0x80) == 0) {
          p_ += i + 1;
          *v = result;
          return true;
        }
      }
      return false;  // more than ten bytes
    }
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
  // Steps over `tag` (a one-byte tag) when it is the next byte.
  bool Take(char tag) {
    if (p_ == end_ || *p_ != tag) return false;
    ++p_;
    return true;
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

// The one-byte tag of field `field` (1 to 15) of wire type `type`: every
// field of these messages.
constexpr char OneByteTag(uint32_t field, uint32_t type) {
  return static_cast<char>((field << 3) | type);
}

// A varint field `field` at the cursor, if it is there: false only when its
// tag is there and its value does not parse.
template <typename T>
bool InOrderVarint(WireCursor& c, uint32_t field, T* v) {
  uint64_t raw;
  if (!c.Take(OneByteTag(field, kVarint))) return true;
  if (!c.Varint(&raw)) return false;
  *v = static_cast<T>(raw);
  return true;
}
bool InOrderBytes(WireCursor& c, uint32_t field, absl::string_view* v) {
  return !c.Take(OneByteTag(field, kLengthDelimited)) || c.Bytes(v);
}

// A write as AppendReplicateWrite and protobuf encode it: each field at
// most once, in field order. Each field costs one compare of its tag byte,
// where ParseWrite() decodes every tag and dispatches on it (about 50 of
// the ~590 instructions a write's parse took). False for anything else (a
// field out of order, repeated, unknown or of another wire type, or bytes
// that do not parse): ParseWrite() then reads the write from the start.
bool ParseWriteInOrder(absl::string_view bytes, ReplicateWrite* w) {
  WireCursor c(bytes);
  ReplicaCommit& commit = w->commit;
  uint64_t resent = 0;
  const bool ok = InOrderVarint(c, 1, &commit.shard_id) &&
                  InOrderVarint(c, 2, &commit.shard_epoch) && InOrderVarint(c, 3, &commit.seq) &&
                  InOrderVarint(c, 4, &w->op) && InOrderBytes(c, 5, &commit.key) &&
                  InOrderBytes(c, 6, &commit.entry) &&
                  InOrderBytes(c, 7, &commit.primary_node_id) &&
                  InOrderVarint(c, 8, &commit.primary_incarnation) && InOrderVarint(c, 9, &resent);
  if (!ok || !c.done()) return false;
  w->resent_after_rdma = resent != 0;
  commit.is_delete = w->op == v1::REPLICA_OP_DELETE;
  return true;
}

bool ParseWrite(absl::string_view bytes, ReplicateWrite* w) {
  if (ParseWriteInOrder(bytes, w)) return true;
  *w = ReplicateWrite();  // what the fast path set is read again below
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
  CopyInto(write, &req);
  return req;
}

void CopyInto(const ReplicateWrite& write, v1::ReplicateRequest* req) {
  req->set_shard_id(write.commit.shard_id);
  req->set_shard_epoch(write.commit.shard_epoch);
  req->set_seq(write.commit.seq);
  req->set_op(static_cast<v1::ReplicaOp>(write.op));
  req->mutable_key()->assign(write.commit.key.data(), write.commit.key.size());
  req->mutable_entry()->assign(write.commit.entry.data(), write.commit.entry.size());
  req->mutable_primary_node_id()->assign(write.commit.primary_node_id.data(),
                                         write.commit.primary_node_id.size());
  req->set_primary_incarnation(write.commit.primary_incarnation);
  req->set_resent_after_rdma(write.resent_after_rdma);
}

namespace {

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void AppendVarint(uint64_t v, std::string* out) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

// Writes a varint at `p`; returns the end.
char* PutVarint(uint64_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

char* PutVarintField(uint32_t field, uint64_t v, char* p) {
  if (v == 0) return p;
  *p++ = OneByteTag(field, kVarint);
  return PutVarint(v, p);
}

// The tag and length of a bytes field (its bytes are appended apart).
char* PutBytesHeader(uint32_t field, size_t size, char* p) {
  if (size == 0) return p;
  *p++ = OneByteTag(field, kLengthDelimited);
  return PutVarint(size, p);
}

}  // namespace

// The fields around the entry are built in stack buffers and the frame
// grows by three appends (head, entry, tail; more for a key or node id
// longer than kInlineBytes): one append per field, each checking the
// string's room, cost a replicated SET more than the copy of its 4 KiB
// entry.
void AppendReplicateWrite(const ReplicateWrite& w, std::string* out) {
  const ReplicaCommit& c = w.commit;
  // An enum is an int32: a negative one goes as ten bytes, as protobuf
  // sends it.
  const uint64_t op = static_cast<uint64_t>(static_cast<int64_t>(w.op));
  // Head: room for the write's tag and length, then four varint fields (at
  // most 11 bytes each) and the key's tag and length; then the key and the
  // entry's tag and length, in one buffer when the key is at most
  // kInlineBytes; the tail (the node id's tag, length and bytes, two varint
  // fields) likewise. The fields are written first and the write's length
  // is what they took: no field is sized apart from writing it.
  constexpr size_t kInlineBytes = 128;
  constexpr size_t kPrefixRoom = 1 + 10;
  char head[kPrefixRoom + 4 * 11 + 11 + kInlineBytes + 11];
  char* const fields = head + kPrefixRoom;
  char* p = fields;
  p = PutVarintField(1, c.shard_id, p);
  p = PutVarintField(2, c.shard_epoch, p);
  p = PutVarintField(3, c.seq, p);
  p = PutVarintField(4, op, p);
  p = PutBytesHeader(5, c.key.size(), p);
  const bool key_inline = c.key.size() <= kInlineBytes;
  char mid[11];
  char* const mid_at = key_inline ? p + c.key.size() : mid;
  if (key_inline && !c.key.empty()) std::memcpy(p, c.key.data(), c.key.size());
  const char* const head_end = PutBytesHeader(6, c.entry.size(), mid_at);
  char tail[11 + kInlineBytes + 2 * 11];
  const bool node_inline = c.primary_node_id.size() <= kInlineBytes;
  char* q = PutBytesHeader(7, c.primary_node_id.size(), tail);
  char* const node_head_end = q;
  if (node_inline && !c.primary_node_id.empty()) {
    std::memcpy(q, c.primary_node_id.data(), c.primary_node_id.size());
    q += c.primary_node_id.size();
  }
  q = PutVarintField(8, c.primary_incarnation, q);
  q = PutVarintField(9, w.resent_after_rdma ? 1 : 0, q);
  const size_t size = static_cast<size_t>(p - fields) + c.key.size() +
                      static_cast<size_t>(head_end - mid_at) + c.entry.size() +
                      static_cast<size_t>(q - tail) + (node_inline ? 0 : c.primary_node_id.size());
  // The write's tag and length, right before its fields.
  char prefix[kPrefixRoom];
  char* e = prefix;
  *e++ = OneByteTag(1, kLengthDelimited);
  e = PutVarint(size, e);
  const size_t prefix_bytes = static_cast<size_t>(e - prefix);
  char* const begin = fields - prefix_bytes;
  std::memcpy(begin, prefix, prefix_bytes);
  out->reserve(out->size() + prefix_bytes + size);
  if (key_inline) {
    out->append(begin, static_cast<size_t>(head_end - begin));
  } else {
    out->append(begin, static_cast<size_t>(p - begin)).append(c.key.data(), c.key.size());
    out->append(mid, static_cast<size_t>(head_end - mid));
  }
  out->append(c.entry.data(), c.entry.size());
  if (node_inline) {
    out->append(tail, static_cast<size_t>(q - tail));
  } else {
    out->append(tail, static_cast<size_t>(node_head_end - tail))
        .append(c.primary_node_id.data(), c.primary_node_id.size())
        .append(node_head_end, static_cast<size_t>(q - node_head_end));
  }
}

void AppendTimeouts(const std::vector<int64_t>& micros, std::string* out) {
  if (micros.empty()) return;
  size_t size = 0;
  for (int64_t m : micros) size += VarintSize(static_cast<uint64_t>(m));
  out->push_back(OneByteTag(2, kLengthDelimited));
  AppendVarint(size, out);
  for (int64_t m : micros) AppendVarint(static_cast<uint64_t>(m), out);
}

void ViewOf(const v1::ReplicateBatch& batch, ReplicateBatchView* out) {
  out->Clear();
  out->writes.reserve(batch.writes_size());
  for (const v1::ReplicateRequest& req : batch.writes()) out->writes.push_back(ViewOf(req));
  out->timeout_micros.assign(batch.timeout_micros().begin(), batch.timeout_micros().end());
}

}  // namespace server
}  // namespace kvstore
