// Copyright 2026 The kvstore Authors.
//
// Request limits, enforced on every path (gRPC, RESP, RDMA commit) before
// anything is allocated. The server's flags set them; the handshake tells
// clients, which check them before sending anything.
//
// Thread-safety: Limits is a plain value; its const methods are
// thread-safe.

#ifndef KVSTORE_COMMON_PROTOCOL_LIMITS_H_
#define KVSTORE_COMMON_PROTOCOL_LIMITS_H_

#include <cstdint>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/protocol/layout.h"

namespace kvstore {

inline constexpr uint64_t kDefaultMaxKeyBytes = 1024;
inline constexpr uint64_t kDefaultMaxValueBytes = 64ull << 20;

// Hard ceilings from the slot format: an entry must fit in kMaxEntryBytes.
inline constexpr uint64_t kCeilingKeyBytes = 64 * 1024;
inline constexpr uint64_t kCeilingValueBytes =
    layout::kMaxEntryBytes - layout::kEntryHeaderBytes - kCeilingKeyBytes;

// Most offsets one ReportReads call may carry (kv_control.proto): a client
// reports its one-sided GETs in batches this large, the server refuses more.
inline constexpr int kMaxReportedReads = 4096;

// The limits one server enforces. The Check* methods compare against the
// fields as set; Validate() checks the fields against the format's
// ceilings.
struct Limits {
  uint64_t max_key_bytes = kDefaultMaxKeyBytes;
  uint64_t max_value_bytes = kDefaultMaxValueBytes;
  // Largest number of keys in one MGET/MSET/MultiGet/MultiPut.
  uint64_t max_batch_keys = 4096;

  // kInvalidArgument naming the limit, or OK. Empty keys are invalid.
  // Inline: every request checks its key, and the out-of-line call, whose
  // frame the error message sizes, cost a one-sided GET ~40 instructions.
  absl::Status CheckKey(absl::string_view key) const { return CheckKeyLength(key.size()); }
  absl::Status CheckKeyLength(uint64_t key_len) const {
    if (ABSL_PREDICT_TRUE(key_len != 0 && key_len <= max_key_bytes)) return absl::OkStatus();
    return KeyLengthError(key_len);
  }
  // Inline for the same reason: a SET checks its value's length three times
  // (request, reservation, commit), ~28 instructions a call out of line.
  absl::Status CheckValueLength(uint64_t value_len) const {
    if (ABSL_PREDICT_TRUE(value_len <= max_value_bytes)) return absl::OkStatus();
    return ValueLengthError(value_len);
  }
  // kInvalidArgument naming the field when a limit is 0 (max_value_bytes may
  // be 0) or beyond the format's ceilings; OK otherwise.
  absl::Status Validate() const;

 private:
  // CheckKeyLength's refusal, out of line.
  absl::Status KeyLengthError(uint64_t key_len) const;
  // CheckValueLength's refusal, out of line.
  absl::Status ValueLengthError(uint64_t value_len) const;
};

}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_LIMITS_H_
