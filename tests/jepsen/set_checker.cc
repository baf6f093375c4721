// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/set_checker.h"

#include <algorithm>
#include <utility>

namespace kvstore {
namespace jepsen {

const char* SetViolationName(SetViolationKind kind) {
  switch (kind) {
    case SetViolationKind::kLost:
      return "lost";
    case SetViolationKind::kUnstable:
      return "unstable";
    case SetViolationKind::kRefusedPresent:
      return "refused-present";
    case SetViolationKind::kPhantom:
      return "phantom";
    case SetViolationKind::kFutureRead:
      return "future-read";
    case SetViolationKind::kNotWriteOnce:
      return "not-write-once";
  }
  return "?";
}

namespace {

void Add(SetReport* report, SetViolationKind kind, const std::string& key, std::vector<Op> ops) {
  report->violations.push_back(SetViolation{kind, key, std::move(ops)});
}

// Reads that found the element present, checked against its insert.
void CheckPresentReads(const std::string& key, const Op* insert, const std::vector<Op>& reads,
                       SetReport* report) {
  for (const Op& r : reads) {
    if (!r.value.has_value()) continue;
    if (insert == nullptr || insert->kind != OpKind::kPut || r.value != insert->value) {
      std::vector<Op> ops = {r};
      if (insert != nullptr) ops.insert(ops.begin(), *insert);
      Add(report, SetViolationKind::kPhantom, key, std::move(ops));
    } else if (insert->outcome == Outcome::kFail) {
      Add(report, SetViolationKind::kRefusedPresent, key, {*insert, r});
    } else if (r.complete_ns < insert->invoke_ns) {
      Add(report, SetViolationKind::kFutureRead, key, {*insert, r});
    }
  }
}

// A present read followed (in real time) by an absent one.
void CheckStability(const std::string& key, const std::vector<Op>& reads, SetReport* report) {
  const Op* first_present = nullptr;
  for (const Op& r : reads) {
    if (r.value.has_value() &&
        (first_present == nullptr || r.complete_ns < first_present->complete_ns)) {
      first_present = &r;
    }
  }
  if (first_present == nullptr) return;
  for (const Op& r : reads) {
    if (!r.value.has_value() && r.invoke_ns > first_present->complete_ns) {
      Add(report, SetViolationKind::kUnstable, key, {*first_present, r});
      return;
    }
  }
}

void CheckKey(const std::string& key, const std::vector<Op>& ops, SetReport* report) {
  std::vector<const Op*> inserts;
  std::vector<Op> reads;
  const Op* final_read = nullptr;
  for (const Op& op : ops) {
    if (op.is_write()) inserts.push_back(&op);
    if (op.kind == OpKind::kGet) reads.push_back(op);
  }
  for (const Op& r : reads) {
    if (r.final_read && (final_read == nullptr || r.invoke_ns > final_read->invoke_ns)) {
      final_read = &r;
    }
  }
  if (inserts.size() > 1) {
    std::vector<Op> copies;
    for (const Op* w : inserts) copies.push_back(*w);
    Add(report, SetViolationKind::kNotWriteOnce, key, std::move(copies));
    return;
  }
  const Op* insert = inserts.empty() ? nullptr : inserts.front();
  if (insert != nullptr) {
    if (insert->outcome == Outcome::kOk) ++report->acked;
    if (insert->outcome == Outcome::kFail) ++report->failed;
    if (insert->outcome == Outcome::kUnknown) ++report->unknown;
  }
  CheckPresentReads(key, insert, reads, report);
  CheckStability(key, reads, report);
  if (final_read == nullptr) {
    ++report->unchecked;
    return;
  }
  if (insert != nullptr && insert->outcome == Outcome::kUnknown && final_read->value.has_value()) {
    ++report->unknown_present;
  }
  // An insert still running when the final read began may come after it.
  if (insert != nullptr && insert->outcome == Outcome::kOk && !final_read->value.has_value() &&
      final_read->invoke_ns > insert->complete_ns) {
    Add(report, SetViolationKind::kLost, key, {*insert, *final_read});
  }
}

}  // namespace

SetReport CheckSet(const std::vector<Op>& ops) {
  SetReport report;
  for (const auto& [key, key_ops] : ByKey(Normalize(ops))) {
    ++report.keys;
    CheckKey(key, key_ops, &report);
  }
  return report;
}

}  // namespace jepsen
}  // namespace kvstore
