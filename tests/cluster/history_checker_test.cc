// Copyright 2026 The kvstore Authors.
//
// HistoryChecker on hand-made histories: what it must catch (a lost
// acknowledged write, a phantom value, a stale read after an acknowledged
// newer write) and what it must accept (overlapping writes seen either way,
// unknown-outcome writes appearing or not, deletes), plus random histories
// of a simulated linearizable register, which must pass.

#include "tests/cluster/history_checker.h"

#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();

class Builder {
 public:
  Builder& Put(const std::string& v, int64_t from, int64_t to, Outcome o = Outcome::kOk) {
    return Add(OpType::kPut, v, from, to, o, false);
  }
  Builder& Del(int64_t from, int64_t to, Outcome o = Outcome::kOk) {
    return Add(OpType::kDelete, std::nullopt, from, to, o, false);
  }
  // v == nullopt: the read found the key absent.
  Builder& Get(std::optional<std::string> v, int64_t from, int64_t to) {
    return Add(OpType::kGet, std::move(v), from, to, Outcome::kOk, false);
  }
  Builder& Final(std::optional<std::string> v, int64_t from, int64_t to) {
    return Add(OpType::kGet, std::move(v), from, to, Outcome::kOk, true);
  }
  Builder& Key(const std::string& k) {
    key_ = k;
    return *this;
  }
  std::vector<Operation> ops() const { return ops_; }
  CheckResult Check(CheckOptions options = {}) const { return CheckHistory(ops_, options); }

 private:
  Builder& Add(OpType t, std::optional<std::string> v, int64_t from, int64_t to, Outcome o,
               bool final_read) {
    Operation op;
    op.id = ops_.size();
    op.client = static_cast<int>(ops_.size() % 4);
    op.type = t;
    op.key = key_;
    op.value = std::move(v);
    op.invoke_ns = from;
    op.complete_ns = to;
    op.outcome = o;
    op.final_read = final_read;
    ops_.push_back(std::move(op));
    return *this;
  }
  std::string key_ = "k";
  std::vector<Operation> ops_;
};

std::vector<ViolationKind> Kinds(const CheckResult& r) {
  std::vector<ViolationKind> kinds;
  for (const Violation& v : r.violations) kinds.push_back(v.kind);
  return kinds;
}

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// --- Must catch ------------------------------------------------------------

TEST(HistoryCheckerTest, CatchesLostAcknowledgedWrite) {
  Builder b;
  b.Put("v1", 0, 10).Put("v2", 20, 30).Final("v1", 100, 110);
  CheckResult r = b.Check();
  EXPECT_THAT(Kinds(r), ElementsAre(ViolationKind::kLostWrite)) << r.Report();
  ASSERT_EQ(r.violations.size(), 1u);
  // The read, the value it returned, and the write that was lost.
  ASSERT_EQ(r.violations[0].ops.size(), 3u);
  EXPECT_EQ(r.violations[0].ops[2].value, "v2");
}

TEST(HistoryCheckerTest, NamesTheLatestLostWrite) {
  Builder b;
  b.Put("v1", 0, 10).Put("v2", 20, 30).Put("v3", 40, 50).Put("v4", 60, 70).Final("v1", 100, 110);
  CheckResult r = b.Check();
  ASSERT_EQ(r.violations.size(), 1u) << r.Report();
  EXPECT_EQ(r.violations[0].ops.back().value, "v4");
}

TEST(HistoryCheckerTest, CatchesLostWriteWhenFinalReadFindsNothing) {
  Builder b;
  b.Put("v1", 0, 10).Final(std::nullopt, 100, 110);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kLostWrite));
}

