// Copyright 2026 The kvstore Authors.

#include "common/rdma/gid.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rdma/verbs_status.h"

namespace kvstore {
namespace rdma {

namespace {

using rdma_internal::VerbError;

// One valid GID table entry of one port.
struct GidEntry {
  int index = 0;
  Gid gid{};
  std::string type;  // "RoCE v2", "RoCE v1", "IB"
  std::string netdev;
};

// The names match what FindRoceV2GidIndex compares against and what the
// sysfs fallback produces, so both readers yield the same strings.
std::string GidTypeName(uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return absl::StrCat("type ", type);
  }
}

// False when the file cannot be opened or is empty; sysfs attributes are a
// single line with a trailing newline, which is stripped.
bool ReadFirstLine(const std::string& path, std::string* line) {
  std::ifstream in(path);
  if (!in || !std::getline(in, *line)) return false;
  *line = std::string(absl::StripAsciiWhitespace(*line));
  return true;
}

// The port's valid GIDs through ibv_query_gid_table.
absl::Status ReadGidTable(const Device& device, uint8_t port, int table_len,
                          std::vector<GidEntry>* out) {
  ibv_device_attr attr;
  if (int rc = ibv_query_device(device.context(), &attr); rc != 0) {
    return VerbError("ibv_query_device", rc);
  }
  // The table covers every port of the device.
  // ibv_query_gid_table fails rather than truncating when the buffer is
  // smaller than the number of valid entries, so size it for every port's
  // full table.
  std::vector<ibv_gid_entry> entries(static_cast<size_t>(table_len) *
                                     std::max<int>(1, attr.phys_port_cnt));
  ssize_t n = ibv_query_gid_table(device.context(), entries.data(), entries.size(), 0);
  if (n < 0) return VerbError("ibv_query_gid_table", static_cast<int>(-n));
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& e = entries[i];
    // Entries come back valid only (unused slots are skipped by the verb), in
    // no promised order; `index` is the entry's own index, not `i`.
    if (e.port_num != port) continue;
    GidEntry g;
    g.index = static_cast<int>(e.gid_index);
    std::memcpy(g.gid.data(), e.gid.raw, g.gid.size());
    g.type = GidTypeName(e.gid_type);
    char name[IF_NAMESIZE] = {};
    // The netdev name is for the NotFound message only; failing to resolve it
    // is not an error.
    if (e.ndev_ifindex != 0 && if_indextoname(e.ndev_ifindex, name) != nullptr) g.netdev = name;
    out->push_back(std::move(g));
  }
  return absl::OkStatus();
}

// The same from sysfs, for when the verb is not available.
absl::Status ReadGidTableSysfs(const Device& device, uint8_t port, int table_len,
                               std::vector<GidEntry>* out) {
  const std::string base =
      absl::StrCat("/sys/class/infiniband/", device.name(), "/ports/", port, "/");
  // Slots are read independently; any slot that cannot be read or parsed is
  // skipped rather than failing the lookup, like the verb does.
  for (int i = 0; i < table_len; ++i) {
    std::string type;
    // Unused entries have no readable type (EINVAL on read).
    if (!ReadFirstLine(absl::StrCat(base, "gid_attrs/types/", i), &type) || type.empty()) {
      continue;
    }
    std::string text;
    if (!ReadFirstLine(absl::StrCat(base, "gids/", i), &text)) continue;
    GidEntry g;
    g.index = i;
    in6_addr addr;
    if (inet_pton(AF_INET6, text.c_str(), &addr) != 1) continue;
    std::memcpy(g.gid.data(), &addr, g.gid.size());
    // An all-zero GID is an unused slot whatever its type file says.
    if (g.gid == Gid{}) continue;
    // sysfs spells it "RoCE v2", "IB/RoCE v1".
    g.type = type == "IB/RoCE v1" ? "RoCE v1" : type;
    // Optional, as in ReadGidTable: g.netdev stays empty when unreadable.
    ReadFirstLine(absl::StrCat(base, "gid_attrs/ndevs/", i), &g.netdev);
    out->push_back(std::move(g));
  }
  return absl::OkStatus();
}

}  // namespace

