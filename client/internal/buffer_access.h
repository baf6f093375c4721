// Copyright 2026 The kvstore Authors.
//
// Access to the private parts of public client types, for the library's own
// implementation only (not part of the public API).
//
// KvClientInternal: static accessors, no state; thread-safe as far as the
// RegisteredBuffer passed in is.

#ifndef KVSTORE_CLIENT_INTERNAL_BUFFER_ACCESS_H_
#define KVSTORE_CLIENT_INTERNAL_BUFFER_ACCESS_H_

#include <memory>
#include <utility>

#include "client/registered_buffer.h"

namespace kvstore {
namespace client {

class KvClientInternal {
 public:
  // A handle for [data, data+size). `registration` keeps the transport's
  // registration alive for as long as any copy of the handle; `lkey` is the
  // RDMA local key, or 0 for memory no device knows (TCP).
  static RegisteredBuffer MakeBuffer(char* data, size_t size, std::shared_ptr<void> registration,
                                     uint32_t lkey) {
    RegisteredBuffer b;
    b.data_ = data;
    b.size_ = size;
    b.registration_ = std::move(registration);
    b.lkey_ = lkey;
    return b;
  }
  // The RDMA local key of `b`; 0 when it was not registered with a device.
  static uint32_t lkey(const RegisteredBuffer& b) { return b.lkey_; }
  // The opaque registration `b` keeps alive (may be null).
  static const std::shared_ptr<void>& registration(const RegisteredBuffer& b) {
    return b.registration_;
  }
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_BUFFER_ACCESS_H_
