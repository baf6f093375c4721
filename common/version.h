// Copyright 2026 The kvstore Authors.
//
// The kvstore release version, in one place. Header-only, compile-time
// constants; safe to use from any thread and during static initialisation.

#ifndef KVSTORE_COMMON_VERSION_H_
#define KVSTORE_COMMON_VERSION_H_

// A macro only so that the two constants below can be built from it by string
// literal concatenation at compile time; use the constants, not the macro.
#define KVSTORE_VERSION_STRING "0.1.0"

namespace kvstore {

// The release as MAJOR.MINOR.PATCH: RESP INFO ("kvstore_version:0.1.0"),
// RESP HELLO and the kvstore_build_info metric. Bump it here and nowhere else.
inline constexpr char kVersion[] = KVSTORE_VERSION_STRING;

// Product and release ("kvstore 0.1.0"): HandshakeResponse.server_version and
// Stats.info["server_version"].
inline constexpr char kProductVersion[] = "kvstore " KVSTORE_VERSION_STRING;

}  // namespace kvstore

#endif  // KVSTORE_COMMON_VERSION_H_