std::string GidToString(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  // Cannot fail for a 16-byte input and a buffer of INET6_ADDRSTRLEN; "?"
  // only guards the contract.
  if (inet_ntop(AF_INET6, gid.data(), buf, sizeof buf) == nullptr) return "?";
  return buf;
}

bool GidIsIpv4Mapped(const Gid& gid) {
  // IPv4-mapped means bytes 0..9 zero and bytes 10..11 0xff (RFC 4291
  // 2.5.5.2); RoCE v2 GIDs of IPv4 addresses take this form.
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  return gid[10] == 0xff && gid[11] == 0xff;
}

absl::StatusOr<Gid> Ipv4MappedGid(absl::string_view ipv4) {
  in_addr addr;
  std::string text(ipv4);
  if (inet_pton(AF_INET, text.c_str(), &addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: '", ipv4, "'"));
  }
  Gid gid{};
  gid[10] = 0xff;
  gid[11] = 0xff;
  // in_addr is already in network byte order, which is the GID's order.
  std::memcpy(gid.data() + 12, &addr, 4);
  return gid;
}

absl::StatusOr<Gid> QueryGid(const Device& device, uint8_t port, int index) {
  ibv_gid gid;
  if (int rc = ibv_query_gid(device.context(), port, index, &gid); rc != 0) {
    // ibv_query_gid returns -1 and sets errno.
    return VerbError(absl::StrCat("ibv_query_gid(port ", port, ", index ", index, ")"),
                     errno != 0 ? errno : EINVAL);
  }
  Gid out;
  std::memcpy(out.data(), gid.raw, out.size());
  return out;
}

absl::StatusOr<int> FindRoceV2GidIndex(const Device& device, uint8_t port, absl::string_view ipv4) {
  Gid want{};
  // `want` stays all-zero with an empty `ipv4`; the match loop below then
  // takes the first IPv4-mapped RoCE v2 entry instead of comparing.
  if (!ipv4.empty()) {
    absl::StatusOr<Gid> g = Ipv4MappedGid(ipv4);
    if (!g.ok()) return g.status();
    want = *g;
  }
  ibv_port_attr port_attr;
  if (int rc = ibv_query_port(device.context(), port, &port_attr); rc != 0) {
    return VerbError(absl::StrCat("ibv_query_port(", port, ")"), rc);
  }
  std::vector<GidEntry> entries;
  // Fall back to sysfs when the verb fails (older kernels or providers).
  // The verb's error is returned if sysfs yields nothing either, because it
  // is the more informative of the two.
  absl::Status s = ReadGidTable(device, port, port_attr.gid_tbl_len, &entries);
  if (!s.ok()) {
    entries.clear();
    absl::Status fb = ReadGidTableSysfs(device, port, port_attr.gid_tbl_len, &entries);
    if (!fb.ok() || entries.empty()) return s;
  }
  for (const GidEntry& e : entries) {
    // RoCE v1 entries carry the same address but are not routable over IP;
    // a QP using one could not reach a peer on another subnet.
    if (e.type != "RoCE v2" || !GidIsIpv4Mapped(e.gid)) continue;
    if (ipv4.empty() || e.gid == want) return e.index;
  }
  std::vector<std::string> found;
  for (const GidEntry& e : entries) {
    found.push_back(absl::StrCat("[", e.index, "] ", GidToString(e.gid), " ", e.type,
                                 e.netdev.empty() ? "" : absl::StrCat(" on ", e.netdev)));
  }
  return absl::NotFoundError(absl::StrCat(
      "no RoCE v2 GID ", ipv4.empty() ? "with an IPv4 address" : absl::StrCat("for ", ipv4), " on ",
      device.name(), " port ", port,
      "; found: ", found.empty() ? "no valid GIDs" : absl::StrJoin(found, ", ")));
}

}  // namespace rdma
}  // namespace kvstore
