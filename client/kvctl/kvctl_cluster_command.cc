// Copyright 2026 The kvstore Authors.
//
// `kvctl cluster`: one KvCluster call to --server, then formatting. The
// map is asked of the named server itself (not routed): that is the server
// whose view an operator wants to see, and it may be any node.

#include "client/kvctl/kvctl_cluster_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/internal/cluster/cluster_rpc.h"
#include "client/kvctl/kvctl_cluster_format.h"
#include "client/kvctl/kvctl_flags.h"
#include "client/kvctl/kvctl_io.h"
#include "common/auth/token.h"
#include "common/control/control_client.h"

namespace kvstore {
namespace client {
namespace kvctl {

absl::StatusOr<ClusterRequest> ParseClusterRequest(const std::string& subcommand, int shard,
                                                   const std::string& target,
                                                   const std::set<std::string>& given,
                                                   const std::vector<std::string>& operands,
                                                   bool dry_run, bool wait, bool yes) {
  ClusterRequest req;
  if (subcommand == "status") {
    req.kind = ClusterRequest::Kind::kStatus;
  } else if (subcommand == "nodes") {
    req.kind = ClusterRequest::Kind::kNodes;
  } else if (subcommand == "slots") {
    req.kind = ClusterRequest::Kind::kSlots;
  } else if (subcommand == "failover") {
    req.kind = ClusterRequest::Kind::kFailover;
  } else if (subcommand == "remove-node") {
    req.kind = ClusterRequest::Kind::kRemoveNode;
  } else if (subcommand == "add-node") {
    req.kind = ClusterRequest::Kind::kAddNode;
  } else if (subcommand == "rebalance") {
    req.kind = ClusterRequest::Kind::kRebalance;
  } else if (subcommand == "accept-loss") {
    req.kind = ClusterRequest::Kind::kAcceptLoss;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown cluster subcommand \"", subcommand,
                     "\" (expected status, nodes, slots, failover, remove-node, add-node, "
                     "rebalance or accept-loss)"));
  }
  if (req.kind == ClusterRequest::Kind::kRemoveNode || req.kind == ClusterRequest::Kind::kAddNode) {
    if (operands.size() != 1 || operands[0].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster ", subcommand, " needs exactly one NODE (a node id)"));
    }
    req.node = operands[0];
  } else if (!operands.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster ", subcommand, " takes no operand (got \"", operands[0], "\")"));
  }
  if (req.kind != ClusterRequest::Kind::kRebalance &&
      (given.count("dry_run") > 0 || given.count("wait") > 0 || given.count("wait_timeout") > 0)) {
    return absl::InvalidArgumentError(
        "--dry-run, --wait and --wait_timeout apply only to cluster rebalance");
  }
  if (dry_run && wait) {
    return absl::InvalidArgumentError(
        "--dry-run and --wait exclude each other (nothing to wait for)");
  }
  req.dry_run = dry_run;
  req.wait = wait;
  const bool failover = req.kind == ClusterRequest::Kind::kFailover;
  const bool accept_loss = req.kind == ClusterRequest::Kind::kAcceptLoss;
  if (!failover && given.count("to") > 0) {
    return absl::InvalidArgumentError("--to applies only to cluster failover");
  }
  if (!failover && !accept_loss && given.count("shard") > 0) {
    return absl::InvalidArgumentError("--shard applies only to cluster failover and accept-loss");
  }
  if (!accept_loss && given.count("yes") > 0) {
    return absl::InvalidArgumentError("--yes applies only to cluster accept-loss");
  }
  req.yes = yes;
  if (failover || accept_loss) {
    if (given.count("shard") == 0) {
      return absl::InvalidArgumentError(absl::StrCat("cluster ", subcommand, " needs --shard=N"));
    }
    if (shard < 0) return absl::InvalidArgumentError("--shard must be 0 or more");
    if (given.count("to") > 0 && target.empty()) {
      return absl::InvalidArgumentError("--to needs a node id");
    }
    req.shard = shard;
    req.target = target;
  }
  return req;
}

