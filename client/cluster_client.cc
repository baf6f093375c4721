// Copyright 2026 The kvstore Authors.
//
// The cluster KvClient: routing by the map, splitting batches by node, and
// the refresh-and-retry loop around every attempt (see the header).

#include "client/cluster_client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/internal/client_metrics.h"
#include "client/internal/cluster/cluster_errors.h"
#include "client/internal/cluster/cluster_router.h"
#include "client/internal/cluster/pair_outcomes.h"
#include "client/internal/cluster/retry_budget.h"
#include "client/internal/cluster/slow_read_path.h"
#include "client/internal/server_link.h"
#include "common/cluster/refusal.h"
#include "common/metrics/exposition.h"
#include "common/metrics/registry.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {
namespace {

class ClusterClientImpl final : public KvClient {
 public:
  explicit ClusterClientImpl(const Options& options)
      : options_(options),
        metrics_(&registry_),
        router_(
            LinkEnv{&options_, &registry_, &metrics_, &rdma_,
                    absl::StrCat("kvclient pid ", getpid()), options.read_from_replicas},
            control::ControlSecurity{options.auth_token, options.tls_ca_file, options.tls_cert_file,
                                     options.tls_key_file, options.tls_server_name},
            options.servers) {}

  ClusterRouter& router() { return router_; }

  // Connects the first node of the map that answers, so that
  // max_value_bytes() and transport_name() have a handshake to report.
  absl::Status ConnectFirstNode() {
    std::shared_ptr<const cluster::ClusterMapView> map = router_.map();
    absl::Status last = absl::UnavailableError("the cluster map names no node");
    for (const v1::ClusterNode& node : map->proto().nodes()) {
      absl::StatusOr<std::shared_ptr<ServerLink>> link = router_.Link(node);
      if (link.ok()) {
        absl::MutexLock lock(&mu_);
        first_ = *link;
        return absl::OkStatus();
      }
      last = link.status();
    }
    return last;
  }

