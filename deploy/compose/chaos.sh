#!/usr/bin/env bash
# Chaos for the running compose cluster, judged by the cluster tests'
# history checker: a load (chaos_load, the workload of tests/cluster in the
# client container) runs while kvserver containers are killed, paused and
# restarted; then every key is read and the whole history is checked.
# deploy/cluster.sh chaos runs this.
#
# Usage: deploy/compose/chaos.sh [--rounds=LIST] [--transport=MODE]
#                                [--seed=N] [--history=FILE]
#
#   --rounds=LIST     faults in order, comma-separated (default
#                     kill,pause,restart):
#                       kill     kill -9 of the kvserver process that leads
#                                shard 0 (a crash: docker's restart policy
#                                brings the container back)
#                       pause    docker pause (SIGSTOP-like freezer) of the
#                                primary of shard 1 until the cluster has
#                                replaced it, then docker unpause: the node
#                                finds its lease gone and registers again,
#                                keeping its memory (it rejoins as syncing)
#                       restart  docker restart of the primary of shard 2
#                                (SIGTERM, a clean stop, then a start)
#                     Each round waits for a new primary, then for every
#                     shard to be back in sync, before the next.
#   --transport=MODE  the load's transport: auto (default), rdma, tcp; with
#                     rdma or tcp, every operation must have used it
#   --seed=N          the workload's seed (default: random, printed)
#   --history=FILE    copy the history (JSON lines) here
#
# Prints, per fault, the time to the first acknowledged write on the keys
# the victim led (chaos_load's figure, from the fault's instant) and the
# time until the map named a new primary; then the checker's verdict.
# Needs chaos_load in the client image (bazel build
# //tests/cluster:chaos_load, then deploy/cluster.sh up rebuilds the image).
# When check_history has been built (bazel build
# //tests/jepsen:check_history; KV_CHECK_HISTORY names another binary), the
# same history is also checked for per-key linearizability on this host;
# without it that check is skipped, and the script says so.
#
# Over TLS with the client container's certificate unless the cluster runs
# the plaintext overlay (KV_TLS=off in deploy/cluster.sh up).
#
# Environment: as deploy/cluster.sh (KV_COMPOSE_PROJECT, KV_COMPOSE_STATE);
# KV_STATUS_TIMEOUT (kvctl cluster status, default 5s), KV_OP_TIMEOUT
# (chaos_load --op_timeout), KV_CHAOS_SETTLE (extra seconds the load goes on
# after each round has recovered, default 0).
#
# Exit status: 0 no violation and every fault recovered from; 1 otherwise;
# 2 bad usage.
set -euo pipefail

PROJECT=${KV_COMPOSE_PROJECT:-kvstore}
STATE=${KV_COMPOSE_STATE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/.state}
# TLS unless deploy/cluster.sh started the plaintext overlay (KV_TLS=off):
# kvctl and chaos_load then present the client container's certificate.
TLS=(--tls_ca=/run/tls/ca.pem --tls_cert=/run/tls/cert.pem --tls_key=/run/tls/key.pem)
[[ -f $STATE/plaintext ]] && TLS=()
export DOCKER_API_VERSION=${DOCKER_API_VERSION:-1.41}
ROUNDS=kill,pause,restart
TRANSPORT=auto
SEED=0
HISTORY=""
SEEDS=kvserver1:7300,kvserver2:7300,kvserver3:7300

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
say() { echo "chaos: $*"; }
die() {
    echo "chaos: $*" >&2
    exit 1
}
for a; do
    case $a in
    --rounds=*) ROUNDS=${a#*=} ;;
    --transport=auto | --transport=rdma | --transport=tcp) TRANSPORT=${a#*=} ;;
    --seed=*) SEED=${a#*=} ;;
    --history=*) HISTORY=${a#*=} ;;
    -h | --help) usage && exit 0 ;;
    *) echo "chaos: unknown argument $a (see --help)" >&2 && exit 2 ;;
    esac
done
[[ $SEED =~ ^[0-9]+$ ]] || {
    echo "chaos: --seed takes a number" >&2
    exit 2
}

