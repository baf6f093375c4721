// Copyright 2026 The kvstore Authors.
//
// RespLoop's writes that wait: SETs held back for pool space (retried when
// space is due), and SETs and other write commands parked for their
// replication round (answered when their commits come back,
// commit_pool.h). Kept apart from resp_loop.cc, which moves bytes; this
// file parks writes and resumes connections whose writes stopped waiting.

#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "server/resp/commands.h"
#include "server/resp/resp_loop.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

// Pipelined SETs of one connection parked at once: a pipeline's worth.
constexpr uint32_t kMaxParkedPerConnection = 64;

// A write command run on a worker: what it needs of its connection is
// copied (the loop may change or close the connection meanwhile), and it
// replies into a stand-in connection whose bytes go back to the loop.
struct ParkedCommand {
  KvStore* store;
  KvStore::Writer* writer;  // the loop's shared writer for parked commands
  const RespServerOptions* options;
  Counters* counters;
  const auth::Identities* ids;
  std::vector<std::string> args;
  int protocol;
  std::string user;
  auth::Role role;
  bool readonly;

  std::string operator()() const {
    Connection stand_in(-1);
    stand_in.protocol = protocol;
    stand_in.authenticated = true;
    stand_in.user = user;
    stand_in.role = role;
    stand_in.readonly = readonly;
    std::vector<absl::string_view> views(args.begin(), args.end());
    DispatchCommand(CommandContext{store, writer, options, counters, &stand_in, ids}, views);
    // Usually one owned chunk; a large value (GETSET, GETDEL) may be a
    // pinned one, copied here so that its pin ends on this thread.
    if (stand_in.out.size() == 1 && stand_in.out.front().pinned.value().data() == nullptr) {
      return std::move(stand_in.out.front().owned);
    }
    std::string reply;
    for (const OutChunk& chunk : stand_in.out) {
      const absl::string_view d = chunk.data();
      reply.append(d.data(), d.size());
    }
    return reply;
  }
};

}  // namespace

// Only a write of keys whose shard would wait for other nodes is worth the
// hand-off (the hook's hint, as for streamed SETs); everything a command
// refuses before it writes (arity, permission) is answered on the loop, in
// the same words, by the table itself.
bool RespLoop::ParkCommand(Connection* c, const resp::ParsedRequest& req, const CommandSpec* spec) {
  if (!c->authenticated) return false;
  if (spec == nullptr || spec->flag != "write" || spec->first_key <= 0 ||
      !ArityOk(*spec, req.args.size()) || !auth::Allows(c->role, spec->permission)) {
    return false;
  }
  WriteHook* hook = store_->options().write_hook;
  if (hook == nullptr || !hook->WaitsForPeers(req.args[spec->first_key])) return false;
  CommitPool::Job job;
  job.fd = c->fd;
  job.serial = c->serial;
  job.held_id = c->Hold();
  job.started = LoopTime(store_->clock());
  job.command =
      ParkedCommand{store_,      command_writer_.get(),
                    &options_,   counters_,
                    ids_,        std::vector<std::string>(req.args.begin(), req.args.end()),
                    c->protocol, c->user,
                    c->role,     c->readonly};
  ++c->parked;
  c->command_parked = true;
  counters_->commands_parked->Increment();
  parking_->Submit(std::move(job));
  return true;
}

// Each held-back SET tries again (StreamedSet asks the store only once
// space is due); one that got its entry, or was refused at the end of its
// wait, goes on with its input and is read again.
void RespLoop::RetryHeldBack() {
  std::vector<int> fds(held_back_.begin(), held_back_.end());
  held_back_.clear();
  for (int fd : fds) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) continue;
    Connection* c = it->second.get();
    Process(c);  // back into held_back_ if still waiting
    if (conns_.count(fd) == 0) continue;
    Flush(c);  // replies, and read interest again once no longer held back
  }
}

// Each parked write finishes within its replication timeout, and a SET's
// entry goes back to the loop's writer before the writer goes.
void RespLoop::StopParking() {
  if (parking_ == nullptr) return;
  parking_->Stop();
  parking_->TakeDone(&done_scratch_);
  for (CommitPool::Done& d : done_scratch_) {
    if (!d.job.command) sets_->Unpark(nullptr, d);  // a command job holds no entry
  }
  done_scratch_.clear();
}

bool RespLoop::MayParkBehind(const Connection& c, absl::string_view key) {
  return !c.command_parked && c.parked < kMaxParkedPerConnection &&
         std::find(c.parked_keys.begin(), c.parked_keys.end(), ParkedKeyHash(key)) ==
             c.parked_keys.end();
}

// Reads the eventfd before taking the outcomes (see CommitPool::TakeDone).
void RespLoop::Unpark(bool read_eventfd) {
  uint64_t count;
  if (read_eventfd) (void)!read(commit_fd_, &count, sizeof(count));
  // Every answer first, then each connection once: a pipeline's SETs are
  // answered together, and one writev sends all their replies (one per
  // SET made a replicated pipeline cost a system call per SET).
  // Both vectors are the loop's, kept (cleared) between calls so that their
  // room is reused: Unpark() runs once per replication reply under load.
  std::vector<std::pair<int, uint64_t>>& answered = answered_scratch_;  // fd, serial
  answered.clear();
  parking_->TakeDone(&done_scratch_);
  for (CommitPool::Done& d : done_scratch_) {
    auto it = conns_.find(d.job.fd);
    Connection* c =
        it != conns_.end() && it->second->serial == d.job.serial ? it->second.get() : nullptr;
    if (!d.job.command) {
      sets_->Unpark(c, d);
    } else if (c != nullptr) {
      --c->parked;
      c->command_parked = false;
      c->Answer(d.job.held_id, [&] { c->ReplyEncoded(d.reply); });
    }
    if (c == nullptr) continue;
    if (answered.empty() || answered.back() != std::make_pair(d.job.fd, d.job.serial)) {
      answered.emplace_back(d.job.fd, d.job.serial);
    }
  }
  // The outcomes are spent: their jobs' entries went back to the writer.
  done_scratch_.clear();
  std::sort(answered.begin(), answered.end());
  answered.erase(std::unique(answered.begin(), answered.end()), answered.end());
  for (const auto& [fd, serial] : answered) {
    auto it = conns_.find(fd);
    if (it == conns_.end() || it->second->serial != serial) continue;
    Connection* c = it->second.get();
    c->blocked_on_park = false;
    Process(c);  // the requests pipelined behind the SETs (blocked again if need be)
    if (conns_.count(fd) == 0) continue;
    Flush(c);  // the answers, and read interest again
  }
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
