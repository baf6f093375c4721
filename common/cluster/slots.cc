// Copyright 2026 The kvstore Authors.

#include "common/cluster/slots.h"

#include <array>

namespace kvstore {
namespace cluster {
namespace {

// One table lookup per byte instead of eight shifts: KeySlot runs on every
// keyed command in cluster mode.
constexpr std::array<uint16_t, 256> MakeTable() {
  std::array<uint16_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kTable = MakeTable();

}  // namespace

uint16_t Crc16(absl::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kTable[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

absl::string_view HashTag(absl::string_view key) {
  const size_t open = key.find('{');
  if (open == absl::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  // "{}" or no closing brace: the whole key is hashed, as in Redis.
  if (close == absl::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

uint32_t KeySlot(absl::string_view key) { return Crc16(HashTag(key)) % kSlotCount; }

}  // namespace cluster
}  // namespace kvstore
