// Copyright 2026 The kvstore Authors.
//
// Human-readable byte sizes for flags: "4096", "64K", "512M", "1G", "2GiB".
// K/M/G/T (with or without "iB"/"B") are powers of 1024.
//
// Thread-safety: pure functions; thread-safe.

#ifndef KVSTORE_COMMON_BYTE_SIZE_H_
#define KVSTORE_COMMON_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {

// Parses a whole number of bytes with an optional unit, case-insensitive,
// surrounding whitespace and a space before the unit allowed. Fractions
// ("1.5G") and negative numbers are not accepted. kInvalidArgument when
// `text` has no leading digits or more than 15, an unknown unit, or a
// result that overflows uint64_t.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);
// For logs and messages: "512 MiB", "1.5 GiB", "100 B". Exact multiples print
// without a fraction; others are rounded to one decimal, so the text does
// not always parse back to `bytes`.
std::string FormatByteSize(uint64_t bytes);

}  // namespace kvstore

#endif  // KVSTORE_COMMON_BYTE_SIZE_H_
