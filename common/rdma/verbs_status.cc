// Copyright 2026 The kvstore Authors.

#include "common/rdma/verbs_status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace rdma {
namespace rdma_internal {

absl::Status VerbError(absl::string_view verb, int err) {
  // The mapping sorts failures by what a caller can do: retry later with
  // fewer resources (kResourceExhausted), fix the request or the
  // configuration (kInvalidArgument, kPermissionDenied), or treat RDMA as
  // absent and fall back (kUnavailable). ENODEV, ENOENT and ENOSYS land in
  // the default case on purpose.
  std::string message = absl::StrCat(verb, ": ", std::strerror(err));
  switch (err) {
    case ENOMEM:
    case EAGAIN:
      return absl::ResourceExhaustedError(message);
    case EINVAL:
    case EOPNOTSUPP:
      return absl::InvalidArgumentError(message);
    // EPERM usually means RLIMIT_MEMLOCK is too small for ibv_reg_mr, or an
    // unprivileged process asked for a privileged resource.
    case EPERM:
    case EACCES:
      return absl::PermissionDeniedError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace rdma_internal
}  // namespace rdma
}  // namespace kvstore