namespace {

constexpr absl::Duration kWaitPoll = absl::Milliseconds(500);

// rebalance [--dry-run] [--wait]: the plan, then (--wait) one progress line
// per change of the map until every planned migration left it.
int RunRebalance(ClusterRpc& rpc, const ClusterRequest& req, const std::string& server, bool json,
                 absl::Duration op_timeout) {
  absl::StatusOr<v1::RebalanceResponse> resp = rpc.Rebalance(req.dry_run, absl::Now() + op_timeout);
  if (!resp.ok()) {
    return Failure(absl::Status(resp.status().code(), absl::StrCat("rebalance via ", server, ": ",
                                                                   resp.status().message())));
  }
  const std::vector<v1::Migration> planned(resp->planned().begin(), resp->planned().end());
  absl::Status status =
      WriteAll(STDOUT_FILENO, FormatRebalancePlan(planned, resp->map().epoch(), req.dry_run, json));
  if (!status.ok()) return Failure(status);
  if (!req.wait || planned.empty()) return kExitOk;
  const absl::Time until = absl::Now() + absl::GetFlag(FLAGS_wait_timeout);
  std::string last;
  for (;;) {
    absl::StatusOr<v1::GetClusterMapResponse> map =
        rpc.GetClusterMap(0, std::min(until, absl::Now() + op_timeout));
    if (!map.ok()) {
      return Failure(
          absl::Status(map.status().code(), absl::StrCat("rebalance --wait: cluster map from ",
                                                         server, ": ", map.status().message())));
    }
    const RebalanceProgress progress = ProgressOf(map->map(), planned);
    RebalanceProgress shown = progress;
    shown.epoch = 0;  // a new epoch alone (another node's change) is no news
    const std::string key = FormatRebalanceProgress(shown, true);
    if (key != last) {
      last = key;
      status = WriteAll(STDOUT_FILENO, FormatRebalanceProgress(progress, json));
      if (!status.ok()) return Failure(status);
    }
    if (progress.finished()) {
      if (progress.dropped == 0) return kExitOk;
      return Failure(
          absl::AbortedError(absl::StrCat(progress.dropped,
                                          " migration(s) were dropped (a shard went down); "
                                          "check 'kvctl cluster status' and rebalance again")));
    }
    if (absl::Now() + kWaitPoll > until) {
      return Failure(absl::DeadlineExceededError(
          absl::StrCat("rebalance --wait: ", progress.done, " of ", progress.total,
                       " migrations done after --wait_timeout; they go on in the background")));
    }
    absl::SleepFor(kWaitPoll);
  }
}

// accept-loss --shard=N [--yes]: says what it costs; gives the shard up only
// with --yes.
int RunAcceptLoss(ClusterRpc& rpc, const ClusterRequest& req, const std::string& server,
                  absl::Time deadline) {
  absl::StatusOr<v1::GetClusterMapResponse> map = rpc.GetClusterMap(0, deadline);
  if (!map.ok()) {
    return Failure(absl::Status(map.status().code(), absl::StrCat("cluster map from ", server, ": ",
                                                                  map.status().message())));
  }
  const std::string cost = DescribeLoss(map->map(), static_cast<uint32_t>(req.shard));
  if (cost.empty()) {
    return Failure(absl::FailedPreconditionError(
        absl::StrCat("shard ", req.shard, " is not DOWN in map epoch ", map->map().epoch(), " of ",
                     server, " (see 'kvctl cluster status'); nothing to accept")));
  }
  absl::Status status = WriteAll(STDOUT_FILENO, cost);
  if (!status.ok()) return Failure(status);
  if (!req.yes) {
    return Failure(
        absl::FailedPreconditionError("not done: run again with --yes to give these keys up"));
  }
  absl::StatusOr<v1::AcceptLossResponse> done =
      rpc.AcceptLoss(static_cast<uint32_t>(req.shard), deadline);
  if (!done.ok()) {
    return Failure(
        absl::Status(done.status().code(), absl::StrCat("accept-loss of shard ", req.shard, " via ",
                                                        server, ": ", done.status().message())));
  }
  status = WriteAll(STDOUT_FILENO,
                    absl::StrCat("shard ", req.shard, " serves again, empty, led by ",
                                 done->primary(), "\n", FormatClusterStatus(done->map(), false)));
  return status.ok() ? kExitOk : Failure(status);
}

// The admin token from --admin_token_file or $KVSTORE_ADMIN_TOKEN_FILE ("" when
// neither is set); an unreadable or invalid file is a usage error naming it.
absl::StatusOr<std::string> AdminToken() {
  std::string path = absl::GetFlag(FLAGS_admin_token_file);
  std::string source = "--admin_token_file";
  if (path.empty()) {
    const char* env = std::getenv("KVSTORE_ADMIN_TOKEN_FILE");
    if (env == nullptr) return std::string();
    path = env;
    source = "KVSTORE_ADMIN_TOKEN_FILE";
  }
  absl::StatusOr<std::string> token = auth::ReadTokenFile(path);
  if (!token.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", token.status().message()));
  }
  return token;
}

}  // namespace