  absl::StatusOr<std::string> Get(absl::string_view key) override {
    return Keyed<std::string>(kGetOp, key, /*read=*/true, /*idempotent=*/true,
                              [&](DataPath& p, absl::Time d) { return p.Get(key, d); });
  }
  absl::Status Put(absl::string_view key, absl::string_view value) override {
    return KeyedStatus(kPutOp, key, /*idempotent=*/false,
                       [&](DataPath& p, absl::Time d) { return p.Put(key, value, d); });
  }
  absl::Status Delete(absl::string_view key) override {
    return KeyedStatus(kDeleteOp, key, /*idempotent=*/false,
                       [&](DataPath& p, absl::Time d) { return p.Delete(key, d); });
  }
  // Expiry writes are not resent on an unknown outcome (as Put); Ttl goes
  // to the primary (not a replica path: it reads through the server CPU).
  absl::Status PutWithTtl(absl::string_view key, absl::string_view value,
                          absl::Duration ttl) override {
    return KeyedStatus(kPutOp, key, /*idempotent=*/false,
                       [&](DataPath& p, absl::Time d) { return p.PutWithTtl(key, value, ttl, d); });
  }
  absl::StatusOr<bool> Expire(absl::string_view key, absl::Duration ttl) override {
    return Keyed<bool>(kPutOp, key, /*read=*/false, /*idempotent=*/false,
                       [&](DataPath& p, absl::Time d) { return p.Expire(key, ttl, d); });
  }
  absl::StatusOr<absl::Duration> Ttl(absl::string_view key) override {
    return Keyed<absl::Duration>(kExistsOp, key, /*read=*/false, /*idempotent=*/true,
                                 [&](DataPath& p, absl::Time d) { return p.Ttl(key, d); });
  }
  absl::StatusOr<bool> Exists(absl::string_view key) override {
    return Keyed<bool>(kExistsOp, key, true, true,
                       [&](DataPath& p, absl::Time d) { return p.Exists(key, d); });
  }
  absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                 size_t offset, size_t capacity) override {
    return Keyed<size_t>(kGetOp, key, true, true, [&](DataPath& p, absl::Time d) {
      return p.GetInto(key, buffer, offset, capacity, d);
    });
  }
  absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                       size_t length) override {
    return KeyedStatus(kPutOp, key, /*idempotent=*/false, [&](DataPath& p, absl::Time d) {
      return p.PutFrom(key, buffer, offset, length, d);
    });
  }

  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys) override;
  absl::StatusOr<std::vector<absl::Status>> MultiPutEach(
      absl::Span<const std::pair<std::string, std::string>> pairs) override;
  absl::StatusOr<ScanPage> Scan(uint64_t cursor, uint32_t count, absl::string_view prefix) override;
  absl::StatusOr<ServerStats> Stats() override;

  // Every link shares one RDMA device and PD (initiator::SharedContext), so a buffer
  // registered through any of them serves all nodes.
  absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size) override {
    return First()->Current().path->Register(data, size);
  }
  uint64_t max_value_bytes() const override { return First()->max_value_bytes(); }
  std::string transport_name() const override {
    std::shared_ptr<DataPath> path = First()->Current().path;
    return path ? std::string(path->name()) : "none";
  }
  std::map<std::string, uint64_t> metrics() const override {
    return metrics::FlattenSnapshot(registry_.TakeSnapshot());
  }

 private:
  std::shared_ptr<ServerLink> First() const {
    absl::MutexLock lock(&mu_);
    return first_;
  }

  // The node for `key` under `map`: the primary, or with read_from_replicas
  // and `replica_ok` an in-sync backup. A kClusterDown refusal (nothing was
  // sent) when the shard has no primary.
  absl::StatusOr<const v1::ClusterNode*> Route(const cluster::ClusterMapView& map,
                                               absl::string_view key, bool replica_ok) {
    const v1::Shard* shard = map.ShardForKey(key);
    if (shard == nullptr || shard->replicas().empty()) return NoPrimary(cluster::KeySlot(key));
    const v1::ClusterNode* node = nullptr;
    if (replica_ok && options_.read_from_replicas && shard->replicas_size() > 1) {
      const uint64_t n = next_replica_.fetch_add(1, std::memory_order_relaxed);
      node = map.Node(shard->replicas(1 + static_cast<int>(n % (shard->replicas_size() - 1))));
    } else {
      node = map.Primary(*shard);
    }
    if (node == nullptr) return absl::InternalError("the cluster map names an unknown node");
    return node;
  }

  // After a failed attempt routed by `epoch` to `node` (may be null): drops
  // a link that stopped answering, refreshes the map, and backs off unless a
  // newer map arrived. Counts the redirect.
  void Recover(Verdict verdict, const absl::Status& s, uint64_t epoch, const v1::ClusterNode* node,
               const std::shared_ptr<ServerLink>& link, RetryBudget* budget) {
    if (verdict == Verdict::kRedirect) metrics_.redirects()->Increment();
    // Plain kUnavailable (not a refusal: the node did not answer) from a
    // node: it may be gone; the next attempt handshakes again.
    // The same for one that stopped answering (an attempt timed out): its
    // connection may hold requests that will never be answered.
    if (link != nullptr && verdict == Verdict::kDown &&
        (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) &&
        !cluster::FromStatus(s).has_value()) {
      router_.Drop(link);
    }
    // A node that redirects holds a newer map, most likely: ask it first.
    const std::string hint =
        verdict == Verdict::kRedirect && node != nullptr ? node->control_address() : "";
    const std::string last =
        verdict == Verdict::kDown && node != nullptr ? node->control_address() : "";
    const bool newer = router_.Refresh(epoch, hint, budget->deadline(), last);
    if (!newer || verdict == Verdict::kDown) budget->Sleep();
  }

  // The retry loop of one single-key operation (see the header).
  template <typename T, typename F>
  absl::StatusOr<T> Keyed(OpKind kind, absl::string_view key, bool read, bool idempotent, F op) {
    const auto start = std::chrono::steady_clock::now();
    RetryBudget budget(options_.cluster_max_attempts, absl::Now() + options_.op_timeout);
    absl::StatusOr<T> r = absl::UnknownError("not attempted");
    const TransportMetrics* tm = metrics_.ForTransport("tcp");
    const uint32_t slot = cluster::KeySlot(key);
    // The node a kAsk refusal named, for the next attempt only. A copy: the map it
    // was found in may be replaced meanwhile.
    std::optional<v1::ClusterNode> asked;
    for (;;) {
      if (budget.attempts() > 0) metrics_.retries()->Increment();
      budget.Begin();
      const std::shared_ptr<const cluster::ClusterMapView> map = router_.map();
      // An ask is followed for one attempt; the next routes by the map.
      const std::optional<v1::ClusterNode> ask_now = std::move(asked);
      asked.reset();
      const bool replica_read =
          read && options_.read_from_replicas && budget.attempts() == 1 && !ask_now.has_value();
      absl::StatusOr<const v1::ClusterNode*> node =
          ask_now.has_value() ? &*ask_now : Route(*map, key, replica_read);
      std::shared_ptr<ServerLink> link;
      bool sent = false;
      if (!node.ok()) {
        r = node.status();
      } else if (absl::StatusOr<std::shared_ptr<ServerLink>> l = router_.Link(**node); !l.ok()) {
        r = l.status();
      } else {
        link = *l;
        tm = link->Current().metrics;
        sent = true;
        r = link->Run<T>(
            Untimed(kind),
            [&](DataPath& p) {
              const absl::Time d = budget.AttemptDeadline(options_.cluster_attempt_timeout);
              // A slot in HANDOFF is not READ one-sidedly (slow_read_path.h).
              if (read && p.name() == "rdma" && ReadsNeedSlowPath(*map, slot)) {
                SlowReadPath slow(link->control(), &p);
                return op(slow, d);
              }
              return op(p, d);
            },
            idempotent);
      }
      const Verdict v = ClassifyAttempt(r.status(), budget);
      // The last attempt, and it may have met a frozen node: refresh for the next operation.
      if (node.ok() && (v == Verdict::kFinal || !budget.More())) {
        router_.RecoverForNextOperation(r.status(), map->epoch(), *node, link);
      }
      // A write not certainly refused may have happened: it is not sent
      // again, and its error says so (see the header).
      if (!idempotent && !r.ok() && !NoEffect(r.status(), sent)) {
        r = WriteOutcome(r.status());
        break;
      }
      if (v == Verdict::kFinal) break;
      if (!budget.More()) {
        r = GaveUp(r.status(), budget, router_.epoch());
        break;
      }
      // A backup that will not serve the read (it has not applied our map,
      // or does not take READONLY): read from the primary, at once.
      if (replica_read && v == Verdict::kRedirect) {
        metrics_.redirects()->Increment();
        continue;
      }
      if (v == Verdict::kTryAgain) {
        metrics_.tryagains()->Increment();
        budget.SleepTryAgain();
        continue;
      }
      if (v == Verdict::kAsk) {
        metrics_.asks()->Increment();
        const std::optional<AskTarget> target = ParseAsk(r.status());
        const v1::ClusterNode* n =
            target.has_value() ? AskedNode(*map, target->slot, target->node_id, target->address)
                               : nullptr;
        if (n != nullptr) {
          asked = *n;
          continue;
        }
        // A node this map does not know: a newer map names it.
      }
      Recover(v == Verdict::kAsk ? Verdict::kRedirect : v, r.status(), map->epoch(),
              node.ok() ? *node : nullptr, link, &budget);
    }
    if (kind.call != CallKind::kNone) tm->ObserveSince(kind.call, start);
    return r;
  }
  template <typename F>
  absl::Status KeyedStatus(OpKind kind, absl::string_view key, bool idempotent, F op) {
    return Keyed<bool>(kind, key, /*read=*/false, idempotent,
                       [&](DataPath& p, absl::Time d) -> absl::StatusOr<bool> {
                         KV_RETURN_IF_ERROR(op(p, d));
                         return true;
                       })
        .status();
  }

  // One key of a batch, alone: its own retry loop (and op_timeout), counted
  // per key but not timed as a call of its own.
  absl::StatusOr<std::string> GetOne(absl::string_view key) {
    return Keyed<std::string>(Untimed(kGetOp), key, /*read=*/true, /*idempotent=*/true,
                              [&](DataPath& p, absl::Time d) { return p.Get(key, d); });
  }
  absl::Status PutOne(absl::string_view key, absl::string_view value) {
    return KeyedStatus(Untimed(kPutOp), key, /*idempotent=*/false,
                       [&](DataPath& p, absl::Time d) { return p.Put(key, value, d); });
  }

  // The indices of a batch grouped by the node they route to; indices of a
  // shard without a primary are in `down`; with `divert_handoff`, indices
  // of slots in HANDOFF (ReadsNeedSlowPath) are in `single`, for the caller
  // to run one by one (Keyed: slow path, ask, try again).
  struct Groups {
    std::shared_ptr<const cluster::ClusterMapView> map;
    std::map<std::string, std::pair<const v1::ClusterNode*, std::vector<size_t>>> by_node;
    std::vector<size_t> down;
    std::vector<size_t> single;
  };
  template <typename KeyOf>
  Groups Split(const std::vector<size_t>& pending, bool read, bool divert_handoff, KeyOf key_of) {
    Groups g;
    g.map = router_.map();
    for (size_t i : pending) {
      if (divert_handoff && ReadsNeedSlowPath(*g.map, cluster::KeySlot(key_of(i)))) {
        g.single.push_back(i);
        continue;
      }
      absl::StatusOr<const v1::ClusterNode*> node = Route(*g.map, key_of(i), read);
      if (!node.ok()) {
        g.down.push_back(i);
        continue;
      }
      auto& group = g.by_node[(*node)->node_id()];
      group.first = *node;
      group.second.push_back(i);
    }
    return g;
  }

  // Runs `fn(i)` for i in [0, n), all but the first on threads of their own.
  template <typename Fn>
  static void Parallel(size_t n, Fn fn) {
    std::vector<std::thread> threads;
    for (size_t i = 1; i < n; ++i) threads.emplace_back([&fn, i] { fn(i); });
    if (n > 0) fn(0);
    for (auto& t : threads) t.join();
  }

  const Options options_;
  // Declared before everything that counts into it.
  metrics::Registry registry_;
  const ClientMetrics metrics_;
  initiator::SharedContext rdma_;
  ClusterRouter router_;
  std::atomic<uint64_t> next_replica_{0};
  mutable absl::Mutex mu_;
  std::shared_ptr<ServerLink> first_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::vector<absl::StatusOr<std::string>>> ClusterClientImpl::MultiGet(
    absl::Span<const std::string> keys) {
  const auto start = std::chrono::steady_clock::now();
  RetryBudget budget(options_.cluster_max_attempts, absl::Now() + options_.op_timeout);
  std::vector<absl::StatusOr<std::string>> out(keys.size(), absl::UnknownError("not attempted"));
  std::vector<size_t> pending(keys.size());
  for (size_t i = 0; i < pending.size(); ++i) pending[i] = i;
  // Keys of a migrating slot (HANDOFF, or refused kAsk / kTryAgain): read one
  // by one after the batch.
  std::vector<size_t> single;
  const TransportMetrics* tm = metrics_.ForTransport("tcp");
  while (!pending.empty()) {
    if (budget.attempts() > 0) metrics_.retries()->Increment();
    budget.Begin();
    Groups g = Split(pending, budget.attempts() == 1, /*divert_handoff=*/true,
                     [&](size_t i) -> absl::string_view { return keys[i]; });
    single.insert(single.end(), g.single.begin(), g.single.end());
    std::vector<size_t> again;
    BatchFailure failure;
    for (size_t i : g.down) {
      out[i] = NoPrimary(cluster::KeySlot(keys[i]));
      failure.Note(Verdict::kDown, out[i].status(), nullptr, nullptr);
      again.push_back(i);
    }
    std::vector<const std::pair<const v1::ClusterNode*, std::vector<size_t>>*> parts;
    for (const auto& [id, part] : g.by_node) parts.push_back(&part);
    std::vector<PartResult<std::vector<absl::StatusOr<std::string>>>> results(parts.size());
    Parallel(parts.size(), [&](size_t pi) {
      std::vector<std::string> part_keys;
      for (size_t i : parts[pi]->second) part_keys.push_back(keys[i]);
      absl::StatusOr<std::shared_ptr<ServerLink>> link = router_.Link(*parts[pi]->first);
      if (!link.ok()) {
        results[pi].value = link.status();
        return;
      }
      results[pi].link = *link;
      results[pi].value = (*link)->Run<std::vector<absl::StatusOr<std::string>>>(
          Untimed(kMultiGetOp),
          [&](DataPath& p) {
            return p.MultiGet(part_keys, budget.AttemptDeadline(options_.cluster_attempt_timeout));
          },
          true, part_keys.size());
    });
    for (size_t pi = 0; pi < parts.size(); ++pi) {
      const std::vector<size_t>& idx = parts[pi]->second;
      auto& value = results[pi].value;
      if (results[pi].link != nullptr) tm = results[pi].link->Current().metrics;
      if (value.ok() && value->size() != idx.size()) {
        value = absl::InternalError("a node answered MultiGet with the wrong number of values");
      }
      if (!value.ok()) {
        const Verdict v = ClassifyAttempt(value.status(), budget);
        // As on one server: a batch that cannot be attempted fails whole.
        if (v == Verdict::kFinal) return value.status();
        if (v == Verdict::kAsk || v == Verdict::kTryAgain) {
          if (v == Verdict::kTryAgain) metrics_.tryagains()->Increment();
          single.insert(single.end(), idx.begin(), idx.end());
          continue;
        }
        failure.Note(v, value.status(), parts[pi]->first, results[pi].link);
        for (size_t i : idx) out[i] = value.status();
        again.insert(again.end(), idx.begin(), idx.end());
        continue;
      }
      for (size_t k = 0; k < idx.size(); ++k) {
        const Verdict v = ClassifyAttempt((*value)[k].status(), budget);
        if (v == Verdict::kAsk || v == Verdict::kTryAgain) {
          if (v == Verdict::kTryAgain) metrics_.tryagains()->Increment();
          single.push_back(idx[k]);
        } else if (v != Verdict::kFinal) {
          failure.Note(v, (*value)[k].status(), parts[pi]->first, results[pi].link);
          again.push_back(idx[k]);
        }
        out[idx[k]] = std::move((*value)[k]);
      }
    }
    pending = std::move(again);
    if (pending.empty()) break;
    if (!budget.More()) {
      for (size_t i : pending) out[i] = GaveUp(out[i].status(), budget, router_.epoch());
      break;
    }
    Recover(failure.verdict, failure.status, g.map->epoch(), failure.node, failure.link, &budget);
  }
  for (size_t i : single) out[i] = GetOne(keys[i]);
  tm->ObserveSince(CallKind::kMultiGet, start);  // under the transport of its last part
  return out;
}

