// Copyright 2026 The kvstore Authors.
//
// PinnedValue (pinned_value.h): the pin on a value's run, released once.

#include "server/storage/pinned_value.h"

#include <utility>

#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

PinnedValue& PinnedValue::operator=(PinnedValue&& other) noexcept {
  if (this != &other) {
    // Drop our own pin first; then take over the other's pin, leaving it
    // with none, so that each pin is released exactly once.
    Release();
    store_ = std::exchange(other.store_, nullptr);
    segment_ = other.segment_;
    value_ = other.value_;
    copy_ = std::move(other.copy_);  // heap memory: value_ stays valid
    if (budget_store_ != nullptr) budget_store_->ReturnCopyBudget(budget_bytes_);
    budget_store_ = std::exchange(other.budget_store_, nullptr);
    budget_bytes_ = std::exchange(other.budget_bytes_, 0);
  }
  return *this;
}

PinnedValue::~PinnedValue() {
  Release();
  // The copy is freed with this object, so its budget comes back here.
  if (budget_store_ != nullptr) budget_store_->ReturnCopyBudget(budget_bytes_);
}

void PinnedValue::Release() {
  // store_ is null for a copy, for a moved-from value and after a Release().
  if (store_ != nullptr) store_->Unpin(segment_);
  store_ = nullptr;
}

}  // namespace server
}  // namespace kvstore
