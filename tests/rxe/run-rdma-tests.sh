#!/usr/bin/env bash
# Run gtest binaries that need an RDMA device, on the host or in a Soft-RoCE VM.
#
# Usage: tests/rxe/run-rdma-tests.sh [options] TEST_BINARY...
#   e.g. tests/rxe/run-rdma-tests.sh "$PWD/bazel-bin/tests/rdma_server_test"
#
# Where the tests run:
#   * host: when `ibv_devinfo` shows a device with an ACTIVE port, the binaries
#     run directly on the host (KV_RDMA_DEVICE / KV_RDMA_IP default to that
#     device and the IPv4 address of its network interface);
#   * vm: otherwise ONE qemu VM (tests/rxe/vm-run.sh, ~6-10 s to boot) runs all
#     binaries in turn with KV_RDMA_DEVICE=rxe0 KV_RDMA_IP=10.0.2.15 (the eth0
#     address: rdma over 127.0.0.1 does not work);
#   * --two-vm: each binary runs twice, in two VMs wired by a qemu socket
#     network (tests/rxe/run-two-vm.sh): KV_RDMA_ROLE=server in VM A
#     (10.0.2.15), KV_RDMA_ROLE=client in VM B (10.0.2.16), KV_RDMA_PEER_IP is
#     the other VM.  The binary's result is the client's (and the server's XML
#     failures, if it wrote XML before it was stopped).
#   * no device and no qemu: a LOUD skip message, exit 77.
#
# Every binary gets: TEST_TMPDIR (fresh, writable), TEST_SRCDIR and RUNFILES_DIR
# (BINARY.runfiles), TEST_WORKSPACE=kvstore, TEST_UNDECLARED_OUTPUTS_DIR,
# KV_RDMA_DEVICE, KV_RDMA_IP, and --gtest_output=xml:RESULTS/NAME.xml; it runs
# in BINARY.runfiles/kvstore when that exists (as under `bazel test`).  NAME is
# the binary's file name (made unique with -2, -3... when names repeat).
# GTEST_* and KV_* variables of the caller are passed on to the tests.
#
# Options:
#   --results DIR      XML, logs and per-binary results (default: $KV_RDMA_RESULTS,
#                      else <repo>/.vm/rdma-results); old results there are removed
#   --mode M           auto (default, or $KV_RDMA_MODE), host, or vm
#   --two-vm           run each binary as server + client in two VMs (see above)
#   --test-timeout S   per binary (default 300)               -> counted as failed
#   --timeout S        whole VM (default 120 + the sum of the per-binary timeouts)
#   --mem MB, --smp N  VM size (vm-run.sh defaults: 2048 MB, 2 vCPUs)
#   --env NAME=VAL     extra environment for the tests (repeatable)
#   --log-lines N      print at most the last N lines of each test's output (300)
#   -h, --help         this text
#
# Output: each test's output (all of it, or its last --log-lines lines), a
# "PASSED name" / "FAILED name" line per binary and a summary.
# RESULTS/NAME.xml is the gtest XML; when a binary wrote none (crash, timeout,
# not gtest) or exited non-zero without a recorded failure, a one-testcase XML
# is synthesised so that XML counting (tests/rxe/xml-count.sh) sees the result.
# Also RESULTS/NAME.log (output), NAME.result, vm-console.log.
#
# Exit status: 0 all passed; 1 a test failed; 2 bad usage; 77 skipped (no RDMA
# device and qemu not installed); 124, 125, 250-254 the VM failed (see
# vm-run.sh --help) before all binaries had run.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
REPO=$(cd "$HERE/../.." && pwd)

RESULTS=${KV_RDMA_RESULTS:-$REPO/.vm/rdma-results}
MODE=${KV_RDMA_MODE:-auto}
TWO_VM=0
TEST_TIMEOUT=300
VM_TIMEOUT=
VM_OPTS=()
EXTRA_ENV=()
LOG_LINES=300
RUN_HERE=0 # internal: run the binaries in this machine (inside the VM, or host mode)
ROLE=      # internal: server|client in --two-vm mode

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
say() { echo "run-rdma-tests: $*"; }
bad_usage() {
    say "$* (see --help)" >&2
    exit 2
}

