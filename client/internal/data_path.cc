// Copyright 2026 The kvstore Authors.
//
// The DataPath defaults: zero copy for a transport without registered memory,
// done with copies. RdmaDataPath falls back to them for buffers that no RDMA
// device knows (lkey 0), so the TCP behaviour lives here once.

#include "client/internal/data_path.h"

#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/internal/buffer_access.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

// The payload's value is irrelevant; its presence is the mark.
absl::Status NotSent(absl::Status s) {
  s.SetPayload(kNotSentPayload, absl::Cord("1"));
  return s;
}

absl::Status DataPath::PutWithTtl(absl::string_view, absl::string_view, absl::Duration,
                                  absl::Time) {
  return NotSent(absl::UnimplementedError(absl::StrCat(name(), " path has no expiry")));
}

absl::StatusOr<bool> DataPath::Expire(absl::string_view, absl::Duration, absl::Time) {
  return NotSent(absl::UnimplementedError(absl::StrCat(name(), " path has no expiry")));
}

absl::StatusOr<absl::Duration> DataPath::Ttl(absl::string_view, absl::Time) {
  return NotSent(absl::UnimplementedError(absl::StrCat(name(), " path has no expiry")));
}

absl::StatusOr<RegisteredBuffer> DataPath::Register(void* data, size_t size) {
  if (data == nullptr || size == 0) return absl::InvalidArgumentError("empty buffer");
  // Nothing to register: the handle just describes the memory.
  return KvClientInternal::MakeBuffer(static_cast<char*>(data), size, nullptr, 0);
}

absl::StatusOr<size_t> DataPath::GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                         size_t offset, size_t capacity, absl::Time deadline) {
  // Written as two comparisons so that offset + capacity cannot overflow.
  if (offset > buffer.size() || capacity > buffer.size() - offset) {
    return absl::InvalidArgumentError("range outside the registered buffer");
  }
  KV_ASSIGN_OR_RETURN(std::string v, Get(key, deadline));
  if (v.size() > capacity) {
    return absl::OutOfRangeError(
        absl::StrCat("value is ", v.size(), " bytes; the buffer holds ", capacity));
  }
  std::memcpy(buffer.data() + offset, v.data(), v.size());
  return v.size();
}

// As GetInto(): the range check first, so a bad range never reaches the
// server.
absl::Status DataPath::PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                               size_t length, absl::Time deadline) {
  if (offset > buffer.size() || length > buffer.size() - offset) {
    return absl::InvalidArgumentError("range outside the registered buffer");
  }
  return Put(key, absl::string_view(buffer.data() + offset, length), deadline);
}

}  // namespace client
}  // namespace kvstore
