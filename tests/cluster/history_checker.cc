// Copyright 2026 The kvstore Authors.

#include "tests/cluster/history_checker.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace kvstore {
namespace testing {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinusInf = std::numeric_limits<int64_t>::min();

// One write that may have happened, with the bounds of its effect instant.
struct Write {
  int64_t invoke = 0;
  int64_t upper = kInf;  // U(W) of the header
  size_t op = 0;         // index into the history
};

// The writes of one key sorted by invocation, with suffix minima of U so
// that "the write invoked after t that took effect earliest" is one search.
class WriteIndex {
 public:
  explicit WriteIndex(std::vector<Write> writes) : writes_(std::move(writes)) {
    std::sort(writes_.begin(), writes_.end(),
              [](const Write& a, const Write& b) { return a.invoke < b.invoke; });
    best_.resize(writes_.size() + 1, -1);
    for (int i = static_cast<int>(writes_.size()) - 1; i >= 0; --i) {
      const int next = best_[i + 1];
      best_[i] = (next < 0 || writes_[i].upper < writes_[next].upper) ? i : next;
    }
  }

  // Of the writes SupersedingBefore() would accept, the one invoked last:
  // the most telling to report. Linear, but only run on a violation.
  const Write* LatestSupersedingBefore(int64_t source_upper, int64_t t) const {
    for (auto it = writes_.rbegin(); it != writes_.rend() && it->invoke > source_upper; ++it) {
      if (it->upper < t) return &*it;
    }
    return nullptr;
  }

  // A write invoked after `source_upper` whose effect instant is surely
  // before `t`, or nullptr.
  const Write* SupersedingBefore(int64_t source_upper, int64_t t) const {
    auto it = std::upper_bound(writes_.begin(), writes_.end(), source_upper,
                               [](int64_t value, const Write& w) { return value < w.invoke; });
    const int best = best_[it - writes_.begin()];
    if (best < 0 || writes_[best].upper >= t) return nullptr;
    return &writes_[best];
  }

 private:
  std::vector<Write> writes_;
  std::vector<int> best_;  // index of the minimal upper in writes_[i..], -1 none
};

bool IsWrite(const Operation& op) { return op.type != OpType::kGet; }
bool MayHaveApplied(const Operation& op) {
  return op.outcome == Outcome::kOk || op.outcome == Outcome::kUnknown;
}
bool IsOkRead(const Operation& op) { return op.type == OpType::kGet && op.outcome == Outcome::kOk; }

class KeyChecker {
 public:
  KeyChecker(const std::vector<Operation>& ops, const std::vector<size_t>& mine,
             const CheckOptions& options, CheckResult* result)
      : ops_(ops), mine_(mine), options_(options), result_(result) {}

  void Run() {
    IndexPuts();
    std::vector<Write> writes;
    for (size_t i : mine_) {
      const Operation& op = ops_[i];
      if (!IsWrite(op) || !MayHaveApplied(op)) continue;
      (op.outcome == Outcome::kOk ? result_->acknowledged_writes : result_->unknown_writes)++;
      writes.push_back({op.invoke_ns, Upper(i), i});
    }
    WriteIndex index(std::move(writes));
    bool acked_write = false, final_read = false;
    for (size_t i : mine_) {
      const Operation& op = ops_[i];
      if (IsWrite(op) && op.outcome == Outcome::kOk) acked_write = true;
      if (!IsOkRead(op)) continue;
      ++result_->reads_checked;
      if (op.final_read) {
        ++result_->final_reads;
        final_read = true;
      }
      if (op.value.has_value()) {
        CheckValueRead(i, index);
      } else {
        CheckAbsentRead(i, index);
      }
    }
    if (options_.require_final_reads && acked_write && !final_read) {
      Report(ViolationKind::kNoFinalRead, {},
             "the key has acknowledged writes but no successful final read");
    }
  }

 private:
  void IndexPuts() {
    for (size_t i : mine_) {
      const Operation& op = ops_[i];
      if (op.type != OpType::kPut || !op.value.has_value()) continue;
      auto [it, inserted] = put_of_.emplace(*op.value, i);
      if (!inserted) {
        Report(ViolationKind::kDuplicateValue, {it->second, i},
               "two PUTs wrote the same value; every PUT must write a value of its own");
      }
    }
    // Earliest completion of a read that returned each value (evidence).
    for (size_t i : mine_) {
      const Operation& op = ops_[i];
      if (!IsOkRead(op) || !op.value.has_value()) continue;
      auto it = put_of_.find(*op.value);
      if (it == put_of_.end() || ops_[it->second].invoke_ns > op.complete_ns) continue;
      auto [seen, inserted] = first_seen_.emplace(it->second, op.complete_ns);
      if (!inserted) seen->second = std::min(seen->second, op.complete_ns);
    }
  }

  // U(W): the latest instant at which write `i` can have taken effect.
  int64_t Upper(size_t i) const {
    const Operation& op = ops_[i];
    int64_t upper = op.outcome == Outcome::kOk ? op.complete_ns : kInf;
    if (options_.reads_as_evidence) {
      auto it = first_seen_.find(i);
      if (it != first_seen_.end()) upper = std::min(upper, it->second);
    }
    return upper;
  }

