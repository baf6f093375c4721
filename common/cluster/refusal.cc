// Copyright 2026 The kvstore Authors.

#include "common/cluster/refusal.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/cluster/refusal.pb.h"

namespace kvstore {
namespace cluster {
namespace {

// The prefix of an outcome-unknown refusal's message, and of its RESP text
// after the UNKNOWN code word (the word resp.cc writes for kUnknown).
constexpr absl::string_view kUnknownPrefix = "outcome unknown: ";
constexpr absl::string_view kRespUnknownWord = "UNKNOWN ";
// kNotStored's RESP word: RESP's word for its status code (common/protocol/
// resp.cc), so that its text is the one any RESOURCE_EXHAUSTED gets.
constexpr absl::string_view kRespNotStoredWord = "OOM ";
// What the Redis kinds put before a slot number in their detail.
constexpr absl::string_view kHashSlot = "Hash slot ";

// The leading words of each kind's text; the four Redis kinds' are Redis's
// own error codes.
struct KindRow {
  RefusalKind kind;
  absl::string_view word;
  absl::StatusCode code;  // with Effect::kNone
};
constexpr KindRow kKinds[] = {
    {RefusalKind::kMoved, "MOVED", absl::StatusCode::kFailedPrecondition},
    {RefusalKind::kAsk, "ASK", absl::StatusCode::kFailedPrecondition},
    {RefusalKind::kTryAgain, "TRYAGAIN", absl::StatusCode::kUnavailable},
    {RefusalKind::kClusterDown, "CLUSTERDOWN", absl::StatusCode::kUnavailable},
    {RefusalKind::kMapBehind, "map behind", absl::StatusCode::kUnavailable},
    {RefusalKind::kStaleShardEpoch, "stale shard epoch", absl::StatusCode::kFailedPrecondition},
    {RefusalKind::kSessionLost, "session lost", absl::StatusCode::kFailedPrecondition},
    {RefusalKind::kStaleServerEpoch, "stale server epoch", absl::StatusCode::kUnavailable},
    {RefusalKind::kNotPublished, "not published", absl::StatusCode::kUnknown},
    {RefusalKind::kNotClustered, "single-node mode", absl::StatusCode::kFailedPrecondition},
    {RefusalKind::kNotStored, "not stored", absl::StatusCode::kResourceExhausted},
};

const KindRow& RowOf(RefusalKind kind) {
  for (const KindRow& row : kKinds) {
    if (row.kind == kind) return row;
  }
  return kKinds[3];  // unreachable for a valid kind; CLUSTERDOWN is the safe reading
}

bool IsRedisKind(RefusalKind kind) {
  return kind == RefusalKind::kMoved || kind == RefusalKind::kAsk ||
         kind == RefusalKind::kTryAgain || kind == RefusalKind::kClusterDown;
}

Refusal Make(RefusalKind kind, std::optional<uint32_t> slot, std::string node_id,
             std::string address, std::string detail) {
  Refusal r;
  r.kind = kind;
  r.slot = slot;
  r.node_id = std::move(node_id);
  r.address = std::move(address);
  r.detail = std::move(detail);
  return r;
}

// The text of the table in the header, without the outcome-unknown prefix.
std::string Text(const Refusal& r) {
  const KindRow& row = RowOf(r.kind);
  std::string out(row.word);
  switch (r.kind) {
    case RefusalKind::kMoved:
    case RefusalKind::kAsk:
      // Redis's exact shape: clients split it on spaces.
      absl::StrAppend(&out, " ", r.slot.value_or(0));
      if (!r.address.empty()) absl::StrAppend(&out, " ", r.address);
      return out;
    case RefusalKind::kTryAgain:
    case RefusalKind::kClusterDown:
      if (r.slot.has_value()) absl::StrAppend(&out, " ", kHashSlot, *r.slot);
      if (!r.detail.empty()) absl::StrAppend(&out, " ", r.detail);
      return out;
    default:
      if (!r.detail.empty()) absl::StrAppend(&out, ": ", r.detail);
      return out;
  }
}

// Consumes "<digits>" from the front of `*text` into `*slot`.
bool ConsumeNumber(absl::string_view* text, uint32_t* slot) {
  size_t n = 0;
  while (n < text->size() && absl::ascii_isdigit((*text)[n])) ++n;
  // Canonical numbers only ("7", not "07"), so that parsing and writing
  // text are inverses.
  if (n == 0 || (n > 1 && (*text)[0] == '0') || !absl::SimpleAtoi(text->substr(0, n), slot)) {
    return false;
  }
  text->remove_prefix(n);
  return true;
}

// The Redis kinds' text: "MOVED|ASK <slot>[ <address>]", "TRYAGAIN Hash
// slot <slot>[ <detail>]" (a TRYAGAIN without a slot is the RESP code word
// of a plain kUnavailable, not a refusal), "CLUSTERDOWN[ Hash slot
// <slot>][ <detail>]".
std::optional<Refusal> ParseRedisText(absl::string_view text) {
  Refusal r;
  const absl::string_view word = text.substr(0, text.find(' '));
  absl::string_view rest = text.substr(word.size());
  if (word == "MOVED" || word == "ASK") {
    r.kind = word == "MOVED" ? RefusalKind::kMoved : RefusalKind::kAsk;
    uint32_t slot = 0;
    if (!absl::ConsumePrefix(&rest, " ") || !ConsumeNumber(&rest, &slot)) return std::nullopt;
    r.slot = slot;
    if (rest.empty()) return r;
    if (!absl::ConsumePrefix(&rest, " ") || rest.empty() || absl::StrContains(rest, ' ')) {
      return std::nullopt;
    }
    r.address = std::string(rest);
    return r;
  }
  if (word != "TRYAGAIN" && word != "CLUSTERDOWN") return std::nullopt;
  r.kind = word == "TRYAGAIN" ? RefusalKind::kTryAgain : RefusalKind::kClusterDown;
  uint32_t slot = 0;
  absl::string_view numbered = rest;
  if (absl::ConsumePrefix(&numbered, " ") && absl::ConsumePrefix(&numbered, kHashSlot) &&
      ConsumeNumber(&numbered, &slot) && (numbered.empty() || numbered[0] == ' ')) {
    r.slot = slot;
    rest = numbered;
  } else if (r.kind == RefusalKind::kTryAgain) {
    return std::nullopt;
  }
  if (absl::ConsumePrefix(&rest, " ")) {
    if (rest.empty()) return std::nullopt;  // Text() writes no empty detail
    r.detail = std::string(rest);
  }
  return r;
}

// Any kind's text (after the outcome-unknown prefix).
std::optional<Refusal> ParseText(absl::string_view text) {
  if (std::optional<Refusal> r = ParseRedisText(text)) return r;
  for (const KindRow& row : kKinds) {
    if (IsRedisKind(row.kind)) continue;
    absl::string_view rest = text;
    if (!absl::ConsumePrefix(&rest, row.word)) continue;
    Refusal r;
    r.kind = row.kind;
    if (rest.empty()) return r;
    if (!absl::ConsumePrefix(&rest, ": ") || rest.empty()) continue;
    r.detail = std::string(rest);
    return r;
  }
  return std::nullopt;
}

}  // namespace

Refusal Refusal::Moved(uint32_t slot, std::string node_id, std::string address) {
  return Make(RefusalKind::kMoved, slot, std::move(node_id), std::move(address), "");
}
Refusal Refusal::Ask(uint32_t slot, std::string node_id, std::string address) {
  return Make(RefusalKind::kAsk, slot, std::move(node_id), std::move(address), "");
}
Refusal Refusal::TryAgain(uint32_t slot, std::string detail) {
  return Make(RefusalKind::kTryAgain, slot, "", "", std::move(detail));
}
Refusal Refusal::ClusterDown(std::string detail) {
  return Make(RefusalKind::kClusterDown, std::nullopt, "", "", std::move(detail));
}
Refusal Refusal::ClusterDown(uint32_t slot, std::string detail) {
  return Make(RefusalKind::kClusterDown, slot, "", "", std::move(detail));
}
Refusal Refusal::MapBehind(std::string detail) {
  return Make(RefusalKind::kMapBehind, std::nullopt, "", "", std::move(detail));
}
Refusal Refusal::StaleShardEpoch(std::string detail) {
  return Make(RefusalKind::kStaleShardEpoch, std::nullopt, "", "", std::move(detail));
}
Refusal Refusal::SessionLost(std::string detail) {
  return Make(RefusalKind::kSessionLost, std::nullopt, "", "", std::move(detail));
}
Refusal Refusal::StaleServerEpoch(std::string detail) {
  return Make(RefusalKind::kStaleServerEpoch, std::nullopt, "", "", std::move(detail));
}
Refusal Refusal::NotClustered(std::string detail) {
  return Make(RefusalKind::kNotClustered, std::nullopt, "", "", std::move(detail));
}
Refusal Refusal::NotStored(std::string detail) {
  return Make(RefusalKind::kNotStored, std::nullopt, "", "", std::move(detail));
}
Refusal Refusal::NotPublished(std::string detail) {
  return Make(RefusalKind::kNotPublished, std::nullopt, "", "", std::move(detail))
      .WithUnknownEffect();
}

Refusal Refusal::WithUnknownEffect() const {
  Refusal r = *this;
  r.effect = Effect::kUnknown;
  return r;
}

std::string EncodePayload(const Refusal& r) {
  v1::Refusal p;
  p.set_kind(static_cast<v1::Refusal::Kind>(r.kind));
  p.set_outcome_unknown(r.effect == Effect::kUnknown);
  if (r.slot.has_value()) p.set_slot(*r.slot);
  p.set_node_id(r.node_id);
  p.set_address(r.address);
  p.set_detail(r.detail);
  return p.SerializeAsString();
}

std::optional<Refusal> DecodePayload(absl::string_view bytes) {
  v1::Refusal p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
  // A kind this build does not know (a newer peer's) is no refusal here.
  if (p.kind() < static_cast<int>(RefusalKind::kMoved) ||
      p.kind() > static_cast<int>(RefusalKind::kNotStored)) {
    return std::nullopt;
  }
  Refusal r;
  r.kind = static_cast<RefusalKind>(p.kind());
  r.effect = p.outcome_unknown() || r.kind == RefusalKind::kNotPublished ? Effect::kUnknown
                                                                         : Effect::kNone;
  if (p.has_slot()) r.slot = p.slot();
  r.node_id = p.node_id();
  r.address = p.address();
  r.detail = p.detail();
  return r;
}

absl::Status ToStatus(const Refusal& r) {
  const bool unknown = r.effect == Effect::kUnknown;
  std::string message = Text(r);
  if (unknown) {
    message = absl::StrCat(kUnknownPrefix, message);
  } else if (r.kind == RefusalKind::kTryAgain) {
    // RESP's word for UNAVAILABLE is TRYAGAIN already: without it here,
    // the status's generic RESP text is exactly RespText(r), and a plain
    // UNAVAILABLE "Hash slot 7" reads back as the same status.
    absl::string_view rest = message;
    absl::ConsumePrefix(&rest, RowOf(r.kind).word);
    absl::ConsumePrefix(&rest, " ");
    message = std::string(rest);
  }
  absl::Status s(unknown ? absl::StatusCode::kUnknown : RowOf(r.kind).code, message);
  s.SetPayload(kRefusalPayload, absl::Cord(EncodePayload(r)));
  return s;
}

std::optional<Refusal> FromStatus(const absl::Status& s) {
  if (s.ok()) return std::nullopt;
  const auto payload = s.GetPayload(kRefusalPayload);
  if (!payload.has_value()) return std::nullopt;
  return DecodePayload(std::string(*payload));
}

bool IsRefusal(const absl::Status& s, RefusalKind kind) {
  std::optional<Refusal> r = FromStatus(s);
  return r.has_value() && r->kind == kind;
}

bool CertainlyNoEffect(const absl::Status& s) {
  std::optional<Refusal> r = FromStatus(s);
  return r.has_value() && r->effect == Effect::kNone;
}

absl::Status OutcomeUnknown(const absl::Status& s) {
  if (s.ok()) return s;
  if (std::optional<Refusal> r = FromStatus(s)) return ToStatus(r->WithUnknownEffect());
  return ToStatus(
      Refusal::NotPublished(absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message())));
}

std::optional<std::string> RespText(const Refusal& r) {
  if (r.effect == Effect::kUnknown) return absl::StrCat(kRespUnknownWord, kUnknownPrefix, Text(r));
  if (r.kind == RefusalKind::kNotStored) return absl::StrCat(kRespNotStoredWord, Text(r));
  if (!IsRedisKind(r.kind)) return std::nullopt;
  return Text(r);
}

std::optional<Refusal> ParseRespText(absl::string_view text) {
  if (absl::ConsumePrefix(&text, kRespUnknownWord)) {
    if (!absl::ConsumePrefix(&text, kUnknownPrefix)) return std::nullopt;
    std::optional<Refusal> r = ParseText(text);
    if (r.has_value()) r->effect = Effect::kUnknown;
    return r;
  }
  if (absl::ConsumePrefix(&text, kRespNotStoredWord)) {
    std::optional<Refusal> r = ParseText(text);
    if (!r.has_value() || r->kind != RefusalKind::kNotStored) return std::nullopt;
    return r;
  }
  return ParseRedisText(text);
}

}  // namespace cluster
}  // namespace kvstore
