// Copyright 2026 The kvstore Authors.
//
// FuzzInput: splits one fuzzer input into typed pieces (integers, byte
// strings) front to back. A tiny stand-in for libFuzzer's
// FuzzedDataProvider, which ships with clang only, so that the same fuzzer
// sources also build with gcc as replay tests (see fuzz.bzl).
//
// Running out of input is not an error: integers read as 0 and strings as
// empty, so every input is a valid test case.
//
// Thread safety: a plain value over caller-owned bytes; one thread.

#ifndef KVSTORE_TESTS_FUZZ_FUZZ_INPUT_H_
#define KVSTORE_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}

  // The next sizeof(T) bytes, little-endian, zero-filled past the end.
  template <typename T>
  T Int() {
    T v{};
    const size_t n = rest_.size() < sizeof(T) ? rest_.size() : sizeof(T);
    // n == 0 at the end of the input, where data() may be null.
    if (n > 0) std::memcpy(&v, rest_.data(), n);
    rest_.remove_prefix(n);
    return v;
  }

  // A string of a length given by the next byte (capped at `max` and at
  // what is left): short strings are the common case a fuzzer should try.
  absl::string_view Bytes(size_t max = 255) {
    size_t n = Int<uint8_t>();
    if (n > max) n = max;
    return Take(n);
  }

  // At most `n` bytes, fewer when the input ends first.
  absl::string_view Take(size_t n) {
    if (n > rest_.size()) n = rest_.size();
    absl::string_view out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return out;
  }

  // Everything not consumed yet.
  absl::string_view Rest() {
    absl::string_view out = rest_;
    rest_ = absl::string_view();
    return out;
  }

 private:
  absl::string_view rest_;
};

// A failed property of the code under test: prints what broke and aborts,
// which libFuzzer reports as a crash (and keeps the input) and the replay
// test as a failure. Unlike assert(), active in optimised builds too.
#define KV_FUZZ_CHECK(cond)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

}  // namespace fuzz
}  // namespace kvstore

#endif  // KVSTORE_TESTS_FUZZ_FUZZ_INPUT_H_
