// Copyright 2026 The kvstore Authors.
//
// InputBuffer: the bytes a RESP connection has received and not yet parsed.
// A growable byte array like std::string, except that making room for a
// read does not zero-fill it: recv() overwrites the room anyway, and
// std::string::resize() clearing 64 KiB before every read was a measurable
// share of a small request's CPU time (and evicted useful cache lines).
//
// Ownership and thread safety: owns its memory; no internal locking (used by
// one RESP loop thread at a time, like its Connection).

#ifndef KVSTORE_SERVER_RESP_INPUT_BUFFER_H_
#define KVSTORE_SERVER_RESP_INPUT_BUFFER_H_

#include <cstddef>
#include <memory>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {
namespace resp_internal {

class InputBuffer {
 public:
  InputBuffer() = default;
  InputBuffer(InputBuffer&& other) noexcept { swap(other); }
  InputBuffer& operator=(InputBuffer&& other) noexcept {
    InputBuffer(std::move(other)).swap(*this);
    return *this;
  }
  InputBuffer(const InputBuffer&) = delete;
  InputBuffer& operator=(const InputBuffer&) = delete;

  const char* data() const { return buf_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  // The bytes [from, size()); REQUIRES: from <= size().
  absl::string_view view(size_t from = 0) const {
    return absl::string_view(buf_.get() + from, size_ - from);
  }

  // Makes room for at least `n` more bytes and returns where they go
  // (uninitialised). The bytes count only after Commit(). Growth keeps the
  // existing bytes and at least doubles the capacity, so appends are
  // amortised O(1). Invalidates pointers into the buffer when it grows.
  char* Prepare(size_t n);
  // Counts `n` bytes written at Prepare()'s pointer. REQUIRES: n is at most
  // what the last Prepare() made room for.
  void Commit(size_t n) { size_ += n; }
  // Prepare() + copy + Commit().
  void Append(absl::string_view bytes);
  // Drops the first `n` bytes, moving the rest to the front.
  // REQUIRES: n <= size().
  void EraseFront(size_t n);
  // Size 0; the capacity stays for the next read.
  void clear() { size_ = 0; }
  // Size and capacity 0: the memory is freed.
  void Release() { InputBuffer().swap(*this); }
  void swap(InputBuffer& other) noexcept {
    buf_.swap(other.buf_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  std::unique_ptr<char[]> buf_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_INPUT_BUFFER_H_
