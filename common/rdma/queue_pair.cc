// Copyright 2026 The kvstore Authors.
//
// Queue pair setup and teardown. The post calls are in queue_pair_datapath.cc.

#include "common/rdma/queue_pair.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rdma/gid.h"
#include "common/rdma/verbs_status.h"
#include "glog/logging.h"

namespace kvstore {
namespace rdma {

namespace {

using rdma_internal::VerbError;

// Outstanding RDMA READs per QP, either direction. More buys nothing for
// small reads and costs responder resources.
constexpr uint32_t kMaxRdAtomic = 16;

// A device limit of 0 means "not reported" (DeviceLimits default), not
// "none allowed", so it leaves the value alone.
uint32_t ClampField(uint32_t value, uint32_t limit) {
  return limit == 0 ? value : std::min(value, limit);
}

// At least 1: a QP with 0 outstanding READs could never issue one. The
// result fits ibv_qp_attr's uint8_t fields because kMaxRdAtomic does.
uint8_t RdAtomic(uint32_t device_limit) {
  return static_cast<uint8_t>(std::clamp<uint32_t>(device_limit, 1, kMaxRdAtomic));
}

// A random 24-bit PSN, so that a QP reusing the number of an earlier one is
// unlikely to accept that connection's stale packets as in-sequence.
uint32_t RandomPsn() {
  // thread_local: QPs may be created on several threads, and std::mt19937 is
  // not safe to share. Seeded once per thread from the OS.
  static thread_local std::mt19937 rng(std::random_device{}());
  // PSNs are 24 bits on the wire; the upper bits must be zero.
  return rng() & 0xffffff;
}

}  // namespace

QpCaps ClampQpCaps(QpCaps caps, const DeviceLimits& limits) {
  // Every queue keeps at least one entry and one SGE; SGEs are also bounded
  // by kMaxSgePerWr because the datapath builds SGE arrays of that size on
  // the stack. max_inline has no entry in DeviceLimits; ibv_create_qp
  // rejects a value the provider cannot support.
  caps.max_send_wr = std::max<uint32_t>(1, ClampField(caps.max_send_wr, limits.max_qp_wr));
  caps.max_recv_wr = std::max<uint32_t>(1, ClampField(caps.max_recv_wr, limits.max_qp_wr));
  uint32_t sge_limit = ClampField(kMaxSgePerWr, limits.max_sge);
  caps.max_send_sge = std::clamp<uint32_t>(caps.max_send_sge, 1, sge_limit);
  caps.max_recv_sge = std::clamp<uint32_t>(caps.max_recv_sge, 1, sge_limit);
  return caps;
}

std::string QpEndpointToString(const QpEndpoint& endpoint) {
  return absl::StrFormat("qpn=0x%x psn=0x%06x gid=%s lid=%u port=%u gid_index=%d", endpoint.qpn,
                         endpoint.psn, GidToString(endpoint.gid), endpoint.lid, endpoint.port,
                         endpoint.gid_index);
}

absl::string_view QpStateName(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET:
      return "RESET";
    case IBV_QPS_INIT:
      return "INIT";
    case IBV_QPS_RTR:
      return "RTR";
    case IBV_QPS_RTS:
      return "RTS";
    case IBV_QPS_SQD:
      return "SQD";
    case IBV_QPS_SQE:
      return "SQE";
    case IBV_QPS_ERR:
      return "ERR";
    default:
      return "UNKNOWN";
  }
}

absl::StatusOr<QueuePair> QueuePair::CreateRc(const Device& device, const ProtectionDomain& pd,
                                              CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                              QpCaps caps, int gid_index) {
  caps = ClampQpCaps(caps, device.limits());
  // An overrun CQ moves its QPs to the error state. A shared CQ can still
  // overrun; this only catches the obvious mistake.
  uint32_t needed = caps.max_send_wr + (&send_cq == &recv_cq ? caps.max_recv_wr : 0);
  if (static_cast<uint32_t>(send_cq.depth()) < needed) {
    LOG(WARNING) << "send CQ depth " << send_cq.depth() << " < " << needed
                 << " WRs that may complete on it";
  }

  // The port attributes give the GID table size, the LID (InfiniBand) and
  // the link layer; the same port is used again in Connect().
  const uint8_t port = device.port();
  ibv_port_attr port_attr;
  if (int rc = ibv_query_port(device.context(), port, &port_attr); rc != 0) {
    return VerbError(absl::StrCat("ibv_query_port(", port, ")"), rc);
  }
  // Checked here, not left to ibv_query_gid, so that a bad configured index
  // fails with kInvalidArgument and a message naming the table size.
  if (gid_index < 0 || gid_index >= port_attr.gid_tbl_len) {
    return absl::InvalidArgumentError(absl::StrCat("GID index ", gid_index, " outside ",
                                                   device.name(), " port ", port, "'s table of ",
                                                   port_attr.gid_tbl_len));
  }
  absl::StatusOr<Gid> gid = QueryGid(device, port, gid_index);
  if (!gid.ok()) return gid.status();
  // On RoCE the GID is the source IP address; an all-zero entry is an unused
  // slot, and a QP using it could never be reached by the peer.
  if (port_attr.link_layer == IBV_LINK_LAYER_ETHERNET && *gid == Gid{}) {
    return absl::InvalidArgumentError(
        absl::StrCat("GID index ", gid_index, " of ", device.name(), " port ", port, " is empty"));
  }

  ibv_qp_init_attr init{};
  init.send_cq = send_cq.get();
  init.recv_cq = recv_cq.get();
  init.qp_type = IBV_QPT_RC;
  // Selective signalling: the datapath asks for a completion only where it
  // needs one (see queue_pair.h), which keeps CQ traffic low.
  init.sq_sig_all = 0;
  init.cap.max_send_wr = caps.max_send_wr;
  init.cap.max_recv_wr = caps.max_recv_wr;
  init.cap.max_send_sge = caps.max_send_sge;
  init.cap.max_recv_sge = caps.max_recv_sge;
  init.cap.max_inline_data = caps.max_inline;
  ibv_qp* qp = ibv_create_qp(pd.get(), &init);
  if (qp == nullptr) {
    return VerbError(absl::StrFormat("ibv_create_qp(RC, send_wr=%u recv_wr=%u send_sge=%u "
                                     "recv_sge=%u inline=%u)",
                                     caps.max_send_wr, caps.max_recv_wr, caps.max_send_sge,
                                     caps.max_recv_sge, caps.max_inline),
                     errno);
  }
  // ibv_create_qp writes back what the device granted (at least the request).
  // Record what the device granted, not what was asked, so that the
  // datapath's checks (SGE count, inline size, batch size) use the real
  // limits. SGEs stay capped at kMaxSgePerWr for the stack arrays.
  QpCaps granted;
  granted.max_send_wr = init.cap.max_send_wr;
  granted.max_recv_wr = init.cap.max_recv_wr;
  granted.max_send_sge = std::min(init.cap.max_send_sge, kMaxSgePerWr);
  granted.max_recv_sge = std::min(init.cap.max_recv_sge, kMaxSgePerWr);
  granted.max_inline = init.cap.max_inline_data;

  // max_rd_atomic (READs this side issues) is bounded by the initiator-depth
  // limit, max_dest_rd_atomic (READs the peer may have outstanding here) by
  // the responder limit.
  return QueuePair(qp, device.context(), port, gid_index, granted, RandomPsn(), *gid, port_attr.lid,
                   RdAtomic(device.limits().max_qp_init_rd_atom),
                   RdAtomic(device.limits().max_qp_rd_atom));
}

// Only qp_ is nulled in `other`: that is the one owned handle; the rest is
// plain data that a moved-from QP never uses.
QueuePair::QueuePair(QueuePair&& other) noexcept
    : qp_(std::exchange(other.qp_, nullptr)),
      context_(other.context_),
      port_(other.port_),
      gid_index_(other.gid_index_),
      caps_(other.caps_),
      psn_(other.psn_),
      gid_(other.gid_),
      lid_(other.lid_),
      max_rd_atomic_(other.max_rd_atomic_),
      max_dest_rd_atomic_(other.max_dest_rd_atomic_) {}

QueuePair& QueuePair::operator=(QueuePair&& other) noexcept {
  if (this != &other) {
    this->~QueuePair();
    new (this) QueuePair(std::move(other));
  }
  return *this;
}

QueuePair::~QueuePair() {
  if (qp_ == nullptr) return;
  const uint32_t qpn = qp_->qp_num;
  // Timed because destroying a QP through which a type-2 window is still
  // bound blocks for about 51 s on rxe (memory_window.h); the warning points
  // at the wrong destruction order.
  const absl::Time start = absl::Now();
  if (int rc = ibv_destroy_qp(qp_); rc != 0) {
    LOG(ERROR) << "ibv_destroy_qp(0x" << std::hex << qpn << std::dec
               << ") failed: " << std::strerror(rc);
  }
  const absl::Duration took = absl::Now() - start;
  if (took > absl::Seconds(1)) {
    LOG(WARNING) << "ibv_destroy_qp(0x" << std::hex << qpn << std::dec << ") took "
                 << absl::FormatDuration(took)
                 << ": was a memory window still bound to it? Deallocate windows first.";
  }
}

// Everything here was fixed at CreateRc(); the PSN survives Reset() so the
// endpoint sent to the peer stays valid across reconnects.
QpEndpoint QueuePair::local() const {
  QpEndpoint e;
  e.qpn = qp_->qp_num;
  e.psn = psn_;
  e.gid = gid_;
  e.lid = lid_;
  e.port = port_;
  e.gid_index = gid_index_;
  return e;
}

absl::Status QueuePair::Modify(ibv_qp_attr& attr, int mask, absl::string_view what) {
  if (int rc = ibv_modify_qp(qp_, &attr, mask); rc != 0) {
    return VerbError(absl::StrCat("ibv_modify_qp(", what, ") of QP 0x", absl::Hex(qp_->qp_num)),
                     rc);
  }
  return absl::OkStatus();
}

absl::Status QueuePair::Reset() {
  ibv_qp_attr attr{};
  // Any state may move to RESET; outstanding WRs are discarded without
  // completions, so the caller must not wait for them.
  attr.qp_state = IBV_QPS_RESET;
  return Modify(attr, IBV_QP_STATE, "RESET");
}

absl::StatusOr<ibv_qp_state> QueuePair::state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (int rc = ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init); rc != 0) {
    return VerbError("ibv_query_qp", rc);
  }
  return attr.qp_state;
}

