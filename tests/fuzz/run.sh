#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang-14, ASan + UBSan) and
# fuzzes each one for a while, starting from its seed corpus.
#
# Usage: tests/fuzz/run.sh [--seconds N] [--xml FILE] [TARGET...]
#
#   --seconds N   fuzz each target for N seconds (-max_total_time; default 60)
#   --xml FILE    also write the results as JUnit XML (one test case per
#                 target), for deploy/test.sh to count
#   TARGET        e.g. resp_request (default: every *_fuzzer in BUILD.bazel)
#   -h, --help    this text
#
# For each target it prints the executions, exec/s, and the coverage libFuzzer
# reached (cov: edges, ft: features) at the end. Inputs that add coverage go
# to a scratch corpus, not into the tree. On a crash, leak, timeout or OOM the
# reproducer is copied into tests/fuzz/corpus/<target>/ (so the plain replay
# test keeps failing until the bug is fixed, then guards it) and the command
# that reproduces it is printed.
#
# The build uses its own Bazel output base (KV_FUZZ_OUTPUT_BASE, default
# ~/.cache/bazel-kvstore-fuzz) because the toolchain follows CC=clang-14: the
# gcc build's outputs stay untouched. No convenience symlinks are made.
#
# Exit status: 0 when every target ran clean; 1 when a target crashed or
# could not be built or run; 2 on bad usage.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"

SECONDS_EACH=60
XML=""
TARGETS=()
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case "$1" in
    --seconds) SECONDS_EACH=${2:?--seconds needs a number}; shift ;;
    --seconds=*) SECONDS_EACH=${1#*=} ;;
    --xml) XML=${2:?--xml needs a file}; shift ;;
    -h | --help) usage && exit 0 ;;
    -*) echo "fuzz: unknown argument $1 (see --help)" >&2 && exit 2 ;;
    *) TARGETS+=("${1%_fuzzer}") ;;
    esac
    shift
done
[[ $SECONDS_EACH =~ ^[0-9]+$ && $SECONDS_EACH -gt 0 ]] || {
    echo "fuzz: --seconds needs a positive whole number" >&2
    exit 2
}
if ((${#TARGETS[@]} == 0)); then
    mapfile -t TARGETS < <(sed -n 's/^ *name = "\(.*\)_fuzzer",$/\1/p' tests/fuzz/BUILD.bazel)
fi

BAZEL=${BAZEL:-bazel}
OUTPUT_BASE=${KV_FUZZ_OUTPUT_BASE:-$HOME/.cache/bazel-kvstore-fuzz}
export CC=clang-14
command -v clang-14 >/dev/null || {
    echo "fuzz: clang-14 not found (deploy/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2
    exit 1
}
fz_bazel() { "$BAZEL" --output_base="$OUTPUT_BASE" "$@"; }

labels=()
for t in "${TARGETS[@]}"; do labels+=("//tests/fuzz:${t}_fuzzer"); done
echo "fuzz: building ${#labels[@]} target(s) with clang-14 (--config=fuzz)"
if ! fz_bazel build --config=fuzz --symlink_prefix=/ "${labels[@]}"; then
    echo "fuzz: build failed" >&2
    exit 1
fi
BIN=$(fz_bazel info --config=fuzz bazel-bin 2>/dev/null)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvfuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# A UBSan report must stop the run (the code is built with
# -fno-sanitize-recover); symbolize with llvm-symbolizer if there is one.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

CASES=() # "name<TAB>seconds<TAB>failure text or empty"
failed=0
for t in "${TARGETS[@]}"; do
    seeds=tests/fuzz/corpus/$t
    bin=$BIN/tests/fuzz/${t}_fuzzer
    mkdir -p "$WORK/$t/corpus" "$WORK/$t/artifacts"
    log=$WORK/$t/log
    t0=$(date +%s)
    rc=0
    # The scratch corpus first: libFuzzer adds new inputs to the first directory.
    "$bin" -max_total_time="$SECONDS_EACH" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -max_len=4096 -artifact_prefix="$WORK/$t/artifacts/" \
        "$WORK/$t/corpus" "$seeds" >"$log" 2>&1 || rc=$?
    dt=$(($(date +%s) - t0))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")
    printf 'fuzz: %-16s %3ss  executions=%s exec/s=%s cov=%s ft=%s corpus=%s' \
        "$t" "$dt" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
    shopt -s nullglob
    artifacts=("$WORK/$t/artifacts"/*)
    shopt -u nullglob
    if ((rc == 0 && ${#artifacts[@]} == 0)); then
        echo "  ok"
        CASES+=("$t"$'\t'"$dt"$'\t')
        continue
    fi
    failed=$((failed + 1))
    echo "  FAILED (exit $rc)"
    grep -E 'ERROR: |runtime error|fuzz check failed|SUMMARY' "$log" | head -n 5 | sed 's/^/    /'
    what="exit $rc"
    for a in "${artifacts[@]}"; do
        keep=$seeds/$(basename "$a")
        cp "$a" "$keep"
        echo "    reproducer kept as $keep"
        echo "    reproduce: bazel test //tests/fuzz:${t}_fuzzer (or $bin $keep)"
        what="$what; reproducer $keep"
    done
    ((${#artifacts[@]})) || tail -n 20 "$log" | sed 's/^/    /'
    CASES+=("$t"$'\t'"$dt"$'\t'"$what")
done

if [[ -n $XML ]]; then
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites><testsuite name=\"fuzz\" tests=\"${#CASES[@]}\" failures=\"$failed\">"
        for c in "${CASES[@]}"; do
            IFS=$'\t' read -r name dt what <<<"$c"
            if [[ -z $what ]]; then
                echo "<testcase classname=\"fuzz\" name=\"${name}_fuzzer\" time=\"$dt\"/>"
            else
                what=${what//&/&amp;}
                what=${what//</&lt;}
                what=${what//\"/&quot;}
                echo "<testcase classname=\"fuzz\" name=\"${name}_fuzzer\" time=\"$dt\"><failure message=\"$what\"/></testcase>"
            fi
        done
        echo '</testsuite></testsuites>'
    } >"$XML"
fi
echo "fuzz: ${#TARGETS[@]} target(s), $failed failed"
((failed == 0))
