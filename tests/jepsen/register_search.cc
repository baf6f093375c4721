// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/register_search.h"

#include <algorithm>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {
namespace {

// One call or return event in the doubly linked list of events.
struct Entry {
  int op = 0;
  bool call = false;
  int prev = -1;
  int next = -1;
  int match = -1;  // a call's return entry
};

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The set of linearized ops, as bits numbered by the order of the ops'
// calls. The search linearizes roughly in that order, so a set is a run of
// ones, a short ragged window, then zeros: the memo keeps only the window
// (the words between the leading full ones and the trailing empty ones),
// which makes a remembered configuration a few words instead of n/64.
// The hash is kept incrementally (XOR of one random word per op).
class LinearizedSet {
 public:
  explicit LinearizedSet(size_t n) : words_((n + 63) / 64, 0) {
    for (size_t i = 0; i < n; ++i) zobrist_.push_back(SplitMix64(i + 1));
  }

  void Flip(int bit) {
    const size_t w = static_cast<size_t>(bit) / 64;
    words_[w] ^= uint64_t{1} << (bit % 64);
    hash_ ^= zobrist_[bit];
    while (full_ < words_.size() && words_[full_] == ~uint64_t{0}) ++full_;
    if (w < full_ && words_[w] != ~uint64_t{0}) full_ = w;
    if (words_[w] != 0) end_ = std::max(end_, w + 1);
    while (end_ > 0 && words_[end_ - 1] == 0) --end_;
  }

  uint64_t hash() const { return hash_; }
  // Leading all-ones words, and one past the last nonzero word.
  size_t full() const { return full_; }
  size_t end() const { return std::max(end_, full_); }
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  std::vector<uint64_t> words_;
  std::vector<uint64_t> zobrist_;
  uint64_t hash_ = 0;
  size_t full_ = 0;
  size_t end_ = 0;
};

// The configurations already explored: (linearized set, state).
class Memo {
 public:
  // False when (set, state) was there already.
  bool Insert(const LinearizedSet& set, int state) {
    Key k;
    k.hash = set.hash();
    k.state = state;
    k.full = static_cast<uint32_t>(set.full());
    k.window.assign(set.words().begin() + set.full(), set.words().begin() + set.end());
    const size_t cost = k.window.size() + 4;
    const bool inserted = set_.insert(std::move(k)).second;
    if (inserted) words_ += cost;
    return inserted;
  }
  uint64_t words() const { return words_; }
  uint64_t size() const { return set_.size(); }

 private:
  struct Key {
    uint64_t hash = 0;
    int state = 0;
    uint32_t full = 0;
    std::vector<uint64_t> window;
    bool operator==(const Key& o) const {
      return hash == o.hash && state == o.state && full == o.full && window == o.window;
    }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return k.hash ^ SplitMix64(static_cast<uint64_t>(k.state));
    }
  };
  std::unordered_set<Key, Hash> set_;
  uint64_t words_ = 0;
};

// The search proper. The event list holds the ops that completed; unknown
// writes stay out of it (they never return, so they would sit at its head
// for the rest of the history and be walked past at every step). Instead a
// read the state cannot explain may be explained by the earliest unused
// unknown write of its value that was invoked before the first pending
// return, linearized right before the read. Any linearization can be put in
// that form: an unknown write no read sees, or one that leaves the state as
// it was, may as well never happen; only reads of its value can sit between
// it and the first of them; and of two usable unknown writes of one value
// the earlier-invoked one can always stand in for the other.
class Search {
 public:
  Search(const std::vector<RegisterOp>& ops, const SearchBudget& budget)
      : ops_(ops), budget_(budget), set_(ops.size()), bit_of_(ops.size(), 0) {
    BuildList();
  }

  SearchResult Run(SearchStats* stats) {
    SearchResult r = Loop();
    if (stats != nullptr) {
      stats->steps = steps_;
      stats->memo_entries = memo_.size();
    }
    return r;
  }

 private:
  // One choice made: `entry` linearized, preceded by the unknown write
  // `unknown` when that is not -1.
  struct Frame {
    int entry;
    int unknown;
    int state;    // before the choice
    bool forced;  // the only choice there was (TryOne)
  };

  void BuildList() {
    const int n = static_cast<int>(ops_.size());
    // Bits by call order, so that linearized sets are near-prefixes.
    std::vector<int> by_invoke(n);
    for (int i = 0; i < n; ++i) by_invoke[i] = i;
    std::stable_sort(by_invoke.begin(), by_invoke.end(),
                     [&](int a, int b) { return ops_[a].invoke < ops_[b].invoke; });
    int max_value = 0;
    for (int rank = 0; rank < n; ++rank) {
      const int i = by_invoke[rank];
      bit_of_[i] = rank;
      max_value = std::max(max_value, ops_[i].value);
    }
    unknown_of_.resize(max_value + 1);
    used_.assign(max_value + 1, 0);
    std::vector<std::tuple<int64_t, int, int>> events;  // (time, 0 call / 1 return, op)
    for (int i : by_invoke) {
      if (ops_[i].complete == kNever) {
        unknown_of_[ops_[i].value].push_back(i);  // by invocation
        continue;
      }
      events.emplace_back(ops_[i].invoke, 0, i);
      // A return never precedes its call, even for a malformed interval.
      events.emplace_back(std::max(ops_[i].complete, ops_[i].invoke), 1, i);
      ++definite_left_;
    }
    // At equal times calls come first: the two ops count as concurrent.
    std::sort(events.begin(), events.end());
    const int m = static_cast<int>(events.size());
    entries_.resize(m + 1);
    head_ = m;
    std::vector<int> call_of(n, -1);
    int prev = head_;
    for (int i = 0; i < m; ++i) {
      const auto& [time, kind, op] = events[i];
      Entry& e = entries_[i];
      e.op = op;
      e.call = kind == 0;
      e.prev = prev;
      entries_[prev].next = i;
      if (e.call) {
        call_of[op] = i;
      } else {
        entries_[call_of[op]].match = i;
      }
      prev = i;
    }
    entries_[prev].next = -1;
  }

