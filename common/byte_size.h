// Copyright 2026 The kvstore Authors.
//
// Human-readable byte sizes for flags: "4096", "64K", "512M", "1G", "2GiB".
// K/M/G/T (with or without "iB"/"B") are powers of 1024.

#ifndef KVSTORE_COMMON_BYTE_SIZE_H_
#define KVSTORE_COMMON_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);
// "512 MiB", "1.5 GiB", "100 B".
std::string FormatByteSize(uint64_t bytes);

}  // namespace kvstore

#endif  // KVSTORE_COMMON_BYTE_SIZE_H_