while (($#)); do
    case "$1" in
    --results | --mode | --test-timeout | --timeout | --mem | --smp | --env | --log-lines | --role)
        (($# >= 2)) || bad_usage "$1 needs an argument"
        case "$1" in
        --results) RESULTS=$2 ;;
        --mode) MODE=$2 ;;
        --test-timeout) TEST_TIMEOUT=$2 ;;
        --timeout) VM_TIMEOUT=$2 ;;
        --mem | --smp) VM_OPTS+=("$1" "$2") ;;
        --env) EXTRA_ENV+=("$2") ;;
        --log-lines) LOG_LINES=$2 ;;
        --role) ROLE=$2 ;;
        esac
        shift 2
        ;;
    --two-vm) TWO_VM=1 && shift ;;
    --run-here) RUN_HERE=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    --) shift && break ;;
    -*) bad_usage "unknown option $1" ;;
    *) break ;;
    esac
done
[[ $MODE == auto || $MODE == host || $MODE == vm ]] || bad_usage "--mode must be auto, host or vm"
[[ $TEST_TIMEOUT =~ ^[0-9]+$ && $LOG_LINES =~ ^[0-9]+$ ]] || bad_usage "--test-timeout/--log-lines take numbers"
for e in "${EXTRA_ENV[@]}"; do
    [[ $e == [A-Za-z_]*=* ]] || bad_usage "--env $e: expected NAME=VALUE"
done

