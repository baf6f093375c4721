// Copyright 2026 The kvstore Authors.
//
// `kvctl cluster`: one KvCluster call to --server, then formatting. The
// map is asked of the named server itself (not routed): that is the server
// whose view an operator wants to see, and it may be any node.

#include "client/kvctl/kvctl_cluster_command.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/internal/cluster/cluster_rpc.h"
#include "client/internal/control_client.h"
#include "client/kvctl/kvctl_cluster_format.h"
#include "client/kvctl/kvctl_flags.h"
#include "client/kvctl/kvctl_io.h"

namespace kvstore {
namespace client {
namespace kvctl {

absl::StatusOr<ClusterRequest> ParseClusterRequest(const std::string& subcommand, int shard,
                                                   const std::string& target,
                                                   const std::set<std::string>& given,
                                                   const std::vector<std::string>& operands) {
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
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown cluster subcommand \"", subcommand,
                     "\" (expected status, nodes, slots, failover or remove-node)"));
  }
  if (req.kind == ClusterRequest::Kind::kRemoveNode) {
    if (operands.size() != 1 || operands[0].empty()) {
      return absl::InvalidArgumentError("cluster remove-node needs exactly one NODE (a node id)");
    }
    req.node = operands[0];
  } else if (!operands.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster ", subcommand, " takes no operand (got \"", operands[0], "\")"));
  }
  const bool failover = req.kind == ClusterRequest::Kind::kFailover;
  if (!failover && (given.count("shard") > 0 || given.count("to") > 0)) {
    return absl::InvalidArgumentError("--shard and --to apply only to cluster failover");
  }
  if (failover) {
    if (given.count("shard") == 0) {
      return absl::InvalidArgumentError("cluster failover needs --shard=N");
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

int RunCluster(const Context& context, const std::vector<std::string>& args) {
  absl::StatusOr<ClusterRequest> req =
      ParseClusterRequest(args[0], absl::GetFlag(FLAGS_shard), absl::GetFlag(FLAGS_to),
                          context.given, std::vector<std::string>(args.begin() + 1, args.end()));
  if (!req.ok()) return UsageError(req.status().message());

  const Options& o = context.options;
  const std::string& server = o.servers[0];
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = ControlClient::DialChannel(
      server, ControlSecurity{o.auth_token, o.tls_ca_file, o.tls_cert_file, o.tls_key_file,
                              o.tls_server_name});
  if (!channel.ok()) return Failure(channel.status());
  ClusterRpc rpc(*channel, o.auth_token);
  const absl::Time deadline = absl::Now() + o.op_timeout;

  v1::ClusterMap map;
  if (req->kind == ClusterRequest::Kind::kFailover) {
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
  std::string out;
  switch (req->kind) {
    case ClusterRequest::Kind::kNodes:
      out = FormatClusterNodes(map, context.json);
      break;
    case ClusterRequest::Kind::kSlots:
      out = FormatClusterSlots(map, context.json);
      break;
    default:  // status, and the new map of failover and remove-node
      out = FormatClusterStatus(map, context.json);
  }
  const absl::Status status = WriteAll(STDOUT_FILENO, out);
  if (!status.ok()) return Failure(status);
  return kExitOk;
}

std::string ClusterHelpText() {
  return "Usage: kvctl [flags] cluster SUBCOMMAND\n"
         "\n"
         "Shows the cluster map as the server named by --server holds it (any node of the\n"
         "cluster; clients never talk to etcd), or asks it for a manual failover or to\n"
         "drain a node.\n"
         "\n"
         "Subcommands:\n"
         "  status                   Map epoch, controller, and each shard: slot ranges,\n"
         "                           primary, in-sync backups, syncing nodes, up or DOWN\n"
         "                           (DOWN: the shard has no primary); and the nodes\n"
         "                           remove-node marked draining, if any.\n"
         "  nodes                    One line per node: control and RESP addresses,\n"
         "                           incarnation, roles (primary:N, backup:N, syncing:N).\n"
         "  slots                    Slot ranges -> shard and primary.\n"
         "  failover --shard=N [--to=NODE]\n"
         "                           Make NODE (an in-sync backup of shard N; default: the\n"
         "                           one with the newest data) its primary. The server\n"
         "                           forwards the request to the controller; the new map\n"
         "                           is printed as status prints it.\n"
         "  remove-node NODE         Drain NODE before stopping it: each shard it leads\n"
         "                           moves to the in-sync backup with the newest data, it\n"
         "                           leaves every shard and is marked draining (not placed\n"
         "                           again until it restarts); the controller then adds\n"
         "                           other nodes where it was, as syncing. Refused (exit 3,\n"
         "                           FAILED_PRECONDITION) when a shard would be left without\n"
         "                           an in-sync replica. Prints the map the removal wrote as\n"
         "                           status prints it; stop NODE once 'status' shows no\n"
         "                           syncing node. Forwarded to the controller.\n"
         "\n"
         "Flags: --json prints one JSON object instead of text; the connection flags\n"
         "(--server, --timeout, --token_file, --tls_*) are those of every command.\n"
         "\n"
         "Exit codes: 0 done; 2 usage error; 3 any other error, e.g.\n"
         "FAILED_PRECONDITION when the server runs in single-node mode or the controller\n"
         "refuses the failover or remove-node, UNIMPLEMENTED from a server without the cluster "
         "service;\n"
         "4 credentials refused. Run 'kvctl --help' for all flags.\n";
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
