// Copyright 2026 The kvstore Authors.
//
// Replicator's sends of one write to its targets (step 3 of replicator.h):
// on the shard's replication stream to each, or by RDMA where a link is up,
// with the retries of a backup whose map is behind.

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "server/cluster/replication/replicator.h"

namespace kvstore {
namespace server {

void Replicator::Forward(v1::ReplicateRequest& req, Targets& targets, absl::Time deadline) {
  std::vector<size_t> pending;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].node == nullptr) {
      targets[i].status = absl::InternalError("replica not named in the map's nodes");
    } else {
      pending.push_back(i);
    }
  }
  // For a backup whose link failed with this write: it may still process
  // that commit (ResentSeqs).
  v1::ReplicateRequest resent;
  ForwardRounds(req, resent, targets, deadline, std::move(pending), /*first=*/true);
}

void Replicator::ForwardRounds(v1::ReplicateRequest& req, v1::ReplicateRequest& resent,
                               Targets& targets, absl::Time deadline, std::vector<size_t> pending,
                               bool first) {
  for (; first || !pending.empty(); first = false) {
    // Targets with an RDMA link up take the write that way; the rest (and
    // all of them without links) on the shard's replication stream to them.
    std::vector<size_t> by_stream;
    std::vector<std::pair<size_t, std::shared_ptr<RdmaReplicaLink>>> by_rdma;
    for (size_t i : pending) {
      std::shared_ptr<RdmaReplicaLink> link =
          rdma_links_ != nullptr ? rdma_links_->Get(*targets[i].node) : nullptr;
      if (link != nullptr) {
        by_rdma.emplace_back(i, std::move(link));
      } else {
        by_stream.push_back(i);
      }
    }
    // Opened (a gRPC call started) before the send lock, which every write
    // of the shard takes.
    std::vector<std::shared_ptr<ReplicationStream>> streams;
    for (size_t i : by_stream) streams.push_back(streams_.Get(req.shard_id(), *targets[i].node));
    std::vector<std::shared_ptr<ReplicationStream::Ticket>> tickets;
    {
      // The seq is taken and the write queued on every stream under one
      // lock, so that each stream carries the shard's writes in seq order.
      std::optional<absl::MutexLock> order;
      if (first) {
        order.emplace(&SendOrder(req.shard_id()));
        req.set_seq(seqs_->Next(req.shard_id()));  // also keeps this node's applied_seq moving
      }
      for (size_t k = 0; k < by_stream.size(); ++k) {
        const Target& t = targets[by_stream[k]];
        tickets.push_back(streams[k]->Send(t.rdma_failed ? resent : req, deadline));
      }
    }
    if (first) {
      resent = req;
      resent.set_resent_after_rdma(true);
    }
    std::vector<size_t> retry;
    // The RDMA sends run while the stream's batch is on its way.
    if (!by_rdma.empty()) SendOverRdma(req, by_rdma, targets, deadline, &retry);
    for (size_t k = 0; k < by_stream.size(); ++k) {
      Target& t = targets[by_stream[k]];
      t.status = streams[k]->Wait(*tickets[k], deadline);
      // A fenced primary publishes nothing: asking a lagging backup again
      // would only leave the write on more nodes.
      if (MapBehind(t.status) && absl::Now() + absl::Milliseconds(2) < deadline &&
          state_->Serving()) {
        retry.push_back(by_stream[k]);
      }
    }
    if (!retry.empty()) absl::SleepFor(absl::Milliseconds(2));
    pending = std::move(retry);
  }
}

// All at once (RdmaReplicaLinks::SendAll). A link that failed is dropped (gRPC
// for a while), and the write is sent again by gRPC in the next round,
// marked resent_after_rdma: a backup applying one seq twice installs the
// same entry twice, which changes nothing, and the mark makes it drop the
// failed link's commit if that arrives after a later write of the key.
void Replicator::SendOverRdma(
    const v1::ReplicateRequest& req,
    const std::vector<std::pair<size_t, std::shared_ptr<RdmaReplicaLink>>>& links, Targets& targets,
    absl::Time deadline, std::vector<size_t>* retry) {
  wire::ReplicaCommit tag;
  tag.shard_id = req.shard_id();
  tag.shard_epoch = req.shard_epoch();
  tag.seq = req.seq();
  tag.primary_node_id = req.primary_node_id();
  tag.primary_incarnation = req.primary_incarnation();
  std::vector<RdmaReplicaLinks::Send> sends;
  for (const auto& [i, link] : links) sends.push_back({link, absl::OkStatus()});
  rdma_links_->SendAll(sends, req.key(), req.entry(), tag, deadline);
  for (size_t k = 0; k < links.size(); ++k) {
    const auto& [i, link] = links[k];
    Target& t = targets[i];
    t.status = sends[k].status;
    const bool time_left = absl::Now() + absl::Milliseconds(2) < deadline && state_->Serving();
    if (t.status.ok()) {
      rdma_links_->sent()->Increment();
    } else if (link->failed(t.status)) {
      rdma_links_->Drop(t.node->node_id(), link);
      t.rdma_failed = true;
      t.status = absl::UnavailableError(
          absl::StrCat("RDMA link to ", t.node->node_id(), " failed: ", t.status.message()));
      if (time_left) retry->push_back(i);
    } else if (MapBehind(t.status) && time_left) {
      retry->push_back(i);
    }
  }
}

}  // namespace server
}  // namespace kvstore
