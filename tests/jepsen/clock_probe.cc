// Copyright 2026 The kvstore Authors.
//
// clock_probe: prints "<CLOCK_REALTIME s> <CLOCK_BOOTTIME s>" as this
// process sees them, for fake_clock_test (run under libfaketime).

#include <time.h>

#include <cstdio>

int main() {
  timespec real{}, boot{};
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_BOOTTIME, &boot);
  std::printf("%lld %lld\n", static_cast<long long>(real.tv_sec),
              static_cast<long long>(boot.tv_sec));
  return 0;
}