# container SERVICE: the id of the project's container of SERVICE.
container() {
    docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" \
        --filter "label=com.docker.compose.service=$1" | head -n 1
}
CLIENT=$(container client)
[[ -n $CLIENT ]] || die "no client container of project $PROJECT (deploy/cluster.sh up)"
docker exec "$CLIENT" test -x /usr/local/bin/chaos_load ||
    die "the client image has no chaos_load: bazel build //tests/cluster:chaos_load, then deploy/cluster.sh up"

status_json() { docker exec "$CLIENT" kvctl --server="$1" "${TLS[@]}" --timeout="${KV_STATUS_TIMEOUT:-5s}" --json cluster status 2>/dev/null; }
# map_query PY: run PY on the map (as m) from the first node that answers.
map_query() {
    local s out
    for s in ${SEEDS//,/ }; do
        out=$(status_json "$s") || continue
        python3 -c "import json,sys; m=json.loads(sys.stdin.read()); $1" <<<"$out" 2>/dev/null && return 0
    done
    return 1
}
primary_of() { map_query "print([s for s in m['shards'] if s['shard_id']==$1][0]['primary'] or '')"; }
in_sync() {
    map_query 'r=m["replication_factor"]; sys.exit(0 if m["shards"] and all(s["up"] and len(s["backups"])+1==r and not s["syncing"] for s in m["shards"]) else 1)'
}
wait_in_sync() {
    local t0=$SECONDS
    until in_sync; do
        ((SECONDS - t0 < $1)) || return 1
        sleep 1
    done
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvchaos.XXXXXX")
LOAD_PID=""
cleanup() {
    [[ -z $LOAD_PID ]] || kill "$LOAD_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
mkfifo "$WORK/cmd"
OUT=$WORK/load.out

# Keys of their own: the history check takes them to be absent at the start,
# and an earlier run (a kill round, then a chaos run) leaves its keys behind.
KEYS=chaos-$(date +%s%N)-
# chaos_load reads its commands from the fifo; fd 7 keeps it open.
EXPECT=()
[[ $TRANSPORT == auto ]] || EXPECT=(--expect_transport="$TRANSPORT")
docker exec -i "$CLIENT" chaos_load --servers=$SEEDS "${TLS[@]}" --transport="$TRANSPORT" "${EXPECT[@]}" \
    ${KV_OP_TIMEOUT:+--op_timeout="$KV_OP_TIMEOUT"} --seed="$SEED" --key_prefix="$KEYS" --history=/tmp/chaos-history.jsonl <"$WORK/cmd" >"$OUT" 2>&1 &
LOAD_PID=$!
exec 7>"$WORK/cmd"
# wait_line TEXT SECONDS: until chaos_load has printed a line containing TEXT.
wait_line() {
    local t0=$SECONDS
    until grep -qF -- "$1" "$OUT"; do
        kill -0 "$LOAD_PID" 2>/dev/null || return 1
        ((SECONDS - t0 < $2)) || return 1
        sleep 0.2
    done
}
say "load: chaos_load in the client container (transport $TRANSPORT)"
wait_line "load running" 180 || {
    cat "$OUT" >&2
    die "the load did not start"
}
grep -m1 'seed' "$OUT"

now_ns() { date +%s%N; }
# fault KIND SHARD: one round.
fault() {
    local kind=$1 shard=$2 victim svc cid t new t_new restarter=""
    victim=$(primary_of "$shard") || die "no map from any node"
    [[ $victim =~ ^n[0-9]+$ ]] || die "shard $shard has no primary"
    svc=kvserver${victim#n}
    cid=$(container "$svc")
    echo "prepare $victim" >&7
    wait_line "prepared $victim" 30 || die "chaos_load did not answer prepare"
    # The victim's pid first: `docker inspect` takes a second or more on an
    # emulated CPU, and the fault's instant must be the kill's, not before.
    local pid
    pid=$(docker inspect -f '{{.State.Pid}}' "$cid") || die "docker inspect $svc failed"
    t=$(now_ns)
    case $kind in
    # After the signal: spawning `date` takes tens of ms under TCG, and a
    # write the victim acknowledged in that gap would count as the recovery.
    kill) kill -9 "$pid" && t=$(now_ns) ;;
    # The container is frozen only once `docker pause` returns (seconds
    # under TCG): the fault's instant is then, or writes acknowledged by the
    # victim before it froze would count as the recovery.
    pause) docker pause "$cid" >/dev/null && t=$(now_ns) ;;
    # From the command: a restart stops the node gracefully (SIGTERM), and
    # writes it acknowledges while it stops are real ones.
    restart)
        docker restart -t 10 "$cid" >/dev/null &
        restarter=$!
        ;;
    esac
    echo "fault $kind-$victim $t" >&7
    say "$kind: $svc (primary of shard $shard)"
    local t0=$SECONDS
    while :; do
        new=$(primary_of "$shard" || true)
        [[ -n $new && $new != "$victim" ]] && break
        if ((SECONDS - t0 > 120)); then
            [[ $kind == pause ]] && docker unpause "$cid" >/dev/null 2>&1
            die "$kind: shard $shard has no new primary after 120 s"
        fi
        sleep 0.5
    done
    t_new=$(now_ns)
    say "$kind: the map names $new primary of shard $shard $(((t_new - t) / 1000000)) ms after the fault"
    if [[ $kind == pause ]]; then
        docker unpause "$cid" >/dev/null
        say "pause: $svc unpaused"
    fi
    [[ -z $restarter ]] || wait "$restarter" || die "restart: docker restart $svc failed"
    wait_in_sync 300 || die "$kind: the cluster was not back in sync within 300 s"
    say "$kind: $svc back, every shard in sync after $((SECONDS - t0)) s"
    # The clients (slow to notice a new map on an emulated CPU) must write
    # the fault's keys again before `stop`: chaos_load fails a fault after
    # which they never did. Wait for that, not for a fixed time.
    echo "await $kind-$victim 300" >&7
    wait_line "recovered $kind-$victim" 330 || die "$kind: chaos_load did not answer await"
    grep -qF "not recovered $kind-$victim" "$OUT" &&
        die "$kind: no write on $victim's keys acknowledged within 300 s of the fault"
    say "$kind: writes on $victim's keys acknowledged again"
    if [[ ${KV_CHAOS_SETTLE:-0} -gt 0 ]]; then
        say "$kind: the load runs ${KV_CHAOS_SETTLE} s more (KV_CHAOS_SETTLE)"
        sleep "$KV_CHAOS_SETTLE"
    fi
}

shard=0
for r in ${ROUNDS//,/ }; do
    case $r in
    kill | pause | restart) fault "$r" "$shard" ;;
    *) die "unknown round $r (kill, pause, restart)" ;;
    esac
    shard=$(((shard + 1) % 3))
