// Copyright 2026 The kvstore Authors.
//
// What RdmaReader asks of the server's CPU: a GET it cannot answer
// one-sidedly, and the batched reports of where one-sided GETs found their
// entries (for the server's eviction policy).

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/internal/rdma/reader.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

// The server reads its own memory under its own rules, so whatever it returns
// is current; only the caller's capacity still needs checking.
absl::StatusOr<size_t> RdmaReader::ServerGet(const Request& req) {
  KV_ASSIGN_OR_RETURN(std::string v, control_->Get(req.key, req.deadline));
  if (req.dest != nullptr) {
    if (v.size() > req.dest->capacity) {
      return absl::OutOfRangeError(
          absl::StrCat("value is ", v.size(), " bytes; the buffer holds ", req.dest->capacity));
    }
    std::memcpy(req.dest->data, v.data(), v.size());
  } else if (req.out != nullptr) {
    *req.out = std::move(v);
    return req.out->size();
  }
  return v.size();
}

void RdmaReader::NoteRead(uint64_t offset) {
  reads_mu_.Lock();
  reads_.push_back(offset);
  if (reads_.size() < kReadReportBatch) {
    reads_mu_.Unlock();
    return;
  }
  std::vector<uint64_t> full;
  full.swap(reads_);
  reads_.reserve(kReadReportBatch);
  reads_mu_.Unlock();
  const absl::Status s = control_->ReportReads(full, absl::Now() + absl::Seconds(1));
  (s.ok() ? read_reports_ : read_reports_failed_)->Increment();
}

}  // namespace client
}  // namespace kvstore
