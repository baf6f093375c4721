#!/usr/bin/env bash
# The compose cluster over RDMA, in the Soft-RoCE VM (tests/rxe): one VM
# boot runs dockerd, loads the images, starts the cluster with
# docker-compose.rdma.yml and checks it.  deploy/test.sh runs it and counts
# its JUnit XML.
#
# Usage: tests/compose/vm_compose_test.sh [--xml FILE] [--no-build]
#
# Test cases (classname compose_vm), in the guest:
#   dockerd          dockerd runs in the VM and every container of the test
#                    sees rxe0 (ibv_devinfo in the client container)
#   up               deploy/cluster.sh up --rdma: images loaded, etcd and
#                    three kvservers healthy, every shard in sync
#   rdma_put_get     kvctl --transport=rdma PUTs and GETs from the client
#                    container; the client's own counters (kvctl bench
#                    --json, kvctl stat --json) say rdma, and every kvserver's
#                    /metrics counts RDMA connections accepted
#   bench            kvctl bench over RDMA: operations, 0 errors (the
#                    figures are printed; they are TCG figures; the host's
#                    compose test benches TCP)
#   failover_kill    kill -9 of the kvserver leading shard 0 while
#                    chaos_load runs over RDMA: a new primary, writes
#                    acknowledged again on its keys, the container restarted
#                    and back in sync, final reads and the history check with
#                    0 violations (deploy/compose/chaos.sh --rounds=kill)
#   rejoin           the killed node is in the map again with its shard in
#                    sync, and docker counts its restart
#   chaos            deploy/cluster.sh chaos --rounds=pause,restart over
#                    RDMA: docker pause and docker restart of primaries under
#                    load, 0 violations
#   down             deploy/cluster.sh down: no container, network or volume
#                    of the project is left
# Without qemu every case is skipped (exit 77 when not under CI=true is
# deploy/test.sh's business: it counts the skips).
#
# Results: --xml FILE (default .vm/compose-results/vm_compose.xml); the
# guest's log is .vm/compose-results/vm_compose.log.  After a failed case the
# log lists the kvserver threads waiting on a lock (tests/compose/
# waiting_threads.py; needs gdb) and stacks-*.txt there hold every thread's
# stack.  Exit status: 0 every
# case passed; 1 a case failed or the VM failed; 77 skipped (no qemu).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RESULTS=$REPO/.vm/compose-results
XML=$RESULTS/vm_compose.xml
NOBUILD=()
GUEST=0
while (($#)); do
    case $1 in
    --xml) XML=${2:?--xml needs a file} && shift ;;
    --no-build) NOBUILD=(--no-build) ;;
    --guest) GUEST=1 ;;
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" && exit 0 ;;
    *) echo "vm_compose_test: unknown argument $1" >&2 && exit 2 ;;
    esac
    shift
done
# shellcheck source=tests/compose/junit.sh
. "$REPO/tests/compose/junit.sh"
ALL=(dockerd up rdma_put_get bench failover_kill rejoin chaos down)

# --- host side: one VM for everything --------------------------------------------
if ((!GUEST)); then
    mkdir -p "$RESULTS" "$(dirname "$XML")"
    rm -f "$RESULTS/guest.xml" "$RESULTS/vm_compose.log" "$RESULTS/victim"
    if ! command -v "${KV_VM_QEMU:-qemu-system-x86_64}" >/dev/null; then
        for n in "${ALL[@]}"; do record "$n" skip "no qemu-system-x86_64: the Soft-RoCE VM cannot run"; done
        write_xml compose_vm "$XML"
        exit 77
    fi
    T0=$SECONDS
    rc=0
    "$REPO/deploy/compose/vm.sh" run "${NOBUILD[@]}" --timeout 2400 --rw "$RESULTS" -- \
        "$REPO/tests/compose/vm_compose_test.sh" --guest --xml "$RESULTS/guest.xml" || rc=$?
    echo "vm_compose_test: VM exit $rc after $((SECONDS - T0)) s"
    if [[ -s $RESULTS/guest.xml ]]; then
        [[ $RESULTS/guest.xml -ef $XML ]] || cp "$RESULTS/guest.xml" "$XML"
    else
        for n in "${ALL[@]}"; do record "$n" fail "the VM run ended without results (exit $rc; see $RESULTS)"; done
        write_xml compose_vm "$XML"
        exit 1
    fi
    grep -q '<failure' "$XML" && exit 1
    ((rc == 0)) || exit 1
    exit 0
fi

