// Copyright 2026 The kvstore Authors.

#include "tests/cluster/history.h"

#include <time.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace testing {

const char* OpTypeName(OpType type) {
  switch (type) {
    case OpType::kPut:
      return "PUT";
    case OpType::kGet:
      return "GET";
    case OpType::kDelete:
      return "DELETE";
  }
  return "?";
}

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPending:
      return "pending";
    case Outcome::kOk:
      return "ok";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kUnknown:
      return "unknown";
  }
  return "?";
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t SteadyNsFromWallNs(int64_t wall_ns) {
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  const int64_t wall_now = static_cast<int64_t>(wall.tv_sec) * 1000000000 + wall.tv_nsec;
  return NowNs() - (wall_now - wall_ns);
}

namespace {

std::string FormatTime(int64_t ns) {
  if (ns == std::numeric_limits<int64_t>::max()) return "inf";
  if (ns == std::numeric_limits<int64_t>::min()) return "-inf";
  return absl::StrFormat("%.6fs", static_cast<double>(ns) / 1e9);
}

}  // namespace

std::string Operation::Describe() const {
  std::string what =
      absl::StrCat("#", id, " c", client, final_read ? " final " : " ", OpTypeName(type), " ", key);
  if (type == OpType::kPut) {
    absl::StrAppend(&what, "=", value.value_or("?"));
  } else if (type == OpType::kGet && outcome == Outcome::kOk) {
    absl::StrAppend(&what, " -> ", value.has_value() ? *value : "(absent)");
  }
  absl::StrAppend(&what, " [", FormatTime(invoke_ns), ", ", FormatTime(complete_ns), "] ",
                  OutcomeName(outcome));
  if (!error.empty()) absl::StrAppend(&what, " (", error, ")");
  return what;
}

size_t History::Invoke(int client, OpType type, absl::string_view key,
                       std::optional<std::string> put_value, bool final_read) {
  Operation op;
  op.client = client;
  op.type = type;
  op.key = std::string(key);
  op.value = std::move(put_value);
  op.final_read = final_read;
  absl::MutexLock lock(&mu_);
  op.id = ops_.size();
  // Taken under the lock so that ids are in invocation order.
  op.invoke_ns = NowNs();
  ops_.push_back(std::move(op));
  return ops_.size() - 1;
}

void History::Complete(size_t id, Outcome outcome, std::optional<std::string> read_value,
                       const absl::Status& status) {
  const int64_t now = NowNs();
  absl::MutexLock lock(&mu_);
  Operation& op = ops_.at(id);
  op.complete_ns = now;
  op.outcome = outcome;
  if (op.type == OpType::kGet) op.value = std::move(read_value);
  if (!status.ok()) op.error = status.ToString();
}

size_t History::Add(Operation op) {
  absl::MutexLock lock(&mu_);
  op.id = ops_.size();
  ops_.push_back(std::move(op));
  return ops_.size() - 1;
}

std::vector<Operation> History::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<Operation> copy = ops_;
  for (Operation& op : copy) {
    if (op.outcome == Outcome::kPending) {
      op.outcome = Outcome::kUnknown;
      op.complete_ns = std::numeric_limits<int64_t>::max();
    }
  }
  return copy;
}

size_t History::size() const {
  absl::MutexLock lock(&mu_);
  return ops_.size();
}

absl::Status History::DumpJsonLines(const std::string& path) const {
  const std::vector<Operation> ops = Snapshot();
  std::ofstream out(path);
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  const int64_t origin = ops.empty() ? 0 : ops.front().invoke_ns;
  for (const Operation& op : ops) {
    nlohmann::json j;
    j["id"] = op.id;
    j["client"] = op.client;
    j["op"] = OpTypeName(op.type);
    j["key"] = op.key;
    j["value"] = op.value.has_value() ? nlohmann::json(*op.value) : nlohmann::json(nullptr);
    j["invoke_us"] = (op.invoke_ns - origin) / 1000;
    j["complete_us"] = op.complete_ns == std::numeric_limits<int64_t>::max()
                           ? nlohmann::json(nullptr)
                           : nlohmann::json((op.complete_ns - origin) / 1000);
    j["outcome"] = OutcomeName(op.outcome);
    if (op.final_read) j["final"] = true;
    if (!op.error.empty()) j["error"] = op.error;
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("write failed: ", path));
  return absl::OkStatus();
}

std::optional<int64_t> FirstAcknowledgedWrite(const std::vector<Operation>& ops,
                                              const std::vector<std::string>& keys,
                                              int64_t after_ns) {
  std::optional<int64_t> first;
  for (const Operation& op : ops) {
    if (op.type == OpType::kGet || op.outcome != Outcome::kOk || op.invoke_ns < after_ns) continue;
    if (std::find(keys.begin(), keys.end(), op.key) == keys.end()) continue;
    if (!first.has_value() || op.complete_ns < *first) first = op.complete_ns;
  }
  return first;
}

std::string DistinctErrors(const std::vector<Operation>& ops, int64_t since_ns, size_t max) {
  std::set<std::string> errors;
  for (const Operation& op : ops) {
    if (op.invoke_ns >= since_ns && !op.error.empty() && errors.size() < max) {
      errors.insert(op.error);
    }
  }
  std::string out;
  for (const std::string& e : errors) absl::StrAppend(&out, "\n  ", e);
  return out;
}

}  // namespace testing
}  // namespace kvstore
