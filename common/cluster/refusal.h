// Copyright 2026 The kvstore Authors.
//
// Refusal: why a server turned a request down, as a typed value, and the one
// codec that carries it everywhere (as Redis turns a CLUSTER_REDIR_* code
// into text in one function, and etcd defines every wire error once).
//
// A refusal travels in an absl::Status payload (ToStatus / FromStatus; the
// payload is refusal.proto's bytes under kRefusalPayload). gRPC carries it in
// the status details both ways (common/grpc_status.h), RDMA commit acks in
// their tail (common/protocol/commit_wire.h), and RESP as Redis Cluster's
// words (RespText / ParseRespText, which common/protocol/resp.cc applies to
// every error reply it writes or reads). Every classifier reads the type,
// never the message; the message is only for people.
//
//   kind               status code (no effect)  text (the Status message; RESP for the
//                                               four Redis kinds)
//   kMoved             FAILED_PRECONDITION      MOVED <slot> <host:port>
//   kAsk               FAILED_PRECONDITION      ASK <slot> <host:port>
//   kTryAgain          UNAVAILABLE              TRYAGAIN Hash slot <slot>[ <detail>]
//   kClusterDown       UNAVAILABLE              CLUSTERDOWN[ Hash slot <slot>][ <detail>]
//   kMapBehind         UNAVAILABLE              map behind[: <detail>]
//   kStaleShardEpoch   FAILED_PRECONDITION      stale shard epoch[: <detail>]
//   kSessionLost       FAILED_PRECONDITION      session lost[: <detail>]
//   kStaleServerEpoch  UNAVAILABLE              stale server epoch[: <detail>]
//   kNotPublished      (always effect unknown)  not published[: <detail>]
//   kNotClustered      FAILED_PRECONDITION      single-node mode[: <detail>]
//   kNotStored         RESOURCE_EXHAUSTED       not stored: <detail> (RESP: OOM not stored: ...)
//
// A kTryAgain status's message leaves the word out ("Hash slot 7 ..."): the
// RESP word of any UNAVAILABLE status is TRYAGAIN already.
// kMoved / kAsk name the node to go to (node_id, and its address for the
// transport the answer goes out on); kTryAgain always names its slot. The
// others never reach a RESP client as such: peers answer each other
// kMapBehind (my map is older than yours: wait) and kStaleShardEpoch (mine
// is newer: route again); the control plane answers kSessionLost and
// kStaleServerEpoch (handshake again); a single-node server answers the
// cluster calls kNotClustered (a client then connects to it as to one
// server; the text keeps the words older clients looked for).
// kNotStored: a replica could not store a write (its memory pool or index
// is full; the store publishes nothing on such an error). A backup answers
// it to its primary; the primary answers its client the same kind, with
// Effect::kNone, when no replica may hold the write. It is final for
// clients: sending the write again at once would meet the same full pool.
// Its RESP text is RESP's word for RESOURCE_EXHAUSTED, "OOM" (Redis's
// word for a write refused for memory), then the status message.
//
// Effect. Every refusal says what became of a write it answers:
//   Effect::kNone     the write certainly had no effect: it was refused
//                     before anything was sent to a backup or a migration
//                     target, and before it was published;
//   Effect::kUnknown  its outcome is unknown: a backup or migration target
//                     may already hold it although this node did not publish
//                     it (it may appear later, e.g. after a failover).
// A refusal of unknown effect has the status code UNKNOWN and a message
// starting "outcome unknown: ", over RESP "UNKNOWN outcome unknown: ...".
// A write may be sent again only after an Effect::kNone refusal
// (CertainlyNoEffect); any error without a refusal may have taken effect.
//
// Thread safety: value types and pure functions; thread-safe.

#ifndef KVSTORE_COMMON_CLUSTER_REFUSAL_H_
#define KVSTORE_COMMON_CLUSTER_REFUSAL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace cluster {

enum class RefusalKind {
  kMoved = 1,         // another node leads the slot: go there (the map is stale)
  kAsk,               // the slot's migration target serves it: ask it, this request only
  kTryAgain,          // the slot's handoff is under way: ask the same node again shortly
  kClusterDown,       // no primary for the slot, or this node is not serving
  kMapBehind,         // the answering peer's map is older than the request's
  kStaleShardEpoch,   // the answering peer's map is newer than the request's
  kSessionLost,       // the control-plane session is gone: handshake again
  kStaleServerEpoch,  // the server restarted since the handshake: handshake again
  kNotPublished,      // sent on to other nodes but not published here
  kNotClustered,      // this server runs single-node: it has no cluster map
  kNotStored,         // a replica could not store the write (pool or index full)
};