TEST(HistoryCheckerTest, CatchesLostWriteEvenWithUnknownWritesBeforeIt) {
  Builder b;
  // v0's outcome is unknown but it began and was given up on before v2 began.
  b.Put("v0", 0, 5, Outcome::kUnknown).Put("v2", 20, 30).Final("v0", 100, 110);
  // An unknown write may take effect any time after its invocation, even
  // after v2: the checker must accept this one...
  EXPECT_THAT(Kinds(b.Check()), IsEmpty());
  // ...but not when v0 was acknowledged.
  Builder c;
  c.Put("v0", 0, 5).Put("v2", 20, 30).Final("v0", 100, 110);
  EXPECT_THAT(Kinds(c.Check()), ElementsAre(ViolationKind::kLostWrite));
}

TEST(HistoryCheckerTest, CatchesPhantomValue) {
  Builder b;
  b.Put("v1", 0, 10).Get("never-written", 20, 30);
  CheckResult r = b.Check();
  EXPECT_THAT(Kinds(r), ElementsAre(ViolationKind::kPhantomRead)) << r.Report();
}

TEST(HistoryCheckerTest, CatchesValueWrittenToAnotherKey) {
  Builder b;
  b.Key("a").Put("va", 0, 10).Key("b").Get("va", 20, 30);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kPhantomRead));
}

TEST(HistoryCheckerTest, CatchesValueOfFailedPut) {
  Builder b;
  b.Put("v1", 0, 10, Outcome::kFailed).Get("v1", 20, 30);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kFailedWriteRead));
}

TEST(HistoryCheckerTest, CatchesReadFromTheFuture) {
  Builder b;
  b.Get("v1", 0, 10).Put("v1", 20, 30);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kFutureRead));
}

TEST(HistoryCheckerTest, CatchesStaleReadAfterAcknowledgedNewerWrite) {
  Builder b;
  b.Put("v1", 0, 10).Put("v2", 20, 30).Get("v1", 40, 50);
  CheckResult r = b.Check();
  EXPECT_THAT(Kinds(r), ElementsAre(ViolationKind::kStaleRead)) << r.Report();
  EXPECT_THAT(r.Report(), ::testing::HasSubstr("stale-read key=k"));
}

TEST(HistoryCheckerTest, CatchesAbsentAfterAcknowledgedPut) {
  Builder b;
  b.Put("v1", 0, 10).Get(std::nullopt, 20, 30);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kStaleRead));
}

TEST(HistoryCheckerTest, CatchesValueAfterAcknowledgedDelete) {
  Builder b;
  b.Put("v1", 0, 10).Del(20, 30).Get("v1", 40, 50);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kStaleRead));
}

TEST(HistoryCheckerTest, CatchesAbsentAfterDeleteThenPut) {
  Builder b;
  b.Del(0, 10).Put("v1", 20, 30).Get(std::nullopt, 40, 50);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kStaleRead));
}

TEST(HistoryCheckerTest, CatchesGoingBackAfterAReadSawTheNewerValue) {
  // v2's outcome is unknown, but a read saw it: it took effect, so a later
  // read may not return v1 again (a value a reader saw must survive).
  Builder b;
  b.Put("v1", 0, 10).Put("v2", 20, 25, Outcome::kUnknown).Get("v2", 30, 40).Get("v1", 50, 60);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kStaleRead));
  CheckOptions acks_only;
  acks_only.reads_as_evidence = false;
  EXPECT_THAT(Kinds(b.Check(acks_only)), IsEmpty());
}

TEST(HistoryCheckerTest, CatchesObservedValueLostInFinalRead) {
  Builder b;
  b.Put("v1", 0, 10).Put("v2", 20, 25, Outcome::kUnknown).Get("v2", 30, 40).Final("v1", 90, 95);
  EXPECT_THAT(Kinds(b.Check()), ElementsAre(ViolationKind::kLostWrite));
}

TEST(HistoryCheckerTest, CatchesMissingFinalReadWhenRequired) {
  Builder b;
  b.Put("v1", 0, 10).Get("v1", 20, 30);
  CheckOptions options;
  options.require_final_reads = true;
  EXPECT_THAT(Kinds(b.Check(options)), ElementsAre(ViolationKind::kNoFinalRead));
  EXPECT_THAT(Kinds(b.Check()), IsEmpty());
}

