// Copyright 2026 The kvstore Authors.
//
// ClientRegistry without a server: ids, unregistering with the handle,
// the CLIENT LIST line, filters, CLIENT KILL's marks and wake-ups, and
// registrations, listings and kills from several threads at once.

#include "server/resp/client_registry.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/resp/commands.h"
#include "server/resp/connection.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

// A connected socketpair end: a descriptor with no IP address.
class Sockets {
 public:
  Sockets() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  ~Sockets() {
    close(fds_[0]);
    close(fds_[1]);
  }
  int fd() const { return fds_[0]; }

 private:
  int fds_[2] = {-1, -1};
};

TEST(ClientRegistryTest, IdsIncreaseAndHandlesUnregister) {
  ClientRegistry reg;
  Sockets s;
  ClientHandle a = reg.Register(s.fd(), kT0, -1, "10.0.0.1:5000", "10.0.0.2:6380");
  ClientHandle b = reg.Register(s.fd(), kT0, -1);
  EXPECT_EQ(a.get()->id, 1u);
  EXPECT_EQ(b.get()->id, 2u);
  EXPECT_EQ(b.get()->addr, "?:0");  // a socketpair has no address
  EXPECT_EQ(reg.size(), 2u);
  {
    ClientHandle moved = std::move(a);
    EXPECT_EQ(a.get(), nullptr);
    EXPECT_EQ(reg.size(), 2u);
  }
  EXPECT_EQ(reg.size(), 1u);
  // Ids are never reused.
  ClientHandle c = reg.Register(s.fd(), kT0, -1);
  EXPECT_EQ(c.get()->id, 3u);
}

TEST(ClientRegistryTest, LineHasRedisFieldsInOrder) {
  ClientRegistry reg;
  Sockets s;
  ClientHandle h = reg.Register(s.fd(), kT0, -1, "10.0.0.1:5000", "10.0.0.2:6380");
  reg.Update(h.get(), [](ClientEntry& e) {
    e.name = "worker";
    e.lib_name = "redis-py";
    e.lib_ver = "5.0.1";
    e.protocol = 3;
    e.no_evict = true;
  });
  h.get()->last_command.store(FindCommand("client"));
  h.get()->last_subcommand.store("info");
  const std::string line = FormatClientLine(*h.get(), kT0 + absl::Seconds(42));
  EXPECT_EQ(line,
            "id=1 addr=10.0.0.1:5000 laddr=10.0.0.2:6380 fd=" + std::to_string(s.fd()) +
                " name=worker age=42 idle=42 flags=e db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 "
                "qbuf-free=0 argv-mem=0 multi-mem=0 obl=0 oll=0 omem=0 tot-mem=0 events=r "
                "cmd=client|info user=default redir=-1 resp=3 lib-name=redis-py lib-ver=5.0.1\n");
  std::vector<std::string> keys;
  for (absl::string_view field : absl::StrSplit(absl::StripSuffix(line, "\n"), ' ')) {
    keys.emplace_back(field.substr(0, field.find('=')));
  }
  EXPECT_THAT(keys, ElementsAre("id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db",
                                "sub", "psub", "ssub", "multi", "qbuf", "qbuf-free", "argv-mem",
                                "multi-mem", "obl", "oll", "omem", "tot-mem", "events", "cmd",
                                "user", "redir", "resp", "lib-name", "lib-ver"));
  // Before any command Redis says NULL.
  ClientHandle fresh = reg.Register(s.fd(), kT0, -1);
  EXPECT_THAT(FormatClientLine(*fresh.get(), kT0), HasSubstr(" cmd=NULL "));
  EXPECT_THAT(FormatClientLine(*fresh.get(), kT0), HasSubstr(" flags=N "));
}

TEST(ClientRegistryTest, PublishStatsReadsTheConnection) {
  ClientRegistry reg;
  Sockets s;
  Connection c(s.fd());
  c.client = reg.Register(s.fd(), kT0, -1);
  c.in.Append("GET k\r\n");
  c.ReplyBulk("value");
  c.readonly = true;
  PublishStats(c, 4);
  const ClientEntry& e = *c.client.get();
  EXPECT_EQ(e.qbuf.load(), 7u);
  EXPECT_EQ(e.argv_mem.load(), 4u);
  EXPECT_EQ(e.oll.load(), 1u);
  EXPECT_EQ(e.omem.load(), 11u);
  EXPECT_GT(e.tot_mem.load(), sizeof(Connection));
  EXPECT_THAT(FormatClientLine(e, kT0), HasSubstr(" flags=r "));
}