// Each node's part keeps the caller's order, so a key given twice (always in
// one part: one key, one shard) keeps its last value. Every pair has its own
// outcome; PairOutcomes decides which are sent again (only pairs certainly
// not stored).
absl::StatusOr<std::vector<absl::Status>> ClusterClientImpl::MultiPutEach(
    absl::Span<const std::pair<std::string, std::string>> pairs) {
  const auto start = std::chrono::steady_clock::now();
  RetryBudget budget(options_.cluster_max_attempts, absl::Now() + options_.op_timeout);
  PairOutcomes outcomes(pairs);
  std::vector<size_t> pending(pairs.size());
  for (size_t i = 0; i < pending.size(); ++i) pending[i] = i;
  const TransportMetrics* tm = metrics_.ForTransport("tcp");
  // Pairs refused kAsk / kTryAgain (and later pairs of their keys): stored
  // one by one after the batch.
  std::vector<size_t> single;
  auto record = [&](size_t i, absl::Status s, bool sent, Verdict v, std::vector<size_t>* again) {
    const PairOutcomes::Next next = outcomes.Record(i, std::move(s), sent, v);
    if (next == PairOutcomes::Next::kAgain) again->push_back(i);
    if (next != PairOutcomes::Next::kSingle) return;
    if (v == Verdict::kTryAgain) metrics_.tryagains()->Increment();
    single.push_back(i);
  };
  while (!pending.empty()) {
    if (budget.attempts() > 0) metrics_.retries()->Increment();
    budget.Begin();
    Groups g = Split(pending, false, /*divert_handoff=*/false,
                     [&](size_t i) -> absl::string_view { return pairs[i].first; });
    std::vector<size_t> again;
    BatchFailure failure;
    for (size_t i : g.down) {
      const absl::Status s = NoPrimary(cluster::KeySlot(pairs[i].first));
      failure.Note(Verdict::kDown, s, nullptr, nullptr);
      record(i, s, /*sent=*/false, Verdict::kDown, &again);
    }
    std::vector<const std::pair<const v1::ClusterNode*, std::vector<size_t>>*> parts;
    for (const auto& [id, part] : g.by_node) parts.push_back(&part);
    std::vector<PartResult<std::vector<absl::Status>>> results(parts.size());
    Parallel(parts.size(), [&](size_t pi) {
      std::vector<std::pair<std::string, std::string>> part_pairs;
      for (size_t i : parts[pi]->second) part_pairs.push_back(pairs[i]);
      absl::StatusOr<std::shared_ptr<ServerLink>> link = router_.Link(*parts[pi]->first);
      if (!link.ok()) {
        results[pi].value = link.status();
        return;
      }
      results[pi].link = *link;
      results[pi].sent = true;
      results[pi].value = (*link)->Run<std::vector<absl::Status>>(
          Untimed(kMultiPutOp),
          [&](DataPath& p) {
            return p.MultiPut(part_pairs, budget.AttemptDeadline(options_.cluster_attempt_timeout));
          },
          /*retry=*/false, part_pairs.size());
    });
    for (size_t pi = 0; pi < parts.size(); ++pi) {
      const std::vector<size_t>& idx = parts[pi]->second;
      if (results[pi].link != nullptr) tm = results[pi].link->Current().metrics;
      auto& value = results[pi].value;
      if (value.ok() && value->size() != idx.size()) {
        value = absl::InternalError("a node answered MultiPut with the wrong number of statuses");
      }
      for (size_t k = 0; k < idx.size(); ++k) {
        // An outer error (nothing of the part was sent) stands for every pair.
        const absl::Status s = value.ok() ? (*value)[k] : value.status();
        const Verdict v = s.ok() ? Verdict::kFinal : ClassifyAttempt(s, budget);
        if (!s.ok() && v != Verdict::kFinal && NoEffect(s, results[pi].sent)) {
          failure.Note(v, s, parts[pi]->first, results[pi].link);
        }
        record(idx[k], s, results[pi].sent, v, &again);
      }
    }
    std::sort(again.begin(), again.end());  // the caller's order, for repeated keys
    pending.clear();
    for (size_t i : again) {
      if (outcomes.MaySend(i)) pending.push_back(i);
    }
    if (pending.empty()) break;
    if (!budget.More()) {
      for (size_t i : pending) outcomes.Set(i, GaveUp(outcomes.status(i), budget, router_.epoch()));
      break;
    }
    Recover(failure.verdict, failure.status, g.map->epoch(), failure.node, failure.link, &budget);
  }
  // In the caller's order, so a key given twice keeps its last value.
  std::sort(single.begin(), single.end());
  for (size_t i : single) {
    if (outcomes.MaySend(i)) outcomes.Set(i, PutOne(pairs[i].first, pairs[i].second));
  }
  tm->ObserveSince(CallKind::kMultiPut, start);
  return std::move(outcomes).Take();
}