TEST(HistoryCheckerTest, RefusesHistoriesThatBreakTheUniqueValuePremise) {
  Builder b;
  b.Put("v1", 0, 10).Put("v1", 20, 30).Final("v1", 90, 95);
  // Reported first; what follows about that value is meaningless.
  std::vector<ViolationKind> kinds = Kinds(b.Check());
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(kinds[0], ViolationKind::kDuplicateValue);
}

TEST(HistoryCheckerTest, ReportsEveryKeySeparately) {
  Builder b;
  b.Key("a").Put("a1", 0, 10).Put("a2", 20, 30).Final("a1", 100, 110);
  b.Key("b").Put("b1", 0, 10).Final("b1", 100, 110);
  b.Key("c").Get("zz", 0, 10);
  CheckResult r = b.Check();
  ASSERT_EQ(r.violations.size(), 2u) << r.Report();
  EXPECT_EQ(r.violations[0].key, "a");
  EXPECT_EQ(r.violations[1].key, "c");
  EXPECT_EQ(r.keys, 3u);
}

// --- Must accept -------------------------------------------------------------

TEST(HistoryCheckerTest, AcceptsOverlappingWritesSeenEitherWay) {
  for (const char* seen : {"v1", "v2"}) {
    Builder b;
    b.Put("v1", 0, 20).Put("v2", 10, 30).Get(seen, 40, 50).Final(seen, 100, 110);
    CheckResult r = b.Check();
    EXPECT_TRUE(r.ok()) << seen << "\n" << r.Report();
  }
}

TEST(HistoryCheckerTest, AcceptsReadConcurrentWithWrite) {
  for (const char* seen : {"v1", "v2"}) {
    Builder b;
    b.Put("v1", 0, 10).Put("v2", 20, 40).Get(seen, 30, 35);
    EXPECT_TRUE(b.Check().ok()) << seen;
  }
}

TEST(HistoryCheckerTest, AcceptsUnknownWriteAppearingOrNot) {
  for (const char* seen : {"v1", "v2"}) {
    Builder b;
    b.Put("v1", 0, 10).Put("v2", 20, 25, Outcome::kUnknown).Get(seen, 30, 40).Final(seen, 90, 95);
    CheckResult r = b.Check();
    EXPECT_TRUE(r.ok()) << seen << "\n" << r.Report();
  }
}

TEST(HistoryCheckerTest, AcceptsUnknownWriteAppearingLongAfterTheClientGaveUp) {
  Builder b;
  b.Put("v1", 0, 10).Put("v2", 20, 25, Outcome::kUnknown).Get("v1", 30, 40).Get("v2", 200, 210);
  b.Final("v2", 300, 310);
  EXPECT_TRUE(b.Check().ok()) << b.Check().Report();
}

TEST(HistoryCheckerTest, AcceptsStillPendingWrite) {
  Builder b;
  b.Put("v1", 0, 10).Put("v2", 20, kInf, Outcome::kUnknown).Get("v2", 30, 40);
  EXPECT_TRUE(b.Check().ok());
}

TEST(HistoryCheckerTest, AcceptsDeletes) {
  Builder b;
  b.Put("v1", 0, 10).Del(20, 30).Get(std::nullopt, 40, 50).Final(std::nullopt, 90, 95);
  EXPECT_TRUE(b.Check().ok()) << b.Check().Report();
  Builder concurrent;
  concurrent.Put("v1", 0, 10).Del(20, 30).Get("v1", 25, 35);
  EXPECT_TRUE(concurrent.Check().ok());
  for (bool applied : {false, true}) {
    Builder unknown;
    unknown.Put("v1", 0, 10).Del(20, 25, Outcome::kUnknown);
    unknown.Final(applied ? std::nullopt : std::optional<std::string>("v1"), 90, 95);
    EXPECT_TRUE(unknown.Check().ok()) << unknown.Check().Report();
  }
  Builder put_after;
  put_after.Put("v1", 0, 10).Del(20, 30).Put("v2", 40, 50).Final("v2", 90, 95);
  EXPECT_TRUE(put_after.Check().ok());
}

