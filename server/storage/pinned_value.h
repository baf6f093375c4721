// Copyright 2026 The kvstore Authors.
//
// PinnedValue: a value read from a KvStore (kv_store.h), kept readable in
// pool memory for as long as the caller holds it.

#ifndef KVSTORE_SERVER_STORAGE_PINNED_VALUE_H_
#define KVSTORE_SERVER_STORAGE_PINNED_VALUE_H_

#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {

class KvStore;

// A local reference to a committed value that keeps its memory from being
// reclaimed (the RESP path sends straight from pool memory). An entry that
// its lease holder can still overwrite is copied instead, and the copy is
// what was verified and what is sent. Move-only.
//
// A default-constructed PinnedValue holds nothing and an empty value.
//
// Thread safety: used by one thread at a time; it may be moved to, and
// released on, another thread (unpinning is an atomic decrement).
class PinnedValue {
 public:
  PinnedValue() = default;
  PinnedValue(PinnedValue&& other) noexcept { *this = std::move(other); }
  PinnedValue& operator=(PinnedValue&& other) noexcept;
  PinnedValue(const PinnedValue&) = delete;
  PinnedValue& operator=(const PinnedValue&) = delete;
  ~PinnedValue();

  // The value's bytes: pool memory, valid until Release() or destruction,
  // or the verified copy, valid until destruction. REQUIRES: the store
  // outlives this object while it holds a pin.
  absl::string_view value() const { return value_; }
  // Drops the pin on the value's run (a no-op for a copy or when already
  // released), after which its pool memory may be reclaimed. Idempotent.
  void Release();

 private:
  friend class KvStore;
  KvStore* store_ = nullptr;
  uint32_t segment_ = 0;
  absl::string_view value_;
  std::unique_ptr<char[]> copy_;  // the verified copy, when there is one
  // The store whose copy budget copy_ is charged to, and by how much.
  KvStore* budget_store_ = nullptr;
  uint64_t budget_bytes_ = 0;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_PINNED_VALUE_H_