absl::StatusOr<ScanPage> ClusterClientImpl::Scan(uint64_t cursor, uint32_t count,
                                                 absl::string_view prefix) {
  std::shared_ptr<const cluster::ClusterMapView> map = router_.map();
  // The primaries, in node-id order: the cursor's node index counts here.
  std::vector<const v1::ClusterNode*> nodes;
  for (const v1::Shard& shard : map->proto().shards()) {
    const v1::ClusterNode* p = map->Primary(shard);
    if (p != nullptr && std::find(nodes.begin(), nodes.end(), p) == nodes.end()) nodes.push_back(p);
  }
  std::sort(nodes.begin(), nodes.end(), [](const v1::ClusterNode* a, const v1::ClusterNode* b) {
    return a->node_id() < b->node_id();
  });
  const uint64_t index = cursor >> kScanNodeShift;
  if (index >= nodes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("scan cursor ", cursor, " names node ", index,
                                                   " but the cluster map has ", nodes.size(),
                                                   " primaries"));
  }
  const v1::ClusterNode& node = *nodes[index];
  KV_ASSIGN_OR_RETURN(std::shared_ptr<ServerLink> link, router_.Link(node));
  KV_ASSIGN_OR_RETURN(v1::ScanResponse resp,
                      link->control()->Scan(cursor & kScanNodeCursorMask, count, prefix,
                                            absl::Now() + options_.op_timeout));
  if (resp.cursor() > kScanNodeCursorMask) {
    return absl::InternalError(absl::StrCat("node ", node.node_id(), " returned scan cursor ",
                                            resp.cursor(), ", over the 48 bits it may use"));
  }
  ScanPage page;
  for (std::string& key : *resp.mutable_keys()) {
    // Only keys of shards this node leads; it also holds copies of others.
    const v1::Shard* shard = map->ShardForKey(key);
    if (shard != nullptr && !shard->replicas().empty() && shard->replicas(0) == node.node_id()) {
      page.keys.push_back(std::move(key));
    }
  }
  if (resp.cursor() != 0) {
    page.cursor = (index << kScanNodeShift) | resp.cursor();
  } else if (index + 1 < nodes.size()) {
    page.cursor = (index + 1) << kScanNodeShift;
  }
  return page;
}