TEST(HistoryCheckerTest, IgnoresFailedAndUnknownReadsAndFailedWrites) {
  Builder b;
  b.Put("v1", 0, 10).Put("v2", 20, 30, Outcome::kFailed).Final("v1", 90, 95);
  Operation unknown_get;
  std::vector<Operation> ops = b.ops();
  unknown_get.id = ops.size();
  unknown_get.type = OpType::kGet;
  unknown_get.key = "k";
  unknown_get.value = "garbage";
  unknown_get.outcome = Outcome::kUnknown;
  unknown_get.invoke_ns = 40;
  unknown_get.complete_ns = 50;
  ops.push_back(unknown_get);
  EXPECT_TRUE(CheckHistory(ops).ok());
}

// --- Random linearizable histories -------------------------------------------

// Simulates a register: every operation takes effect at one instant inside
// its interval (unknown writes maybe never, maybe after the client gave up),
// and reads return the state at their instant. The checker must accept all.
std::vector<Operation> RandomLinearizable(uint32_t seed) {
  std::mt19937 rng(seed);
  struct Planned {
    Operation op;
    int64_t at;  // effect instant, kInf for never
  };
  std::vector<Planned> plan;
  int value_id = 0;
  for (int i = 0; i < 300; ++i) {
    Planned p;
    p.op.client = static_cast<int>(rng() % 5);
    p.op.key = absl::StrCat("k", rng() % 3);
    const int kind = static_cast<int>(rng() % 10);
    p.op.type = kind < 4 ? OpType::kPut : (kind < 5 ? OpType::kDelete : OpType::kGet);
    p.op.final_read = false;
    if (p.op.type == OpType::kPut) p.op.value = absl::StrCat("v", value_id++);
    p.op.invoke_ns = static_cast<int64_t>(rng() % 10000);
    p.op.complete_ns = p.op.invoke_ns + 1 + static_cast<int64_t>(rng() % 500);
    p.op.outcome = Outcome::kOk;
    const int64_t span = p.op.complete_ns - p.op.invoke_ns;
    p.at = p.op.invoke_ns + static_cast<int64_t>(rng() % span);
    if (p.op.type != OpType::kGet && rng() % 8 == 0) {
      p.op.outcome = Outcome::kUnknown;
      const int fate = static_cast<int>(rng() % 3);
      if (fate == 0) p.at = kInf;                                                   // never
      if (fate == 1) p.at = p.op.complete_ns + static_cast<int64_t>(rng() % 2000);  // late
    }
    plan.push_back(std::move(p));
  }
  for (int k = 0; k < 3; ++k) {  // final reads after everything
    Planned p;
    p.op.type = OpType::kGet;
    p.op.key = absl::StrCat("k", k);
    p.op.final_read = true;
    p.op.invoke_ns = 20000;
    p.op.complete_ns = 20001;
    p.op.outcome = Outcome::kOk;
    p.at = 20000;
    plan.push_back(std::move(p));
  }
  // Apply effects in instant order; ties broken by plan order.
  std::vector<size_t> order(plan.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return plan[a].at < plan[b].at; });
  std::map<std::string, std::optional<std::string>> state;
  for (size_t i : order) {
    Planned& p = plan[i];
    if (p.at == kInf) break;
    if (p.op.type == OpType::kPut) state[p.op.key] = p.op.value;
    if (p.op.type == OpType::kDelete) state[p.op.key] = std::nullopt;
    if (p.op.type == OpType::kGet) p.op.value = state[p.op.key];
  }
  std::vector<Operation> ops;
  for (Planned& p : plan) {
    p.op.id = ops.size();
    ops.push_back(std::move(p.op));
  }
  return ops;
}

