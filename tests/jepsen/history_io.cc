// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/history_io.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace jepsen {
namespace {

using nlohmann::json;

absl::Status LineError(size_t line_no, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("history line ", line_no + 1, ": ", what));
}

absl::StatusOr<OpKind> ParseKind(const std::string& text) {
  const std::string upper = absl::AsciiStrToUpper(text);
  if (upper == "PUT") return OpKind::kPut;
  if (upper == "GET") return OpKind::kGet;
  if (upper == "DELETE" || upper == "DEL") return OpKind::kDelete;
  return absl::InvalidArgumentError(absl::StrCat("unknown op \"", text, "\""));
}

absl::StatusOr<Outcome> ParseOutcome(const std::string& text) {
  if (text == "ok") return Outcome::kOk;
  if (text == "fail" || text == "failed") return Outcome::kFail;
  if (text == "unknown" || text == "pending" || text == "info") return Outcome::kUnknown;
  return absl::InvalidArgumentError(absl::StrCat("unknown outcome \"", text, "\""));
}

// A time field: "<name>_ns", else "<name>_us" * 1000; kNever when null or
// absent.
absl::StatusOr<int64_t> ParseTime(const json& j, const std::string& name) {
  for (const auto& [field, scale] : {std::pair<std::string, int64_t>{name + "_ns", 1},
                                     std::pair<std::string, int64_t>{name + "_us", 1000}}) {
    auto it = j.find(field);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(field, " is not an integer"));
    }
    return it->get<int64_t>() * scale;
  }
  return kNever;
}

std::string StringField(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

absl::StatusOr<Op> ParseOpLine(absl::string_view line, size_t line_no) {
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return LineError(line_no, "not a JSON object");
  for (const char* required : {"op", "key", "outcome"}) {
    if (!j.contains(required) || !j[required].is_string()) {
      return LineError(line_no, absl::StrCat("\"", required, "\" missing or not a string"));
    }
  }
  Op op;
  op.id = line_no;
  if (j.contains("id")) {
    if (!j["id"].is_number_unsigned()) return LineError(line_no, "\"id\" is not a number");
    op.id = j["id"].get<uint64_t>();
  }
  if (j.contains("client") && j["client"].is_number_integer()) op.client = j["client"].get<int>();
  absl::StatusOr<OpKind> kind = ParseKind(j["op"].get<std::string>());
  absl::StatusOr<Outcome> outcome = ParseOutcome(j["outcome"].get<std::string>());
  if (!kind.ok()) return LineError(line_no, kind.status().message());
  if (!outcome.ok()) return LineError(line_no, outcome.status().message());
  op.kind = *kind;
  op.outcome = *outcome;
  op.key = j["key"].get<std::string>();
  if (j.contains("value") && !j["value"].is_null()) {
    if (!j["value"].is_string()) return LineError(line_no, "\"value\" is not a string or null");
    op.value = j["value"].get<std::string>();
  }
  if (op.kind == OpKind::kPut && !op.value.has_value()) {
    return LineError(line_no, "a PUT without a value");
  }
  absl::StatusOr<int64_t> invoke = ParseTime(j, "invoke");
  absl::StatusOr<int64_t> complete = ParseTime(j, "complete");
  if (!invoke.ok()) return LineError(line_no, invoke.status().message());
  if (!complete.ok()) return LineError(line_no, complete.status().message());
  if (*invoke == kNever) return LineError(line_no, "no invoke time");
  op.invoke_ns = *invoke;
  op.complete_ns = *complete;
  if (op.complete_ns == kNever && op.outcome != Outcome::kUnknown) {
    return LineError(line_no, "a completed outcome without a complete time");
  }
  op.batch = StringField(j, "batch");
  if (j.contains("batch") && j["batch"].is_number()) op.batch = j["batch"].dump();
  op.workload = StringField(j, "workload");
  op.final_read = j.contains("final") && j["final"].is_boolean() && j["final"].get<bool>();
  op.path = StringField(j, "path");
  op.error = StringField(j, "error");
  return op;
}

std::string FormatOpLine(const Op& op) {
  json j;
  j["id"] = op.id;
  j["client"] = op.client;
  j["op"] = OpKindName(op.kind);
  j["key"] = op.key;
  j["value"] = op.value.has_value() ? json(*op.value) : json(nullptr);
  j["invoke_ns"] = op.invoke_ns;
  j["complete_ns"] = op.complete_ns == kNever ? json(nullptr) : json(op.complete_ns);
  j["outcome"] = OutcomeName(op.outcome);
  if (!op.batch.empty()) j["batch"] = op.batch;
  if (!op.workload.empty()) j["workload"] = op.workload;
  if (op.final_read) j["final"] = true;
  if (!op.path.empty()) j["path"] = op.path;
  if (!op.error.empty()) j["error"] = op.error;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<std::vector<Op>> ParseHistory(absl::string_view text) {
  std::vector<Op> ops;
  size_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StripAsciiWhitespace(line).empty()) {
      absl::StatusOr<Op> op = ParseOpLine(line, line_no);
      if (!op.ok()) return op.status();
      ops.push_back(*std::move(op));
    }
    ++line_no;
  }
  return ops;
}

absl::StatusOr<std::vector<Op>> ReadHistoryFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<Op>> ops = ParseHistory(text.str());
  if (!ops.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", ops.status().message()));
  return ops;
}

absl::Status WriteHistoryFile(const std::string& path, const std::vector<Op>& ops) {
  std::ofstream out(path);
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  for (const Op& op : ops) out << FormatOpLine(op) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("write failed: ", path));
  return absl::OkStatus();
}

}  // namespace jepsen
}  // namespace kvstore
