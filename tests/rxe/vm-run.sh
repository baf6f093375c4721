#!/usr/bin/env bash
# Run one command inside a throw-away qemu VM that has a Soft-RoCE device.
#
# Usage: tests/rxe/vm-run.sh [options] -- CMD [ARGS...]
#
# The VM (Debian 6.1 kernel, qemu TCG: -accel tcg,thread=multi -cpu max; KVM
# does not work on our hosts) sees the host's root filesystem read-only over
# virtio-9p with a RAM overlay on top, so everything looks writable but writes
# vanish at power-off, except under --rw directories.  eth0 gets --ip and the
# rdma_rxe device rxe0 is created on it.  CMD runs as root, in the same working
# directory as on the host, with stdin from /dev/null.
#
# Options:
#   --timeout S      kill the VM after S seconds (default 900)      -> exit 124
#   --mem MB         guest memory (default 2048)
#   --smp N          guest vCPUs (default 2)
#   --rw DIR         make host DIR writable in the guest, at the same path
#                    (repeatable; created if missing; no spaces, commas, colons)
#   --env NAME=VAL   set NAME in CMD's environment (repeatable); --env NAME
#                    passes the host's value.  Nothing else is inherited.
#   --ip CIDR        eth0 address (default 10.0.2.15/24; /24 if no prefix)
#   --mac MAC        eth0 MAC address (default 52:54:00:12:34:56)
#   --netdev SPEC    qemu -netdev for eth0 (default "user"); e.g.
#                    socket,listen=127.0.0.1:PORT / socket,connect=127.0.0.1:PORT
#                    to wire two VMs together (see run-two-vm.sh)
#   --no-rxe         do not create rxe0
#   --docker         also run dockerd in the guest before CMD: loads the
#                    bridge/veth/nf_tables modules and runs
#                    tests/rxe/guest-dockerd.sh (host binaries over 9p; see
#                    there).  Give it --mem 1024 or more (the default is).
#   --log FILE       save the whole console log (boot + output) to FILE
#   --cache DIR      image cache (default $KV_VM_CACHE or /var/tmp/kvstore-rxe-vm);
#                    images are built by build-image.sh when missing or stale
#   --quiet          print only CMD's output (VM problems are still reported)
#   -h, --help       this text
#
# Exit status: CMD's exit status, or
#   124  timeout (the VM was killed)
#   125  bad usage, or qemu-system-x86_64 not installed (no VM was started)
#   250  building the VM image failed
#   251  the VM ended without reporting a status (qemu error, kernel panic)
#   252  guest setup failed: module load, 9p/overlay mount, network,
#        dockerd (--docker)
#   253  the guest could not cd to the working directory
#   254  `rdma link add rxe0` failed or the rxe0 port never became ACTIVE
#   130/143  vm-run.sh was interrupted (SIGINT/SIGTERM); the VM is killed
# (A command that itself exits with 250-254 is indistinguishable; avoid that.)
#
# Environment: KV_VM_CACHE (image cache), KV_VM_ACCEL / KV_VM_CPU override the
# qemu accelerator and CPU model (default tcg,thread=multi / max), KV_VM_QEMU
# the qemu binary (default qemu-system-x86_64; all tests/rxe scripts treat a
# missing one as "no qemu"), TMPDIR (where
# the per-run directory goes; must be visible to the guest, i.e. not under a
# --rw dir), KV_VM_KEEP_RUN=1 keeps that directory (command script, console
# log, status records) for debugging.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

TIMEOUT=900
MEM=2048
SMP=2
RW_DIRS=()
ENVS=()
IPADDR=10.0.2.15/24
MAC=52:54:00:12:34:56
NETDEV=user
NORXE=0
DOCKER=0
LOG=
QUIET=0
CACHE=${KV_VM_CACHE:-/var/tmp/kvstore-rxe-vm}

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
msg() { echo "vm-run: $*" >&2; }
bad_usage() {
    msg "$* (see --help)"
    exit 125
}
need_arg() { (($# >= 2)) || bad_usage "$1 needs an argument"; }

while (($#)); do
    case "$1" in
    --timeout | --mem | --smp | --rw | --env | --ip | --mac | --netdev | --log | --cache)
        need_arg "$@"
        case "$1" in
        --timeout) TIMEOUT=$2 ;;
        --mem) MEM=$2 ;;
        --smp) SMP=$2 ;;
        --rw) RW_DIRS+=("$2") ;;
        --env) ENVS+=("$2") ;;
        --ip) IPADDR=$2 ;;
        --mac) MAC=$2 ;;
        --netdev) NETDEV=$2 ;;
        --log) LOG=$2 ;;
        --cache) CACHE=$2 ;;
        esac
        shift 2
        ;;
    --no-rxe) NORXE=1 && shift ;;
    --docker) DOCKER=1 && shift ;;
    --quiet) QUIET=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    --) shift && break ;;
    -*) bad_usage "unknown option $1" ;;
    *) break ;;
    esac
