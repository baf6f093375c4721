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
  std::vector<ibv_gid_entry> entries(static_cast<size_t>(table_len) *
                                     std::max<int>(1, attr.phys_port_cnt));
  ssize_t n = ibv_query_gid_table(device.context(), entries.data(), entries.size(), 0);
  if (n < 0) return VerbError("ibv_query_gid_table", static_cast<int>(-n));
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& e = entries[i];
    if (e.port_num != port) continue;
    GidEntry g;
    g.index = static_cast<int>(e.gid_index);
    std::memcpy(g.gid.data(), e.gid.raw, g.gid.size());
    g.type = GidTypeName(e.gid_type);
    char name[IF_NAMESIZE] = {};
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
    if (g.gid == Gid{}) continue;
    // sysfs spells it "RoCE v2", "IB/RoCE v1".
    g.type = type == "IB/RoCE v1" ? "RoCE v1" : type;
    ReadFirstLine(absl::StrCat(base, "gid_attrs/ndevs/", i), &g.netdev);
    out->push_back(std::move(g));
  }
  return absl::OkStatus();
}

}  // namespace

std::string GidToString(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.data(), buf, sizeof buf) == nullptr) return "?";
  return buf;
}

bool GidIsIpv4Mapped(const Gid& gid) {
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
  absl::Status s = ReadGidTable(device, port, port_attr.gid_tbl_len, &entries);
  if (!s.ok()) {
    entries.clear();
    absl::Status fb = ReadGidTableSysfs(device, port, port_attr.gid_tbl_len, &entries);
    if (!fb.ok() || entries.empty()) return s;
  }
  for (const GidEntry& e : entries) {
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
