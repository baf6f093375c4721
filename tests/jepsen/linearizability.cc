// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/linearizability.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace jepsen {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kViolation:
      return "VIOLATION";
    case Verdict::kUnknown:
      return "UNKNOWN";
  }
  return "?";
}

namespace {

std::optional<std::string> Written(const Op& w) {
  return w.kind == OpKind::kDelete ? std::nullopt : w.value;
}

// One key's ops as the search sees them, with the history ops they stand for.
struct Prepared {
  std::vector<RegisterOp> ops;
  std::vector<const Op*> source;  // parallel to ops
  // Parallel to ops: for an unknown write bounded by a read (see Prepare),
  // that read; else nullptr.
  std::vector<const Op*> bound_by;
  // Writes left out: failed ones (never take effect) and unknown ones no
  // read could have seen. Adding any of them to a failing subset leaves it
  // failing, so an explanation may name them.
  std::vector<const Op*> left_out;
  std::map<std::string, int> value_ids;
  size_t pruned_unknown = 0;
};

int ValueId(std::map<std::string, int>& ids, const std::optional<std::string>& v) {
  if (!v.has_value()) return 0;
  auto [it, inserted] = ids.emplace(*v, static_cast<int>(ids.size()) + 1);
  return it->second;
}

// The reads of each value (nullopt = absent), by completion time, and how
// many writes of any outcome wrote each value.
struct ValueIndex {
  std::map<std::optional<std::string>, std::vector<const Op*>> reads;
  std::map<std::string, int> writers;
};

ValueIndex Index(const std::vector<Op>& ops) {
  ValueIndex index;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kGet) index.reads[op.value].push_back(&op);
    if (op.kind == OpKind::kPut) ++index.writers[*op.value];
  }
  for (auto& [value, reads] : index.reads) {
    std::sort(reads.begin(), reads.end(),
              [](const Op* a, const Op* b) { return a->complete_ns < b->complete_ns; });
  }
  return index;
}

// The first read of `value` that completed at or after `t`, or nullptr.
const Op* FirstReadFrom(const ValueIndex& index, const std::optional<std::string>& value,
                        int64_t t) {
  auto it = index.reads.find(value);
  if (it == index.reads.end()) return nullptr;
  auto r = std::lower_bound(it->second.begin(), it->second.end(), t,
                            [](const Op* op, int64_t at) { return op->complete_ns < at; });
  return r == it->second.end() ? nullptr : *r;
}

// Unknown writes are where the search's cost lies (each stays pending to
// the end), so two equivalences narrow them:
//  - one whose value no read completed at or after its invocation returned
//    is left out: "never" explains it as well as any point;
//  - a PUT whose value no other write wrote, and which a read saw, took
//    effect before the first such read completed: it becomes a write that
//    completed then.
Prepared Prepare(const std::vector<Op>& ops) {
  Prepared p;
  const ValueIndex index = Index(ops);
  for (const Op& op : ops) {
    if (op.is_write() && op.outcome == Outcome::kFail) {
      p.left_out.push_back(&op);
      continue;
    }
    RegisterOp r;
    r.write = op.is_write();
    r.value = ValueId(p.value_ids, op.is_write() ? Written(op) : op.value);
    r.invoke = op.invoke_ns;
    r.complete = op.complete_ns;
    const Op* bound = nullptr;
    if (op.is_write() && op.outcome == Outcome::kUnknown) {
      const Op* first = FirstReadFrom(index, Written(op), op.invoke_ns);
      if (first == nullptr) {
        ++p.pruned_unknown;
        p.left_out.push_back(&op);
        continue;
      }
      if (op.kind == OpKind::kPut && index.writers.at(*op.value) == 1) {
        r.complete = first->complete_ns;
        bound = first;
      }
    }
    p.ops.push_back(r);
    p.source.push_back(&op);
    p.bound_by.push_back(bound);
  }
  return p;
}

std::vector<RegisterOp> Select(const std::vector<RegisterOp>& ops, const std::vector<int>& idx) {
  std::vector<RegisterOp> out;
  out.reserve(idx.size());
  for (int i : idx) out.push_back(ops[i]);
  return out;
}

// `cur` without the ops of cur[start, start+len) that may be removed without
// hiding a violation: reads, and writes whose value no remaining read returns.
std::vector<int> WithoutChunk(const std::vector<RegisterOp>& ops, const std::vector<int>& cur,
                              size_t start, size_t len) {
  std::set<int> read_values;
  for (size_t i = 0; i < cur.size(); ++i) {
    const bool in_chunk = i >= start && i < start + len;
    if (!in_chunk && !ops[cur[i]].write) read_values.insert(ops[cur[i]].value);
  }
  std::vector<int> out;
  for (size_t i = 0; i < cur.size(); ++i) {
    const RegisterOp& op = ops[cur[i]];
    const bool in_chunk = i >= start && i < start + len;
    if (in_chunk && (!op.write || read_values.count(op.value) == 0)) continue;
    out.push_back(cur[i]);
  }
  return out;
}

