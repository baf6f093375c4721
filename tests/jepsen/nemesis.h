// Copyright 2026 The kvstore Authors.
//
// Nemesis: the faults of the fault suite, drawn at random from a seed (the
// same seed and options draw the same sequence of kinds and targets; what
// the cluster does in between is not replayable, the draw is). Each fault is
// injected, held, and healed by the runner:
//
//   kill          kill -9 of a node (a shard's primary when there is one),
//                 restarted after the hold: inside or outside the member TTL
//   pause         SIGSTOP of a node for 0.3, 0.9, 1.5 or 5 TTL, then SIGCONT
//   cut-etcd      a node and every etcd member cannot reach each other
//   cut-peer      a node and one other node cannot reach each other
//   cut-clients   a node and the clients cannot reach each other
//   one-way       a node's packets to every other node vanish; theirs arrive
//   cut-all       a node cut from etcd, every other node and the clients (a
//                 total partition: the failover time of a partition)
//   etcd-kill     kill -9 of the etcd leader, restarted after the hold
//   etcd-pause    SIGSTOP of the etcd leader, SIGCONT after the hold
//   etcd-isolate  one etcd member cut from the other members (kvservers still
//                 reach it: its watches and keepalives get no leader)
//   failover      kvctl cluster failover of a random shard (an admin act,
//                 not a fault; nothing to heal)
//   clock-step    a node's wall clock (CLOCK_REALTIME only) steps by ±2 or
//                 ±5 TTL while it runs, and back to the true time at the
//                 heal (fake_clock.h; needs TestBedOptions::fake_clocks)
//   full-pool     an in-sync backup restarted with a small pool (16M),
//                 back in sync, then filled by large writes to the shards
//                 it backs (pool_filler.h) until it answers pool-full;
//                 healed by a restart with the usual pool
//   add-remove    the spare node (the bed's last namespace) started,
//                 `add-node` (a new shard it leads) and `rebalance` (slots
//                 migrate to it under load); at the heal `remove-node`
//                 (drained while migrations may still run) and stopped, so
//                 the node count returns to where it was
//
// Partitions drop packets silently at the receiver (Firewall, kIn), so
// connections hang as over a real broken link instead of failing fast.
//
// Thread safety: not thread-safe; the runner's fault thread drives it.

#ifndef KVSTORE_TESTS_JEPSEN_NEMESIS_H_
#define KVSTORE_TESTS_JEPSEN_NEMESIS_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tests/jepsen/cluster_admin.h"
#include "tests/jepsen/pool_filler.h"
#include "tests/jepsen/test_bed.h"

namespace kvstore {
namespace jepsen {

enum class FaultKind {
  kKill,
  kPause,
  kCutEtcd,
  kCutPeer,
  kCutClients,
  kOneWay,
  kCutAll,
  kEtcdKill,
  kEtcdPause,
  kEtcdIsolate,
  kFailover,
  kClockStep,
  kFullPool,
  kAddRemove,
};

// The name used in --faults and in the log ("kill", "cut-etcd", ...).
std::string FaultName(FaultKind kind);
// Parses a comma-separated list of names ("all": every kind).
absl::Status ParseFaults(const std::string& list, std::vector<FaultKind>* out);

struct Fault {
  FaultKind kind = FaultKind::kKill;
  int node = -1;   // the node it hits (kill, pause, cuts)
  int other = -1;  // cut-peer: the other node; etcd-*: the member
  int shard = -1;  // failover
  absl::Duration hold;
  absl::Duration step;  // clock-step: the offset from the true time
  std::string Describe() const;
};

class Nemesis {
 public:
  // `bed` is not owned and outlives the nemesis. `ttl`: the member TTL.
  Nemesis(TestBed* bed, std::vector<FaultKind> kinds, uint64_t seed, absl::Duration ttl);

  // Draws the next fault (targets from the current map where it matters).
  Fault Next();
  // Injects it. An error says what could not be done (the runner logs it
  // and goes on: a fault that cannot be injected is not a violation).
  absl::Status Inject(Fault& fault);
  // Undoes it: restarts, resumes, clears rules.
  absl::Status Heal(const Fault& fault);
  // What the last Inject/Heal did beyond the fault's description (the
  // filler's writes, the admin answers), then cleared; "" when nothing.
  std::string TakeNote();

 private:
  int RandomNode();
  int PrimaryOrRandom();
  int BackupOrRandom();
  absl::Status CutPair(Firewall& a, const std::string& a_ip, Firewall& b, const std::string& b_ip);
  absl::Status InjectFullPool(const Fault& f);
  absl::Status HealFullPool(const Fault& f);
  absl::Status InjectAddRemove(const Fault& f);
  absl::Status HealAddRemove(const Fault& f);
  // Kills `node` and starts it again with `flags` appended, once the map
  // no longer names it (a new, empty process).
  absl::Status RestartWith(int node, std::vector<std::string> flags);

  TestBed* const bed_;
  const std::vector<FaultKind> kinds_;
  const absl::Duration ttl_;
  std::mt19937_64 rng_;
  ClusterAdmin admin_;
  std::unique_ptr<PoolFiller> filler_;  // full-pool, between inject and heal
  std::string note_;
};

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_NEMESIS_H_
