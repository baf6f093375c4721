// Copyright 2026 The kvstore Authors.
//
// FakeClocks against the installed libfaketime: a process started with a
// node's environment sees its wall clock stepped by the offset written,
// and its CLOCK_BOOTTIME (the server's lease deadlines) not moved at all.
// Skips without the library.

#include "tests/jepsen/fake_clock.h"

#include <time.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace jepsen {
namespace {

struct Probe {
  int64_t real = 0;
  int64_t boot = 0;
};

Probe RunProbe(const std::vector<std::string>& env) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(testing::BinaryPath("tests/jepsen/clock_probe"));
  testing::ProcessResult r = testing::RunProcess(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> f = absl::StrSplit(r.out, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  Probe p;
  EXPECT_EQ(f.size(), 2u) << r.out;
  if (f.size() == 2) {
    EXPECT_TRUE(absl::SimpleAtoi(f[0], &p.real));
    EXPECT_TRUE(absl::SimpleAtoi(f[1], &p.boot));
  }
  return p;
}

Probe Here() {
  timespec real{}, boot{};
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_BOOTTIME, &boot);
  return {real.tv_sec, boot.tv_sec};
}

TEST(FakeClocksTest, StepsTheWallClockOnlyAndBack) {
  if (absl::Status s = FakeClocks::Available(); !s.ok()) GTEST_SKIP() << s;
#if defined(__SANITIZE_ADDRESS__)
  // The probe is built with ASan here, whose runtime must come first in
  // the library list: with libfaketime preloaded ahead of it the probe
  // refuses to start. The fault suite's kvservers are never built so.
  GTEST_SKIP() << "libfaketime cannot be preloaded ahead of the ASan runtime";
#endif
  FakeClocks clocks(testing::TempDir() + "/clocks");
  const std::vector<std::string> env = clocks.Env(0);
  // The file starts at the true time. Bounds are generous (a loaded
  // machine): the steps are a thousand seconds.
  Probe before = Here(), p = RunProbe(env);
  EXPECT_LT(std::llabs(p.real - before.real), 100);

  for (int64_t step : {1000, -1000}) {
    ASSERT_TRUE(clocks.Step(0, absl::Seconds(step)).ok());
    before = Here();
    p = RunProbe(env);
    EXPECT_LT(std::llabs(p.real - (before.real + step)), 100) << "step " << step;
    EXPECT_LT(std::llabs(p.boot - before.boot), 100) << "CLOCK_BOOTTIME moved, step " << step;
  }
  ASSERT_TRUE(clocks.Step(0, absl::ZeroDuration()).ok());
  before = Here();
  p = RunProbe(env);
  EXPECT_LT(std::llabs(p.real - before.real), 100);
  // Another node's clock is its own.
  ASSERT_TRUE(clocks.Step(1, absl::Seconds(1000)).ok());
  p = RunProbe(env);
  EXPECT_LT(std::llabs(p.real - Here().real), 100);
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
