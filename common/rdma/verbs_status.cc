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
  std::string message = absl::StrCat(verb, ": ", std::strerror(err));
  switch (err) {
    case ENOMEM:
    case EAGAIN:
      return absl::ResourceExhaustedError(message);
    case EINVAL:
    case EOPNOTSUPP:
      return absl::InvalidArgumentError(message);
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
