#!/usr/bin/env bash
# kvstore's test command: install what is needed, build, run every test, and
# count the results.  This is what CI runs (.ci/run).
#
# Usage: deploy/test.sh [--no-rdma | --rdma-only] [--no-compose] [--no-setup]
#        deploy/test.sh --sanitize=asan|tsan [--no-setup]
#        deploy/test.sh --fuzz[=SECONDS] [--no-rdma] [--no-setup]
#
# Steps (each announced by a "==> " line):
#   1. deploy/setup.sh                  install the Debian packages (idempotent)
#   2. deploy/check-tree.sh             clang-format, layering and file-length
#                                       checks, one test case each
#      bazel test //...                 every test not tagged requires-rdma or
#                                       manual (.bazelrc filters those); when
#                                       step 2b's ASan pass follows (CI), only
#                                       the tests with a long timeout run here
#                                       and everything that is not a test is
#                                       built: each test runs once, the others
#                                       under ASan + UBSan
#   2c. the compose cluster on this host over TCP (deploy/compose/test-compose.sh:
#       deploy/cluster.sh up with TLS, redis-cli -c and kvctl from the client
#       container, what TLS and etcd's network refuse, a certificate renewal,
#       a crashed node restarted, down leaves nothing); its JUnit XML is
#       counted; where no Docker engine can run, its cases count as skipped
#   2b. with CI=true (or --sanitize / --fuzz): the host suite under
#       AddressSanitizer + UBSan (bazel test --config=asan //..., .bazelrc;
#       the tests with a long timeout are left to step 2),
#       and every fuzzer of tests/fuzz for KV_FUZZ_SECONDS (default 30) each
#       (tests/fuzz/run.sh: clang-14, libFuzzer, ASan + UBSan); each sanitized
#       test and each fuzzer counts as test cases like the others
#   3. RDMA tests: the targets of
#        bazel query 'attr(tags, "requires-rdma", tests(//...))'
#      (minus those tagged manual) are built with `bazel build` and their
#      binaries run by tests/rxe/run-rdma-tests.sh: on the host if it has an
#      active RDMA device, else in one Soft-RoCE qemu VM.  Targets also tagged
#      rdma-two-vm run as server + client in two VMs (run-rdma-tests.sh --two-vm).
#   3b. the compose cluster over RDMA in one more Soft-RoCE VM boot
#      (tests/compose/vm_compose_test.sh: dockerd in the VM, cluster up with
#      docker-compose.rdma.yml, PUT/GET over RDMA from the client container,
#      kill -9 / pause / restart of primaries under load with the history
#      check, down leaves nothing); its JUnit XML is counted.  About 12
#      minutes of TCG on a 2-core host (720 s measured); skipped without
#      qemu like step 3.  KV_COMPOSE_VM=0 skips it (docs/operations.md §13.8)
#   4. count the <testcase>s of the gtest/JUnit XML of this run: the test.xml
#      of every test that step 2 reported (cached results included; the list
#      comes from Bazel's build event file, not from whatever bazel-testlogs
#      holds) and the XML written in step 3.  A test case with <failure> or
#      <error> is failed; skipped and disabled ones are reported separately.
#
# Before it, "time per step" says where the run's time went.
# The last line of the output is always "N passed, N failed".
#
# Options:
#   --no-rdma     skip step 3
#   --rdma-only   skip steps 2 and 2c
#   --no-compose  skip steps 2c and 3b
#   --no-setup    skip step 1 (for quick local runs)
#   --sanitize=asan|tsan
#                 only the host suite, under that sanitizer (no plain pass, no
#                 RDMA tests); tsan uses the suppressions of tests/fuzz/tsan.supp
#   --fuzz[=SECONDS]
#                 also run the fuzzers (SECONDS each, default KV_FUZZ_SECONDS)
#   -h, --help    this text
#
# Exit status: 0 only if bazel test passed (or found no tests to run), the RDMA
# tests passed (or were skipped, loudly, because this machine can run neither
# RDMA nor qemu: run-rdma-tests.sh exit 77; with CI=true that skip is a
# failure), the sanitized suite and the fuzzers of step 2b passed (when run),
# no test case failed and at least one passed.  1 otherwise; 2 on bad usage.
#
# Environment: CI=true (strict mode; adds step 2b), BAZEL (default: bazel),
# KV_VM_CACHE (VM image cache of tests/rxe), KV_RDMA_MODE (auto|host|vm),
# KV_FUZZ_SECONDS (seconds per fuzzer in step 2b, default 30),
# KV_CI_SANITIZE=0 (CI without step 2b's asan pass and fuzzers).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

