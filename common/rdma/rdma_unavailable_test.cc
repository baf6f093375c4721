// Copyright 2026 The kvstore Authors.
//
// The no-device path (style §4 rule 16): without an RDMA device, opening one
// is a Status, never a crash. Runs in the plain test command; skipped where a
// device exists.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "common/rdma/device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace rdma {
namespace {

using ::testing::HasSubstr;

TEST(RdmaUnavailableTest, OpenWithoutDeviceIsUnavailable) {
  const std::vector<std::string> names = ListDeviceNames();
  if (!names.empty()) {
    GTEST_SKIP() << "RDMA devices present (" << absl::StrJoin(names, ", ")
                 << "): the no-device path cannot be tested here";
  }
  absl::StatusOr<Device> device = Device::Open("");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable) << device.status();
  EXPECT_FALSE(device.status().message().empty());

  absl::StatusOr<Device> named = Device::Open("mlx5_0");
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.status().code(), absl::StatusCode::kUnavailable) << named.status();

  // Asking again gives the same answer (no state left behind).
  EXPECT_TRUE(ListDeviceNames().empty());
  EXPECT_EQ(Device::Open("").status().code(), absl::StatusCode::kUnavailable);
}

TEST(RdmaUnavailableTest, UnknownDeviceNameIsUnavailable) {
  absl::StatusOr<Device> device = Device::Open("no-such-rdma-device");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable) << device.status();
  // With devices present the message names the missing device; without any
  // it may be ibv_get_device_list's error instead.
  if (!ListDeviceNames().empty()) {
    EXPECT_THAT(std::string(device.status().message()), HasSubstr("no-such-rdma-device"));
  }
}

}  // namespace
}  // namespace rdma
}  // namespace kvstore
