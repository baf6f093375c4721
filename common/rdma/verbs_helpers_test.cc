// Copyright 2026 The kvstore Authors.
//
// Device-free unit tests of the verbs helpers: work-completion status
// mapping, GID text, caps clamping, errno mapping.

#include <infiniband/verbs.h>

#include <cerrno>
#include <string>

#include "absl/status/status.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/device.h"
#include "common/rdma/gid.h"
#include "common/rdma/queue_pair.h"
#include "common/rdma/verbs_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace rdma {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ibv_wc MakeWc(ibv_wc_status status, ibv_wc_opcode opcode) {
  ibv_wc wc{};
  wc.status = status;
  wc.opcode = opcode;
  wc.wr_id = 0x1234;
  wc.qp_num = 0x11;
  return wc;
}

TEST(WcStatusToStatusTest, SuccessIsOk) {
  EXPECT_TRUE(WcStatusToStatus(MakeWc(IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE)).ok());
}

TEST(WcStatusToStatusTest, RemoteAccessErrorIsPermissionDenied) {
  absl::Status s = WcStatusToStatus(MakeWc(IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("RDMA_WRITE"), HasSubstr(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)),
                    HasSubstr("0x1234")));
}

TEST(WcStatusToStatusTest, CallerNamesTheOperation) {
  absl::Status s = WcStatusToStatus(MakeWc(IBV_WC_REM_ACCESS_ERR, IBV_WC_SEND), "lease WRITE");
  EXPECT_THAT(std::string(s.message()), HasSubstr("lease WRITE"));
}

TEST(WcStatusToStatusTest, FlushAndTransportErrorsAreUnavailable) {
  for (ibv_wc_status st : {IBV_WC_WR_FLUSH_ERR, IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR,
                           IBV_WC_REM_OP_ERR, IBV_WC_RESP_TIMEOUT_ERR}) {
    absl::Status s = WcStatusToStatus(MakeWc(st, IBV_WC_RDMA_READ));
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(ibv_wc_status_str(st)));
  }
}

TEST(WcStatusToStatusTest, LocalErrorsAreInternal) {
  for (ibv_wc_status st : {IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_PROT_ERR, IBV_WC_MW_BIND_ERR,
                           IBV_WC_LOC_QP_OP_ERR, IBV_WC_GENERAL_ERR}) {
    EXPECT_EQ(WcStatusToStatus(MakeWc(st, IBV_WC_BIND_MW)).code(), absl::StatusCode::kInternal);
  }
}

TEST(WcOpcodeNameTest, Names) {
  EXPECT_EQ(WcOpcodeName(IBV_WC_RDMA_READ), "RDMA_READ");
  EXPECT_EQ(WcOpcodeName(IBV_WC_RECV), "RECV");
  EXPECT_EQ(WcOpcodeName(IBV_WC_BIND_MW), "BIND_MW");
  EXPECT_EQ(WcOpcodeName(IBV_WC_LOCAL_INV), "LOCAL_INV");
}

TEST(GidTest, Ipv4MappedRoundTrip) {
  absl::StatusOr<Gid> gid = Ipv4MappedGid("10.0.2.15");
  ASSERT_TRUE(gid.ok()) << gid.status();
  EXPECT_TRUE(GidIsIpv4Mapped(*gid));
  EXPECT_EQ(GidToString(*gid), "::ffff:10.0.2.15");
  EXPECT_EQ((*gid)[12], 10);
  EXPECT_EQ((*gid)[15], 15);
}

TEST(GidTest, LinkLocalIsNotIpv4Mapped) {
  Gid gid{};
  gid[0] = 0xfe;
  gid[1] = 0x80;
  gid[15] = 1;
  EXPECT_FALSE(GidIsIpv4Mapped(gid));
  EXPECT_EQ(GidToString(gid), "fe80::1");
  EXPECT_FALSE(GidIsIpv4Mapped(Gid{}));
}

TEST(GidTest, BadIpv4IsInvalidArgument) {
  EXPECT_EQ(Ipv4MappedGid("10.0.2").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ipv4MappedGid("fe80::1").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(QpCapsTest, ClampedToDeviceLimits) {
  DeviceLimits limits;
  limits.max_qp_wr = 100;
  limits.max_sge = 1;
  QpCaps caps = ClampQpCaps(QpCaps{}, limits);
  EXPECT_EQ(caps.max_send_wr, 100u);
  EXPECT_EQ(caps.max_recv_wr, 100u);
  EXPECT_EQ(caps.max_send_sge, 1u);
  EXPECT_EQ(caps.max_recv_sge, 1u);
  EXPECT_EQ(caps.max_inline, QpCaps{}.max_inline);
}

TEST(QpCapsTest, UnknownLimitsLeaveDefaultsAndSgesStayOnTheStack) {
  QpCaps want;
  want.max_send_sge = 64;
  want.max_recv_sge = 0;
  QpCaps caps = ClampQpCaps(want, DeviceLimits{});
  EXPECT_EQ(caps.max_send_wr, QpCaps{}.max_send_wr);
  EXPECT_EQ(caps.max_send_sge, kMaxSgePerWr);
  EXPECT_EQ(caps.max_recv_sge, 1u);
}

TEST(QpEndpointTest, ToString) {
  QpEndpoint e;
  e.qpn = 0x11;
  e.psn = 0xabcdef;
  e.gid = *Ipv4MappedGid("10.0.2.15");
  e.port = 1;
  e.gid_index = 3;
  EXPECT_EQ(QpEndpointToString(e),
            "qpn=0x11 psn=0xabcdef gid=::ffff:10.0.2.15 lid=0 port=1 gid_index=3");
  EXPECT_EQ(QpStateName(IBV_QPS_ERR), "ERR");
  EXPECT_EQ(QpStateName(IBV_QPS_RTS), "RTS");
}

TEST(VerbErrorTest, CodesAndMessage) {
  absl::Status s = rdma_internal::VerbError("ibv_post_send", ENOMEM);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("ibv_post_send: "));
  EXPECT_EQ(rdma_internal::VerbError("ibv_modify_qp(RTR)", EINVAL).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rdma_internal::VerbError("ibv_open_device", ENODEV).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rdma
}  // namespace kvstore
