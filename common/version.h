// Copyright 2026 The kvstore Authors.
//
// The kvstore release version, in one place. Header-only, a compile-time
// constant; safe to use from any thread and during static initialisation.

#ifndef KVSTORE_COMMON_VERSION_H_
#define KVSTORE_COMMON_VERSION_H_

namespace kvstore {

// The release as MAJOR.MINOR.PATCH. kvserver reports it in the RESP INFO
// text ("kvstore_version:0.1.0"); bump it here and nowhere else.
inline constexpr char kVersion[] = "0.1.0";

}  // namespace kvstore

#endif  // KVSTORE_COMMON_VERSION_H_
