// Copyright 2026 The kvstore Authors.

#include "client/internal/rdma/read_chunks.h"

#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

// Where the bytes of a READ land, in order, as maximal runs of bytes that
// go to consecutive addresses of one lkey. Two scatter lists put every byte
// in the same place exactly when their runs are equal (the byte-by-byte
// comparison this replaces allocated 16 bytes per byte read: seconds for
// a few rounds of megabytes).
struct Landing {
  uint32_t lkey;
  uint64_t addr;
  uint64_t length;
  bool operator==(const Landing& o) const {
    return lkey == o.lkey && addr == o.addr && length == o.length;
  }
};

void AppendRuns(const rdma::Sge* sges, int n, std::vector<Landing>* runs) {
  for (int i = 0; i < n; ++i) {
    if (sges[i].length == 0) continue;
    if (!runs->empty() && runs->back().lkey == sges[i].lkey &&
        runs->back().addr + runs->back().length == sges[i].addr) {
      runs->back().length += sges[i].length;
    } else {
      runs->push_back({sges[i].lkey, sges[i].addr, sges[i].length});
    }
  }
}

TEST(SplitRead, ShortReadsStayWhole) {
  const rdma::Sge sge{0x1000, static_cast<uint32_t>(2 * kChunkedReadMinBytes - 1), 7};
  ReadChunk out[kMaxReadChunks];
  ASSERT_EQ(SplitRead({&sge, 1}, out), 1);
  EXPECT_EQ(out[0].begin, 0u);
  EXPECT_EQ(out[0].end, sge.length);
  ASSERT_EQ(out[0].nsge, 1);
  EXPECT_EQ(out[0].sges[0].addr, sge.addr);
  EXPECT_EQ(out[0].sges[0].length, sge.length);
}

TEST(SplitRead, OneMebibyteEntryInFourPieces) {
  // A GET's whole entry into one buffer: 1 MiB of value plus header and key.
  const rdma::Sge sge{0x10000, (1u << 20) + 64, 3};
  ReadChunk out[kMaxReadChunks];
  ASSERT_EQ(SplitRead({&sge, 1}, out), 4);
  EXPECT_EQ(out[0].end - out[0].begin, (1u << 18) + 4096);  // a quarter, 4 KiB aligned
  EXPECT_EQ(out[3].end, sge.length);
}

// Any scatter list of up to three entries (a zero-copy GET: header+key to
// scratch, the value to the caller, padding to scratch): the pieces cover
// the READ once, in order, each byte landing where the whole READ put it.
TEST(SplitRead, PiecesMapEveryByteWhereTheWholeReadDid) {
  const uint32_t seed = std::random_device{}();
  std::printf("SplitRead seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int round = 0; round < 200; ++round) {
    const int nsge = 1 + static_cast<int>(rng() % kMaxChunkSges);
    rdma::Sge sges[kMaxChunkSges];
    uint64_t total = 0;
    for (int i = 0; i < nsge; ++i) {
      // Mostly small pieces around one large one, as a real GET has.
      const uint32_t len = rng() % 3 == 0 ? rng() % (3 << 20) : rng() % 100;
      sges[i] = {uint64_t{i + 1} << 40, len, static_cast<uint32_t>(i + 10)};
      total += len;
    }
    ReadChunk out[kMaxReadChunks];
    const int n = SplitRead({sges, static_cast<size_t>(nsge)}, out);
    ASSERT_GE(n, 1);
    ASSERT_LE(n, kMaxReadChunks);
    if (total < 2 * kChunkedReadMinBytes) EXPECT_EQ(n, 1);
    uint64_t expect_begin = 0;
    std::vector<Landing> pieces;
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(out[i].begin, expect_begin);
      if (i + 1 < n) EXPECT_GE(out[i].end - out[i].begin, kChunkedReadMinBytes);
      uint64_t len = 0;
      for (int j = 0; j < out[i].nsge; ++j) len += out[i].sges[j].length;
      EXPECT_EQ(len, out[i].end - out[i].begin);
      AppendRuns(out[i].sges, out[i].nsge, &pieces);
      expect_begin = out[i].end;
    }
    EXPECT_EQ(expect_begin, total);
    std::vector<Landing> whole;
    AppendRuns(sges, nsge, &whole);
    EXPECT_TRUE(pieces == whole) << "round " << round << " seed " << seed;
  }
}

}  // namespace
}  // namespace client
}  // namespace kvstore
