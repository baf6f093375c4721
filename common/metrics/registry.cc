// Copyright 2026 The kvstore Authors.

#include "common/metrics/registry.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace kvstore {
namespace metrics {

namespace {

// Prometheus data model: metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]*. Colons are reserved for recording rules, so we
// accept neither colons nor upper case (snake_case is the convention, and
// promtool's linter flags camelCase).
bool IsValidName(absl::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string DescribeLabels(const Labels& labels) {
  return absl::StrCat(
      "{",
      absl::StrJoin(labels, ",",
                    [](std::string* out, const std::pair<std::string, std::string>& kv) {
                      absl::StrAppend(out, kv.first, "=\"", kv.second, "\"");
                    }),
      "}");
}

}  // namespace

absl::string_view MetricKindName(MetricKind kind) {
  // No default: the compiler then flags a kind added without a name.
  switch (kind) {
    case MetricKind::kCounter:
      return "counter";
    case MetricKind::kGauge:
      return "gauge";
    case MetricKind::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// ---------------------------------------------------------------------------
// Histogram

int Histogram::BucketIndex(uint64_t nanos) {
  // Bounds are whole microseconds, so "nanos <= 2^i us" is the same test as
  // "ceil(nanos / 1000) <= 2^i"; the smallest such i is ceil(log2(us)),
  // which for us >= 2 is the bit width of (us - 1).
  // Dividing first cannot overflow, unlike rounding up with (nanos + 999).
  const uint64_t micros = nanos / 1000 + (nanos % 1000 != 0 ? 1 : 0);
  // 0 and 1 us both belong in the first bucket; clz(0) is also undefined.
  if (micros <= 1) return 0;
  const int i = 64 - __builtin_clzll(micros - 1);
  // Everything beyond the last finite bound shares the +Inf slot.
  return i < kFiniteBuckets ? i : kFiniteBuckets;
}

void Histogram::ObserveNanos(uint64_t nanos) {
  // Two independent relaxed adds: a concurrent snapshot may see one without
  // the other, an error of one observation that the next scrape corrects.
  buckets_[BucketIndex(nanos)].fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(nanos, std::memory_order_relaxed);
}

void Histogram::ObserveMicros(uint64_t micros) {
  // Saturate rather than wrap: 2^64 ns is 584 years, so only a corrupt
  // timestamp gets here, and it belongs in +Inf, not in a small bucket.
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max() / 1000;
  ObserveNanos(micros > kMax ? std::numeric_limits<uint64_t>::max() : micros * 1000);
}

void Histogram::Observe(absl::Duration d) {
  // A negative duration means a clock went backwards between two reads; the
  // operation took (about) no time, which is what we record.
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  const int64_t nanos = absl::ToInt64Nanoseconds(d);  // saturates for InfiniteDuration
  ObserveNanos(static_cast<uint64_t>(nanos));
}

// ---------------------------------------------------------------------------
// Registry internals

// A callback series. Owned by its Child; runs only under callback_mu_.
struct Registry::Callback {
  uint64_t id = 0;                       // what CallbackHandle names it by; never reused
  std::function<int64_t()> gauge_fn;     // kGauge
  std::function<uint64_t()> counter_fn;  // kCounter
};

// One labelled series: exactly one of the pointers is set.
struct Registry::Child {
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
  std::unique_ptr<Callback> callback;
};

// All children of one metric name. Children are created, never moved
// (unique_ptr), so the pointers handed out stay valid as the map grows.
struct Registry::Family {
  std::string name;
  std::string help;
  MetricKind kind;
  std::vector<std::string> label_names;  // sorted; the same for every child
  // Ordered by labels: snapshots come out sorted without a sort.
  std::map<Labels, std::unique_ptr<Child>> children;
};

Registry::Registry() = default;
Registry::~Registry() = default;

Registry& Registry::Default() {
  // Leaked on purpose: threads (and static destructors) may still increment
  // counters while the process exits.
  static Registry* const registry = new Registry();
  return *registry;
}

Registry::Family* Registry::GetFamilyLocked(absl::string_view name, absl::string_view help,
                                            MetricKind kind, Labels* labels) {
  CHECK(absl::StartsWith(name, "kvstore_") && IsValidName(name))
      << "metric name '" << name << "' must be kvstore_ followed by [a-z0-9_]";
  CHECK(!help.empty()) << "metric " << name << " needs a help text";
  if (kind == MetricKind::kCounter) {
    CHECK(absl::EndsWith(name, "_total")) << "counter " << name << " must end in _total";
  } else {
    // _total promises a counter to every Prometheus user; a gauge or
    // histogram named so would mislead rate() queries.
    CHECK(!absl::EndsWith(name, "_total"))
        << "only counters may end in _total: " << name << " is a " << MetricKindName(kind);
  }
  if (kind == MetricKind::kHistogram) {
    CHECK(absl::EndsWith(name, "_seconds"))
        << "histogram " << name << " must end in _seconds (buckets are exposed in seconds)";
  }

  // Sorted labels are the child's identity: {op,transport} and
  // {transport,op} name one series, and exposition order is stable.
  std::sort(labels->begin(), labels->end());
  std::vector<std::string> label_names;
  for (size_t i = 0; i < labels->size(); ++i) {
    const std::string& label = (*labels)[i].first;
    // "__" prefixes are Prometheus-internal; "le" is the bucket label of
    // histograms and "quantile" that of summaries.
    CHECK(IsValidName(label) && !absl::StartsWith(label, "__") && label != "le" &&
          label != "quantile")
        << "metric " << name << ": bad label name '" << label << "'";
    CHECK(i == 0 || (*labels)[i - 1].first != label)
        << "metric " << name << ": label " << label << " given twice";
    label_names.push_back(label);
  }

  // First registration of a name defines its kind, help and label names;
  // every later one must agree.
  auto it = families_.find(name);
  if (it == families_.end()) {
    auto family = std::make_unique<Family>();
    family->name = std::string(name);
    family->help = std::string(help);
    family->kind = kind;
    family->label_names = std::move(label_names);
    it = families_.emplace(family->name, std::move(family)).first;
    return it->second.get();
  }
  Family* family = it->second.get();
  CHECK(family->kind == kind) << "metric " << name << " registered as a "
                              << MetricKindName(family->kind) << " and as a "
                              << MetricKindName(kind);
  CHECK(family->help == help) << "metric " << name << " registered with two help texts: '"
                              << family->help << "' and '" << help << "'";
  // Children with different label names would make sum() and by() queries
  // silently drop series; Prometheus clients refuse it too.
  CHECK(family->label_names == label_names)
      << "metric " << name << ": labels " << DescribeLabels(*labels)
      << " do not have the label names of the family (" << absl::StrJoin(family->label_names, ",")
      << ")";
  return family;
}

Registry::Child* Registry::AddChild(absl::string_view name, absl::string_view help, MetricKind kind,
                                    Labels labels) {
  absl::MutexLock lock(&mu_);
  Family* family = GetFamilyLocked(name, help, kind, &labels);
  // operator[] creates an empty slot for a new label set; an existing child
  // is returned as is, which makes registration idempotent.
  std::unique_ptr<Child>& child = family->children[labels];
  if (child == nullptr) {
    child = std::make_unique<Child>();
    // The constructors are private to keep metrics registry-owned, so
    // make_unique cannot be used here.
    switch (kind) {
      case MetricKind::kCounter:
        child->counter.reset(new Counter());
        break;
      case MetricKind::kGauge:
        child->gauge.reset(new Gauge());
        break;
      case MetricKind::kHistogram:
        child->histogram.reset(new Histogram());
        break;
    }
  }
  CHECK(child->callback == nullptr)
      << "metric " << name << DescribeLabels(labels) << " is already a callback series";
  return child.get();
}

Counter* Registry::AddCounter(absl::string_view name, absl::string_view help, Labels labels) {
  return AddChild(name, help, MetricKind::kCounter, std::move(labels))->counter.get();
}

Gauge* Registry::AddGauge(absl::string_view name, absl::string_view help, Labels labels) {
  return AddChild(name, help, MetricKind::kGauge, std::move(labels))->gauge.get();
}

Histogram* Registry::AddHistogram(absl::string_view name, absl::string_view help, Labels labels) {
  return AddChild(name, help, MetricKind::kHistogram, std::move(labels))->histogram.get();
}

CallbackHandle Registry::AddCallback(absl::string_view name, absl::string_view help,
                                     MetricKind kind, Labels labels,
                                     std::function<int64_t()> gauge_fn,
                                     std::function<uint64_t()> counter_fn) {
  absl::MutexLock lock(&mu_);
  Family* family = GetFamilyLocked(name, help, kind, &labels);
  // Unlike plain metrics, a callback series is never shared: two callbacks
  // for one series would be two sources of truth.
  std::unique_ptr<Child>& child = family->children[labels];
  CHECK(child == nullptr) << "metric " << name << DescribeLabels(labels)
                          << " is already registered";
  child = std::make_unique<Child>();
  child->callback = std::make_unique<Callback>();
  child->callback->id = next_callback_id_++;
  child->callback->gauge_fn = std::move(gauge_fn);
  child->callback->counter_fn = std::move(counter_fn);
  return CallbackHandle(this, child->callback->id);
}

CallbackHandle Registry::AddCallbackGauge(absl::string_view name, absl::string_view help,
                                          Labels labels, std::function<int64_t()> fn) {
  CHECK(fn != nullptr) << "callback gauge " << name << " without a function";
  return AddCallback(name, help, MetricKind::kGauge, std::move(labels), std::move(fn), nullptr);
}

CallbackHandle Registry::AddCallbackCounter(absl::string_view name, absl::string_view help,
                                            Labels labels, std::function<uint64_t()> fn) {
  CHECK(fn != nullptr) << "callback counter " << name << " without a function";
  return AddCallback(name, help, MetricKind::kCounter, std::move(labels), nullptr, std::move(fn));
}

void Registry::RemoveCallback(uint64_t id) {
  // callback_mu_ first: a snapshot holds it while it runs callbacks, so
  // taking it here waits until our callback can no longer be running.
  absl::MutexLock callback_lock(&callback_mu_);
  absl::MutexLock lock(&mu_);
  // A linear search: removals happen at shutdown, and an id index would
  // be one more structure to keep consistent.
  for (auto fit = families_.begin(); fit != families_.end(); ++fit) {
    auto& children = fit->second->children;
    for (auto cit = children.begin(); cit != children.end(); ++cit) {
      if (cit->second->callback == nullptr || cit->second->callback->id != id) continue;
      children.erase(cit);
      // Drop a family left empty so that a later registration may give it
      // another help text, and so that no HELP/TYPE without samples remains.
      if (children.empty()) families_.erase(fit);
      return;
    }
  }
  // Unreachable through CallbackHandle (Reset forgets the id); loud in
  // debug builds should someone add another path.
  LOG(DFATAL) << "metrics: callback " << id << " removed twice";
}

Snapshot Registry::TakeSnapshot() const {
  // Held throughout: callbacks must not be unregistered while we run them.
  absl::MutexLock callback_lock(&callback_mu_);
  Snapshot snapshot;
  // Callbacks of the copied samples, run after mu_ is released so that a
  // slow callback (one taking the store's lock) never blocks registration.
  std::vector<std::pair<SampleSnapshot*, const Callback*>> pending;
  {
    absl::MutexLock lock(&mu_);
    snapshot.families.reserve(families_.size());
    for (const auto& [name, family] : families_) {
      FamilySnapshot& fs = snapshot.families.emplace_back();
      fs.name = family->name;
      fs.help = family->help;
      fs.kind = family->kind;
      fs.samples.reserve(family->children.size());
      for (const auto& [labels, child] : family->children) {
        SampleSnapshot& s = fs.samples.emplace_back();
        s.labels = labels;
        // Plain metrics are read here, under mu_: loads only, no user code.
        if (child->counter != nullptr) {
          s.counter = child->counter->Value();
        } else if (child->gauge != nullptr) {
          s.gauge = child->gauge->Value();
        } else if (child->histogram != nullptr) {
          HistogramSnapshot& h = s.histogram;
          h.upper_bounds_micros.reserve(Histogram::kFiniteBuckets);
          h.cumulative_counts.reserve(Histogram::kFiniteBuckets + 1);
          // The histogram stores per-bucket counts (one add per observation);
          // the format wants running totals, built here at read time.
          uint64_t cumulative = 0;
          for (int i = 0; i <= Histogram::kFiniteBuckets; ++i) {
            if (i < Histogram::kFiniteBuckets) {
              h.upper_bounds_micros.push_back(Histogram::BucketUpperBoundMicros(i));
            }
            cumulative += child->histogram->buckets_[i].load(std::memory_order_relaxed);
            h.cumulative_counts.push_back(cumulative);
          }
          h.count = cumulative;
          h.sum_nanos = child->histogram->sum_nanos_.load(std::memory_order_relaxed);
        }
      }
    }
    // Pointers into the vectors are taken only now, when no vector grows.
    for (FamilySnapshot& fs : snapshot.families) {
      const Family& family = *families_.find(fs.name)->second;
      auto child = family.children.begin();
      for (SampleSnapshot& s : fs.samples) {
        if (child->second->callback != nullptr)
          pending.emplace_back(&s, child->second->callback.get());
        ++child;
      }
    }
  }
  // Still under callback_mu_, so no handle can remove these meanwhile.
  for (auto& [sample, callback] : pending) {
    if (callback->gauge_fn) {
      sample->gauge = callback->gauge_fn();
    } else {
      sample->counter = callback->counter_fn();
    }
  }
  return snapshot;
}

// ---------------------------------------------------------------------------
// CallbackHandle

CallbackHandle::CallbackHandle(CallbackHandle&& other) noexcept
    : registry_(other.registry_), id_(other.id_) {
  other.registry_ = nullptr;
}

CallbackHandle& CallbackHandle::operator=(CallbackHandle&& other) noexcept {
  if (this != &other) {
    // The series this handle kept goes away, as with any RAII owner.
    Reset();
    registry_ = other.registry_;
    id_ = other.id_;
    other.registry_ = nullptr;
  }
  return *this;
}

CallbackHandle::~CallbackHandle() { Reset(); }

void CallbackHandle::Reset() {
  if (registry_ == nullptr) return;
  registry_->RemoveCallback(id_);
  registry_ = nullptr;
}

}  // namespace metrics
}  // namespace kvstore