done

echo stop >&7
exec 7>&-
rc=0
wait "$LOAD_PID" || rc=$?
LOAD_PID=""
sed -n '/fault .*first acknowledged\|FAIL\|operations,\|history:\|violation\|PASS/p' "$OUT"
if [[ -n $HISTORY ]]; then
    docker cp "$CLIENT:/tmp/chaos-history.jsonl" "$HISTORY" && say "history in $HISTORY"
fi
# The linearizability checker of tests/jepsen, on this host, over the same
# history (it is in the format chaos_load writes).
CHECKER=${KV_CHECK_HISTORY:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bazel-bin/tests/jepsen/check_history}
lin_rc=0 lin_done=""
if [[ ! -x $CHECKER ]]; then
    say "linearizability check skipped: no $CHECKER (bazel build //tests/jepsen:check_history)"
elif ! docker cp "$CLIENT:/tmp/chaos-history.jsonl" "$WORK/history.jsonl" 2>/dev/null; then
    say "linearizability check skipped: chaos_load wrote no history"
else
    "$CHECKER" --require_final_reads "$WORK/history.jsonl" >"$WORK/check.out" 2>&1 || lin_rc=$?
    sed 's/^/chaos: check_history: /' "$WORK/check.out"
    lin_done=", per-key linearizable"
fi
((rc == 0)) || {
    tail -n 30 "$OUT" >&2
    die "the history check failed (chaos_load exit $rc)"
}
((lin_rc == 0)) || die "the linearizability check failed (check_history exit $lin_rc)"
say "PASS: no acknowledged write lost, no stale or phantom read$lin_done"
