// Copyright 2026 The kvstore Authors.

#include "client/internal/rdma/read_chunks.h"

#include <algorithm>

namespace kvstore {
namespace client {

int SplitRead(absl::Span<const rdma::Sge> sges, ReadChunk out[kMaxReadChunks]) {
  uint64_t total = 0;
  for (const rdma::Sge& g : sges) total += g.length;
  constexpr uint64_t kAlign = 4096;
  uint64_t piece = (total + kMaxReadChunks - 1) / kMaxReadChunks;
  piece = std::max(kChunkedReadMinBytes, (piece + kAlign - 1) / kAlign * kAlign);
  const int n =
      total < 2 * kChunkedReadMinBytes
          ? 1
          : static_cast<int>(std::min<uint64_t>(kMaxReadChunks, (total + piece - 1) / piece));
  // Walk the scatter list once: `at` is the READ offset where sges[g] starts.
  size_t g = 0;
  uint64_t at = 0;
  for (int i = 0; i < n; ++i) {
    ReadChunk& c = out[i];
    c.begin = i * piece;
    c.end = i + 1 == n ? total : std::min(total, (i + 1) * piece);
    c.nsge = 0;
    // Every scatter entry overlapping [begin, end), clipped to it.
    while (g < sges.size() && at < c.end) {
      const uint64_t lo = std::max(at, c.begin);
      const uint64_t hi = std::min(at + sges[g].length, c.end);
      if (hi > lo) {
        c.sges[c.nsge++] = {sges[g].addr + (lo - at), static_cast<uint32_t>(hi - lo), sges[g].lkey};
      }
      if (at + sges[g].length > c.end) break;  // the rest of sges[g] is the next piece's
      at += sges[g].length;
      ++g;
    }
  }
  return n;
}

}  // namespace client
}  // namespace kvstore