  void Remove(int i) {
    Entry& e = entries_[i];
    entries_[e.prev].next = e.next;
    if (e.next != -1) entries_[e.next].prev = e.prev;
  }
  void Restore(int i) {
    Entry& e = entries_[i];
    entries_[e.prev].next = i;
    if (e.next != -1) entries_[e.next].prev = i;
  }
  void Lift(int call) {
    Remove(call);
    Remove(entries_[call].match);
  }
  void Unlift(int call) {
    Restore(entries_[call].match);
    Restore(call);
  }
  void Flip(int op) { set_.Flip(bit_of_[op]); }

  // The earliest unused unknown write of `value` if it was invoked before
  // the first pending return (so it may be linearized now); else -1.
  int UsableUnknown(int value) const {
    const std::vector<int>& of = unknown_of_[value];
    if (used_[value] == static_cast<int>(of.size())) return -1;
    const int u = of[used_[value]];
    int i = entries_[head_].next;
    while (i != -1 && entries_[i].call) i = entries_[i].next;
    const int64_t first_return = i == -1 ? kNever : ops_[entries_[i].op].complete;
    return ops_[u].invoke <= first_return ? u : -1;
  }

  enum class Try {
    kLifted,   // linearized: go on from the head
    kSkip,     // not here: try the next candidate
    kDeadEnd,  // this configuration has no completion: back up
  };

  // Linearizes the op at `entry` (a read the state cannot explain with an
  // unknown write of its value right before it) if the configuration is new.
  // A read the state explains is taken at once and is the only choice: put
  // anywhere later, it could as well come now (it changes nothing, and every
  // op that must precede it already does), so if the configuration with it
  // fails, the one without it fails too.
  Try TryOne(int entry, int* state, std::vector<Frame>* stack) {
    const RegisterOp& op = ops_[entries_[entry].op];
    const bool forced = !op.write && op.value == *state;
    int unknown = -1;
    if (!op.write && !forced) {
      unknown = UsableUnknown(op.value);
      if (unknown == -1) return Try::kSkip;
    }
    // A write sets the state to its value; a read leaves it at its value.
    Flip(entries_[entry].op);
    if (unknown != -1) Flip(unknown);
    if (!memo_.Insert(set_, op.value)) {
      Flip(entries_[entry].op);
      if (unknown != -1) Flip(unknown);
      // Remembered configurations are never on the current path (sets only
      // grow along it), so this one was explored and failed.
      return forced ? Try::kDeadEnd : Try::kSkip;
    }
    stack->push_back(Frame{entry, unknown, *state, forced});
    if (unknown != -1) ++used_[op.value];
    *state = op.value;
    Lift(entry);
    --definite_left_;
    return Try::kLifted;
  }

  // Walks the list; see the file comment of register_search.h.
  SearchResult Loop() {
    std::vector<Frame> stack;
    int state = 0;
    int entry = entries_[head_].next;
    bool back_up = false;
    while (definite_left_ > 0) {
      if (++steps_ > budget_.max_steps || memo_.words() > budget_.max_memo_words) {
        return SearchResult::kBudgetExceeded;
      }
      if (!back_up && entry != -1 && entries_[entry].call) {
        const Try t = TryOne(entry, &state, &stack);
        if (t == Try::kLifted) entry = entries_[head_].next;
        if (t == Try::kSkip) entry = entries_[entry].next;
        back_up = t == Try::kDeadEnd;
        continue;
      }
      // A return whose op is not linearized, or a dead end: undo the last
      // choice and try the next one after it (or, if that choice was
      // forced, back up further).
      if (stack.empty()) return SearchResult::kNotLinearizable;
      const Frame f = stack.back();
      stack.pop_back();
      state = f.state;
      ++definite_left_;
      Flip(entries_[f.entry].op);
      if (f.unknown != -1) {
        Flip(f.unknown);
        --used_[ops_[f.unknown].value];
      }
      Unlift(f.entry);
      entry = entries_[f.entry].next;
      back_up = f.forced;
    }
    return SearchResult::kLinearizable;
  }

  const std::vector<RegisterOp>& ops_;
  const SearchBudget budget_;
  std::vector<Entry> entries_;
  int head_ = 0;
  int definite_left_ = 0;
  LinearizedSet set_;
  std::vector<int> bit_of_;                   // op -> its bit: the rank of its call
  std::vector<std::vector<int>> unknown_of_;  // value -> its unknown writes, by invocation
  std::vector<int> used_;                     // value -> how many of those are linearized
  Memo memo_;
  uint64_t steps_ = 0;
};

}  // namespace

SearchResult SearchRegister(const std::vector<RegisterOp>& ops, const SearchBudget& budget,
                            SearchStats* stats) {
  Search search(ops, budget);
  return search.Run(stats);
}

}  // namespace jepsen
}  // namespace kvstore