  void CheckValueRead(size_t r, const WriteIndex& index) {
    const Operation& read = ops_[r];
    auto it = put_of_.find(*read.value);
    if (it == put_of_.end()) {
      Report(ViolationKind::kPhantomRead, {r}, "no PUT of this key wrote the value read");
      return;
    }
    const size_t p = it->second;
    const Operation& put = ops_[p];
    if (put.outcome == Outcome::kFailed) {
      Report(ViolationKind::kFailedWriteRead, {r, p},
             "the read returned the value of a PUT recorded as never sent");
      return;
    }
    if (put.invoke_ns > read.complete_ns) {
      Report(ViolationKind::kFutureRead, {r, p},
             "the read completed before the PUT of its value began");
      return;
    }
    if (index.SupersedingBefore(Upper(p), read.invoke_ns) != nullptr) {
      ReportSuperseded(r, p, *index.LatestSupersedingBefore(Upper(p), read.invoke_ns));
    }
  }

  // "Absent" reflects the initial state or a DELETE that may have applied
  // and began before the read ended; the latest-taking-effect one is the
  // hardest to supersede, so it alone decides.
  void CheckAbsentRead(size_t r, const WriteIndex& index) {
    const Operation& read = ops_[r];
    int64_t best_upper = kMinusInf;
    size_t best = r;  // r itself stands for "the initial state"
    for (size_t i : mine_) {
      const Operation& op = ops_[i];
      if (op.type != OpType::kDelete || !MayHaveApplied(op)) continue;
      if (op.invoke_ns > read.complete_ns) continue;
      const int64_t upper = Upper(i);
      if (upper > best_upper) {
        best_upper = upper;
        best = i;
      }
    }
    if (index.SupersedingBefore(best_upper, read.invoke_ns) != nullptr) {
      ReportSuperseded(r, best, *index.LatestSupersedingBefore(best_upper, read.invoke_ns));
    }
  }

  void ReportSuperseded(size_t r, size_t source, const Write& w) {
    const Operation& newer = ops_[w.op];
    const bool acked = newer.outcome == Outcome::kOk && newer.complete_ns == w.upper;
    const std::string how = acked ? "was acknowledged" : "was seen by a read";
    const std::string what =
        source == r ? "the initial absent state" : absl::StrCat("the write #", ops_[source].id);
    std::vector<size_t> involved = {r};
    if (source != r) involved.push_back(source);
    involved.push_back(w.op);
    if (ops_[r].final_read) {
      Report(ViolationKind::kLostWrite, involved,
             absl::StrCat("write #", newer.id, " ", how, " and began after ", what,
                          " took effect, yet the final read returned ", what, ": write #", newer.id,
                          " was lost"));
    } else {
      Report(ViolationKind::kStaleRead, involved,
             absl::StrCat("write #", newer.id, " ", how, " before the read began and began after ",
                          what, " took effect, yet the read returned ", what));
    }
  }

  void Report(ViolationKind kind, const std::vector<size_t>& involved, std::string why) {
    Violation v;
    v.kind = kind;
    v.key = key();
    for (size_t i : involved) v.ops.push_back(ops_[i]);
    v.explanation = std::move(why);
    result_->violations.push_back(std::move(v));
  }

  const std::string& key() const { return ops_[mine_.front()].key; }

  const std::vector<Operation>& ops_;
  const std::vector<size_t>& mine_;
  const CheckOptions& options_;
  CheckResult* result_;
  absl::flat_hash_map<std::string, size_t> put_of_;  // value -> its PUT
  absl::flat_hash_map<size_t, int64_t> first_seen_;  // PUT -> first read end
};

}  // namespace

const char* ViolationKindName(ViolationKind kind) {
  switch (kind) {
    case ViolationKind::kPhantomRead:
      return "phantom-read";
    case ViolationKind::kFailedWriteRead:
      return "failed-write-read";
    case ViolationKind::kFutureRead:
      return "future-read";
    case ViolationKind::kStaleRead:
      return "stale-read";
    case ViolationKind::kLostWrite:
      return "lost-write";
    case ViolationKind::kNoFinalRead:
      return "no-final-read";
    case ViolationKind::kDuplicateValue:
      return "duplicate-value";
  }
  return "?";
}

std::string Violation::Describe() const {
  std::string out = absl::StrCat(ViolationKindName(kind), " key=", key, ": ", explanation);
  for (const Operation& op : ops) absl::StrAppend(&out, "\n    ", op.Describe());
  return out;
}

std::string CheckResult::Report(size_t max_violations) const {
  std::string out =
      absl::StrCat("history: ", keys, " keys, ", reads_checked, " reads checked (", final_reads,
                   " final), ", acknowledged_writes, " acknowledged writes, ", unknown_writes,
                   " unknown; ", violations.size(), " violations");
  for (size_t i = 0; i < violations.size() && i < max_violations; ++i) {
    absl::StrAppend(&out, "\n  ", violations[i].Describe());
  }
  if (violations.size() > max_violations) {
    absl::StrAppend(&out, "\n  ... ", violations.size() - max_violations, " more");
  }
  return out;
}

CheckResult CheckHistory(const std::vector<Operation>& ops, const CheckOptions& options) {
  CheckResult result;
  std::map<std::string, std::vector<size_t>> by_key;  // ordered: stable reports
  for (size_t i = 0; i < ops.size(); ++i) by_key[ops[i].key].push_back(i);
  result.keys = by_key.size();
  for (const auto& [key, mine] : by_key) {
    KeyChecker(ops, mine, options, &result).Run();
  }
  return result;
}

}  // namespace testing
}  // namespace kvstore
