// Copyright 2026 The kvstore Authors.
//
// RegisteredBuffer: caller memory registered for zero-copy transfers
// (KvClient::Register). Part of the public API, included by kv_client.h; it
// lives in its own header so the client's internals can name it without
// depending on KvClient.

#ifndef KVSTORE_CLIENT_REGISTERED_BUFFER_H_
#define KVSTORE_CLIENT_REGISTERED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kvstore {
namespace client {

// Caller memory registered for zero-copy transfers (see KvClient::Register).
// Over RDMA the NIC reads and writes it directly; over TCP it is plain
// memory. Copyable handle; the registration lives until the last copy and
// the client are gone. The memory must outlive every handle.
//
// Thread safety: a const handle may be used from many threads at once; the
// bytes it describes are the caller's to synchronise.
class RegisteredBuffer {
 public:
  RegisteredBuffer() = default;
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  // The library's own access to the fields below (client/internal/buffer_access.h).
  friend class KvClientInternal;
  char* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<void> registration_;  // transport-specific, opaque
  uint32_t lkey_ = 0;                   // 0: not registered with an RDMA device
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_REGISTERED_BUFFER_H_
