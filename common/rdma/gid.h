// Copyright 2026 The kvstore Authors.
//
// GID table lookups for RoCE: which GID index carries RoCE v2 for a given
// IPv4 address. (rxe lists every address of its netdev twice, as RoCE v1 and
// RoCE v2, next to the IPv6 link-local GIDs; the index differs per host.)
//
// Thread-safety: the functions are thread-safe.

#ifndef KVSTORE_COMMON_RDMA_GID_H_
#define KVSTORE_COMMON_RDMA_GID_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rdma/device.h"

namespace kvstore {
namespace rdma {

using Gid = std::array<uint8_t, 16>;

// The GID index on `port` of `device` whose type is RoCE v2 and whose GID is
// the IPv4-mapped form (::ffff:a.b.c.d) of `ipv4`; with an empty `ipv4`, the
// first RoCE v2 GID that is IPv4-mapped. Reads the table with
// ibv_query_gid_table (rdma-core reads sysfs gid_attrs/types/<i> and
// gids/<i> when the kernel lacks the ioctl).
// kInvalidArgument for an `ipv4` that does not parse; kNotFound when no entry
// matches, with a message listing the entries found (index, GID, type,
// netdev); kUnavailable when the table cannot be read.
absl::StatusOr<int> FindRoceV2GidIndex(const Device& device, uint8_t port, absl::string_view ipv4);

// The GID at `index` of `port` (ibv_query_gid). kUnavailable/kInvalidArgument
// (from errno) when the query fails.
absl::StatusOr<Gid> QueryGid(const Device& device, uint8_t port, int index);

// RFC 5952 text of the GID as an IPv6 address, e.g. "::ffff:10.0.2.15" or
// "fe80::5054:ff:fe12:3456".
std::string GidToString(const Gid& gid);

// True when `gid` is IPv4-mapped (::ffff:a.b.c.d).
bool GidIsIpv4Mapped(const Gid& gid);

// The IPv4-mapped GID of a dotted-quad address; kInvalidArgument if `ipv4`
// does not parse.
absl::StatusOr<Gid> Ipv4MappedGid(absl::string_view ipv4);

}  // namespace rdma
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_GID_H_
