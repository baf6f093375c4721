// Copyright 2026 The kvstore Authors.
//
// NodeProcess against a real kvserver (single-node mode: the controls do not
// depend on the cluster): ready-file ports, SIGSTOP/SIGCONT, CPU time,
// kill -9, a restart on the same ports, an exit status of its own.

#include "tests/cluster/node_process.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {
namespace {

using ::kvstore::testing::Eventually;
char ProcState(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  std::getline(f, stat);
  const size_t close = stat.rfind(')');
  return close == std::string::npos ? '?' : stat[close + 2];
}

absl::Status PutGet(const std::string& address, const std::string& key) {
  client::Options o;
  o.servers = {address};
  o.transport = client::TransportMode::kTcp;
  o.op_timeout = absl::Seconds(2);
  auto c = client::KvClient::Connect(o);
  if (!c.ok()) return c.status();
  absl::Status s = (*c)->Put(key, "v");
  if (!s.ok()) return s;
  return (*c)->Get(key).status();
}

NodeLaunch SmallNode() {
  NodeLaunch l;
  l.flags = {"--pool_size=16M", "--transport=tcp"};
  l.log_tag = "single";
  return l;
}

TEST(NodeProcessTest, StartsPausesResumesKillsAndRestartsOnTheSamePorts) {
  auto p = NodeProcess::Start(SmallNode());
  ASSERT_TRUE(p.ok()) << p.status();
  NodeProcess& node = **p;
  EXPECT_GT(node.control_port(), 0);
  EXPECT_GT(node.resp_port(), 0);
  ASSERT_TRUE(PutGet(node.control_address(), "a").ok());
  EXPECT_GT(node.CpuTicks() + 1, 0u);  // readable; may still be 0 ticks

  node.Pause();
  EXPECT_TRUE(Eventually([&] { return ProcState(node.pid()) == 'T'; }));
  EXPECT_TRUE(node.Running());
  // A frozen server answers nothing: the operation times out.
  client::Options o;
  o.servers = {node.control_address()};
  o.transport = client::TransportMode::kTcp;
  o.connect_timeout = absl::Milliseconds(500);
  o.op_timeout = absl::Milliseconds(500);
  auto frozen = client::KvClient::Connect(o);
  EXPECT_FALSE(frozen.ok() && (*frozen)->Put("b", "v").ok());
  node.Resume();
  EXPECT_TRUE(Eventually([&] { return ProcState(node.pid()) != 'T'; }));
  ASSERT_TRUE(PutGet(node.control_address(), "c").ok());

  const int control = node.control_port(), resp = node.resp_port();
  node.Kill();
  EXPECT_FALSE(node.Running());
  EXPECT_EQ(node.WaitExit(absl::Seconds(1)), -9);

  NodeLaunch again = SmallNode();
  again.control_port = control;
  again.resp_port = resp;
  auto q = NodeProcess::Start(again);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)->control_port(), control);
  ASSERT_TRUE(PutGet((*q)->control_address(), "d").ok());
  EXPECT_EQ((*q)->Stop(), 0) << (*q)->Log();
}

TEST(NodeProcessTest, ReportsAStartUpFailureWithTheLog) {
  NodeLaunch l = SmallNode();
  l.flags.push_back("--pool_size=not-a-size");
  auto p = NodeProcess::Start(l);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInternal) << p.status();
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
