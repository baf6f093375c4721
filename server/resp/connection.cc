// Copyright 2026 The kvstore Authors.

#include "server/resp/connection.h"

#include <utility>

#include "common/protocol/resp.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

// Runs one codec encoder on the owned tail chunk and counts what it added.
// Encoding straight into the queue avoids a temporary string per reply.
template <typename Encoder>
void Encode(std::string& tail, size_t* out_bytes, Encoder encode) {
  const size_t before = tail.size();
  encode(&tail);
  *out_bytes += tail.size() - before;
}

}  // namespace

// Coalescing small replies into one string keeps the writev iovec count low
// for pipelined requests; a pinned value always ends the current string.
uint64_t Connection::Hold() {
  OutChunk& chunk = out.emplace_back();
  chunk.held = true;
  chunk.held_id = ++next_held_id;
  return chunk.held_id;
}

std::string& Connection::TailSlow() {
  if (reply_into_ != nullptr) return *reply_into_;
  if (out.empty() || out.back().pinned.value().data() != nullptr || out.back().held) {
    out.emplace_back();
    // The last sent chunk's capacity, so steady request/reply traffic does
    // not allocate a string per reply; a new one gets room for a batch of
    // pipelined replies at once, so copied values never make it reallocate
    // (ReplyValue only copies what fits).
    std::string& s = out.back().owned;
    if (!out_spares.empty()) {
      s = std::move(out_spares.back());
      out_spares.pop_back();
    }
    if (s.capacity() < kOutChunkBytes) s.reserve(kOutChunkBytes);
  }
  return out.back().owned;
}

void Connection::RecycleOwned(std::string&& s) {
  // Big strings (a large MGET or INFO reply) are not worth holding on to.
  constexpr size_t kKeepBytes = 2 * kOutChunkBytes;
  // Smaller ones (a held reply's string) would be grown by Tail() anyway.
  if (s.capacity() > kKeepBytes || s.capacity() < kOutChunkBytes) return;
  if (out_spares.size() == kOutSpares) return;
  out_spares.push_back(std::move(s));
  out_spares.back().clear();
}

void Connection::ReplyEncoded(absl::string_view bytes) {
  Encode(Tail(), &out_bytes, [&](std::string* t) { t->append(bytes.data(), bytes.size()); });
}

void Connection::ReplyValue(PinnedValue v) {
  const size_t n = v.value().size();
  // "$<len>\r\n" + value + "\r\n": 32 bytes of framing is plenty.
  if (n > kCopyValueBytes) return ReplyPinned(std::move(v));
  std::string& tail = Tail();
  if (tail.capacity() - tail.size() < n + 32) return ReplyPinned(std::move(v));
  ReplyBulk(v.value());
  // `v` is destroyed on return: the entry is unpinned right after the copy.
}

void Connection::ReplyOk() { Encode(Tail(), &out_bytes, resp::AppendOk); }

void Connection::ReplySimple(absl::string_view s) {
  Encode(Tail(), &out_bytes, [s](std::string* o) { resp::AppendSimple(o, s); });
}

// AppendError scrubs CR/LF, so echoed names cannot break the framing.
void Connection::ReplyError(absl::string_view text) {
  Encode(Tail(), &out_bytes, [text](std::string* o) { resp::AppendError(o, text); });
}

// The single place a Status becomes a reply: the code word comes from the
// codec's mapping, so every command answers the same code the same way.
void Connection::ReplyStatus(const absl::Status& s) {
  if (s.ok()) return ReplyOk();
  Encode(Tail(), &out_bytes, [&s](std::string* o) { resp::AppendStatusError(o, s); });
}

void Connection::ReplyInteger(int64_t n) {
  Encode(Tail(), &out_bytes, [n](std::string* o) { resp::AppendInteger(o, n); });
}

// Redis's "no such key" for GET and inside MGET arrays: a null bulk in
// RESP2, RESP3's own null.
void Connection::ReplyNull() {
  Encode(Tail(), &out_bytes, protocol == 3 ? resp::AppendResp3Null : resp::AppendNull);
}

void Connection::ReplyBulk(absl::string_view s) {
  Encode(Tail(), &out_bytes, [s](std::string* o) { resp::AppendBulk(o, s); });
}

void Connection::ReplyArrayHeader(uint64_t n) {
  Encode(Tail(), &out_bytes, [n](std::string* o) { resp::AppendArrayHeader(o, n); });
}

// RESP2 has no map: Redis flattens it into key, value, key, value...
void Connection::ReplyMapHeader(uint64_t n) {
  if (protocol != 3) return ReplyArrayHeader(2 * n);
  Encode(Tail(), &out_bytes, [n](std::string* o) { resp::AppendMapHeader(o, n); });
}

void Connection::ReplySetHeader(uint64_t n) {
  if (protocol != 3) return ReplyArrayHeader(n);
  Encode(Tail(), &out_bytes, [n](std::string* o) { resp::AppendSetHeader(o, n); });
}

// The same text either way, so a RESP2 client reads the number Redis sends.
void Connection::ReplyDouble(double d) {
  if (protocol != 3) return ReplyBulk(resp::FormatDouble(d));
  Encode(Tail(), &out_bytes, [d](std::string* o) { resp::AppendDouble(o, d); });
}

void Connection::ReplyBool(bool b) {
  if (protocol != 3) return ReplyInteger(b ? 1 : 0);
  Encode(Tail(), &out_bytes, [b](std::string* o) { resp::AppendBool(o, b); });
}

void Connection::ReplyVerbatim(absl::string_view text) {
  if (protocol != 3) return ReplyBulk(text);
  Encode(Tail(), &out_bytes, [text](std::string* o) { resp::AppendVerbatim(o, "txt", text); });
}

// The zero-copy GET reply: header and trailer are tiny owned strings, the
// body is sent from pool memory. The pin keeps the segment from being
// reclaimed until writev has sent the last byte.
void Connection::ReplyPinned(PinnedValue v) {
  const absl::string_view value = v.value();  // pool memory; moving v keeps it
  Encode(Tail(), &out_bytes, [&value](std::string* o) { resp::AppendBulkHeader(o, value.size()); });
  if (!value.empty()) {
    // The body is its own chunk: Flush() hands it to writev from the pool,
    // and dropping the chunk after it is sent releases the pin.
    OutChunk chunk;
    chunk.view = value;
    chunk.pinned = std::move(v);
    out.push_back(std::move(chunk));
    out_bytes += value.size();
  }
  Encode(Tail(), &out_bytes, resp::AppendBulkTrailer);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