absl::Status QueuePair::Connect(const QpEndpoint& remote, int access_flags,
                                const QpTimeouts& timeouts) {
  // `remote` comes from the peer over the control plane: validate what the
  // verbs would otherwise reject with a bare EINVAL. QPNs are 24 bits and 0
  // is reserved (QP0, the subnet management QP).
  if (remote.qpn == 0 || remote.qpn > 0xffffff) {
    return absl::InvalidArgumentError(absl::StrCat("bad remote QPN 0x", absl::Hex(remote.qpn)));
  }
  ibv_port_attr port_attr;
  if (int rc = ibv_query_port(context_, port_, &port_attr); rc != 0) {
    return VerbError(absl::StrCat("ibv_query_port(", port_, ")"), rc);
  }
  // The port is queried at connect time, not cached from CreateRc(), so the
  // current active MTU and link layer are used.
  const bool roce = port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (roce && remote.gid == std::array<uint8_t, 16>{}) {
    return absl::InvalidArgumentError("remote endpoint has no GID (required on RoCE)");
  }

  // A QP that was connected before (or is in ERR) cannot move to INIT
  // directly; it goes back to RESET first, which drops its outstanding WRs.
  absl::StatusOr<ibv_qp_state> current = state();
  if (!current.ok()) return current.status();
  if (*current != IBV_QPS_RESET) {
    if (absl::Status s = Reset(); !s.ok()) return s;
  }

  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  // P_Key index 0 holds the default partition key, the only one used here.
  init.pkey_index = 0;
  init.port_num = port_;
  // What the PEER may do to our memory through this QP. The per-MR/MW
  // access bits must allow it too; both are checked on every access.
  init.qp_access_flags = access_flags;
  if (absl::Status s = Modify(
          init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
      !s.ok()) {
    return s;
  }

  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  // Both sides use their own port's active MTU; on one RoCE subnet these
  // agree. A mismatch is not detected here.
  rtr.path_mtu = port_attr.active_mtu;
  rtr.dest_qp_num = remote.qpn;
  // The peer's send PSN is the first PSN our receive side expects.
  rtr.rq_psn = remote.psn & 0xffffff;
  rtr.max_dest_rd_atomic = max_dest_rd_atomic_;
  rtr.min_rnr_timer = timeouts.min_rnr_timer;
  rtr.ah_attr.port_num = port_;
  rtr.ah_attr.dlid = remote.lid;
  // Service level 0 and no source path bits: default lane and LID of the
  // port, as on a single subnet.
  rtr.ah_attr.sl = 0;
  rtr.ah_attr.src_path_bits = 0;
  // RoCE always routes with the GRH; InfiniBand does when the peer gave a GID
  // (needed across subnets, harmless within one).
  if (roce || remote.gid != std::array<uint8_t, 16>{}) {
    rtr.ah_attr.is_global = 1;
    std::memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid.data(), remote.gid.size());
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
    // Any value above 1 lets the packet cross routers; 64 is the usual IP TTL.
    rtr.ah_attr.grh.hop_limit = 64;
    rtr.ah_attr.grh.traffic_class = 0;
    rtr.ah_attr.grh.flow_label = 0;
  }
  if (absl::Status s = Modify(rtr,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                              "RTR");
      !s.ok()) {
    return s;
  }

  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  // RTS sets the requester side: retransmission (see QpTimeouts for the
  // values) and our starting send PSN, which the peer gave to its RTR as its
  // rq_psn.
  rts.timeout = timeouts.timeout;
  rts.retry_cnt = timeouts.retry_cnt;
  rts.rnr_retry = timeouts.rnr_retry;
  rts.sq_psn = psn_;
  rts.max_rd_atomic = max_rd_atomic_;
  return Modify(rts,
                IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                "RTS");
}

}  // namespace rdma
}  // namespace kvstore