TEST(ClientRegistryTest, ListFilters) {
  ClientRegistry reg;
  Sockets s;
  ClientHandle a = reg.Register(s.fd(), kT0, -1, "1.1.1.1:1", "9.9.9.9:6380");
  ClientHandle b = reg.Register(s.fd(), kT0, -1, "2.2.2.2:2", "9.9.9.9:6381");
  reg.Update(b.get(), [](ClientEntry& e) { e.user = "admin"; });
  auto ids = [&](const ClientFilter& f) {
    std::string out;
    reg.List(f, kT0, &out);
    std::vector<std::string> got;
    for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
      got.emplace_back(line.substr(0, line.find(' ')));
    }
    return got;
  };
  EXPECT_THAT(ids({}), ElementsAre("id=1", "id=2"));
  ClientFilter f;
  f.ids = {2, 7};
  EXPECT_THAT(ids(f), ElementsAre("id=2"));
  f = ClientFilter();
  f.addr = "1.1.1.1:1";
  EXPECT_THAT(ids(f), ElementsAre("id=1"));
  f = ClientFilter();
  f.laddr = "9.9.9.9:6381";
  EXPECT_THAT(ids(f), ElementsAre("id=2"));
  f = ClientFilter();
  f.user = "admin";
  EXPECT_THAT(ids(f), ElementsAre("id=2"));
  f = ClientFilter();
  f.nobody = true;
  EXPECT_TRUE(ids(f).empty());
}

TEST(ClientRegistryTest, KillMarksOthersWakesTheirLoopAndSparesTheCaller) {
  ClientRegistry reg;
  Sockets s;
  const int wake = eventfd(0, EFD_NONBLOCK);
  ClientHandle self = reg.Register(s.fd(), kT0, wake, "1.1.1.1:1", "");
  ClientHandle other = reg.Register(s.fd(), kT0, wake, "1.1.1.1:1", "");
  bool self_matched = true;
  ClientFilter f;
  f.addr = "1.1.1.1:1";
  EXPECT_EQ(reg.Kill(f, self.get(), /*skip_self=*/true, &self_matched), 1u);
  EXPECT_FALSE(self_matched);
  EXPECT_TRUE(other.get()->kill_requested.load());
  EXPECT_FALSE(self.get()->kill_requested.load());
  uint64_t count = 0;
  EXPECT_EQ(read(wake, &count, sizeof(count)), static_cast<ssize_t>(sizeof(count)));
  EXPECT_EQ(count, 1u);
  // Not spared: counted and reported, still not marked (it closes itself);
  // the other one, marked already and on its way out, is not counted again.
  EXPECT_EQ(reg.Kill(f, self.get(), /*skip_self=*/false, &self_matched), 1u);
  EXPECT_TRUE(self_matched);
  EXPECT_FALSE(self.get()->kill_requested.load());
  f.addr = "no:such";
  EXPECT_EQ(reg.Kill(f, self.get(), false, &self_matched), 0u);
  close(wake);
}

// Loops register, rename, list and kill at once; the listing always
// parses (no torn names) and every registration is gone at the end.
TEST(ClientRegistryTest, ManyThreadsAtOnce) {
  ClientRegistry reg;
  Sockets s;
  constexpr int kThreads = 4;
  constexpr int kRounds = 500;
  std::atomic<bool> bad_line{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        ClientHandle h = reg.Register(s.fd(), kT0, -1);
        reg.Update(h.get(), [&](ClientEntry& e) { e.name = "t" + std::to_string(t); });
        h.get()->last_command.store(FindCommand("GET"));
        std::string out;
        reg.List(ClientFilter(), kT0, &out);
        for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
          if (!absl::StartsWith(line, "id=") || !absl::EndsWith(line, "lib-ver=")) bad_line = true;
        }
        bool self_matched;
        ClientFilter f;
        f.ids = {h.get()->id + 1};
        reg.Kill(f, h.get(), true, &self_matched);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_FALSE(bad_line);
  EXPECT_EQ(reg.size(), 0u);
}

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
