// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/replica_dumps_io.h"

#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace jepsen {

absl::StatusOr<std::vector<ShardDumps>> ParseReplicaDumps(absl::string_view text) {
  using nlohmann::json;
  std::map<std::string, ShardDumps> shards;
  size_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("replica dump line ", line_no, ": ", what));
    };
    json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return error("not a JSON object");
    if (!j.contains("shard") || !(j["shard"].is_string() || j["shard"].is_number_integer())) {
      return error("\"shard\" missing");
    }
    if (!j.contains("replica") || !j["replica"].is_string()) return error("\"replica\" missing");
    if (!j.contains("data") || !j["data"].is_object()) return error("\"data\" is not an object");
    const std::string shard =
        j["shard"].is_string() ? j["shard"].get<std::string>() : j["shard"].dump();
    const std::string replica = j["replica"].get<std::string>();
    ShardDumps& s = shards[shard];
    s.shard = shard;
    if (s.replicas.count(replica) > 0) {
      return error(absl::StrCat("a second dump of ", replica, " for shard ", shard));
    }
    ReplicaDump& dump = s.replicas[replica];
    for (const auto& [key, value] : j["data"].items()) {
      if (!value.is_string()) return error(absl::StrCat("the value of ", key, " is not a string"));
      dump[key] = value.get<std::string>();
    }
  }
  std::vector<ShardDumps> out;
  for (auto& [name, s] : shards) out.push_back(std::move(s));
  return out;
}

absl::StatusOr<std::vector<ShardDumps>> ReadReplicaDumpsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseReplicaDumps(text.str());
}

}  // namespace jepsen
}  // namespace kvstore