# --- guest side --------------------------------------------------------------------
CLUSTER=$REPO/deploy/cluster.sh
export KV_COMPOSE_PROJECT=kvstore-vmtest
LOG=$(mktemp)
OPT=${KV_OP_TIMEOUT:-10s} # kvctl --timeout: connecting over rxe under TCG takes more than 10 s
# kvctl's flags for the client container's certificate when the cluster runs
# TLS (deploy/cluster.sh's default; vm.sh gives the guest KV_TLS=off, since
# TLS with etcd missed kvserver's deadlines under TCG).  RDMA itself is never
# encrypted.
KT="--tls_ca=/run/tls/ca.pem --tls_cert=/run/tls/cert.pem --tls_key=/run/tls/key.pem"
[[ ${KV_TLS:-on} == off ]] && KT=""
exec > >(tee -a "$RESULTS/vm_compose.log") 2>&1
in_client() { docker exec -i "$(docker ps -q --filter "label=com.docker.compose.project=$KV_COMPOSE_PROJECT" --filter label=com.docker.compose.service=client)" "$@"; }
# After a failed case: every container's state, restarts and last log lines,
# then the kvserver threads that wait on a lock (a stuck write shows there;
# the whole stacks go to the results directory).
diag() {
    local id p stacks
    echo "--- diagnosis (containers and their last log lines)"
    for id in $(docker ps -aq --filter "label=com.docker.compose.project=$KV_COMPOSE_PROJECT"); do
        docker inspect -f '{{.Name}} {{.State.Status}} exit={{.State.ExitCode}} restarts={{.RestartCount}}' "$id"
        docker logs --tail 12 "$id" 2>&1 | sed 's/^/  | /'
    done
    command -v gdb >/dev/null || return 0
    stacks=$RESULTS/stacks-$(date +%H%M%S).txt
    for p in $(pgrep -x kvserver); do
        echo "=== kvserver pid $p"
        timeout 120 gdb -p "$p" -batch -ex "thread apply all bt" 2>/dev/null
    done >"$stacks"
    echo "--- kvserver threads waiting on a lock (stacks: ${stacks#"$REPO"/})"
    python3 "$REPO/tests/compose/waiting_threads.py" "$stacks"
}
case_() { check "$@" || diag; }
finish() {
    write_xml compose_vm "$XML"
    local r
    for r in "${RESULTS_[@]}"; do [[ $r == fail ]] && exit 1; done
    exit 0
}

check dockerd "dockerd in the VM" sh -c 'docker version -f "dockerd {{.Server.Version}}" &&
    docker info -f "cgroup v{{.CgroupVersion}}, storage {{.Driver}}" && ls /dev/infiniband'

if ! check up "deploy/cluster.sh up --rdma" "$CLUSTER" up --rdma --no-build --timeout=600; then
    "$REPO/deploy/compose/vm.sh" guest-diagnose || true
    for n in "${ALL[@]:2:${#ALL[@]}-3}"; do record "$n" fail "not run: the cluster did not come up"; done
    check down "deploy/cluster.sh down" "$CLUSTER" down
    finish
fi
grep -E 'cluster: .*\([0-9]+ s\)|ready after' "$LOG"

rdma_put_get() {
    in_client sh -c '
        S="--server=kvserver2:7300 --transport=rdma --timeout='"$OPT"' '"$KT"'"
        ibv_devinfo -l 2>/dev/null | grep -q rxe0 || ls /dev/infiniband >&2 || exit 1
        for i in $(seq 1 5); do kvctl $S put "rk:$i" "rdma-$i" >/dev/null || { echo "put rk:$i"; exit 1; }; done
        for i in $(seq 1 5); do [ "$(kvctl $S get "rk:$i")" = "rdma-$i" ] || { echo "get rk:$i"; exit 1; }; done
        kvctl $S --json stat > /tmp/stat.json || exit 1
        kvctl $S --json bench --ops=200 --concurrency=2 --keys=50 --value-size=512 > /tmp/bench.json || exit 1
        cat /tmp/stat.json /tmp/bench.json' >"$LOG.2" || {
        cat "$LOG.2"
        return 1
    }
    python3 - "$LOG.2" <<'EOF' || return 1
import json, sys
text = open(sys.argv[1]).read()
dec = json.JSONDecoder()
docs, junk, i = [], [], 0
while i < len(text):
    if text[i].isspace():
        i += 1
        continue
    try:
        d, i = dec.raw_decode(text, i)
    except json.JSONDecodeError:
        # Say what kvctl printed that is not JSON, then skip that line.
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        junk.append(text[i:end][:300])
        i = end
        continue
    docs.append(d)
