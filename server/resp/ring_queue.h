// Copyright 2026 The kvstore Authors.
//
// RingQueue<T>: a FIFO of T in one ring of slots that is reused. A
// connection's reply queue holds one chunk at a time for most of its life
// (a request, its reply, written, the next request); std::deque allocated a
// node every few such replies and freed one every few writes. Here a slot
// leaves the ring only when the ring grows (doubling), and Release() gives
// the slots back when the queue is empty.
//
// Every slot outside the queued range holds a default-constructed T:
// pop_front() destroys the front element (so whatever it owns goes at once,
// e.g. a pinned value's pin) and constructs a fresh one in its place, and
// emplace_back() hands out that fresh slot. T must be default-constructible
// and movable.
//
// Thread safety: none (one owner, as the connection that holds it).

#ifndef KVSTORE_SERVER_RESP_RING_QUEUE_H_
#define KVSTORE_SERVER_RESP_RING_QUEUE_H_

#include <cstddef>
#include <iterator>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace kvstore {
namespace server {
namespace resp_internal {

template <typename T>
class RingQueue {
 public:
  template <typename Q, typename V>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;

    Iter(Q* q, size_t i) : q_(q), i_(i) {}
    V& operator*() const { return q_->at(i_); }
    V* operator->() const { return &q_->at(i_); }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iter& o) const { return i_ == o.i_; }
    bool operator!=(const Iter& o) const { return i_ != o.i_; }

   private:
    Q* q_;
    size_t i_;  // position from the front
  };
  using iterator = Iter<RingQueue, T>;
  using const_iterator = Iter<const RingQueue, const T>;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  // REQUIRES: !empty().
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  T& back() { return at(size_ - 1); }
  const T& back() const { return at(size_ - 1); }

  // The slot after the last element, default-constructed, now queued.
  T& emplace_back() {
    if (size_ == slots_.size()) Grow();
    T& slot = at(size_);
    ++size_;
    return slot;
  }
  void push_back(T&& v) { emplace_back() = std::move(v); }

  // Ends the front element (its destructor runs now) and leaves a fresh T
  // in its slot. REQUIRES: !empty().
  void pop_front() {
    T* slot = &slots_[head_];
    slot->~T();
    new (slot) T();
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }

  // Frees the slots of an empty queue (an idle connection's); a no-op
  // otherwise.
  void Release() {
    if (size_ != 0) return;
    std::vector<T>().swap(slots_);
    head_ = 0;
  }
  size_t capacity() const { return slots_.size(); }

  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, size_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

 private:
  T& at(size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& at(size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }

  // Twice the slots (a power of two, so positions wrap with a mask), the
  // queued elements moved to the front in order.
  void Grow() {
    std::vector<T> bigger(slots_.empty() ? kFirstSlots : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move(at(i));
    slots_.swap(bigger);
    head_ = 0;
  }

  static constexpr size_t kFirstSlots = 4;
  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RING_QUEUE_H_