done
(($#)) || bad_usage "no command given"
[[ $TIMEOUT =~ ^[0-9]+$ && $MEM =~ ^[0-9]+$ && $SMP =~ ^[0-9]+$ ]] ||
    bad_usage "--timeout, --mem and --smp take whole numbers"
[[ $IPADDR == */* ]] || IPADDR=$IPADDR/24
# The NIC is attached to the netdev by its id; add ours unless one was given.
[[ $NETDEV == *id=* ]] || NETDEV=$NETDEV,id=n0
NETID=${NETDEV#*id=}
NETID=${NETID%%,*}

command -v "${KV_VM_QEMU:-qemu-system-x86_64}" >/dev/null ||
    bad_usage "qemu-system-x86_64 not found (install qemu-system-x86: deploy/setup.sh)"

# Paths that go on the kernel command line must be free of separators.
safe_path() { [[ $1 == /* && $1 != *[[:space:],:]* ]]; }

# --- image ---------------------------------------------------------------------
build_out=$("$HERE/build-image.sh" --cache "$CACHE" 2>&1) || {
    echo "$build_out" >&2
    msg "building the VM image failed"
    exit 250
}
((QUIET)) || [[ $build_out == *"up to date"* ]] || echo "$build_out" >&2

# --- per-run directory: command script, console log, status channel ------------
RUN=$(mktemp -d "${TMPDIR:-/tmp}/kvvm.XXXXXX")
safe_path "$RUN" || bad_usage "TMPDIR ($RUN) must be an absolute path without spaces, commas or colons"
cleanup() { rm -rf "$RUN"; }
trap cleanup EXIT
[[ -n ${KV_VM_KEEP_RUN:-} ]] && trap - EXIT

RW_ARG=
FSDEVS=(-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
    -device "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot")
i=0
for d in "${RW_DIRS[@]}"; do
    [[ $d != *[[:space:],:]* ]] || bad_usage "--rw $d: no spaces, commas or colons allowed"
    mkdir -p "$d"
    d=$(cd "$d" && pwd -P)
    safe_path "$d" || bad_usage "--rw $d: no spaces, commas or colons allowed"
    FSDEVS+=(-fsdev "local,id=rw$i,path=$d,security_model=none,multidevs=remap"
        -device "virtio-9p-pci,fsdev=rw$i,mount_tag=rw$i")
    RW_ARG+="${RW_ARG:+,}rw$i:$d"
    i=$((i + 1))
done

# The guest reads this script through the 9p root (the host's /tmp is visible).
{
    echo "# written by tests/rxe/vm-run.sh; runs in the guest under bash"
    for e in "${ENVS[@]}"; do
        if [[ $e == *=* ]]; then
            name=${e%%=*} val=${e#*=}
        else
            name=$e val=${!e-}
        fi
        [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || bad_usage "--env $e: bad variable name"
        printf 'export %s=%q\n' "$name" "$val"
    done
    printf 'cd -- %q || { echo "kvvm: cannot cd to %q"; echo "setup-failed 253 cd" >/dev/ttyS1; exit 253; }\n' "$PWD" "$PWD"
    if ((DOCKER)); then
        echo 'export DOCKER_API_VERSION=${DOCKER_API_VERSION:-1.41}'
        printf '%q || { echo "setup-failed 252 dockerd did not start" >/dev/ttyS1; exit 252; }\n' \
            "$HERE/guest-dockerd.sh"
        echo 'echo "stage dockerd $(cut -d" " -f1 /proc/uptime)" >/dev/ttyS1'
    fi
    echo 'echo "stage ready $(cut -d" " -f1 /proc/uptime)" >/dev/ttyS1'
    echo 'echo "kvvm: ready"'
    printf '%q ' "$@"
    echo
} >"$RUN/cmd.sh"
: >"$RUN/status"

# tsc=reliable clocksource=tsc: under TCG the guest kernel cannot calibrate
# the TSC against the PIT, rejects it and falls back to the HPET, where every
# clock_gettime is a system call plus an emulated device read (2.1 us against
# 0.16 us on the TSC, measured in this VM). Real RDMA hosts read the clock
# from the vDSO, and perftest reads rdtsc directly, so the HPET would charge
# kvstore's timed paths (deadlines, busy-poll bounds, histograms) a cost no
# real machine has. QEMU derives the guest TSC from the host's monotonic clock.
APPEND="console=ttyS0 quiet loglevel=3 panic=-1 oops=panic mitigations=off tsc=reliable clocksource=tsc"
APPEND+=" kvvm.script=$RUN/cmd.sh kvvm.ip=$IPADDR"
[[ -n $RW_ARG ]] && APPEND+=" kvvm.rw=$RW_ARG"
((NORXE)) && APPEND+=" kvvm.norxe=1"
((DOCKER)) && APPEND+=" kvvm.docker=1"

# shellcheck disable=SC2054 # the commas are qemu option syntax
QEMU=("${KV_VM_QEMU:-qemu-system-x86_64}"
    -accel "${KV_VM_ACCEL:-tcg,thread=multi}" -cpu "${KV_VM_CPU:-max}"
    -m "$MEM" -smp "$SMP"
    -nodefaults -no-user-config -display none -no-reboot
    # ttyS0: console (kernel + command output); ttyS1: status records from /init
    -chardev stdio,id=con,signal=off -serial chardev:con
    -chardev "file,id=status,path=$RUN/status" -serial chardev:status
    -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initrd.gz" -append "$APPEND"
    -netdev "$NETDEV" -device "virtio-net-pci,netdev=$NETID,mac=$MAC"
    "${FSDEVS[@]}")

# qemu runs under `timeout` in a background pipeline so that a signal to this
# script can stop it (bash runs traps only between foreground commands).
run_qemu() {
    timeout --foreground -k 10 "$TIMEOUT" "${QEMU[@]}" </dev/null 2>&1 &
    echo $! >"$RUN/qemu.pid"
    local rc=0
    wait $! || rc=$?
    echo "$rc" >"$RUN/qemu.rc"
}
# Strip the tty's \r, keep the full log, drop the kernel's power-off message,
# and in --quiet mode print only what comes after the "kvvm: ready" line.
console_filter() {
    awk -v quiet="$QUIET" -v logf="$RUN/console.log" '
        { sub(/\r+$/, ""); gsub(/\r/, ""); print > logf; fflush(logf) }
        quiet == 1 && !started { if ($0 == "kvvm: ready") started = 1; next }
        /\[ *[0-9]+\.[0-9]+\] reboot: Power down$/ {
            # may follow output that did not end in a newline
            sub(/\[ *[0-9]+\.[0-9]+\] reboot: Power down$/, "")
            if ($0 == "") next
        }
        { print; fflush() }'
}

stop_vm() {
    local sig=$1
    [[ -f $RUN/qemu.pid ]] && kill -TERM "$(cat "$RUN/qemu.pid")" 2>/dev/null
    wait 2>/dev/null || true
    msg "interrupted (SIG$sig); VM stopped"
    [[ $sig == INT ]] && exit 130
    exit 143
}
trap 'stop_vm INT' INT
trap 'stop_vm TERM' TERM HUP

((QUIET)) || msg "booting VM (ip ${IPADDR}, timeout ${TIMEOUT}s): $*"
t0=$(date +%s%N)
run_qemu | console_filter &
wait $! || true
t1=$(date +%s%N)
[[ -n $LOG ]] && cp "$RUN/console.log" "$LOG"

# --- outcome -------------------------------------------------------------------------
tr -d '\r' <"$RUN/status" >"$RUN/status.txt"
qemu_rc=$(cat "$RUN/qemu.rc" 2>/dev/null || echo 1)
setup_err=$(grep -m1 '^setup-failed ' "$RUN/status.txt" || true)
exit_line=$(grep '^exit ' "$RUN/status.txt" | tail -1 || true)
ready_at=$(awk '$1 == "stage" && $2 == "ready" {print $3}' "$RUN/status.txt")
if [[ -n $setup_err ]]; then
    set -- $setup_err
    rc=$2
    shift 2
    msg "VM setup failed: $* (exit $rc)"
elif [[ -n $exit_line ]]; then
    rc=${exit_line#exit }
elif [[ $qemu_rc == 124 || $qemu_rc == 137 ]]; then
    rc=124
    msg "TIMEOUT: VM killed after ${TIMEOUT}s"
else
    rc=251
    msg "VM ended without a status (qemu exit $qemu_rc)"
fi
if ((rc >= 250 && rc <= 254)) || [[ -z $ready_at ]]; then
    if ((QUIET)) || [[ -z $ready_at ]]; then
        msg "console tail:"
        tail -n 40 "$RUN/console.log" | sed 's/^/  | /' >&2
    fi
fi
wall_ms=$(((t1 - t0) / 1000000))
((QUIET)) || msg "exit=$rc wall=$((wall_ms / 1000)).$((wall_ms % 1000 / 100))s guest-ready-at=${ready_at:-never}s"
exit "$rc"
