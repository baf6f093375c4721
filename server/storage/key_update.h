// Copyright 2026 The kvstore Authors.
//
// The types of KvStore::Update(): a read-modify-write of one key (INCR,
// APPEND, SET NX/XX/GET/KEEPTTL, EXPIRE, GETDEL ...). The store hands the
// decision function what the key holds now; the function says what to do.
// Both run under the key's write lock (key_locks.h), so no other client
// write of the key (RESP, gRPC, RDMA commit) lands between the read and
// the write.

#ifndef KVSTORE_SERVER_STORAGE_KEY_UPDATE_H_
#define KVSTORE_SERVER_STORAGE_KEY_UPDATE_H_

#include <array>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {

// What a key holds when the decision runs. An expired key reads as absent.
// `value` points into pool memory pinned for the duration of the update.
struct CurrentValue {
  bool exists = false;
  absl::string_view value;
  uint64_t expires_at_ms = 0;  // unix ms; 0: no expiry
};

struct KeyUpdate {
  enum class Action {
    kKeep,    // change nothing
    kWrite,   // store `value` (the concatenation of its pieces) with `expires_at_ms`
    kDelete,  // delete the key (nothing happens when it is absent)
  };
  Action action = Action::kKeep;
  // Pieces concatenated in order: APPEND passes {current, suffix}, EXPIRE
  // {current} (the second piece empty). They may point into
  // CurrentValue::value or into memory the caller keeps alive until Update()
  // returns. A fixed pair, not a vector: no allocation per update.
  std::array<absl::string_view, 2> value{};
  uint64_t expires_at_ms = 0;
};

// What KvStore::Stat() reports of a key.
struct KeyInfo {
  uint64_t value_len = 0;
  uint64_t expires_at_ms = 0;  // 0: no expiry
};

// An error aborts the update with nothing changed and is returned as is.
using UpdateFn = absl::FunctionRef<absl::StatusOr<KeyUpdate>(const CurrentValue&)>;

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_KEY_UPDATE_H_