int RunCluster(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<ClusterRequest> req = ParseClusterRequest(
      args[0], absl::GetFlag(FLAGS_shard), absl::GetFlag(FLAGS_to), context.given,
      std::vector<std::string>(args.begin() + 1, args.end()), absl::GetFlag(FLAGS_dry_run),
      absl::GetFlag(FLAGS_wait), absl::GetFlag(FLAGS_yes));
  if (!req.ok()) return UsageError(req.status().message());

  const Options& o = context.options;
  const std::string& server = o.servers[0];
  // The admin requests need the admin token; status reads the map, which
  // any credential may, so the admin token (when given) serves for all.
  absl::StatusOr<std::string> admin = AdminToken();
  if (!admin.ok()) return UsageError(admin.status().message());
  const std::string& token = admin->empty() ? o.auth_token : *admin;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = control::ControlClient::DialChannel(
      server, control::ControlSecurity{token, o.tls_ca_file, o.tls_cert_file, o.tls_key_file,
                                       o.tls_server_name});
  if (!channel.ok()) return Failure(channel.status());
  ClusterRpc rpc(*channel, token);
  const absl::Time deadline = absl::Now() + o.op_timeout;

  if (req->kind == ClusterRequest::Kind::kRebalance) {
    return RunRebalance(rpc, *req, server, context.json, o.op_timeout);
  }
  if (req->kind == ClusterRequest::Kind::kAcceptLoss)
    return RunAcceptLoss(rpc, *req, server, deadline);
  v1::ClusterMap map;
  std::string out;
  if (req->kind == ClusterRequest::Kind::kAddNode) {
    absl::StatusOr<v1::AddNodeResponse> added = rpc.AddNode(req->node, deadline);
    if (!added.ok()) {
      return Failure(absl::Status(
          added.status().code(),
          absl::StrCat("add-node ", req->node, " via ", server, ": ", added.status().message())));
    }
    // JSON stays one object (status's); the shard is the last one listed.
    if (!context.json) {
      out = absl::StrCat("added ", req->node, " as the primary of new shard ", added->shard_id(),
                         " (no slots yet: run 'kvctl cluster rebalance')\n");
    }
    map = std::move(*added->mutable_map());
  } else if (req->kind == ClusterRequest::Kind::kFailover) {
    absl::StatusOr<v1::ClusterMap> after = rpc.Failover(req->shard, req->target, deadline);
    if (!after.ok()) {
      return Failure(absl::Status(after.status().code(),
                                  absl::StrCat("failover of shard ", req->shard, " via ", server,
                                               ": ", after.status().message())));
    }
    map = *std::move(after);
  } else if (req->kind == ClusterRequest::Kind::kRemoveNode) {
    absl::StatusOr<v1::ClusterMap> after = rpc.RemoveNode(req->node, deadline);
    if (!after.ok()) {
      return Failure(absl::Status(after.status().code(),
                                  absl::StrCat("remove-node ", req->node, " via ", server, ": ",
                                               after.status().message())));
    }
    map = *std::move(after);
  } else {
    absl::StatusOr<v1::GetClusterMapResponse> resp = rpc.GetClusterMap(0, deadline);
    if (!resp.ok()) {
      return Failure(
          absl::Status(resp.status().code(),
                       absl::StrCat("cluster map from ", server, ": ", resp.status().message())));
    }
    map = std::move(*resp->mutable_map());
  }
  switch (req->kind) {
    case ClusterRequest::Kind::kNodes:
      out += FormatClusterNodes(map, context.json);
      break;
    case ClusterRequest::Kind::kSlots:
      out += FormatClusterSlots(map, context.json);
      break;
    default:  // status, and the new map of failover, remove-node, add-node
      out += FormatClusterStatus(map, context.json);
  }
  const absl::Status status = WriteAll(STDOUT_FILENO, out);
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

std::string ClusterHelpText() {
  return "Usage: kvctl [flags] cluster SUBCOMMAND\n"
         "\n"
         "Shows the cluster map as the server named by --server holds it (any node of the\n"
         "cluster; clients never talk to etcd), or asks it for a manual failover, to\n"
         "drain or add a node, to rebalance the slots, or to give up a DOWN shard's keys.\n"
         "Requests that change the map\n"
         "are forwarded to the controller.\n"
         "\n"
         "Subcommands:\n"
         "  status                   Map epoch, controller, and each shard: slot ranges,\n"
         "                           primary, in-sync backups, syncing nodes, up or DOWN\n"
         "                           (DOWN: the shard has no primary); the nodes\n"
         "                           remove-node marked draining, if any; and one line per\n"
         "                           slot migration (id, PENDING/COPYING/HANDOFF, slots,\n"
         "                           count, source -> target shard).\n"
         "  nodes                    One line per node: control and RESP addresses,\n"
         "                           incarnation, roles (primary:N, backup:N, syncing:N).\n"
         "  slots                    Slot ranges -> shard and primary, then the slot\n"
         "                           migrations as status shows them.\n"
         "  failover --shard=N [--to=NODE]\n"
         "                           Make NODE (an in-sync backup of shard N; default: the\n"
         "                           one with the newest data) its primary. The new map is\n"
         "                           printed as status prints it.\n"
         "  remove-node NODE         Drain NODE before stopping it: each shard it leads\n"
         "                           moves to the in-sync backup with the newest data, it\n"
         "                           leaves every shard and is marked draining (not placed\n"
         "                           again until it restarts); the controller then adds\n"
         "                           other nodes where it was, as syncing. Refused (exit 3,\n"
         "                           FAILED_PRECONDITION) when a shard would be left without\n"
         "                           an in-sync replica. Prints the map the removal wrote as\n"
         "                           status prints it; stop NODE once 'status' shows no\n"
         "                           syncing node.\n"
         "  add-node NODE            Give NODE (a kvserver started with --etcd that serves\n"
         "                           no shard) a new shard with no slots, which it leads,\n"
         "                           with R-1 backups picked among the other nodes (fewest\n"
         "                           roles first). Prints the new shard's id and the new map.\n"
         "                           NOT_FOUND: NODE is not registered; FAILED_PRECONDITION:\n"
         "                           it already serves a shard or is draining. Then run\n"
         "                           rebalance to give the shard slots.\n"
         "  rebalance [--dry-run] [--wait]\n"
         "                           Plan slot migrations that leave every shard with\n"
         "                           floor or ceil of 16384/shards slots (contiguous ranges\n"
         "                           from the top of over-full shards) and queue them; the\n"
         "                           cluster runs them one at a time. Prints each planned\n"
         "                           migration: id, slots, count, source -> target shard.\n"
         "                           --dry-run only prints the plan. --wait then polls the\n"
         "                           map every 0.5 s and prints a progress line whenever it\n"
         "                           changes (done of total, pending, the running one and\n"
         "                           its state) until every planned migration is done; exit\n"
         "                           3 if one was dropped (a shard went down), the server\n"
         "                           fails, or --wait_timeout (default 30m) passes.\n"
         "                           FAILED_PRECONDITION (exit 3): migrations are still\n"
         "                           queued or running, or a shard is down.\n"
         "  accept-loss --shard=N [--yes]\n"
         "                           Give up the keys of DOWN shard N: a shard whose every\n"
         "                           in-sync replica failed stays DOWN (CLUSTERDOWN) until\n"
         "                           one of them registers again with its copy. Prints what\n"
         "                           it costs (every key of the shard's slots) and, only\n"
         "                           with --yes, makes a live node its primary, EMPTY.\n"
         "                           Without --yes nothing changes (exit 3).\n"
         "\n"
         "Flags: --json prints JSON instead of text (rebalance: one object for the plan,\n"
         "then one per progress line); the connection flags (--server, --timeout,\n"
         "--token_file, --tls_*) are those of every command. Servers with an admin token\n"
         "refuse every command but status without it: --admin_token_file=PATH (or\n"
         "$KVSTORE_ADMIN_TOKEN_FILE).\n"
         "\n"
         "Exit codes: 0 done; 2 usage error; 3 any other error, e.g.\n"
         "FAILED_PRECONDITION when the server runs in single-node mode or the controller\n"
         "refuses the request, UNIMPLEMENTED from a server without the cluster service;\n"
         "4 credentials refused (PERMISSION_DENIED: not an admin). Run 'kvctl --help' for all "
         "flags.\n";
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
