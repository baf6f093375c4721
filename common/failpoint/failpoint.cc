// Copyright 2026 The kvstore Authors.

#include "common/failpoint/failpoint.h"

#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace kvstore {
namespace failpoint {
namespace internal {

std::atomic<int> armed_points{0};

namespace {

struct Point {
  // Shared so that Hit() can run it after dropping the registry lock while
  // a test disarms or re-arms the point.
  std::shared_ptr<const Action> action;
  int64_t hits = 0;
};

struct Registry {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, Point> points ABSL_GUARDED_BY(mu);
};

Registry& TheRegistry() {
  // Never destroyed: points may be reached by threads still running at exit.
  static Registry* const registry = new Registry;
  return *registry;
}

}  // namespace

absl::Status Hit(absl::string_view name) {
  Registry& r = TheRegistry();
  std::shared_ptr<const Action> action;
  {
    absl::MutexLock lock(&r.mu);
    auto it = r.points.find(name);
    if (it == r.points.end() || it->second.action == nullptr) return absl::OkStatus();
    ++it->second.hits;
    action = it->second.action;
  }
  return (*action)();
}

void Arm(const std::string& name, Action action) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  Point& p = r.points[name];
  if (p.action == nullptr) armed_points.fetch_add(1, std::memory_order_relaxed);
  p.action = std::make_shared<const Action>(std::move(action));
}

void Disarm(const std::string& name) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.points.find(name);
  if (it == r.points.end() || it->second.action == nullptr) return;
  it->second.action = nullptr;
  armed_points.fetch_sub(1, std::memory_order_relaxed);
}

int64_t Hits(const std::string& name) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.points.find(name);
  return it == r.points.end() ? 0 : it->second.hits;
}

}  // namespace internal

namespace {

// "UNAVAILABLE" -> kUnavailable; false for a word that names no code.
bool ParseCode(absl::string_view word, absl::StatusCode* code) {
  for (int c = 1; c <= 16; ++c) {
    if (absl::StatusCodeToString(static_cast<absl::StatusCode>(c)) == word) {
      *code = static_cast<absl::StatusCode>(c);
      return true;
    }
  }
  return false;
}

// The argument of "word(ARG)", or false when `action` is not of that form.
bool Argument(absl::string_view action, absl::string_view word, absl::string_view* arg) {
  if (!absl::ConsumePrefix(&action, word) || !absl::ConsumePrefix(&action, "(") ||
      !absl::ConsumeSuffix(&action, ")")) {
    return false;
  }
  *arg = action;
  return true;
}

absl::Status ParseAction(const std::string& name, absl::string_view text, Action* action) {
  const std::string what = absl::StrCat("failpoint ", name, " (", text, ")");
  absl::string_view arg;
  if (text == "pause") {
    *action = [what] {
      LOG(WARNING) << what << " hit: pausing for ever";
      for (;;) absl::SleepFor(absl::Hours(1));
      return absl::OkStatus();
    };
  } else if (text == "exit") {
    *action = [what] {
      LOG(WARNING) << what << " hit: exiting with status " << kFailpointExitCode;
      google::FlushLogFiles(google::GLOG_INFO);
      _exit(kFailpointExitCode);
      return absl::OkStatus();
    };
  } else if (Argument(text, "sleep", &arg)) {
    absl::Duration d;
    if (!absl::ParseDuration(arg, &d) || d < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bad duration"));
    }
    *action = [what, d] {
      LOG(WARNING) << what << " hit";
      absl::SleepFor(d);
      return absl::OkStatus();
    };
  } else if (Argument(text, "error", &arg)) {
    absl::StatusCode code;
    if (!ParseCode(arg, &code)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown status code"));
    }
    const absl::Status error(code, absl::StrCat("failpoint ", name));
    *action = [what, error] {
      LOG(WARNING) << what << " hit";
      return error;
    };
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the action is none of error(CODE), sleep(DURATION), pause, exit"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ArmFromSpec(absl::string_view spec) {
  // Parse everything first: a spec with one bad entry arms nothing.
  std::vector<std::pair<std::string, Action>> parsed;
  for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(entry, '=');
    const std::string name(absl::StripAsciiWhitespace(kv.first));
    const absl::string_view text = absl::StripAsciiWhitespace(kv.second);
    if (name.empty() || text.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("failpoint spec entry '", entry, "' is not NAME=ACTION"));
    }
    Action action;
    if (absl::Status s = ParseAction(name, text, &action); !s.ok()) return s;
    parsed.emplace_back(name, std::move(action));
  }
  for (auto& [name, action] : parsed) {
    LOG(WARNING) << "failpoint " << name << " armed from the command line";
    internal::Arm(name, std::move(action));
  }
  return absl::OkStatus();
}

}  // namespace failpoint
}  // namespace kvstore