# --json promises JSON on stdout: anything else breaks scripts.
assert not junk, "kvctl --json printed lines that are not JSON: %r" % junk
assert len(docs) >= 2, "expected the stat and bench JSON documents, got %d" % len(docs)
stat, bench = docs[0], docs[-1]
flat = json.dumps(stat)
assert '"rdma"' in flat, "kvctl stat does not name rdma: " + flat[:400]
assert bench["transport"] == "rdma", bench["transport"]
assert bench["errors"] == 0 and bench["ops"] == 200, bench
print("kvctl put/get x5 over rdma; bench: %d ops over %s, 0 errors" % (bench["ops"], bench["transport"]))
EOF
    local s n
    for s in kvserver1 kvserver2 kvserver3; do
        n=$(in_client wget -q -O - "http://$s:9400/metrics" | awk '$1 == "kvstore_rdma_connections_accepted_total" {print $2}')
        echo "$s kvstore_rdma_connections_accepted_total=$n"
        [[ -n $n && ${n%.*} -gt 0 ]] || return 1
    done
}
case_ rdma_put_get "PUT/GET over RDMA" rdma_put_get

# Over RDMA only: the host's compose test runs the same bench over TCP.
bench_rdma() {
    "$CLUSTER" bench --duration=5s --concurrency=4 --value-size=1K --keys=1000 --get-ratio=0.5 --transport=rdma >"$LOG.rdma" 2>&1 || {
        tail -n 20 "$LOG.rdma"
        return 1
    }
    echo "== bench over rdma (Soft-RoCE under TCG)"
    grep -E '^(transport|ops|gets|puts|errors|  (get|put) )' "$LOG.rdma"
    grep -qE "^transport +rdma" "$LOG.rdma" && grep -qE '^errors +0$' "$LOG.rdma" || return 1
    echo "rdma $(awk '/^ops/ {print $7}' "$LOG.rdma") ops/s"
}
case_ bench "kvctl bench over RDMA" bench_rdma

VICTIM=""
failover_kill() {
    VICTIM=$(in_client kvctl --server=kvserver1:7300 $KT --timeout="$OPT" --json cluster status |
        python3 -c 'import json,sys; print([s for s in json.load(sys.stdin)["shards"] if s["shard_id"]==0][0]["primary"])')
    echo "shard 0 primary: $VICTIM"
    echo "$VICTIM" >"$RESULTS/victim" # for rejoin (cases run in subshells)
    "$REPO/deploy/compose/chaos.sh" --rounds=kill --transport=rdma --history="$RESULTS/history-kill.jsonl"
}
case_ failover_kill "kill -9 of a primary under RDMA load" failover_kill

rejoin() {
    VICTIM=$(cat "$RESULTS/victim" 2>/dev/null)
    [[ $VICTIM =~ ^n[0-9]+$ ]] || { echo "no victim recorded by failover_kill"; return 1; }
    local c restarts
    c=$(docker ps -aq --filter "label=com.docker.compose.project=$KV_COMPOSE_PROJECT" --filter "label=com.docker.compose.service=kvserver${VICTIM#n}")
    restarts=$(docker inspect -f '{{.RestartCount}} {{.State.Status}}' "$c")
    echo "kvserver${VICTIM#n}: restarts+state $restarts"
    [[ ${restarts% *} -gt 0 && $restarts == *running ]] || return 1
    # The refill gave the victim's roles to the others while it was down;
    # the controller then hands it its share back (a copy, under TCG).
    local t0=$SECONDS
    until in_client kvctl --server=kvserver1:7300 $KT --timeout="$OPT" --json cluster status | rejoined "$VICTIM" >/dev/null 2>&1; do
        ((SECONDS - t0 < 300)) || break
        sleep 5
    done
    in_client kvctl --server=kvserver1:7300 $KT --timeout="$OPT" --json cluster status | rejoined "$VICTIM" || return 1
    echo "rejoined $((SECONDS - t0)) s after the check began"
}
rejoined() {
    python3 -c '
import json, sys
m = json.load(sys.stdin)
v = sys.argv[1]
held = [s["shard_id"] for s in m["shards"] if v == s["primary"] or v in s["backups"]]
assert held, "%s holds no shard: %s" % (v, m)
assert all(s["up"] and not s["syncing"] and len(s["backups"]) + 1 == m["replication_factor"] for s in m["shards"]), m
print("%s is back: replica of shard(s) %s, every shard in sync" % (v, held))' "$1"
}
case_ rejoin "the killed node rejoins" rejoin

case_ chaos "deploy/cluster.sh chaos (pause, restart)" \
    "$CLUSTER" chaos --rounds=pause,restart --transport=rdma --history="$RESULTS/history-chaos.jsonl"

down_clean() {
    "$CLUSTER" down || return 1
    local label="label=com.docker.compose.project=$KV_COMPOSE_PROJECT"
    echo "left: $(docker ps -aq --filter "$label" | wc -l) containers, $(docker network ls -q --filter "$label" | wc -l) networks, $(docker volume ls -q --filter "$label" | wc -l) volumes"
    [[ -z $(docker ps -aq --filter "$label")$(docker network ls -q --filter "$label")$(docker volume ls -q --filter "$label") ]]
}
check down "deploy/cluster.sh down left something" down_clean
finish