TEST(HistoryCheckerTest, AcceptsRandomLinearizableHistories) {
  const uint32_t base = std::random_device{}();
  std::printf("seed base %u\n", base);
  for (uint32_t i = 0; i < 200; ++i) {
    std::vector<Operation> ops = RandomLinearizable(base + i);
    CheckOptions options;
    options.require_final_reads = false;
    CheckResult r = CheckHistory(ops, options);
    ASSERT_TRUE(r.ok()) << "seed " << base + i << "\n" << r.Report();
  }
}

// The same histories with one final read rewound to the key's first value
// whose PUT completed before a later acknowledged write began: caught.
TEST(HistoryCheckerTest, CatchesRewoundFinalReadsInRandomHistories) {
  const uint32_t base = std::random_device{}();
  std::printf("seed base %u\n", base);
  int mutated = 0;
  for (uint32_t i = 0; i < 200; ++i) {
    std::vector<Operation> ops = RandomLinearizable(base + i);
    // The key's first acknowledged PUT, and an acknowledged write that began
    // after it completed: the final read may then not return the first.
    for (Operation& fin : ops) {
      if (!fin.final_read) continue;
      const Operation* first = nullptr;
      for (const Operation& op : ops) {
        if (op.key == fin.key && op.type == OpType::kPut && op.outcome == Outcome::kOk &&
            (first == nullptr || op.complete_ns < first->complete_ns)) {
          first = &op;
        }
      }
      if (first == nullptr) continue;
      bool superseded = false;
      for (const Operation& op : ops) {
        superseded |= op.key == fin.key && op.type != OpType::kGet && op.outcome == Outcome::kOk &&
                      op.invoke_ns > first->complete_ns;
      }
      if (!superseded || fin.value == first->value) continue;
      fin.value = first->value;
      ++mutated;
      CheckResult r = CheckHistory(ops);
      bool lost = false;
      for (const Violation& v : r.violations) lost |= v.kind == ViolationKind::kLostWrite;
      EXPECT_TRUE(lost) << "seed " << base + i << "\n" << r.Report();
      break;
    }
  }
  EXPECT_GT(mutated, 50);
}

TEST(HistoryTest, RecordsAndDumps) {
  History h;
  size_t put = h.Invoke(1, OpType::kPut, "k", std::string("v1"));
  h.Complete(put, Outcome::kOk);
  size_t get = h.Invoke(2, OpType::kGet, "k");
  h.Complete(get, Outcome::kOk, std::string("v1"));
  size_t pending = h.Invoke(3, OpType::kPut, "k", std::string("v2"));
  std::vector<Operation> ops = h.Snapshot();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[pending].outcome, Outcome::kUnknown);
  EXPECT_EQ(ops[pending].complete_ns, kInf);
  EXPECT_LE(ops[put].invoke_ns, ops[put].complete_ns);
  EXPECT_LE(ops[put].complete_ns, ops[get].invoke_ns);
  EXPECT_TRUE(CheckHistory(ops).ok());
  const std::string path = absl::StrCat(::testing::TempDir(), "/history.jsonl");
  ASSERT_TRUE(h.DumpJsonLines(path).ok());
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_THAT(line, ::testing::HasSubstr("\"key\":\"k\""));
  }
  EXPECT_EQ(lines, 3);
}

// chaos.sh announces a fault with `date +%s%N`; before this conversion that
// wall-clock time was compared with steady-clock operation times as it was,
// and no write was ever found after a fault.
TEST(History, WallClockTimesConvertToTheHistorysClock) {
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  const int64_t wall_ns = static_cast<int64_t>(wall.tv_sec) * 1000000000 + wall.tv_nsec;
  const int64_t second_ago = SteadyNsFromWallNs(wall_ns - 1000000000);
  const int64_t now = NowNs();
  EXPECT_GT(now - second_ago, 900000000);
  EXPECT_LT(now - second_ago, 1500000000);
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
