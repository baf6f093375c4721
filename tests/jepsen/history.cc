// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/history.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvstore {
namespace jepsen {

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kPut:
      return "PUT";
    case OpKind::kGet:
      return "GET";
    case OpKind::kDelete:
      return "DELETE";
  }
  return "?";
}

const char* OutcomeName(Outcome out) {
  switch (out) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kFail:
      return "fail";
    case Outcome::kUnknown:
      return "unknown";
  }
  return "?";
}

namespace {

std::string FormatTime(int64_t ns, int64_t origin) {
  if (ns == kNever) return "never";
  return absl::StrFormat("%.6fs", static_cast<double>(ns - origin) / 1e9);
}

}  // namespace

std::string Op::Describe(int64_t origin_ns) const {
  std::string s =
      absl::StrCat("#", id, " c", client, final_read ? " final " : " ", OpKindName(kind), " ", key);
  if (kind == OpKind::kPut) {
    absl::StrAppend(&s, "=", value.value_or("?"));
  } else if (kind == OpKind::kGet && outcome == Outcome::kOk) {
    absl::StrAppend(&s, " -> ", value.has_value() ? *value : "(absent)");
  }
  absl::StrAppend(&s, " [", FormatTime(invoke_ns, origin_ns), ", ",
                  FormatTime(complete_ns, origin_ns), "] ", OutcomeName(outcome));
  if (!batch.empty()) absl::StrAppend(&s, " batch=", batch);
  if (!path.empty()) absl::StrAppend(&s, " via ", path);
  if (!error.empty()) absl::StrAppend(&s, " (", error, ")");
  return s;
}

std::vector<Op> Normalize(std::vector<Op> ops) {
  std::vector<Op> out;
  out.reserve(ops.size());
  for (Op& op : ops) {
    if (op.kind == OpKind::kGet && op.outcome != Outcome::kOk) continue;
    if (op.outcome == Outcome::kUnknown) op.complete_ns = kNever;
    op.complete_ns = std::max(op.complete_ns, op.invoke_ns);
    out.push_back(std::move(op));
  }
  return out;
}

std::map<std::string, std::vector<Op>> ByKey(const std::vector<Op>& ops) {
  std::map<std::string, std::vector<Op>> by_key;
  for (const Op& op : ops) by_key[op.key].push_back(op);
  return by_key;
}

int64_t Origin(const std::vector<Op>& ops) {
  if (ops.empty()) return 0;
  int64_t origin = ops.front().invoke_ns;
  for (const Op& op : ops) origin = std::min(origin, op.invoke_ns);
  return origin;
}

}  // namespace jepsen
}  // namespace kvstore
