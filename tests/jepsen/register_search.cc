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

// The configurations already explored: (linearized set, state). The set's
// hash is kept incrementally (XOR of one random word per op), so a lookup
// costs a copy of the set only.
class Memo {
 public:
  // False when (bits, state) was there already.
  bool Insert(const std::vector<uint64_t>& bits, uint64_t hash, int state) {
    auto [it, inserted] = set_.insert(Key{hash, state, bits});
    if (inserted) words_ += bits.size() + 3;
    return inserted;
  }
  uint64_t words() const { return words_; }
  uint64_t size() const { return set_.size(); }

 private:
  struct Key {
    uint64_t hash;
    int state;
    std::vector<uint64_t> bits;
    bool operator==(const Key& o) const {
      return hash == o.hash && state == o.state && bits == o.bits;
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

class Search {
 public:
  Search(const std::vector<RegisterOp>& ops, const SearchBudget& budget)
      : ops_(ops), budget_(budget), bits_((ops.size() + 63) / 64, 0) {
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
  void BuildList() {
    const int n = static_cast<int>(ops_.size());
    std::vector<std::tuple<int64_t, int, int>> events;  // (time, 0 call / 1 return, op)
    for (int i = 0; i < n; ++i) {
      events.emplace_back(ops_[i].invoke, 0, i);
      // A return never precedes its call, even for a malformed interval.
      events.emplace_back(std::max(ops_[i].complete, ops_[i].invoke), 1, i);
      if (ops_[i].complete != kNever) ++definite_left_;
      zobrist_.push_back(SplitMix64(static_cast<uint64_t>(i) + 1));
    }
    // At equal times calls come first: the two ops count as concurrent.
    std::sort(events.begin(), events.end());
    entries_.resize(2 * n + 1);
    head_ = 2 * n;
    std::vector<int> call_of(n, -1);
    int prev = head_;
    for (int i = 0; i < 2 * n; ++i) {
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
  void Flip(int op) {
    bits_[op / 64] ^= uint64_t{1} << (op % 64);
    hash_ ^= zobrist_[op];
  }

  // One choice made: `entry` linearized (with `partner`, a read of its
  // value, right after it when `entry` is an unknown write).
  struct Frame {
    int entry;
    int partner;
    int state;  // before the choice
  };

  // The first call entry from `from` on, before the first return, of a read
  // of `value`; -1 if none.
  int NextPartner(int value, int from) const {
    for (int i = from; i != -1 && entries_[i].call; i = entries_[i].next) {
      const RegisterOp& op = ops_[entries_[i].op];
      if (!op.write && op.value == value) return i;
    }
    return -1;
  }

  // Whether the unknown write at `entry` is the first candidate unknown
  // write of its value: candidates of one value, all invoked and none ever
  // returning, are interchangeable, so only the first is tried.
  bool FirstUnknownOfItsValue(int entry) const {
    const int value = ops_[entries_[entry].op].value;
    for (int i = entries_[head_].next; i != entry; i = entries_[i].next) {
      const RegisterOp& op = ops_[entries_[i].op];
      if (op.write && op.complete == kNever && op.value == value) return false;
    }
    return true;
  }

  // Linearizes the ordinary op at `entry` if the register allows it and the
  // configuration is new.
  bool TryOne(int entry, int* state, std::vector<Frame>* stack) {
    const RegisterOp& op = ops_[entries_[entry].op];
    if (!op.write && op.value != *state) return false;
    const int next_state = op.write ? op.value : *state;
    Flip(entries_[entry].op);
    if (!memo_.Insert(bits_, hash_, next_state)) {
      Flip(entries_[entry].op);
      return false;
    }
    stack->push_back(Frame{entry, -1, *state});
    *state = next_state;
    Lift(entry);
    --definite_left_;
    return true;
  }

  // Linearizes the unknown write at `entry` followed at once by a candidate
  // read of its value, the first from `from` on whose configuration is new.
  // Any linearization can be put in that form: an unknown write no read
  // sees, or one that leaves the state as it was, may as well never happen,
  // and nothing but reads of its value can sit between it and the first of
  // them.
  bool TryFused(int entry, int from, int* state, std::vector<Frame>* stack) {
    const int u = entries_[entry].op;
    const int value = ops_[u].value;
    for (int p = NextPartner(value, from); p != -1; p = NextPartner(value, entries_[p].next)) {
      Flip(u);
      Flip(entries_[p].op);
      if (memo_.Insert(bits_, hash_, value)) {
        stack->push_back(Frame{entry, p, *state});
        *state = value;
        Lift(entry);
        Lift(p);
        --definite_left_;
        return true;
      }
      Flip(u);
      Flip(entries_[p].op);
    }
    return false;
  }

  // Walks the list; see the file comment of register_search.h.
  SearchResult Loop() {
    std::vector<Frame> stack;
    int state = 0;
    int entry = entries_[head_].next;
    while (definite_left_ > 0) {
      if (++steps_ > budget_.max_steps || memo_.words() > budget_.max_memo_words) {
        return SearchResult::kBudgetExceeded;
      }
      if (entry != -1 && entries_[entry].call) {
        const RegisterOp& op = ops_[entries_[entry].op];
        bool lifted;
        if (op.complete == kNever) {
          lifted = op.value != state && FirstUnknownOfItsValue(entry) &&
                   TryFused(entry, entries_[head_].next, &state, &stack);
        } else {
          lifted = TryOne(entry, &state, &stack);
        }
        entry = lifted ? entries_[head_].next : entries_[entry].next;
        continue;
      }
      // A return whose op is not linearized: undo the last choice and try
      // the next one after it.
      if (stack.empty()) return SearchResult::kNotLinearizable;
      const Frame f = stack.back();
      stack.pop_back();
      state = f.state;
      ++definite_left_;
      if (f.partner == -1) {
        Flip(entries_[f.entry].op);
        Unlift(f.entry);
        entry = entries_[f.entry].next;
        continue;
      }
      Flip(entries_[f.partner].op);
      Flip(entries_[f.entry].op);
      Unlift(f.partner);
      Unlift(f.entry);
      entry = TryFused(f.entry, entries_[f.partner].next, &state, &stack) ? entries_[head_].next
                                                                          : entries_[f.entry].next;
    }
    return SearchResult::kLinearizable;
  }

  const std::vector<RegisterOp>& ops_;
  const SearchBudget budget_;
  std::vector<Entry> entries_;
  int head_ = 0;
  int definite_left_ = 0;
  std::vector<uint64_t> zobrist_;
  std::vector<uint64_t> bits_;
  uint64_t hash_ = 0;
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