// Shrinks the failing `ops` by chunks (halving, as delta debugging does)
// while the rest still has no linearization. Returns the indices kept;
// `*minimal` is false when the step budget ran out first.
std::vector<int> Shrink(const std::vector<RegisterOp>& ops, const LinearizabilityOptions& options,
                        bool* minimal) {
  std::vector<int> cur(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) cur[i] = static_cast<int>(i);
  uint64_t spent = 0;
  size_t chunk = std::max<size_t>(1, cur.size() / 2);
  while (true) {
    bool removed = false;
    for (size_t start = 0; start < cur.size();) {
      std::vector<int> trial = WithoutChunk(ops, cur, start, chunk);
      if (trial.size() == cur.size()) {
        start += chunk;
        continue;
      }
      if (spent >= options.explain_steps) {
        *minimal = false;
        return cur;
      }
      SearchBudget budget = options.budget;
      budget.max_steps = std::min(budget.max_steps, options.explain_steps - spent);
      SearchStats stats;
      const SearchResult r = SearchRegister(Select(ops, trial), budget, &stats);
      spent += stats.steps;
      if (r == SearchResult::kNotLinearizable) {
        // The chunk's ops that stayed now sit at `start`: go on after them.
        const size_t len = std::min(chunk, cur.size() - start);
        start += len - (cur.size() - trial.size());
        cur = std::move(trial);
        removed = true;
      } else {
        start += chunk;
      }
    }
    if (chunk > 1) {
      chunk = std::max<size_t>(1, std::min(chunk / 2, cur.size() / 2));
    } else if (!removed) {
      return cur;
    }
  }
}

std::string Reason(const std::vector<Op>& expl) {
  std::vector<const Op*> reads, writes;
  for (const Op& op : expl) (op.is_write() ? writes : reads).push_back(&op);
  if (reads.size() == 1) {
    const Op& r = *reads[0];
    bool same = true, refused = true, later = true;
    for (const Op* w : writes) {
      same = same && Written(*w) == r.value;
      refused = refused && w->outcome == Outcome::kFail;
      later = later && w->invoke_ns > r.complete_ns;
    }
    if (same && writes.empty()) return "a read returned a value no write of this key wrote";
    if (same && refused) return "a read returned the value of a write the server refused";
    if (same && later) return "a read returned a value before its write began";
  }
  return absl::StrCat("no order of these ", expl.size(),
                      " ops within their real-time intervals is a legal register history");
}

void Explain(const Prepared& p, const LinearizabilityOptions& options, KeyVerdict* v) {
  std::vector<int> kept;
  if (options.explain) {
    kept = Shrink(p.ops, options, &v->minimal);
  } else {
    v->minimal = false;
    for (size_t i = 0; i < p.ops.size(); ++i) kept.push_back(static_cast<int>(i));
  }
  // The read that bounds a kept unknown write goes with it, so that the
  // explanation fails on its own, without the rest of the history.
  std::set<const Op*> chosen;
  for (int i : kept) {
    chosen.insert(p.source[i]);
    if (p.bound_by[i] != nullptr) chosen.insert(p.bound_by[i]);
  }
  std::set<std::optional<std::string>> read_values;
  for (const Op* op : chosen) {
    v->explanation.push_back(*op);
    if (op->kind == OpKind::kGet) read_values.insert(op->value);
  }
  for (const Op* w : p.left_out) {
    if (Written(*w).has_value() && read_values.count(Written(*w)) > 0) v->explanation.push_back(*w);
  }
  std::sort(v->explanation.begin(), v->explanation.end(),
            [](const Op& a, const Op& b) { return a.invoke_ns < b.invoke_ns; });
  v->reason = Reason(v->explanation);
}

}  // namespace

KeyVerdict CheckKey(const std::string& key, const std::vector<Op>& ops,
                    const LinearizabilityOptions& options) {
  KeyVerdict v;
  v.key = key;
  const Prepared p = Prepare(ops);
  v.ops = p.ops.size();
  v.pruned_unknown = p.pruned_unknown;
  SearchStats stats;
  const SearchResult r = SearchRegister(p.ops, options.budget, &stats);
  v.steps = stats.steps;
  switch (r) {
    case SearchResult::kLinearizable:
      v.verdict = Verdict::kOk;
      break;
    case SearchResult::kBudgetExceeded:
      v.verdict = Verdict::kUnknown;
      v.reason = absl::StrCat("search budget spent after ", stats.steps, " steps and ",
                              stats.memo_entries, " remembered configurations");
      break;
    case SearchResult::kNotLinearizable:
      v.verdict = Verdict::kViolation;
      Explain(p, options, &v);
      break;
  }
  return v;
}

LinearizabilityReport CheckLinearizable(const std::vector<Op>& ops,
                                        const LinearizabilityOptions& options) {
  LinearizabilityReport report;
  for (const auto& [key, key_ops] : ByKey(Normalize(ops))) {
    ++report.keys;
    KeyVerdict v = CheckKey(key, key_ops, options);
    if (v.verdict == Verdict::kOk) {
      ++report.keys_ok;
    } else if (v.verdict == Verdict::kViolation) {
      report.violations.push_back(std::move(v));
    } else {
      report.unknown.push_back(std::move(v));
    }
  }
  return report;
}

}  // namespace jepsen
}  // namespace kvstore
