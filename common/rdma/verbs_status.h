// Copyright 2026 The kvstore Authors.
//
// Conversion of libibverbs return codes to absl::Status (style §3 rule 9): the
// message names the verb and carries strerror's text. Internal to
// common/rdma.

#ifndef KVSTORE_COMMON_RDMA_VERBS_STATUS_H_
#define KVSTORE_COMMON_RDMA_VERBS_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace rdma {
namespace rdma_internal {

// "<verb>: <strerror(err)>" with a code chosen from `err`:
//   ENOMEM, EAGAIN          -> kResourceExhausted (queue or table full)
//   EINVAL, EOPNOTSUPP      -> kInvalidArgument
//   EPERM, EACCES           -> kPermissionDenied
//   ENODEV, ENOENT, ENOSYS  -> kUnavailable
//   anything else           -> kUnavailable
// `err` is a positive errno value (verbs return it directly or set errno).
absl::Status VerbError(absl::string_view verb, int err);

}  // namespace rdma_internal
}  // namespace rdma
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_VERBS_STATUS_H_
