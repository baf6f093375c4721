// Copyright 2026 The kvstore Authors.
//
// Fuzzes resp::ParseReply, the TCP client's parser of a server's bytes (the
// client trusts no server), and the error-text mapping both ways.
//
// Checks, besides "no crash, no sanitizer report":
//   * a complete reply consumed at most the buffer, and respects the
//     limits (bulk size, elements per array, depth);
//   * statelessness: every strict prefix of a complete reply is "incomplete",
//     neither an error nor a (different) complete reply;
//   * round trip: the reply re-encoded with the real encoders (Append*,
//     RESP3's included) parses back to an equal reply (an attribute, which
//     the parser drops, is not re-encoded);
//   * RespErrorToStatus never returns OK, and RespErrorToStatus inverts
//     StatusToRespError for every non-OK code and message.
// Input: byte 0 picks the limits, bytes 1-2 a status code and a message
// length for the mapping check; the rest is the reply stream.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/protocol/resp.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

using resp::Reply;

// A double is compared by value (its text may be spelt differently once
// re-encoded: "1.50" comes back as "1.5"), NaN equal to NaN.
bool Equal(const Reply& a, const Reply& b) {
  if (a.type != b.type || a.integer != b.integer) return false;
  if (a.type == Reply::Type::kDouble) {
    if (!(a.number == b.number || (std::isnan(a.number) && std::isnan(b.number)))) return false;
  } else if (a.str != b.str) {
    return false;
  }
  if (a.elements.size() != b.elements.size()) return false;
  for (size_t i = 0; i < a.elements.size(); ++i) {
    if (!Equal(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

bool HasCrLf(absl::string_view s) { return s.find_first_of("\r\n") != absl::string_view::npos; }

// Encodes `r` with the codec's own encoders; false if it cannot be (a simple
// string or error holding CR or LF, which no encoder may emit).
bool Encode(const Reply& r, std::string* out) {
  switch (r.type) {
    case Reply::Type::kSimple:
      if (HasCrLf(r.str)) return false;
      resp::AppendSimple(out, r.str);
      return true;
    case Reply::Type::kError:
      if (HasCrLf(r.str)) return false;
      resp::AppendError(out, r.str);
      return true;
    case Reply::Type::kInteger:
      resp::AppendInteger(out, r.integer);
      return true;
    case Reply::Type::kBulk:
      resp::AppendBulk(out, r.str);
      return true;
    case Reply::Type::kNull:
      resp::AppendNull(out);
      return true;
    case Reply::Type::kDouble:
      resp::AppendDouble(out, r.number);
      return true;
    case Reply::Type::kBool:
      resp::AppendBool(out, r.integer != 0);
      return true;
    case Reply::Type::kBigNumber:
      resp::AppendBigNumber(out, r.str);
      return true;
    case Reply::Type::kVerbatim:
      resp::AppendVerbatim(out, "txt", r.str);
      return true;
    case Reply::Type::kArray:
    case Reply::Type::kMap:
    case Reply::Type::kSet:
    case Reply::Type::kPush:
      if (r.type == Reply::Type::kArray) resp::AppendArrayHeader(out, r.elements.size());
      if (r.type == Reply::Type::kMap) resp::AppendMapHeader(out, r.elements.size() / 2);
      if (r.type == Reply::Type::kSet) resp::AppendSetHeader(out, r.elements.size());
      if (r.type == Reply::Type::kPush) resp::AppendPushHeader(out, r.elements.size());
      for (const Reply& e : r.elements) {
        if (!Encode(e, out)) return false;
      }
      return true;
  }
  return false;
}

void CheckLimits(const Reply& r, const resp::ReplyLimits& limits, int depth) {
  KV_FUZZ_CHECK(depth <= limits.max_depth);
  if (r.type == Reply::Type::kBulk) KV_FUZZ_CHECK(r.str.size() <= limits.max_bulk_bytes);
  if (r.type == Reply::Type::kError) KV_FUZZ_CHECK(!resp::RespErrorToStatus(r.str).ok());
  KV_FUZZ_CHECK(r.elements.size() <= limits.max_elements);
  for (const Reply& e : r.elements) CheckLimits(e, limits, depth + 1);
}

void CheckReply(absl::string_view buf, const resp::ReplyLimits& limits) {
  auto parsed = resp::ParseReply(buf, limits);
  if (!parsed.ok()) {
    KV_FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kDataLoss);
    return;
  }
  if (!parsed->complete) {
    KV_FUZZ_CHECK(parsed->consumed == 0);
    return;
  }
  KV_FUZZ_CHECK(parsed->consumed > 0 && parsed->consumed <= buf.size());
  CheckLimits(parsed->reply, limits, 0);
  const size_t n = parsed->consumed;
  const size_t step = n <= 256 ? 1 : n / 64;
  for (size_t k = 0; k < n; k += step) {
    auto p = resp::ParseReply(buf.substr(0, k), limits);
    KV_FUZZ_CHECK(p.ok() && !p->complete);
  }
  std::string encoded;
  if (Encode(parsed->reply, &encoded)) {
    auto again = resp::ParseReply(encoded, limits);
    KV_FUZZ_CHECK(again.ok() && again->complete && again->consumed == encoded.size());
    KV_FUZZ_CHECK(Equal(again->reply, parsed->reply));
  }
}

// StatusToRespError -> RespErrorToStatus gives back the code and message.
void CheckErrorMapping(uint8_t code_byte, absl::string_view message) {
  const auto code = static_cast<absl::StatusCode>(1 + code_byte % 16);  // 1..16: never OK
  const absl::Status s(code, message);
  const absl::Status back = resp::RespErrorToStatus(resp::StatusToRespError(s));
  KV_FUZZ_CHECK(back.code() == code);
  KV_FUZZ_CHECK(back.message() == message);
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvstore::fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.Int<uint8_t>();
  const uint8_t code = in.Int<uint8_t>();
  kvstore::CheckErrorMapping(code, in.Bytes(64));
  kvstore::resp::ReplyLimits limits;
  if (mode & 1) {
    limits.max_bulk_bytes = 16;
    limits.max_elements = 4;
    limits.max_depth = 1 + (mode >> 6);
  }
  kvstore::CheckReply(in.Rest(), limits);
  return 0;
}