RUN_BAZEL_TESTS=1
RUN_RDMA=1
RUN_SETUP=1
RUN_COMPOSE=1
BAZEL=${BAZEL:-bazel}
IN_CI=0
[[ ${CI:-} == true || ${CI:-} == 1 ]] && IN_CI=1
SANITIZE=""                           # --sanitize: the one suite to run
FUZZ_SECONDS=${KV_FUZZ_SECONDS:-30}
RUN_FUZZ=0

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case "$1" in
    --no-rdma) RUN_RDMA=0 ;;
    --rdma-only) RUN_BAZEL_TESTS=0 ;;
    --no-compose) RUN_COMPOSE=0 ;;
    --no-setup) RUN_SETUP=0 ;;
    --sanitize=asan | --sanitize=tsan) SANITIZE=${1#*=} ;;
    --sanitize*)
        echo "deploy/test.sh: $1: the sanitizers are --sanitize=asan and --sanitize=tsan" >&2
        exit 2
        ;;
    --fuzz) RUN_FUZZ=1 ;;
    --fuzz=*) RUN_FUZZ=1 FUZZ_SECONDS=${1#*=} ;;
    -h | --help) usage && exit 0 ;;
    *)
        echo "deploy/test.sh: unknown argument $1 (see --help)" >&2
        exit 2
        ;;
    esac
    shift
done
# --sanitize replaces the plain suite and the RDMA tests (which run their
# plain binaries in the VM); CI adds the asan pass and the fuzzers to them.
if [[ -n $SANITIZE ]]; then
    RUN_BAZEL_TESTS=0 RUN_RDMA=0
elif ((IN_CI && RUN_BAZEL_TESTS && ${KV_CI_SANITIZE:-1})); then
    SANITIZE=asan RUN_FUZZ=1
