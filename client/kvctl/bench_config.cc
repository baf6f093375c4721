// Copyright 2026 The kvstore Authors.
//
// Flag parsing and validation for `kvctl bench`. Error messages name the
// flag in its hyphenated spelling because kvctl prints them verbatim as
// usage errors.

#include "client/kvctl/bench_config.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace kvstore {
namespace client {

absl::StatusOr<double> ParseRatio(absl::string_view text) {
  absl::string_view number = absl::StripAsciiWhitespace(text);
  const bool percent = absl::ConsumeSuffix(&number, "%");
  double value;
  // SimpleAtod accepts "nan" and "inf"; neither is a ratio.
  if (number.empty() || !absl::SimpleAtod(number, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ratio: \"", text, "\" (want 0..1, e.g. 0.9, or 0%..100%)"));
  }
  // "90%" and "0.9" must end up as the same double.
  if (percent) value /= 100;
  if (!(value >= 0 && value <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ratio \"", text, "\" is outside 0..1 (0%..100%)"));
  }
  return value;
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  // Split into leading digits and a suffix by hand: SimpleAtoi alone would
  // accept a sign, which a size must not have.
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(rest[digits])) ++digits;
  const absl::string_view number = rest.substr(0, digits);
  const std::string suffix = absl::AsciiStrToLower(rest.substr(digits));

  // The suffix becomes a shift (-1: not a suffix we know).
  int shift;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else {
    shift = -1;
  }
  // Digits only from here on, so SimpleAtoi fails only on overflow.
  uint64_t value;
  if (number.empty() || shift < 0 || !absl::SimpleAtoi(number, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a byte size: \"", text, "\" (want an integer, optionally with K, M or G)"));
  }
  // Checked before shifting: "17179869184G" must not wrap to a small number.
  if (value > (UINT64_MAX >> shift)) {
    return absl::InvalidArgumentError(absl::StrCat("byte size \"", text, "\" is too large"));
  }
  return value << shift;
}

absl::Status ValidateBenchConfig(const BenchConfig& config) {
  // Checked in flag order, so the user hears about the first bad flag.
  if (config.keys == 0) return absl::InvalidArgumentError("--keys must be positive");
  if (config.value_size == 0 || config.value_size > kMaxBenchValueSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("--value-size must be in 1..", kMaxBenchValueSize));
  }
  // Written so that NaN fails too.
  if (!(config.get_ratio >= 0 && config.get_ratio <= 1)) {
    return absl::InvalidArgumentError("--get-ratio must be in 0..1");
  }
  if (config.concurrency < 1 || config.concurrency > kMaxBenchConcurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("--concurrency must be in 1..", kMaxBenchConcurrency));
  }
  // The duration only matters for a timed run.
  if (config.ops == 0 && config.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--duration must be positive");
  }
  if (config.progress_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("progress interval must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<BenchConfig> MakeBenchConfig(const BenchFlags& flags, uint64_t random_seed) {
  // These two depend on whether a flag was given, which BenchConfig cannot
  // express, so they are checked here rather than in ValidateBenchConfig().
  if (flags.duration_given && flags.ops_given) {
    return absl::InvalidArgumentError("--duration and --ops are mutually exclusive");
  }
  if (flags.ops_given && flags.ops == 0) {
    return absl::InvalidArgumentError("--ops must be positive");
  }
  // Plain numbers are copied as they are; ValidateBenchConfig() below
  // range-checks them along with the parsed ones.
  BenchConfig config;
  config.keys = flags.keys;
  absl::StatusOr<uint64_t> value_size = ParseByteSize(flags.value_size);
  if (!value_size.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--value-size: ", value_size.status().message()));
  }
  config.value_size = *value_size;
  absl::StatusOr<double> get_ratio = ParseRatio(flags.get_ratio);
  if (!get_ratio.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--get-ratio: ", get_ratio.status().message()));
  }
  config.get_ratio = *get_ratio;
  config.concurrency = flags.concurrency;
  // --ops makes the run counted (duration unused); otherwise it is timed.
  if (flags.ops_given) {
    config.ops = flags.ops;
  } else {
    config.duration = flags.duration;
  }
  config.preload = flags.preload;
  config.zero_copy = flags.zero_copy;
  // 0 means "choose one"; a (very unlikely) zero draw becomes 1 so that the
  // printed seed, passed back with --seed, reproduces the run.
  config.seed = flags.seed != 0 ? flags.seed : (random_seed != 0 ? random_seed : 1);
  absl::Status status = ValidateBenchConfig(config);
  if (!status.ok()) return status;
  return config;
}

// %08d pads to 8 digits but never truncates, hence "wider past 10^8".
std::string BenchKey(uint64_t index) { return absl::StrFormat("bench:%08d", index); }

}  // namespace client
}  // namespace kvstore
