// Copyright 2026 The kvstore Authors.
//
// Access to the private parts of public client types, for the library's own
// implementation only (not part of the public API).

#ifndef KVSTORE_CLIENT_INTERNAL_BUFFER_ACCESS_H_
#define KVSTORE_CLIENT_INTERNAL_BUFFER_ACCESS_H_

#include <memory>
#include <utility>

#include "client/kv_client.h"

namespace kvstore {
namespace client {

class KvClientInternal {
 public:
  static RegisteredBuffer MakeBuffer(char* data, size_t size, std::shared_ptr<void> registration,
                                     uint32_t lkey) {
    RegisteredBuffer b;
    b.data_ = data;
    b.size_ = size;
    b.registration_ = std::move(registration);
    b.lkey_ = lkey;
    return b;
  }
  static uint32_t lkey(const RegisteredBuffer& b) { return b.lkey_; }
  static const std::shared_ptr<void>& registration(const RegisteredBuffer& b) {
    return b.registration_;
  }
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_BUFFER_ACCESS_H_