now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }
xml_escape() {
    local s=$1
    s=${s//&/&amp;}
    s=${s//</&lt;}
    s=${s//>/&gt;}
    s=${s//\"/&quot;}
    printf '%s' "$s"
}
# synth_xml FILE NAME MESSAGE: a one-testcase XML, failed if MESSAGE is non-empty
synth_xml() {
    local file=$1 name msg
    name=$(xml_escape "$2")
    msg=$(xml_escape "$3")
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites><testsuite name=\"$name\" tests=\"1\" failures=\"$([[ -n $msg ]] && echo 1 || echo 0)\">"
        if [[ -n $msg ]]; then
            echo "<testcase name=\"$name\" classname=\"rdma-harness\" status=\"run\"><failure message=\"$msg\"></failure></testcase>"
        else
            echo "<testcase name=\"$name\" classname=\"rdma-harness\" status=\"run\"></testcase>"
        fi
        echo '</testsuite></testsuites>'
    } >"$file"
}

# ---------------------------------------------------------------------------
# Internal mode: run NAME=BINARY pairs right here (inside the VM or on a host
# with a device).  Writes RESULTS/NAME{.xml,.log,.result}.
# ---------------------------------------------------------------------------
run_here() {
    local total=$# i=0 pair name bin suffix="" tmp rc t0 ms lines xml log
    [[ -n $ROLE && $ROLE == server ]] && suffix=.server
    mkdir -p "$RESULTS"
    for pair in "$@"; do
        i=$((i + 1))
        name=${pair%%=*}
        bin=${pair#*=}
        xml=$RESULTS/$name$suffix.xml
        log=$RESULTS/$name$suffix.log
        echo "==> [$i/$total] $name${ROLE:+ ($ROLE)}"
        tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvrdma-$name.XXXXXX")
        mkdir -p "$RESULTS/$name$suffix.outputs"
        local rundir=$PWD
        [[ -d $bin.runfiles/kvstore ]] && rundir=$bin.runfiles/kvstore
        t0=$(now_ms)
        rc=0
        (
            cd "$rundir"
            export TEST_TMPDIR=$tmp TEST_WORKSPACE=kvstore
            export TEST_SRCDIR=$bin.runfiles RUNFILES_DIR=$bin.runfiles
            export TEST_UNDECLARED_OUTPUTS_DIR=$RESULTS/$name$suffix.outputs
            export XML_OUTPUT_FILE=$xml
            for e in "${EXTRA_ENV[@]}"; do export "${e?}"; done
            # No exec: if the test dies of a signal, this subshell reports it
            # into the log (instead of our stdout) and exits 128+signal.
            timeout -k 10 "$TEST_TIMEOUT" "$bin" "--gtest_output=xml:$xml" </dev/null
        ) >"$log" 2>&1 || rc=$?
        ms=$(($(now_ms) - t0))
        rm -rf "$tmp"
        # the test's output: all of it, or its tail
        lines=$(wc -l <"$log")
        if ((lines > LOG_LINES)); then
            echo "... ($((lines - LOG_LINES)) earlier lines in $log)"
            tail -n "$LOG_LINES" "$log"
        else
            cat "$log"
        fi
        local why=""
        if ((rc == 124 || rc == 137)); then
            why="timed out after ${TEST_TIMEOUT}s"
        elif ((rc > 128)); then
            why="killed by signal $((rc - 128))"
        elif ((rc != 0)); then
            why="exit status $rc"
        fi
        # make sure the XML tells the same story as the exit status
        if [[ ! -s $xml ]]; then
            synth_xml "$xml" "$name$suffix" "${why:+$why (no gtest XML written)}"
        elif [[ -n $why ]] && ! grep -q '<failure' "$xml"; then
            synth_xml "$RESULTS/$name$suffix.exit.xml" "$name$suffix.exit_status" "$why"
        fi
        echo "rc=$rc ms=$ms why=$why" >"$RESULTS/$name$suffix.result"
        if ((rc == 0)); then
            echo "PASSED $name${ROLE:+ ($ROLE)} ($(secs $ms)s)"
        else
            echo "FAILED $name${ROLE:+ ($ROLE)}: $why ($(secs $ms)s); log: $log"
        fi
    done
}

if ((RUN_HERE)); then
    run_here "$@"
    exit 0 # per-binary results are in RESULTS/*.result
fi

# ---------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------
(($#)) || bad_usage "no test binaries given"

# NAME=BINARY pairs; names are file names made unique
declare -A SEEN=()
PAIRS=()
NAMES=()
BINS=()
for b in "$@"; do
    [[ $b == /* ]] || b=$PWD/$b
    [[ -f $b && -x $b ]] || bad_usage "not an executable file: $b"
    n=$(basename "$b")
    [[ $n =~ ^[A-Za-z0-9_.+-]+$ ]] || bad_usage "unsupported characters in binary name: $n"
    base=$n k=1
    while [[ -n ${SEEN[$n]:-} ]]; do
        k=$((k + 1))
        n=$base-$k
    done
    SEEN[$n]=1
    PAIRS+=("$n=$b")
    NAMES+=("$n")
    BINS+=("$b")
done

mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd -P)
# Remove what an earlier run left (only our own kinds of files).
(
    shopt -s nullglob
    cd "$RESULTS"
    rm -rf -- *.xml *.log *.result *.outputs
)

# An active RDMA device on the host?  Prints "DEVICE" if so.
host_device() {
    command -v ibv_devinfo >/dev/null || return 1
    local dev
    for dev in $(ibv_devinfo -l 2>/dev/null | awk 'NR > 1 {print $1}'); do
        if ibv_devinfo -d "$dev" 2>/dev/null | grep -q 'PORT_ACTIVE'; then
            echo "$dev"
            return 0
        fi
    done
    return 1
}
# IPv4 address of the network interface behind DEVICE (RoCE), if any
device_ip() {
    local nd
    nd=$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/ndevs/0" 2>/dev/null) || return 0
    ip -4 -o addr show dev "$nd" 2>/dev/null | awk '{sub(/\/.*/, "", $4); print $4; exit}'
}

if [[ $MODE == auto ]]; then
    if ((!TWO_VM)) && dev=$(host_device); then MODE=host; else MODE=vm; fi
fi
if [[ $MODE == vm ]] && ! command -v "${KV_VM_QEMU:-qemu-system-x86_64}" >/dev/null; then
    cat <<EOF
###########################################################################
###  SKIPPED: RDMA TESTS NOT RUN                                        ###
###  No active RDMA device on this host, and qemu-system-x86_64 is not  ###
###  installed, so the Soft-RoCE VM cannot run either.                  ###
###  Fix: deploy/setup.sh (installs qemu-system-x86 busybox-static).    ###
###########################################################################
EOF
    printf '###  not run: %s\n' "${NAMES[@]}"
    exit 77
fi

# Environment handed to the tests: GTEST_* and KV_* of the caller, then ours.
pass_env() {
    local v
    while IFS= read -r v; do
        case "$v" in
        # harness settings, and what the harness sets itself per VM
        KV_VM_* | KV_RDMA_RESULTS | KV_RDMA_MODE) continue ;;
        KV_RDMA_DEVICE | KV_RDMA_IP | KV_RDMA_PEER_IP | KV_RDMA_ROLE) continue ;;
        esac
        printf '%s\n' "$v"
    done < <(compgen -e | grep -E '^(GTEST_|KV_)' || true)
}

summary() {
    local vm_rc=$1 n name res rc ms why failed=0 notrun=0 counts
    echo
    local how="$MODE mode"
    ((TWO_VM)) && how="two-VM mode"
    echo "==> RDMA test results ($how; $RESULTS)"
    for name in "${NAMES[@]}"; do
        res=$RESULTS/$name.result
        if [[ ! -f $res ]]; then
            why="not run: the VM failed (exit $vm_rc)"
            synth_xml "$RESULTS/$name.xml" "$name" "$why"
            echo "FAILED $name: $why"
            failed=$((failed + 1)) notrun=$((notrun + 1))
            continue
        fi
        rc=$(sed -n 's/^rc=\([0-9]*\).*/\1/p' "$res")
        ms=$(sed -n 's/.* ms=\([0-9]*\).*/\1/p' "$res")
        why=$(sed -n 's/.* why=//p' "$res")
        # two-VM: a server that recorded failures fails the binary too
        local xmls=("$RESULTS/$name.xml") x
        for x in "$RESULTS/$name.exit.xml" "$RESULTS/$name.server.xml" "$RESULTS/$name.server.exit.xml"; do
            [[ -f $x ]] && xmls+=("$x")
        done
        counts=$("$HERE/xml-count.sh" "${xmls[@]}")
        if [[ $rc == 0 && $counts == *" failed=0 "* ]]; then
            echo "PASSED $name ($(secs "$ms")s; $counts)"
        else
            echo "FAILED $name (${why:-test failures}; $(secs "$ms")s; $counts)"
            failed=$((failed + 1))
        fi
    done
    echo "==> $((${#NAMES[@]} - failed)) of ${#NAMES[@]} test binaries passed"
    if ((notrun)); then return "$vm_rc"; fi
    ((failed == 0)) || return 1
    return 0
}

start_ms=$(now_ms)
case "$MODE" in
host)
    dev=${dev:-$(host_device || true)}
    [[ -n $dev ]] || {
        say "--mode host: no RDMA device with an ACTIVE port" >&2
        exit 2
    }
    export KV_RDMA_DEVICE=${KV_RDMA_DEVICE:-$dev}
    ip4=$(device_ip "$KV_RDMA_DEVICE")
    export KV_RDMA_IP=${KV_RDMA_IP:-$ip4}
    say "host mode: device $KV_RDMA_DEVICE, KV_RDMA_IP=${KV_RDMA_IP:-unset}"
    run_here "${PAIRS[@]}"
    rc=0
    summary 0 || rc=$?
    ;;
vm)
    if ((TWO_VM)); then
        say "two-VM mode: ${#PAIRS[@]} binaries, one VM pair each"
        vm_rc=0
        for pair in "${PAIRS[@]}"; do
            env_args=()
            while IFS= read -r v; do env_args+=(--env "$v"); done < <(pass_env)
            for e in "${EXTRA_ENV[@]}"; do env_args+=(--env "$e"); done
            inner=(--run-here --results "$RESULTS" --test-timeout "$TEST_TIMEOUT" --log-lines "$LOG_LINES")
            for e in "${EXTRA_ENV[@]}"; do inner+=(--env "$e"); done
            srv=$(printf '%q ' "$SELF" "${inner[@]}" --role server -- "$pair")
            cli=$(printf '%q ' "$SELF" "${inner[@]}" --role client -- "$pair")
            r=0
            "$HERE/run-two-vm.sh" "${VM_OPTS[@]}" --rw "$RESULTS" "${env_args[@]}" \
                --timeout "${VM_TIMEOUT:-$((TEST_TIMEOUT + 120))}" \
                --server-log "$RESULTS/${pair%%=*}.server-console.log" \
                --client-log "$RESULTS/${pair%%=*}.client-console.log" \
                --server-cmd "$srv" --client-cmd "$cli" || r=$?
            # 124/125/250-254 from the client VM mean the harness, not the test
            if [[ $r == 124 || $r == 125 ]] || ((r >= 250 && r <= 254)); then
                [[ -f $RESULTS/${pair%%=*}.result ]] || vm_rc=$r
            fi
        done
        rc=0
        summary "$vm_rc" || rc=$?
    else
        total=${VM_TIMEOUT:-$((120 + ${#PAIRS[@]} * (TEST_TIMEOUT + 15)))}
        env_args=(--env KV_RDMA_DEVICE=rxe0 --env KV_RDMA_IP=10.0.2.15)
        while IFS= read -r v; do env_args+=(--env "$v"); done < <(pass_env)
        say "vm mode: booting one VM for ${#PAIRS[@]} binaries (timeout ${total}s)"
        vm_rc=0
        inner=(--run-here --results "$RESULTS" --test-timeout "$TEST_TIMEOUT" --log-lines "$LOG_LINES")
        for e in "${EXTRA_ENV[@]}"; do inner+=(--env "$e"); done
        "$HERE/vm-run.sh" "${VM_OPTS[@]}" --timeout "$total" --rw "$RESULTS" \
            --log "$RESULTS/vm-console.log" "${env_args[@]}" \
            -- "$SELF" "${inner[@]}" -- "${PAIRS[@]}" || vm_rc=$?
        rc=0
        summary "$vm_rc" || rc=$?
    fi
    ;;
esac
say "done in $(secs $(($(now_ms) - start_ms)))s, exit $rc"
exit "$rc"
