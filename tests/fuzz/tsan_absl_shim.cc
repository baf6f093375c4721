// Copyright 2026 The kvstore Authors.
//
// Tells ThreadSanitizer about absl::Mutex, absl::CondVar and
// absl::Notification, which Debian's Abseil implements in an uninstrumented
// shared library: without this, TSan sees none of their happens-before and
// reports every access they guard as a race.
//
// How: --config=tsan links this library into every binary
// (--custom_malloc, .bazelrc) and its linkopts --wrap each entry point, so a
// call from kvstore's code to e.g. absl::Mutex::Lock() lands in
// __wrap_<mangled name>, which calls the real one (__real_<mangled name>) and
// reports an acquire (after locking) or a release (before unlocking, and
// before waits that unlock internally) on the object's address. Calls made
// inside Debian's libraries (gRPC's own locks) are not wrapped.
//
// Only for TSan builds; the names are Abseil 20220623's (inline namespace
// debian3) and the link fails loudly if they change.

#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

using absl::Condition;
using absl::CondVar;
using absl::Duration;
using absl::Mutex;
using absl::Notification;
using absl::Time;

namespace {

// A Condition is evaluated inside Abseil while it holds the mutex it took
// internally, which TSan cannot see; this wrapper makes the evaluation an
// acquire/release of that mutex, so the fields the condition reads count as
// guarded by it.
struct GuardedCondition {
  const Condition* cond;
  Mutex* mu;
  static bool Eval(void* arg) {
    auto* g = static_cast<GuardedCondition*>(arg);
    __tsan_acquire(g->mu);
    const bool r = g->cond->Eval();
    __tsan_release(g->mu);
    return r;
  }
};

}  // namespace

extern "C" void __real__ZN4absl7debian35Mutex4LockEv(Mutex* m);
extern "C" void __wrap__ZN4absl7debian35Mutex4LockEv(Mutex* m) {
  __real__ZN4absl7debian35Mutex4LockEv(m);
  __tsan_acquire(m);
}
extern "C" void __real__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* m);
extern "C" void __wrap__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* m) {
  __real__ZN4absl7debian35Mutex10ReaderLockEv(m);
  __tsan_acquire(m);
}
extern "C" void __real__ZN4absl7debian35Mutex6UnlockEv(Mutex* m);
extern "C" void __wrap__ZN4absl7debian35Mutex6UnlockEv(Mutex* m) {
  __tsan_release(m);
  __real__ZN4absl7debian35Mutex6UnlockEv(m);
}
extern "C" void __real__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* m);
extern "C" void __wrap__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* m) {
  __tsan_release(m);
  __real__ZN4absl7debian35Mutex12ReaderUnlockEv(m);
}
extern "C" bool __real__ZN4absl7debian35Mutex7TryLockEv(Mutex* m);
extern "C" bool __wrap__ZN4absl7debian35Mutex7TryLockEv(Mutex* m) {
  const bool locked = __real__ZN4absl7debian35Mutex7TryLockEv(m);
  if (locked) __tsan_acquire(m);
  return locked;
}
extern "C" bool __real__ZN4absl7debian35Mutex13ReaderTryLockEv(Mutex* m);
extern "C" bool __wrap__ZN4absl7debian35Mutex13ReaderTryLockEv(Mutex* m) {
  const bool locked = __real__ZN4absl7debian35Mutex13ReaderTryLockEv(m);
  if (locked) __tsan_acquire(m);
  return locked;
}
// LockWhen* hold the lock on return whatever they return.
extern "C" void __real__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(Mutex* m,
                                                                         const Condition& c);
extern "C" void __wrap__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(Mutex* m,
                                                                         const Condition& c) {
  GuardedCondition g{&c, m};
  __real__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(m,
                                                           Condition(&GuardedCondition::Eval, &g));
  __tsan_acquire(m);
}
extern "C" bool __real__ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* m, const Condition& c, Duration d);
extern "C" bool __wrap__ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* m, const Condition& c, Duration d) {
  GuardedCondition g{&c, m};
  const bool r = __real__ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(
      m, Condition(&GuardedCondition::Eval, &g), d);
  __tsan_acquire(m);
  return r;
}
// Await* unlock while waiting and relock before returning.
extern "C" void __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex* m, const Condition& c);
extern "C" void __wrap__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex* m,
                                                                      const Condition& c) {
  __tsan_release(m);
  GuardedCondition g{&c, m};
  __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(m, Condition(&GuardedCondition::Eval, &g));
  __tsan_acquire(m);
}
extern "C" bool __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* m, const Condition& c, Duration d);
extern "C" bool __wrap__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* m, const Condition& c, Duration d) {
  __tsan_release(m);
  GuardedCondition g{&c, m};
  const bool r = __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
      m, Condition(&GuardedCondition::Eval, &g), d);
  __tsan_acquire(m);
  return r;
}
extern "C" bool __real__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    Mutex* m, const Condition& c, Time t);
extern "C" bool __wrap__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    Mutex* m, const Condition& c, Time t) {
  __tsan_release(m);
  GuardedCondition g{&c, m};
  const bool r = __real__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
      m, Condition(&GuardedCondition::Eval, &g), t);
  __tsan_acquire(m);
  return r;
}
// CondVar waits unlock `m` while waiting.
extern "C" void __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* m);
extern "C" void __wrap__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* m) {
  __tsan_release(m);
  __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(cv, m);
  __tsan_acquire(m);
}
extern "C" bool __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    CondVar* cv, Mutex* m, Duration d);
extern "C" bool __wrap__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    CondVar* cv, Mutex* m, Duration d) {
  __tsan_release(m);
  const bool r =
      __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(cv, m, d);
  __tsan_acquire(m);
  return r;
}
extern "C" bool __real__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(
    CondVar* cv, Mutex* m, Time t);
extern "C" bool __wrap__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(
    CondVar* cv, Mutex* m, Time t) {
  __tsan_release(m);
  const bool r = __real__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(cv, m, t);
  __tsan_acquire(m);
  return r;
}
// Notification: Notify() releases, a wait that saw it acquires.
extern "C" void __real__ZN4absl7debian312Notification6NotifyEv(Notification* n);
extern "C" void __wrap__ZN4absl7debian312Notification6NotifyEv(Notification* n) {
  __tsan_release(n);
  __real__ZN4absl7debian312Notification6NotifyEv(n);
}
extern "C" void __real__ZNK4absl7debian312Notification19WaitForNotificationEv(
    const Notification* n);
extern "C" void __wrap__ZNK4absl7debian312Notification19WaitForNotificationEv(
    const Notification* n) {
  __real__ZNK4absl7debian312Notification19WaitForNotificationEv(n);
  __tsan_acquire(const_cast<Notification*>(n));
}
extern "C" bool
__real__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
    const Notification* n, Duration d);
extern "C" bool
__wrap__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
    const Notification* n, Duration d) {
  const bool r =
      __real__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(n, d);
  if (r) __tsan_acquire(const_cast<Notification*>(n));
  return r;
}