fi
[[ $FUZZ_SECONDS =~ ^[1-9][0-9]*$ ]] || {
    echo "deploy/test.sh: fuzzing needs a positive number of seconds, not '$FUZZ_SECONDS'" >&2
    exit 2
}
((RUN_BAZEL_TESTS || RUN_RDMA || ${#SANITIZE})) || {
    echo "deploy/test.sh: --no-rdma and --rdma-only together leave nothing to do" >&2
    exit 2
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvtest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RDMA_RESULTS=$REPO/.vm/rdma-results
T0=$(date +%s)
PROBLEMS=() # reasons for a non-zero exit, besides failed test cases
XMLS=()     # XML files to count
NOTES=()    # things to repeat in the summary
EXTRA_FAILED=() # tests that failed without a test case to show for it

STEP_NAME="" STEP_T0=$T0
STEP_TIMES=() # "seconds  step" for each step, printed by finish
step() {
    local now
    now=$(date +%s)
    [[ -z $STEP_NAME ]] || STEP_TIMES+=("$(printf '%5ds  %s' $((now - STEP_T0)) "$STEP_NAME")")
    STEP_NAME=$* STEP_T0=$now
    echo
    echo "==> $*"
}
problem() {
    PROBLEMS+=("$*")
    echo "!!! $*"
}

# Print the summary and the final line, and exit with the verdict.
finish() {
    local passed=0 failed=0 skipped=0 disabled=0 counts line kind name file
    step "counting test cases ($((${#XMLS[@]})) XML files)"
    if ((${#XMLS[@]})); then
        counts=$("$REPO/tests/rxe/xml-count.sh" --list "${XMLS[@]}")
        while IFS=$'\t' read -r kind name file; do
            [[ $kind == passed=* ]] && continue
            file=${file#"$REPO"/}
            [[ $file == */testlogs/* ]] && file=bazel-testlogs/${file#*/testlogs/}
            printf '    %-8s %s  (%s)\n' "$kind" "$name" "$file"
        done <<<"$counts"
        # last line: passed=N failed=N skipped=N disabled=N
        read -r passed failed skipped disabled < <(tail -n 1 <<<"$counts" | sed 's/[a-z]*=//g')
    fi
    local x
    for x in "${EXTRA_FAILED[@]}"; do
        printf '    %-8s %s\n' failed "$x"
        failed=$((failed + 1))
    done
    ((skipped == 0)) || echo "    $skipped test case(s) skipped"
    ((disabled == 0)) || echo "    $disabled test case(s) disabled"
    ((${#NOTES[@]} == 0)) || printf '    note: %s\n' "${NOTES[@]}"
    # Where the time went (CI has 90 minutes; README says what a run costs).
    echo "    time per step:"
    printf '    %s\n' "${STEP_TIMES[@]}"
    ((passed > 0)) || PROBLEMS+=("no test case passed")
    local verdict=0
    if ((failed > 0 || ${#PROBLEMS[@]} > 0)); then
        verdict=1
        echo "==> FAILED after $(($(date +%s) - T0))s"
        ((failed == 0)) || echo "    $failed test case(s) failed"
        ((${#PROBLEMS[@]} == 0)) || printf '    %s\n' "${PROBLEMS[@]}"
    else
        echo "==> OK after $(($(date +%s) - T0))s"
    fi
    echo "$passed passed, $failed failed"
    exit "$verdict"
}

# --- 1. packages ------------------------------------------------------------
if ((RUN_SETUP)); then
    step "setup: deploy/setup.sh"
    if ! "$REPO/deploy/setup.sh"; then
        problem "deploy/setup.sh failed; not going on"
        finish
    fi
fi
command -v "$BAZEL" >/dev/null || {
    problem "$BAZEL not found (deploy/setup.sh installs bazel-bootstrap)"
    finish
}

# --- 2a. tree checks ---------------------------------------------------------
# clang-format, no downcasts or upward includes in the client, file lengths,
# no references outside the repository: one test case each.
if ((RUN_BAZEL_TESTS)); then
    step "tree checks: deploy/check-tree.sh"
    "$REPO/deploy/check-tree.sh" --xml "$WORK/check-tree.xml" || true
    if [[ -f $WORK/check-tree.xml ]]; then
        XMLS+=("$WORK/check-tree.xml")
    else
        problem "deploy/check-tree.sh wrote no results"
    fi
fi

# --- 2. bazel test //... ------------------------------------------------------
# test.xml paths (and results without one) from Bazel's build event JSON: one
# event a line; testResult events list their outputs, also for cached results.
bep_test_xmls() {
    grep '^{"id":{"testResult":' "$1" | grep -o '"uri":"file://[^"]*/test\.xml"' |
        sed -e 's|^"uri":"file://||' -e 's|"$||' -e 's|%20| |g' | sort -u || true
}
# test targets whose build failed or was aborted (no testResult for them)
bep_tests_not_built() {
    local label line
    grep '^{"id":{"targetConfigured":' "$1" | grep '"testSize"' |
        sed -n 's/^{"id":{"targetConfigured":{"label":"\([^"]*\)".*/\1/p' | sort -u |
        while IFS= read -r label; do
            line=$(grep -F "{\"id\":{\"targetCompleted\":{\"label\":\"$label\"" "$1" | head -n 1 || true)
            [[ $line == *'"success":true'* ]] || echo "$label"
        done
}
bep_results_without_xml() {
    grep '^{"id":{"testResult":' "$1" | grep -v '/test\.xml"' |
        grep -o '"label":"[^"]*"' | cut -d'"' -f4 | sort -u || true
}

# With the ASan pass to follow (CI), each host test runs once: the tests with a
# long timeout here (the ASan pass leaves them out: .bazelrc), every other one
# under ASan + UBSan in step 2b. Compiling and running the short tests twice
# cost CI about a quarter of its time. Everything that is not a test is still
# built here: the binaries, benchmarks and tools must compile as shipped.
# Short tests tagged "plain" run here too: checks of theirs that the
# sanitizers' own allocator or runtime would defeat skip themselves there.
PLAIN_PASSES=()
if ((RUN_BAZEL_TESTS)) && [[ $SANITIZE == asan ]]; then
    PLAIN_PASSES=("--test_timeout_filters=long"
        "--test_timeout_filters=-long --test_tag_filters=plain,-requires-rdma,-manual")
fi

# collect_bep BEP SUFFIX: counts the results a bazel run's build event file
# names (test.xml files, results without one, tests that did not build);
# SUFFIX (" under asan", or empty) goes after each label it reports.
collect_bep() {
    local bep=$1 suffix=$2 x label
    mapfile -t found < <(bep_test_xmls "$bep")
    for x in "${found[@]}"; do
        if [[ -f $x ]]; then XMLS+=("$x"); else problem "missing $x"; fi
    done
    echo "    ${#found[@]} test.xml file(s) reported by this bazel run"
    while IFS= read -r label; do
        [[ -z $label ]] || EXTRA_FAILED+=("$label$suffix (test result without test.xml)")
    done < <(bep_results_without_xml "$bep")
    while IFS= read -r label; do
        [[ -z $label ]] || EXTRA_FAILED+=("$label$suffix (failed to build)")
    done < <(bep_tests_not_built "$bep")
}

# run_plain_tests NAME [FLAG...]: bazel test //... with FLAGs, its results
# counted from its own build event file.
run_plain_tests() {
    local name=$1 bep=$WORK/bep-$1.json rc=0
    shift
    # --keep_going: run every test that builds, even if another one does not.
    # --cache_test_results=no: a test command that reports a result it did
    # not run this time would hide a flaky or load-sensitive test.
    "$BAZEL" test //... --keep_going --cache_test_results=no "$@" \
        --build_event_json_file="$bep" || rc=$?
    case $rc in
    0) ;;
    4) NOTES+=("bazel test //... $* found no test targets to run (exit 4)") ;;
    3) problem "bazel test //... $*: some tests failed (exit 3)" ;;
    *) problem "bazel test //... $* failed (exit $rc: build or infrastructure error)" ;;
    esac
    [[ -f $bep ]] && collect_bep "$bep" ""
    return 0
}

if ((RUN_BAZEL_TESTS)); then
    if ((${#PLAIN_PASSES[@]})); then
        step "bazel build (every target that is not a test)"
        q='//... except tests(//...) except attr(tags, "manual", //...)'
        if ! "$BAZEL" query "$q" --output=label >"$WORK/nontest.labels" 2>"$WORK/query.err"; then
            cat "$WORK/query.err"
            problem "bazel query for the targets that are not tests failed"
        elif ! "$BAZEL" build --keep_going --target_pattern_file="$WORK/nontest.labels"; then
            problem "bazel build of the targets that are not tests failed"
        fi
        pass_no=0
        for flags in "${PLAIN_PASSES[@]}"; do
            pass_no=$((pass_no + 1))
            read -ra f <<<"$flags"
            step "bazel test //... --build_tests_only $flags (the rest run under ASan in step 2b)"
            run_plain_tests "plain$pass_no" --build_tests_only "${f[@]}"
        done
    else
        step "bazel test //..."
        run_plain_tests plain
    fi
fi

# --- 2c. the compose cluster (TCP, on this host) -------------------------------
if ((RUN_BAZEL_TESTS && RUN_COMPOSE)); then
    step "compose cluster: deploy/compose/test-compose.sh"
    BAZEL=$BAZEL "$REPO/deploy/compose/test-compose.sh" --xml "$WORK/compose.xml" ||
        problem "the compose cluster test failed"
    if [[ -f $WORK/compose.xml ]]; then
        XMLS+=("$WORK/compose.xml")
        grep -q '<skipped' "$WORK/compose.xml" &&
            NOTES+=("the compose cluster test was SKIPPED: no Docker engine can run on this machine")
    else
        problem "the compose cluster test wrote no results"
    fi
fi

# --- 2b. sanitizers and fuzzing ----------------------------------------------
# The host suite under --config=asan|tsan (.bazelrc): a separate output
# directory, no convenience symlinks (step 3 uses bazel-bin), results counted
# from this run's own build event file exactly as in step 2.
run_sanitized_suite() {
    local config=$1 bep=$WORK/bep-$1.json rc=0 flags=()
    # Debian's Abseil, gRPC and protobuf are not instrumented for TSan; its
    # suppressions say what that makes it misreport.
    [[ $config == tsan ]] &&
        flags+=("--test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$REPO/tests/fuzz/tsan.supp")
    step "bazel test --config=$config //... (the host suite under $config)"
    # --build_tests_only: the benchmarks and tools are not run here, so they
    # need no sanitized build.
    "$BAZEL" test --config="$config" //... --keep_going --cache_test_results=no --symlink_prefix=/ \
        --build_tests_only \
        --build_event_json_file="$bep" "${flags[@]}" || rc=$?
    case $rc in
    0 | 4) ;;
    3) problem "bazel test --config=$config //...: some tests failed (exit 3)" ;;
    *) problem "bazel test --config=$config //... failed (exit $rc: build or infrastructure error)" ;;
    esac
    [[ -f $bep ]] && collect_bep "$bep" " under $config"
    return 0
}
[[ -z $SANITIZE ]] || run_sanitized_suite "$SANITIZE"
if ((RUN_FUZZ)); then
    step "fuzzers: tests/fuzz/run.sh --seconds $FUZZ_SECONDS"
    "$REPO/tests/fuzz/run.sh" --seconds "$FUZZ_SECONDS" --xml "$WORK/fuzz.xml" ||
        problem "tests/fuzz/run.sh failed (a crash keeps its reproducer in tests/fuzz/corpus/)"
    if [[ -f $WORK/fuzz.xml ]]; then XMLS+=("$WORK/fuzz.xml"); else problem "the fuzzers wrote no results"; fi
fi

# --- 3. RDMA tests ------------------------------------------------------------
# //pkg:name -> bazel-bin/pkg/name
label_to_binary() {
    local l=${1#@}
    l=${l#//}
    local pkg=${l%%:*} name=${l#*:}
    if [[ $l != *:* ]]; then
        pkg=$l
        name=${l##*/}
    fi
    echo "$BAZEL_BIN${pkg:+/$pkg}/$name"
}

if ((RUN_RDMA)); then
    step "RDMA tests: bazel query for tag requires-rdma"
    q='attr(tags, "requires-rdma", tests(//...)) except attr(tags, "manual", tests(//...))'
    if ! "$BAZEL" query "$q" --output=label >"$WORK/rdma.labels" 2>"$WORK/query.err"; then
        cat "$WORK/query.err"
        problem "bazel query for requires-rdma tests failed"
        finish
    fi
    mapfile -t LABELS <"$WORK/rdma.labels"
    if ((${#LABELS[@]} == 0)); then
        echo "    no test targets tagged requires-rdma: nothing to run"
        NOTES+=("no requires-rdma test targets")
    else
        printf '    %s\n' "${LABELS[@]}"
        "$BAZEL" query "attr(tags, \"rdma-two-vm\", set(${LABELS[*]}))" --output=label \
            >"$WORK/twovm.labels" 2>"$WORK/query.err" || {
            cat "$WORK/query.err"
            problem "bazel query for rdma-two-vm failed"
            finish
        }
        step "bazel build ${#LABELS[@]} RDMA test target(s)"
        if ! "$BAZEL" build "${LABELS[@]}"; then
            problem "bazel build of the RDMA tests failed"
            finish
        fi
        BAZEL_BIN=$REPO/bazel-bin
        [[ -d $BAZEL_BIN ]] || BAZEL_BIN=$("$BAZEL" info bazel-bin)
        ONE=() TWO=()
        for l in "${LABELS[@]}"; do
            if grep -qxF "$l" "$WORK/twovm.labels"; then
                TWO+=("$(label_to_binary "$l")")
            else
                ONE+=("$(label_to_binary "$l")")
            fi
        done
        # run_rdma DIR ARGS...: one run-rdma-tests.sh invocation
        run_rdma() {
            local dir=$1 rc=0
            shift
            rm -rf "$dir" # only this run's XML may be counted
            "$REPO/tests/rxe/run-rdma-tests.sh" --results "$dir" "$@" || rc=$?
            case $rc in
            0) ;;
            77)
                if ((IN_CI)); then
                    problem "RDMA tests SKIPPED (no RDMA device, no qemu): a failure under CI=true"
                else
                    NOTES+=("RDMA tests were SKIPPED: no RDMA device and no qemu on this machine")
                fi
                ;;
            1) problem "RDMA tests failed" ;;
            *) problem "RDMA test harness failed (run-rdma-tests.sh exit $rc; see tests/rxe/README.md)" ;;
            esac
            shopt -s nullglob
            XMLS+=("$dir"/*.xml)
            shopt -u nullglob
        }
        if ((${#ONE[@]})); then
            step "run ${#ONE[@]} RDMA test binary(ies): tests/rxe/run-rdma-tests.sh"
            run_rdma "$RDMA_RESULTS" "${ONE[@]}"
        fi
        if ((${#TWO[@]})); then
            step "run ${#TWO[@]} two-VM RDMA test binary(ies): tests/rxe/run-rdma-tests.sh --two-vm"
            run_rdma "$RDMA_RESULTS-two-vm" --two-vm "${TWO[@]}"
        fi
    fi
fi

# --- 3b. the compose cluster over RDMA, in the VM ------------------------------
# On by default; KV_COMPOSE_VM=0 skips it (docs/operations.md §13.8).
if ((RUN_RDMA && RUN_COMPOSE)) && [[ ${KV_COMPOSE_VM:-1} != 0 ]]; then
    step "compose cluster over RDMA in the Soft-RoCE VM: tests/compose/vm_compose_test.sh"
    rc=0
    BAZEL=$BAZEL "$REPO/tests/compose/vm_compose_test.sh" --xml "$WORK/compose-vm.xml" || rc=$?
    case $rc in
    0) ;;
    77)
        if ((IN_CI)); then
            problem "the compose VM test was SKIPPED (no qemu): a failure under CI=true"
        else
            NOTES+=("the compose VM test was SKIPPED: no qemu on this machine")
        fi
        ;;
    *) problem "the compose VM test failed (exit $rc; .vm/compose-results/vm_compose.log)" ;;
    esac
    if [[ -f $WORK/compose-vm.xml ]]; then
        XMLS+=("$WORK/compose-vm.xml")
    else
        problem "the compose VM test wrote no results"
    fi
fi

finish
