// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/write_availability.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"

namespace kvstore {
namespace jepsen {
namespace {

double Ms(int64_t ns) { return ns / 1e6; }

struct Gap {
  int64_t start = 0, end = 0;
  int64_t length() const { return end - start; }
};

// The longest gap between consecutive completions (sorted) that ends after
// `from` and starts before `until`; `until` ends the last one. With no
// completion before `from`, the gap starts at `from`.
Gap LongestGap(std::vector<int64_t> done, int64_t from, int64_t until) {
  std::sort(done.begin(), done.end());
  Gap best;
  int64_t prev = from;
  for (int64_t t : done) {
    if (t <= from) {
      prev = t;
      continue;
    }
    if (prev >= until) break;
    const Gap g{prev, std::min(t, until)};
    if (g.length() > best.length()) best = g;
    prev = t;
  }
  if (prev < until && until - prev > best.length()) best = {prev, until};
  return best;
}

}  // namespace

WriteAvailability MeasureWrites(const std::vector<Op>& ops,
                                const std::function<int(const std::string&)>& shard_of, int shards,
                                int64_t from_ns, int64_t since_ns, int64_t until_ns) {
  WriteAvailability a;
  std::vector<int64_t> all;
  std::map<int, std::vector<int64_t>> by_shard;
  int64_t first = kNever;
  std::vector<int64_t> first_of(std::max(shards, 0), kNever);
  for (const Op& op : ops) {
    if (!op.is_write() || op.outcome != Outcome::kOk || op.complete_ns == kNever) continue;
    const int shard = shard_of(op.key);
    all.push_back(op.complete_ns);
    if (shard >= 0 && shard < shards) by_shard[shard].push_back(op.complete_ns);
    if (op.invoke_ns < since_ns) continue;
    first = std::min(first, op.complete_ns);
    if (shard >= 0 && shard < shards) first_of[shard] = std::min(first_of[shard], op.complete_ns);
  }
  if (first != kNever) a.first_write_ms = Ms(first - since_ns);
  int64_t last_shard = 0;
  for (int64_t t : first_of) {
    if (t == kNever) {
      ++a.shards_without_write;
    } else {
      last_shard = std::max(last_shard, t);
    }
  }
  if (shards > 0 && a.shards_without_write == 0) a.all_shards_ms = Ms(last_shard - since_ns);
  const Gap g = LongestGap(all, from_ns, until_ns);
  a.longest_gap_ms = Ms(g.length());
  a.gap_start_ns = g.start;
  a.gap_end_ns = g.end;
  for (int s = 0; s < shards; ++s) {
    const Gap sg = LongestGap(by_shard[s], from_ns, until_ns);
    if (Ms(sg.length()) > a.longest_shard_gap_ms || a.longest_gap_shard < 0) {
      a.longest_shard_gap_ms = Ms(sg.length());
      a.longest_gap_shard = s;
    }
  }
  return a;
}

std::string DescribeAvailability(const WriteAvailability& a) {
  std::string out = a.first_write_ms < 0 ? "no write accepted"
                                         : absl::StrFormat("first write %.0f ms", a.first_write_ms);
  if (a.all_shards_ms >= 0) {
    absl::StrAppendFormat(&out, ", every shard %.0f ms", a.all_shards_ms);
  } else {
    absl::StrAppendFormat(&out, ", %d shards never", a.shards_without_write);
  }
  absl::StrAppendFormat(&out,
                        "; longest gap without an acknowledged write %.0f ms (shard %d: %.0f ms)",
                        a.longest_gap_ms, a.longest_gap_shard, a.longest_shard_gap_ms);
  return out;
}

}  // namespace jepsen
}  // namespace kvstore
