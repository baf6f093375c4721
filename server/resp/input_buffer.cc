// Copyright 2026 The kvstore Authors.

#include "server/resp/input_buffer.h"

#include <algorithm>
#include <cstring>

namespace kvstore {
namespace server {
namespace resp_internal {

char* InputBuffer::Prepare(size_t n) {
  if (capacity_ - size_ < n) {
    const size_t want = std::max(size_ + n, 2 * capacity_);
    // new char[] leaves the bytes uninitialised, which is the point.
    std::unique_ptr<char[]> bigger(new char[want]);
    if (size_ > 0) std::memcpy(bigger.get(), buf_.get(), size_);
    buf_ = std::move(bigger);
    capacity_ = want;
  }
  return buf_.get() + size_;
}

void InputBuffer::Append(absl::string_view bytes) {
  if (bytes.empty()) return;
  std::memcpy(Prepare(bytes.size()), bytes.data(), bytes.size());
  Commit(bytes.size());
}

void InputBuffer::EraseFront(size_t n) {
  if (n == 0) return;
  // memmove: the ranges overlap when more than n bytes remain.
  if (n < size_) std::memmove(buf_.get(), buf_.get() + n, size_ - n);
  size_ -= n;
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
