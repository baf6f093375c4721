"""kv_fuzz_test: one libFuzzer target that is also a plain replay test.

kv_fuzz_test(name = "x_fuzzer", srcs = ["x_fuzzer.cc"], deps = [...]) makes a
cc_test that runs LLVMFuzzerTestOneInput on every file of corpus/<x>/:

  * normally (gcc, `bazel test //...`) it links replay_main.cc, which feeds
    each corpus file to the target once and fails on a crash or a failed
    check, so the corpora are regression tests;
  * under --config=fuzz (clang-14, tests/fuzz/run.sh) it links libFuzzer's
    own main instead (-fsanitize=fuzzer); given files rather than a directory
    libFuzzer also just runs them, so `bazel test --config=fuzz` replays too.
"""

load("@rules_cc//cc:defs.bzl", "cc_test")

def kv_fuzz_test(name, srcs, deps = [], size = "small"):
    corpus = "corpus/" + name[:-len("_fuzzer")] if name.endswith("_fuzzer") else "corpus/" + name
    files = native.glob([corpus + "/*"])
    if not files:
        fail("kv_fuzz_test %s: %s/ is empty; a replay of nothing proves nothing" % (name, corpus))
    cc_test(
        name = name,
        size = size,
        srcs = srcs + select({
            "//tests/fuzz:fuzzing": [],
            "//conditions:default": ["//tests/fuzz:replay_main.cc"],
        }),
        linkopts = select({
            "//tests/fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        data = files,
        args = ["$(location %s)" % f for f in files],
        deps = deps + ["//tests/fuzz:fuzz_input"],
    )
