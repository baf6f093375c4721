// Copyright 2026 The kvstore Authors.
//
// KV_RETURN_IF_ERROR and KV_ASSIGN_OR_RETURN: Debian's Abseil (20220623) has
// no status macros. These follow the semantics of Abseil's later macros so
// they can be swapped for them without touching call sites.
//
// Both macros return from the enclosing function, which must therefore
// return absl::Status or an absl::StatusOr<T> (constructible from a non-OK
// Status).

#ifndef KVSTORE_COMMON_STATUS_MACROS_H_
#define KVSTORE_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function if it is not OK.
#define KV_RETURN_IF_ERROR(expr)                               \
  do {                                                         \
    const ::absl::Status kv_status_internal_ = (expr);         \
    if (!kv_status_internal_.ok()) return kv_status_internal_; \
  } while (0)

// Two-level concatenation so that __LINE__ is expanded before pasting.
#define KV_STATUS_MACROS_CONCAT_INNER_(x, y) x##y
#define KV_STATUS_MACROS_CONCAT_(x, y) KV_STATUS_MACROS_CONCAT_INNER_(x, y)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the enclosing function, otherwise move-assigns the value to `lhs`, which
// may be a declaration: KV_ASSIGN_OR_RETURN(auto fd, OpenSocket());
// Expands to several statements, not one: do not use it as the body of an
// unbraced if/else, and use it at most once per line (the temporary's name
// is made unique with __LINE__). `lhs` must not contain unparenthesised
// commas.
#define KV_ASSIGN_OR_RETURN(lhs, rexpr) \
  KV_ASSIGN_OR_RETURN_IMPL_(KV_STATUS_MACROS_CONCAT_(kv_statusor_, __LINE__), lhs, rexpr)

#define KV_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)    \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // KVSTORE_COMMON_STATUS_MACROS_H_