enum class Effect {
  kNone,     // certainly no effect (see the file comment)
  kUnknown,  // outcome unknown
};

struct Refusal {
  RefusalKind kind = RefusalKind::kClusterDown;
  Effect effect = Effect::kNone;
  std::optional<uint32_t> slot;
  std::string node_id;  // kMoved, kAsk: the node to go to (payload only)
  std::string address;  // kMoved, kAsk: its "host:port"
  std::string detail;   // for people; never classified

  static Refusal Moved(uint32_t slot, std::string node_id, std::string address);
  static Refusal Ask(uint32_t slot, std::string node_id, std::string address);
  static Refusal TryAgain(uint32_t slot, std::string detail);
  static Refusal ClusterDown(std::string detail);
  static Refusal ClusterDown(uint32_t slot, std::string detail);
  static Refusal MapBehind(std::string detail);
  static Refusal StaleShardEpoch(std::string detail);
  static Refusal SessionLost(std::string detail);
  static Refusal StaleServerEpoch(std::string detail);
  static Refusal NotClustered(std::string detail);
  static Refusal NotStored(std::string detail);
  // Always Effect::kUnknown.
  static Refusal NotPublished(std::string detail);

  // A copy with Effect::kUnknown.
  Refusal WithUnknownEffect() const;

  friend bool operator==(const Refusal& a, const Refusal& b) {
    return a.kind == b.kind && a.effect == b.effect && a.slot == b.slot && a.node_id == b.node_id &&
           a.address == b.address && a.detail == b.detail;
  }
  friend bool operator!=(const Refusal& a, const Refusal& b) { return !(a == b); }
};

// The absl::Status payload type URL (an Any type URL, so that generic gRPC
// tools name the message).
inline constexpr char kRefusalPayload[] = "type.googleapis.com/kvstore.v1.Refusal";

// The status of `r`: the code and text of the table above (UNKNOWN and
// "outcome unknown: <text>" for Effect::kUnknown), with `r` as payload.
absl::Status ToStatus(const Refusal& r);
// The refusal `s` carries, or nullopt (OK, no payload, or one that does not
// decode). Reads the payload only, never the message.
std::optional<Refusal> FromStatus(const absl::Status& s);
// Whether `s` carries a refusal of `kind` (of either effect).
bool IsRefusal(const absl::Status& s, RefusalKind kind);
// Whether a write that failed with `s` certainly had no effect: `s` carries
// a refusal of Effect::kNone. False for OK.
bool CertainlyNoEffect(const absl::Status& s);
// `s` (an error met after the write was sent on to other nodes) as an
// outcome-unknown refusal: a refusal keeps its kind and fields with
// Effect::kUnknown; any other error becomes kNotPublished naming it. OK
// stays OK.
absl::Status OutcomeUnknown(const absl::Status& s);

// The payload bytes of `r`, and back (nullopt for bytes that are not a
// refusal). Exposed for transports that carry the payload themselves
// (RDMA commit acks).
std::string EncodePayload(const Refusal& r);
std::optional<Refusal> DecodePayload(absl::string_view bytes);

// The RESP error text of `r` (without '-' and CRLF): Redis Cluster's words
// for the four Redis kinds ("MOVED 12 10.0.0.2:6379"), "OOM not stored:
// <detail>" for kNotStored, "UNKNOWN outcome
// unknown: <text>" for any refusal of Effect::kUnknown; nullopt for the
// other kinds, which RESP answers by their status code like any error. The
// one function that writes refusal text for RESP.
std::optional<std::string> RespText(const Refusal& r);
// The reverse, for the text of an error reply read off the wire (without
// '-' and CRLF): nullopt for any other error. The node id does not travel
// in RESP text; everything else round-trips. The one parser of RESP
// redirects.
std::optional<Refusal> ParseRespText(absl::string_view text);

}  // namespace cluster
}  // namespace kvstore

#endif  // KVSTORE_COMMON_CLUSTER_REFUSAL_H_
