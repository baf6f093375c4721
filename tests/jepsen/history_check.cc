// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/history_check.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/jepsen/set_checker.h"

namespace kvstore {
namespace jepsen {
namespace {

std::string OpCounts(const std::vector<Op>& ops) {
  std::map<std::pair<bool, Outcome>, size_t> n;
  for (const Op& op : ops) ++n[{op.is_write(), op.outcome}];
  auto at = [&](bool write, Outcome o) { return n[{write, o}]; };
  return absl::StrCat("ops: ", ops.size(), " (writes ok ", at(true, Outcome::kOk), ", fail ",
                      at(true, Outcome::kFail), ", unknown ", at(true, Outcome::kUnknown),
                      "; reads ok ", at(false, Outcome::kOk), ", failed or unknown (dropped) ",
                      at(false, Outcome::kFail) + at(false, Outcome::kUnknown), ")\n");
}

void AppendOps(const std::vector<Op>& ops, int64_t origin, std::string* text) {
  for (const Op& op : ops) absl::StrAppend(text, "      ", op.Describe(origin), "\n");
}

void Linearizability(const std::vector<Op>& ops, const HistoryCheckOptions& options, int64_t origin,
                     HistoryCheckResult* result) {
  const LinearizabilityReport r = CheckLinearizable(ops, options.linearizability);
  absl::StrAppend(&result->text, "linearizability: ", r.keys, " keys, ", r.keys_ok, " ok, ",
                  r.violations.size(), " violating, ", r.unknown.size(),
                  " unknown (search budget spent)\n");
  for (size_t i = 0; i < r.violations.size() && i < options.max_reported; ++i) {
    const KeyVerdict& v = r.violations[i];
    absl::StrAppend(&result->text, "  VIOLATION key ", v.key, ": ", v.reason,
                    v.minimal ? "" : " (explanation not minimal: shrink budget spent)", "\n");
    AppendOps(v.explanation, origin, &result->text);
  }
  for (size_t i = 0; i < r.unknown.size() && i < options.max_reported; ++i) {
    absl::StrAppend(&result->text, "  UNKNOWN key ", r.unknown[i].key, " (", r.unknown[i].ops,
                    " ops): ", r.unknown[i].reason, "\n");
  }
  result->violation |= !r.violations.empty();
  result->undecided |= !r.unknown.empty();
}

void Set(const std::vector<Op>& ops, const HistoryCheckOptions& options, int64_t origin,
         HistoryCheckResult* result) {
  const SetReport r = CheckSet(ops);
  absl::StrAppend(&result->text, "set: ", r.keys, " keys, inserts acked ", r.acked, ", refused ",
                  r.failed, ", unknown ", r.unknown, " (", r.unknown_present,
                  " present at the end); ", r.unchecked, " keys without a final read; ",
                  r.violations.size(), " violations\n");
  for (size_t i = 0; i < r.violations.size() && i < options.max_reported; ++i) {
    const SetViolation& v = r.violations[i];
    absl::StrAppend(&result->text, "  VIOLATION ", SetViolationName(v.kind), " key ", v.key, "\n");
    AppendOps(v.ops, origin, &result->text);
  }
  result->violation |= !r.ok();
}

void FinalReads(const std::vector<Op>& ops, const HistoryCheckOptions& options,
                HistoryCheckResult* result) {
  std::set<std::string> acked, read;
  for (const Op& op : Normalize(ops)) {
    if (op.is_write() && op.outcome == Outcome::kOk) acked.insert(op.key);
    if (op.final_read) read.insert(op.key);
  }
  std::vector<std::string> missing;
  for (const std::string& key : acked) {
    if (read.count(key) == 0) missing.push_back(key);
  }
  absl::StrAppend(&result->text, "final reads: ", read.size(), " keys read, ", missing.size(),
                  " keys with an acknowledged write and no final read\n");
  if (!options.require_final_reads || missing.empty()) return;
  for (size_t i = 0; i < missing.size() && i < options.max_reported; ++i) {
    absl::StrAppend(&result->text, "  VIOLATION no final read of ", missing[i], "\n");
  }
  result->violation = true;
}

}  // namespace

HistoryCheckResult CheckHistory(const std::vector<Op>& ops, const HistoryCheckOptions& options) {
  HistoryCheckResult result;
  result.text = OpCounts(ops);
  std::vector<Op> registers, set;
  for (const Op& op : ops) {
    const bool in_set = op.workload == "set" || (!options.set_prefix.empty() &&
                                                 absl::StartsWith(op.key, options.set_prefix));
    (in_set ? set : registers).push_back(op);
  }
  const int64_t origin = Origin(ops);
  if (!registers.empty()) {
    Linearizability(registers, options, origin, &result);
    FinalReads(registers, options, &result);
  }
  if (!set.empty()) Set(set, options, origin, &result);
  return result;
}

std::string ConvergenceText(const ConvergenceReport& report, size_t max_reported, bool* violation) {
  std::string text =
      absl::StrCat("convergence: ", report.shards, " shards, ", report.replicas, " replica dumps, ",
                   report.keys, " keys, ", report.differences.size(), " keys differ\n");
  for (size_t i = 0; i < report.differences.size() && i < max_reported; ++i) {
    absl::StrAppend(&text, "  VIOLATION ", DescribeDifference(report.differences[i]), "\n");
  }
  if (!report.ok()) *violation = true;
  return text;
}

}  // namespace jepsen
}  // namespace kvstore