absl::StatusOr<ServerStats> ClusterClientImpl::Stats() {
  std::shared_ptr<const cluster::ClusterMapView> map = router_.map();
  absl::Status last = absl::UnavailableError("the cluster map names no node");
  for (const v1::ClusterNode& node : map->proto().nodes()) {
    absl::StatusOr<std::shared_ptr<ServerLink>> link = router_.Link(node);
    absl::StatusOr<v1::StatsResponse> resp =
        link.ok() ? (*link)->control()->Stats(absl::Now() + options_.op_timeout) : link.status();
    if (!resp.ok()) {
      last = resp.status();
      continue;
    }
    ServerStats out;
    out.info.insert(resp->info().begin(), resp->info().end());
    out.counters.insert(resp->counters().begin(), resp->counters().end());
    out.info["cluster_node"] = node.node_id();
    return out;
  }
  return last;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvClient>> ConnectCluster(const Options& options,
                                                         std::string* single_node_seed) {
  auto impl = std::make_unique<ClusterClientImpl>(options);
  KV_RETURN_IF_ERROR(
      impl->router().Bootstrap(absl::Now() + options.connect_timeout, single_node_seed));
  KV_RETURN_IF_ERROR(impl->ConnectFirstNode());
  return std::unique_ptr<KvClient>(std::move(impl));
}

}  // namespace client
}  // namespace kvstore
